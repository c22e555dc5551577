"""Runs for the export tests: every built-in fixture and scenario, and a hostile copy.

Import directly (``from exports_support import ...``); pytest puts this folder on
``sys.path``.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from conftest import EXPORTED_BUNDLE, FIRST_WAVE, REPO, SCENARIOS, edit_json
from sandbox_replay import InputMode, ReplayConfig, replay
from sandbox_replay.atomic import dump_json
from sandbox_replay.exports import ExportFacts, ExportRun, export_run
from sandbox_replay.exports.sarif import build_sarif

# A request id built to break every format the exports write: XML structure and CDATA,
# Markdown links, images, emphasis and tables, HTML, line breaks, a bidi override and
# control characters (two of them invalid in XML 1.0).
HOSTILE = (
    "req_</failure>]]>*_[x](javascript:alert(1))![i](https://e.invalid/x.png)"
    "<script>alert(1)</script>|cell\n# heading\r\n\u202eevil\x01\x0b\x1b[31m&amp;"
)


def builtin_inputs() -> list[tuple[str, Path, InputMode]]:
    """Return every built-in run folder: the fixture, the bundle and each scenario."""
    found = [
        ("first_wave", FIRST_WAVE, InputMode.FIXTURE),
        ("exported_bundle", EXPORTED_BUNDLE, InputMode.BUNDLE),
    ]
    if SCENARIOS.is_dir():
        found += [
            (f"scenario_{p.name}", p, InputMode.BUNDLE)
            for p in sorted(SCENARIOS.iterdir())
            if (p / "bundle_manifest.json").is_file()
        ]
    return found


BUILTIN_IDS = [name for name, _, _ in builtin_inputs()]


def builtin_run(name: str, *, sensitivity: bool = False) -> ExportRun:
    """Replay one built-in run, its files named relative to the repository root."""
    for run_name, path, mode in builtin_inputs():
        if run_name == name:
            config = ReplayConfig(path, mode, sensitivity=sensitivity)
            return export_run(run_name, replay(config), REPO)
    raise KeyError(name)


def all_builtin_runs() -> list[ExportRun]:
    return [builtin_run(name) for name in BUILTIN_IDS]


def hostile_run(tmp_path: Path) -> ExportRun:
    """Copy the fixture, give one request a hostile id, and replay it under a hostile name."""
    folder = tmp_path / "hostile"
    shutil.copytree(FIRST_WAVE, folder)
    with edit_json(folder / "action_requests.json") as data:
        data["action_requests"][0]["request_id"] = HOSTILE
    outcome = replay(ReplayConfig(folder, InputMode.FIXTURE))
    assert any(HOSTILE in f.subject_id for f in outcome.findings)
    return ExportRun(HOSTILE, ExportFacts.of(outcome), "")


def sarif_bytes(runs: Sequence[ExportRun]) -> bytes:
    """Return the SARIF log of ``runs`` as one file, unsplit."""
    return dump_json(build_sarif(runs))
