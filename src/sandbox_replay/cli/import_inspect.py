"""``import inspect``: turn Inspect AI evaluation logs into bundle folders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sandbox_replay.cli import options as opt
from sandbox_replay.cli.app import (
    app,
    argument,
    option,
    progress,
    set_output,
    terminal_safe,
    usage_errors,
)

import_app = typer.Typer(
    help="Turn another harness's logs into bundle folders that run-sandbox-bundle and build replay.",
    no_args_is_help=True,
)
app.add_typer(import_app, name="import")


@import_app.command("inspect")
def import_inspect(
    logs: Annotated[
        list[Path],
        argument(help="Inspect AI .eval logs, or folders searched for them."),
    ],
    out_dir: Annotated[
        Path,
        option("--out", "-o", help="Folder to write the bundle folders into."),
    ],
    map_file: opt.MapOpt = None,
    per_log: Annotated[
        bool, typer.Option("--per-log", help="One bundle per log instead of one per sample.")
    ] = False,
    rollback_from_teardown: opt.TeardownOpt = False,
    forbidden_classes: opt.ForbiddenClassesOpt = None,
    quiet: opt.QuietOpt = False,
) -> None:
    """Import Inspect AI evaluation logs as bundle folders, one per sample (or per log).

    Reads the logs with Inspect's own API (the extra sandbox-replay[inspect]). Bundles
    carry refs and sha256 digests, never argument, output or command bodies. Exit 0 when
    every bundle is written, 2 on a usage error or a log that cannot be read.
    """
    from sandbox_replay.importers.inspect_logs import (
        InspectImportError,
        find_logs,
        import_logs,
        write_bundles,
    )

    set_output(quiet, False)
    table = opt.PolicyOptions(forbidden_classes).table()
    options = opt.InspectOptions(map_file, rollback_from_teardown).import_options(table, per_log)
    with usage_errors(InspectImportError, safe=True):
        found = find_logs(logs)
        if not found:
            shown = ", ".join(str(path) for path in logs)
            raise InspectImportError(f"no .eval log found under {shown}")
        bundles = import_logs(found, options)
        written = write_bundles(bundles, out_dir)
    for bundle, folder in zip(bundles, written, strict=True):
        if bundle.secret_matches:
            counts = ", ".join(f"{c}: {n}" for c, n in sorted(bundle.secret_matches.items()))
            progress(
                f"{terminal_safe(folder)}: forbidden material in tool bodies ({counts}); not written"
            )
        progress(f"wrote {terminal_safe(folder)}")
    progress(
        f"imported {len(found)} log(s) as {len(written)} bundle(s) into {terminal_safe(out_dir)}"
    )
