"""``diff``: what changed from one build to another."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sandbox_replay.atomic import write_bytes_atomic
from sandbox_replay.cli import options as opt
from sandbox_replay.cli.app import (
    EXIT_BLOCKED,
    EXIT_PASS,
    app,
    argument,
    option,
    progress,
    terminal_safe,
    usage_error,
    usage_errors,
)
from sandbox_replay.records.changes import Changes
from sandbox_replay.report.run_folder import RunFolderError, check_out_file


@app.command("diff")
def diff(
    old: Annotated[Path, argument(help="The earlier site folder or pack archive.")],
    new: Annotated[Path, argument(help="The later site folder or pack archive.")],
    markdown: Annotated[
        Path | None,
        option(
            "--markdown",
            help="Also write the changes as Markdown, for a pull-request comment.",
        ),
    ] = None,
    fail_on: Annotated[
        str | None,
        option(
            "--fail-on",
            help="Exit 1 on a 'regression' (a run that passed in OLD is blocked in NEW), or "
            "on 'new' (a regression or any finding OLD did not have).",
        ),
    ] = None,
    site_url: opt.SiteUrlOpt = None,
) -> None:
    """Print what changed from one build to another: regressions and new findings.

    Each new finding is a path:line: CODE message line (paths from the working
    directory, as the sites record their inputs), then a summary line. Exit 0, or 1 with
    --fail-on when there is what it names; 2 on a usage error (a site or archive that
    cannot be read or checked included).
    """
    from sandbox_replay.exports.markdown import diff_markdown
    from sandbox_replay.records.changes import compare
    from sandbox_replay.report.baseline import BaselineError, read_baseline

    if fail_on not in (None, "regression", "new"):
        raise usage_error(
            f"--fail-on accepts 'regression' or 'new', got {terminal_safe(fail_on)!r}"
        )
    if markdown is not None:
        with usage_errors(RunFolderError):
            check_out_file(markdown, "--markdown")
    with usage_errors(BaselineError, safe=True):
        before, after = read_baseline(old), read_baseline(new)
    changes = compare(before.runs, after.runs, before.manifest_sha256, before.label)
    for line in diff_lines(changes):
        print(line)
    if markdown is not None:
        with usage_errors(ValueError):
            data = diff_markdown(changes, site_url)
        write_bytes_atomic(markdown, data)
        progress(f"wrote {markdown}")
    progress(changes.summary())
    raise typer.Exit(EXIT_BLOCKED if fail_on and changes.fails(fail_on) else EXIT_PASS)


def diff_lines(changes: Changes) -> list[str]:
    """Return the regressions and new findings as ``path:line: CODE message`` lines."""
    lines = []
    for run in changes.regressions:
        lines.append(
            f"{terminal_safe(run.after.source_path, 200)}: REGRESSION run "
            f"{terminal_safe(run.name)} passed in the baseline and is blocked now"
        )
    for run, finding in changes.new_findings:
        folder = run.after.source_path.rstrip("/")
        path = f"{folder}/{finding.path}" if finding.path else folder
        line = f":{finding.line}" if finding.line else ""
        lines.append(
            f"{terminal_safe(path, 200)}{line}: {finding.code} "
            f"{terminal_safe(finding.message, 200)}"
        )
    return lines
