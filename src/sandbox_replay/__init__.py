"""sandbox-replay: re-derive sandbox policy verdicts and hold recorded containment claims to them.

The library API is the same one the CLI calls:

    from sandbox_replay import ReplayConfig, InputMode, replay, build_records
    outcome = replay(ReplayConfig(Path("fixtures/first_wave"), InputMode.FIXTURE))
    records = build_records(outcome)
"""

from sandbox_replay.checks.pipeline import Replay, ReplayConfig, replay
from sandbox_replay.load.run import InputMode
from sandbox_replay.records.build import RunRecords, build_records, write_records
from sandbox_replay.version import __version__

__all__ = [
    "InputMode",
    "Replay",
    "ReplayConfig",
    "RunRecords",
    "__version__",
    "build_records",
    "replay",
    "write_records",
]
