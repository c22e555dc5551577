"""``verify``: re-derive a published site from the inputs it records."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sandbox_replay.cli.app import (
    EXIT_BLOCKED,
    EXIT_PASS,
    EXIT_USAGE,
    app,
    argument,
    option,
    progress,
    terminal_safe,
    usage_error,
)


@app.command("verify")
def verify(
    site_dir: Annotated[Path, argument(help="The published report site folder.")],
    inputs: Annotated[
        Path | None,
        option(
            "--inputs",
            help="Folder the site's recorded source paths are relative to "
            "(default: the working directory).",
        ),
    ] = None,
    baseline: Annotated[
        Path | None,
        option(
            "--baseline",
            help="The baseline the site was built with (--baseline of build): a site "
            "folder or pack archive. Needed, and must be the very same, when the site "
            "records one.",
        ),
    ] = None,
) -> None:
    """Re-run every validator on the inputs a site records and check the site follows.

    Prints each difference on stdout, one line each. Exit 0 when every input, result
    record and page re-derives byte for byte; 1 on any difference or anything that
    cannot be checked; 2 on a usage error, or when the site's manifest names a path
    that is absolute, climbs with .., leaves --inputs through a symbolic link or is
    not a regular file or folder: then nothing is read and each such path is printed
    after "refused:".
    """
    from sandbox_replay.report.verify import VerifyConfig, VerifyError, verify_site

    if not site_dir.is_dir():
        raise usage_error(f"site folder {site_dir} does not exist")
    if inputs is not None and not inputs.is_dir():
        raise usage_error(f"inputs folder {inputs} does not exist")
    try:
        config = VerifyConfig(site_dir, inputs, progress=progress, baseline=baseline)
        report = verify_site(config)
    except VerifyError as error:
        progress(f"cannot verify: {terminal_safe(error, 400)}")
        raise typer.Exit(EXIT_BLOCKED) from None
    if report.refused:
        for line in report.refused:
            print(f"refused: {terminal_safe(line, 400)}")
        progress(
            f"NOT verified: the site's manifest names {len(report.refused)} path(s) "
            "verify does not read; nothing was checked"
        )
        raise typer.Exit(EXIT_USAGE)
    for line in report.differences:
        print(terminal_safe(line, 400))
    if report.ok:
        progress(f"verified: {len(report.runs)} runs, {report.files_checked} files re-derive")
        raise typer.Exit(EXIT_PASS)
    progress(f"NOT verified: {len(report.differences)} difference(s)")
    raise typer.Exit(EXIT_BLOCKED)
