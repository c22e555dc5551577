"""Replay one fixture or bundle folder, write its records and exports, and word the result.

The library side of ``run`` and ``run-sandbox-bundle``: ``RunFolderConfig`` checks what
it is given as it is made (a ``RunFolderError`` for the first thing that cannot be used),
``replay_folder`` does the work, and ``summary_lines`` / ``finding_lines`` are what the
terminal is told of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_replay.checks.pipeline import Replay, ReplayConfig, replay
from sandbox_replay.exports import ExportTargets, export_run, outside_root, write_exports
from sandbox_replay.load.run import CORE_FILES, InputMode
from sandbox_replay.model.codes import Layer
from sandbox_replay.records.build import RunRecords, build_records, write_records
from sandbox_replay.records.seeded import seeded_caught_text, seeded_missed

# At most this many findings are listed after a run (``-v``: all of them).
SHOWN_FINDINGS = 10


class RunFolderError(ValueError):
    """A folder or path given to a replay cannot be used (a usage problem, not a finding)."""


def check_out_file(path: Path, what: str) -> None:
    """Refuse a file path that is a folder or lies under a file."""
    if path.is_dir():
        raise RunFolderError(f"{what} {path} is a folder, not a file")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise RunFolderError(f"{what} {path} lies under {parent}, which is a file")


def check_run_folder(folder: Path) -> None:
    """Refuse a path that is not a folder holding any of the seven core files."""
    if not folder.exists():
        raise RunFolderError(f"input folder {folder} does not exist")
    if not folder.is_dir():
        raise RunFolderError(f"input {folder} is not a folder")
    if not any((folder / name).exists() for name in CORE_FILES):
        # A wrong path in CI must not look like a containment failure (exit 1).
        raise RunFolderError(
            f"{folder} holds none of the seven core files ({', '.join(CORE_FILES)}): "
            "not a fixture or bundle folder"
        )


@dataclass(frozen=True)
class RunFolderConfig:
    """One replay and where its records and exports go."""

    replay: ReplayConfig
    out_dir: Path
    acceptance_out: Path | None = None
    targets: ExportTargets = field(default_factory=ExportTargets)
    # The folder the exports' paths are relative to (default: ``exports.repository_root``).
    root: Path | None = None

    def __post_init__(self) -> None:
        check_run_folder(self.replay.input_dir)
        out = self.out_dir
        if out.exists() and not out.is_dir():
            raise RunFolderError(f"output path {out} exists and is not a folder")
        for parent in out.parents:
            if parent.exists() and not parent.is_dir():
                raise RunFolderError(f"output path {out} lies under {parent}, which is a file")
        if self.acceptance_out is not None:
            check_out_file(self.acceptance_out, "acceptance path")


@dataclass(frozen=True)
class RunWritten:
    """A replay, its records, and every file written of them."""

    outcome: Replay
    records: RunRecords
    written: list[Path]


def replay_folder(config: RunFolderConfig) -> RunWritten:
    """Replay the run and write its records and exports.

    A path that cannot be written is a ``RunFolderError`` naming it.
    """
    say = config.replay.progress or (lambda message: None)
    input_dir, mode = config.replay.input_dir, config.replay.mode
    say(f"replaying {input_dir} ({'fixture' if mode is InputMode.FIXTURE else 'bundle'} mode)")
    outcome = replay(config.replay)
    records = build_records(outcome)
    try:
        started = time.perf_counter()
        written = write_records(records, mode, config.out_dir, config.acceptance_out)
        say(f"wrote the records in {time.perf_counter() - started:.1f}s")
        if config.targets.paths():
            warning = outside_root(input_dir, config.root)
            if warning is not None:
                say(warning)
            summary = config.targets.markdown is not None  # only it shows headline and chart
            name = input_dir.resolve().name
            runs = [export_run(name, outcome, config.root, records.result, summary=summary)]
            written += write_exports(config.targets, runs)
    except OSError as error:
        where = f" {error.filename}" if error.filename else ""
        raise RunFolderError(f"cannot write{where}: {error.strerror or error}") from None
    return RunWritten(outcome, records, written)


def expected_alarms(result: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Return the findings that are a fixture's planted negative cases firing, by design."""
    observed = result["observed_negative_cases"]
    return [
        f
        for f in result["findings"]
        if f["layer"] == Layer.NEGATIVE_CASES.value
        and f["error_code"] in observed.get(f.get("negative_case_id"), ())
    ]


def finding_lines(
    result: Mapping[str, Any],
    where: str,
    shown_as: Callable[[object, int], str],
    limit: int | None = SHOWN_FINDINGS,
) -> list[str]:
    """Return the run's findings as ``path:line: CODE message`` lines (as ruff prints them).

    The expected negative-case alarms are left out (they are counted on their own);
    ``where`` is the input folder as given, so a line's path opens from the working
    directory; ``shown_as`` makes input text fit for a terminal. Past ``limit``, one line
    says how many more the result record holds.
    """
    expected = {id(f) for f in expected_alarms(result)}
    shown = [f for f in result["findings"] if id(f) not in expected]
    lines = []
    for finding in shown[:limit] if limit is not None else shown:
        path = f"{where.rstrip('/')}/{finding['path']}" if finding.get("path") else where
        line = f":{finding['line']}" if finding.get("line") else ""
        lines.append(
            f"{shown_as(path, 200)}{line}: {finding['error_code']} "
            f"{shown_as(finding['message'], 200)}"
        )
    if limit is not None and len(shown) > limit:
        lines.append(f"... and {len(shown) - limit} more in the result record (-v lists all)")
    return lines


def summary_lines(
    records: RunRecords,
    shown_as: Callable[[object, int], str],
    status_colour: Callable[[str], str] = str,
) -> list[str]:
    """Return the human summary of a run: status, headline figures, codes."""
    r = records.result
    trace = r["public_agent_execution_trace"]
    # An outcome other than blocked/executed is the recorded verdict label: input text.
    outcomes = ", ".join(
        f"{n} {shown_as(k, 40)}" for k, n in trace["summary"]["outcome_counts"].items()
    )
    lines = [
        f"status: {status_colour(r['status'])}  "
        f"({r['input_mode']}, bundle {shown_as(r['bundle_id'], 120)})",
        f"requests: {r['action_request_count']}  derived: {r['derived_block_count']} block, "
        f"{r['derived_allow_count']} allow, {r['derived_review_count']} review  "
        f"mismatches: {r['derived_policy_verdict_mismatch_count']}",
        f"side effects: {r['side_effect_receipt_count']} rows, "
        f"{r['blocked_without_execution_count']} blocked without execution  "
        f"rollbacks: {r['rollback_verified_count']}/{r['rollback_receipt_count']} verified  "
        f"cold replays: {r['cold_replay_confirmed_count']}/{r['cold_replay_count']} confirmed "
        f"({r['cold_replay_pass_count']} labelled pass)",
        f"trace: {trace['span_count']} spans ({outcomes or 'none'})  "
        f"scan: {r['secret_exclusion_scan']['blocking_hit_count']} forbidden hit(s)",
    ]
    if r["expected_negative_cases"]:
        missing = r["missing_negative_cases"]
        lines.append(
            f"negative cases: {len(r['observed_negative_cases'])}/"
            f"{len(r['expected_negative_cases'])} fired"
            + (f"  missing: {', '.join(missing)}" if missing else "")
        )
    alarms = {id(f) for f in expected_alarms(r)}
    alarm_codes = {f["error_code"] for f in r["findings"] if id(f) in alarms}
    # A code also raised by a finding other than an expected alarm is a gap too.
    gap_codes = {f["error_code"] for f in r["findings"] if id(f) not in alarms}
    other_codes = [c for c in r["error_codes"] if c not in alarm_codes or c in gap_codes]
    expected = f" ({len(alarms)} of them the expected negative-case alarms)" if alarms else ""
    seeded = seeded_caught_text(r)
    if seeded is not None:
        missed = seeded_missed(r)
        lines.append(seeded + (f"  missed: {', '.join(missed)}" if missed else ""))
    lines.append(f"findings: {r['finding_count']}{expected}  error codes: {len(other_codes)}")
    lines.extend(f"  {code}" for code in other_codes)
    return lines
