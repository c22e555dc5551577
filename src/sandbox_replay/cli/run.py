"""``run`` and ``run-sandbox-bundle``: replay one fixture or bundle folder and write its records."""

from __future__ import annotations

import inspect
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from sandbox_replay.checks.pipeline import ReplayConfig
from sandbox_replay.cli import options as opt
from sandbox_replay.cli.app import (
    EXIT_BLOCKED,
    EXIT_PASS,
    app,
    colour,
    option,
    output,
    progress,
    set_output,
    terminal_safe,
    usage_errors,
)
from sandbox_replay.load.files import LoadLimits
from sandbox_replay.load.run import InputMode
from sandbox_replay.report.run_folder import (
    SHOWN_FINDINGS,
    RunFolderConfig,
    RunFolderError,
    check_run_folder,
    finding_lines,
    replay_folder,
    summary_lines,
)

__all__ = ["SHOWN_FINDINGS"]


def replay_command(
    mode: InputMode,
    input_dir: opt.InputOpt,
    out_dir: opt.OutOpt,
    acceptance_out: Annotated[
        Path | None,
        option(
            "--acceptance-out",
            help="Where to write the acceptance record (default: inside --out).",
        ),
    ] = None,
    card: opt.CardOpt = False,
    sarif: opt.SarifOpt = None,
    junit: opt.JunitOpt = None,
    markdown: opt.MarkdownOpt = None,
    site_url: opt.SiteUrlOpt = None,
    max_file_mb: opt.MaxFileMbOpt = opt.DEFAULT_LIMITS.max_file_bytes // opt.MB,
    max_rows: opt.MaxRowsOpt = opt.DEFAULT_LIMITS.max_rows,
    max_depth: opt.MaxDepthOpt = opt.DEFAULT_LIMITS.max_depth,
    max_string_chars: opt.MaxStringOpt = opt.DEFAULT_LIMITS.max_string_chars,
    jobs: opt.ReplayJobsOpt = None,
    forbidden_classes: opt.ForbiddenClassesOpt = None,
    policy: opt.PolicyOpt = None,
    cedar_schema: opt.CedarSchemaOpt = None,
    sensitivity: opt.SensitivityOpt = False,
    require_sensitivity: opt.RequireSensitivityOpt = False,
    quiet: opt.QuietOpt = False,
    verbose: opt.VerboseOpt = False,
    root: opt.RootOpt = None,
) -> int:
    """Replay one folder as the options ask, say what was written and found; return the exit
    code. Every parameter but ``mode`` is an option of both replay commands, declared here once.
    """
    set_output(quiet, verbose)
    with usage_errors(RunFolderError):
        check_run_folder(input_dir)
        policies = opt.PolicyOptions(forbidden_classes, policy, cedar_schema)
        scanner = opt.extra_scanner(policies.table())
        chosen = policies.choice().for_run(input_dir)
        targets = opt.ExportOptions(sarif, junit, markdown, site_url).targets()
        opt.check_jobs(jobs)
        limits = LoadLimits(
            max_file_bytes=max_file_mb * opt.MB,
            max_rows=max_rows,
            max_string_chars=max_string_chars,
            max_depth=max_depth,
        )
        detail = progress if output.verbose else None
        replay = ReplayConfig(input_dir, mode, limits, chosen, scanner, progress, detail)
        replay = replace(replay, sensitivity=sensitivity, require_sensitivity=require_sensitivity)
        config = RunFolderConfig(replay, out_dir, acceptance_out, targets, root)
        if chosen is not None:
            opt.say_policy(chosen)
        done = replay_folder(config)
    for path in done.written:
        progress(f"wrote {path}")
    stream = sys.stderr if card else sys.stdout
    said = summary_lines(
        done.records,
        terminal_safe,
        lambda status: colour(status, "32" if status == "pass" else "1;31", stream),
    )
    if output.quiet:
        said = said[:1]
    else:
        limit = None if output.verbose else SHOWN_FINDINGS
        said += finding_lines(done.records.result, str(input_dir), terminal_safe, limit)
    for line in said:
        print(line, file=stream)
    if card:
        print(json.dumps(done.records.card, indent=2))
    return EXIT_PASS if done.outcome.passed else EXIT_BLOCKED


def _replay_command(name: str, mode: InputMode, doc: str, *dropped: str) -> None:
    """Add the replay command ``name`` with the shared options but ``dropped``."""

    def command(**options: Any) -> None:
        raise typer.Exit(replay_command(mode, **options))

    shared = inspect.signature(replay_command, eval_str=True)
    kept = [p for p in shared.parameters.values() if p.name not in ("mode", *dropped)]
    command.__signature__ = shared.replace(parameters=kept)  # type: ignore[attr-defined]
    command.__doc__ = doc
    app.command(name)(command)


_replay_command(
    "run",
    InputMode.FIXTURE,
    """Replay a fixture folder: the seven core files plus the eight negative-case files.

    Writes the result record, board, validation receipt and acceptance record. Every
    negative case must fire its code; a missing one blocks the run. A file over a limit
    (--max-*) is refused with SANDBOX_POLICY_INPUT_LIMIT_EXCEEDED, which blocks.
    Exit 0 pass, 1 blocked, 2 usage error.
    """,
)
_replay_command(
    "run-sandbox-bundle",
    InputMode.BUNDLE,
    """Replay an exported sandbox bundle: the seven core files, the bundle manifest,
    the source-module manifest and the copied bodies under source_modules/.

    Writes the bundle validation result. A file over a limit (--max-*) is refused with
    SANDBOX_POLICY_INPUT_LIMIT_EXCEEDED, which blocks. Exit 0 pass, 1 blocked, 2 usage error.
    """,
    "acceptance_out",
)
