"""``run`` and ``run-sandbox-bundle``: replay one fixture or bundle folder and write its records."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from sandbox_replay.checks.pipeline import Replay, ReplayConfig, replay
from sandbox_replay.cli.app import (
    EXIT_BLOCKED,
    EXIT_PASS,
    app,
    check_input_dir,
    check_out_dir,
    check_out_file,
    colour,
    output,
    progress,
    set_output,
    terminal_safe,
    usage_error,
)
from sandbox_replay.cli.options import (
    _DEFAULT_LIMITS,
    _MB,
    CardOpt,
    CedarSchemaOpt,
    ExportOptions,
    ForbiddenClassesOpt,
    InputOpt,
    JunitOpt,
    LimitOptions,
    MarkdownOpt,
    MaxDepthOpt,
    MaxFileMbOpt,
    MaxRowsOpt,
    MaxStringOpt,
    OutOpt,
    PolicyOpt,
    PolicyOptions,
    QuietOpt,
    ReplayJobsOpt,
    RootOpt,
    SarifOpt,
    SiteUrlOpt,
    VerboseOpt,
    check_jobs,
    extra_scanner,
    say_policy,
)
from sandbox_replay.exports import ExportTargets, export_run, outside_root, write_exports
from sandbox_replay.load.run import CORE_FILES, InputMode
from sandbox_replay.model.codes import Layer
from sandbox_replay.records.build import RunRecords, build_records, write_records


@dataclass(frozen=True)
class RunOptions:
    """What a replay command was asked: its folders, exports, limits and policies."""

    mode: InputMode
    input_dir: Path
    out_dir: Path
    exports: ExportOptions
    limits: LimitOptions
    policies: PolicyOptions
    acceptance_out: Path | None = None
    jobs: int | None = None
    root: Path | None = None


@dataclass(frozen=True)
class RunConfig:
    """One replay and where its records and exports go, every path checked."""

    replay: ReplayConfig
    out_dir: Path
    acceptance_out: Path | None
    targets: ExportTargets
    root: Path | None


def run_config(options: RunOptions) -> RunConfig:
    """Check the options (a usage error for the first that cannot be used) and read the
    policy and forbidden-classes table they name."""
    input_dir = options.input_dir
    check_input_dir(input_dir)
    if not any((input_dir / name).exists() for name in CORE_FILES):
        # A wrong path in CI must not look like a containment failure (exit 1).
        raise usage_error(
            f"{input_dir} holds none of the seven core files ({', '.join(CORE_FILES)}): "
            "not a fixture or bundle folder"
        )
    scanner = extra_scanner(options.policies.table())
    policy = options.policies.choice().for_run(input_dir)
    check_out_dir(options.out_dir)
    if options.acceptance_out is not None:
        check_out_file(options.acceptance_out, "acceptance path")
    targets = options.exports.targets()
    check_jobs(options.jobs)
    if policy is not None:
        say_policy(policy)
    detail = progress if output.verbose else None
    replayed = ReplayConfig(
        input_dir, options.mode, options.limits.limits(), policy, scanner, progress, detail
    )
    return RunConfig(replayed, options.out_dir, options.acceptance_out, targets, options.root)


def replay_and_write(config: RunConfig) -> tuple[Replay, RunRecords, list[Path]]:
    """Replay the run, write its records and exports; return them and the paths written."""
    input_dir, mode = config.replay.input_dir, config.replay.mode
    progress(f"replaying {input_dir} ({'fixture' if mode is InputMode.FIXTURE else 'bundle'} mode)")
    outcome = replay(config.replay)
    records = build_records(outcome)
    try:
        started = time.perf_counter()
        written = write_records(records, mode, config.out_dir, config.acceptance_out)
        progress(f"wrote the records in {time.perf_counter() - started:.1f}s")
        targets = config.targets
        if targets.paths():
            summary = targets.markdown is not None  # only it shows headline and chart
            warning = outside_root(input_dir, config.root)
            if warning is not None:
                progress(warning)
            name = input_dir.resolve().name
            runs = [export_run(name, outcome, config.root, records.result, summary=summary)]
            written += write_exports(targets, runs)
    except OSError as error:
        where = f" {error.filename}" if error.filename else ""
        raise usage_error(f"cannot write{where}: {error.strerror or error}") from None
    return outcome, records, written


def run(options: RunOptions, card: bool) -> int:
    """Replay as ``options`` ask, say what was written and found; return the exit code."""
    outcome, records, written = replay_and_write(run_config(options))
    for path in written:
        progress(f"wrote {path}")
    stream = sys.stderr if card else sys.stdout
    said = summary_lines(records, stream)
    if output.quiet:
        said = said[:1]
    else:
        limit = None if output.verbose else SHOWN_FINDINGS
        said += finding_lines(records.result, str(options.input_dir), limit)
    for line in said:
        print(line, file=stream)
    if card:
        print(json.dumps(records.card, indent=2))
    return EXIT_PASS if outcome.passed else EXIT_BLOCKED


@app.command("run")
def run_fixture(
    input_dir: InputOpt,
    out_dir: OutOpt,
    acceptance_out: Annotated[
        Path | None,
        typer.Option(
            "--acceptance-out",
            help="Where to write the acceptance record (default: inside --out).",
            show_default=False,
        ),
    ] = None,
    card: CardOpt = False,
    sarif: SarifOpt = None,
    junit: JunitOpt = None,
    markdown: MarkdownOpt = None,
    site_url: SiteUrlOpt = None,
    max_file_mb: MaxFileMbOpt = _DEFAULT_LIMITS.max_file_bytes // _MB,
    max_rows: MaxRowsOpt = _DEFAULT_LIMITS.max_rows,
    max_depth: MaxDepthOpt = _DEFAULT_LIMITS.max_depth,
    max_string_chars: MaxStringOpt = _DEFAULT_LIMITS.max_string_chars,
    jobs: ReplayJobsOpt = None,
    forbidden_classes: ForbiddenClassesOpt = None,
    policy: PolicyOpt = None,
    cedar_schema: CedarSchemaOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    root: RootOpt = None,
) -> None:
    """Replay a fixture folder: the seven core files plus the eight negative-case files.

    Writes the result record, board, validation receipt and acceptance record. Every
    negative case must fire its code; a missing one blocks the run. A file over a limit
    (--max-*) is refused with SANDBOX_POLICY_INPUT_LIMIT_EXCEEDED, which blocks.
    Exit 0 pass, 1 blocked, 2 usage error.
    """
    set_output(quiet, verbose)
    options = RunOptions(
        InputMode.FIXTURE,
        input_dir,
        out_dir,
        ExportOptions(sarif, junit, markdown, site_url),
        LimitOptions(max_file_mb, max_rows, max_depth, max_string_chars),
        PolicyOptions(forbidden_classes, policy, cedar_schema),
        acceptance_out,
        jobs,
        root,
    )
    raise typer.Exit(run(options, card))


@app.command("run-sandbox-bundle")
def run_bundle(
    input_dir: InputOpt,
    out_dir: OutOpt,
    card: CardOpt = False,
    sarif: SarifOpt = None,
    junit: JunitOpt = None,
    markdown: MarkdownOpt = None,
    site_url: SiteUrlOpt = None,
    max_file_mb: MaxFileMbOpt = _DEFAULT_LIMITS.max_file_bytes // _MB,
    max_rows: MaxRowsOpt = _DEFAULT_LIMITS.max_rows,
    max_depth: MaxDepthOpt = _DEFAULT_LIMITS.max_depth,
    max_string_chars: MaxStringOpt = _DEFAULT_LIMITS.max_string_chars,
    jobs: ReplayJobsOpt = None,
    forbidden_classes: ForbiddenClassesOpt = None,
    policy: PolicyOpt = None,
    cedar_schema: CedarSchemaOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    root: RootOpt = None,
) -> None:
    """Replay an exported sandbox bundle: the seven core files, the bundle manifest,
    the source-module manifest and the copied bodies under source_modules/.

    Writes the bundle validation result. A file over a limit (--max-*) is refused with
    SANDBOX_POLICY_INPUT_LIMIT_EXCEEDED, which blocks. Exit 0 pass, 1 blocked, 2 usage error.
    """
    set_output(quiet, verbose)
    options = RunOptions(
        InputMode.BUNDLE,
        input_dir,
        out_dir,
        ExportOptions(sarif, junit, markdown, site_url),
        LimitOptions(max_file_mb, max_rows, max_depth, max_string_chars),
        PolicyOptions(forbidden_classes, policy, cedar_schema),
        jobs=jobs,
        root=root,
    )
    raise typer.Exit(run(options, card))


# At most this many findings are listed after a run (``-v``: all of them).
SHOWN_FINDINGS = 10


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
    result: Mapping[str, Any], where: str, limit: int | None = SHOWN_FINDINGS
) -> list[str]:
    """Return the run's findings as ``path:line: CODE message`` lines (as ruff prints them).

    The expected negative-case alarms are left out (they are counted on their own);
    ``where`` is the input folder as given, so a line's path opens from the working
    directory. Past ``limit``, one line says how many more the result record holds.
    """
    expected = {id(f) for f in expected_alarms(result)}
    shown = [f for f in result["findings"] if id(f) not in expected]
    lines = []
    for finding in shown[:limit] if limit is not None else shown:
        path = f"{where.rstrip('/')}/{finding['path']}" if finding.get("path") else where
        line = f":{finding['line']}" if finding.get("line") else ""
        lines.append(
            f"{terminal_safe(path, 200)}{line}: {finding['error_code']} "
            f"{terminal_safe(finding['message'], 200)}"
        )
    if limit is not None and len(shown) > limit:
        lines.append(f"... and {len(shown) - limit} more in the result record (-v lists all)")
    return lines


def summary_lines(records: RunRecords, stream: TextIO | None = None) -> list[str]:
    """Return the human summary of a run: status, headline figures, codes."""
    r = records.result
    trace = r["public_agent_execution_trace"]
    # An outcome other than blocked/executed is the recorded verdict label: input text.
    outcomes = ", ".join(
        f"{n} {terminal_safe(k, 40)}" for k, n in trace["summary"]["outcome_counts"].items()
    )
    status = r["status"]
    if stream is not None:
        status = colour(status, "32" if status == "pass" else "1;31", stream)
    lines = [
        f"status: {status}  ({r['input_mode']}, bundle {terminal_safe(r['bundle_id'])})",
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
        lines.append(
            f"negative cases: {len(r['observed_negative_cases'])}/"
            f"{len(r['expected_negative_cases'])} fired"
            + (
                f"  missing: {', '.join(r['missing_negative_cases'])}"
                if r["missing_negative_cases"]
                else ""
            )
        )
    alarms = expected_alarms(r)
    alarm_codes = {f["error_code"] for f in alarms}
    other_codes = [c for c in r["error_codes"] if c not in alarm_codes or _also_a_gap(r, c)]
    expected = f" ({len(alarms)} of them the expected negative-case alarms)" if alarms else ""
    lines.append(f"findings: {r['finding_count']}{expected}  error codes: {len(other_codes)}")
    lines.extend(f"  {code}" for code in other_codes)
    return lines


def _also_a_gap(result: Mapping[str, Any], code: str) -> bool:
    """Say whether ``code`` is raised by a finding other than an expected alarm too."""
    alarms = {id(f) for f in expected_alarms(result)}
    return any(f["error_code"] == code and id(f) not in alarms for f in result["findings"])
