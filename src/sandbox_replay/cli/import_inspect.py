"""``import inspect`` and ``import agentdojo``: turn another harness's logs into bundle folders."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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

if TYPE_CHECKING:
    from sandbox_replay.importers.inspect_bundle import Bundle

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
    _written(bundles, written, len(found), out_dir)


@import_app.command("agentdojo")
def import_agentdojo(
    logdir: Annotated[
        list[Path],
        argument(
            help="AgentDojo run logs, or folders searched for them (<task>/<attack>/<run>.json)."
        ),
    ],
    out_dir: Annotated[
        Path,
        option("--out", "-o", help="Folder to write the bundle folders into."),
    ],
    map_file: Annotated[
        Path | None,
        option(
            "--map",
            help="Map file tried before the packaged map of the AgentDojo suites' tools "
            "(docs/agentdojo.md).",
        ),
    ] = None,
    forbidden_classes: opt.ForbiddenClassesOpt = None,
    quiet: opt.QuietOpt = False,
) -> None:
    """Import AgentDojo run logs as bundle folders, one per run.

    Reads each log with the replay's own strict JSON reader; AgentDojo need not be
    installed. Bundles carry refs and sha256 digests, never argument, output or message
    bodies; the benchmark's utility and security flags go into the manifest. Exit 0 when
    every bundle is written, 2 on a usage error or a log that cannot be read.
    """
    from sandbox_replay.importers import agentdojo_logs as agentdojo
    from sandbox_replay.importers.inspect_logs import write_bundles
    from sandbox_replay.importers.tool_map import MapFileError

    set_output(quiet, False)
    table = opt.PolicyOptions(forbidden_classes).table()
    with usage_errors(MapFileError, agentdojo.AgentDojoImportError, safe=True):
        tool_map = agentdojo.read_map(map_file) if map_file else agentdojo.agentdojo_map()
        options = agentdojo.AgentDojoOptions(tool_map, opt.extra_scanner(table))
        found = agentdojo.find_logs(logdir)
        if not found:
            shown = ", ".join(str(path) for path in logdir)
            raise agentdojo.AgentDojoImportError(f"no AgentDojo run log found under {shown}")
        bundles = agentdojo.import_logs(found, options)
        written = write_bundles(bundles, out_dir, agentdojo.AgentDojoImportError)
    _written(bundles, written, len(found), out_dir)


def _written(bundles: Sequence[Bundle], written: Sequence[Path], logs: int, out_dir: Path) -> None:
    """Print a line per bundle written, and one for the whole import."""
    for bundle, folder in zip(bundles, written, strict=True):
        if bundle.secret_matches:
            counts = ", ".join(f"{c}: {n}" for c, n in sorted(bundle.secret_matches.items()))
            progress(
                f"{terminal_safe(folder)}: forbidden material in tool bodies ({counts}), "
                "counted on the requests; no body is written"
            )
        progress(f"wrote {terminal_safe(folder)}")
    progress(f"imported {logs} log(s) as {len(written)} bundle(s) into {terminal_safe(out_dir)}")
