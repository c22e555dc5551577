"""``build``: replay every run found and render the static report site."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sandbox_replay.cli import options as opt
from sandbox_replay.cli.app import (
    EXIT_BLOCKED,
    EXIT_INCOMPLETE,
    EXIT_PASS,
    app,
    argument,
    option,
    progress,
    set_output,
    terminal_safe,
    usage_error,
    usage_errors,
)
from sandbox_replay.exports import write_exports
from sandbox_replay.model.policy import PolicyChoice

if TYPE_CHECKING:
    pass

FAIL_ON = ("blocked", "regression", "new")


def _checked_paths(
    paths: list[Path] | None, fail_on: str | None, baseline: Path | None
) -> tuple[Path, ...]:
    """Check ``--fail-on``; return the paths to build (default: ./fixtures)."""
    if fail_on not in (None, *FAIL_ON):
        raise usage_error(
            f"--fail-on accepts 'blocked', 'regression' or 'new', got {terminal_safe(fail_on)!r}"
        )
    if fail_on in ("regression", "new") and baseline is None:
        raise usage_error(f"--fail-on {fail_on} needs --baseline: a build to compare with")
    if paths:
        return tuple(paths)
    if not Path("fixtures").is_dir():
        raise usage_error(
            "no PATH given and there is no fixtures/ folder here; "
            "pass the fixture or bundle folders to build"
        )
    return (Path("fixtures"),)


def say_policies(policies: PolicyChoice) -> None:
    """Say which policies the runs were replayed with (nothing for the packaged table)."""
    if policies.default is not None:
        opt.say_policy(policies.default, " for every run")
    for folder, run_policy in policies.runs:
        opt.say_policy(run_policy, f" for runs under {_shown_folder(folder)}")


def _shown_folder(folder: Path) -> str:
    try:
        return folder.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return folder.name


@app.command("build")
def build(
    paths: Annotated[
        list[Path] | None,
        argument(
            help="Fixture or bundle folders, or folders to search for them (default: ./fixtures).",
        ),
    ] = None,
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", help="Folder to write the site into.")
    ] = Path("site"),
    fail_on: Annotated[
        str | None,
        option(
            "--fail-on",
            help="Exit 1 when any run is 'blocked' (for CI gates); with --baseline, "
            "'regression' when a run that passed in the baseline is blocked, 'new' when "
            "there is a regression or any finding the baseline did not have. By default "
            "the command exits 0 whenever the site is built (3 when a run could not be read).",
        ),
    ] = None,
    baseline: Annotated[
        Path | None,
        option(
            "--baseline",
            help="A previous build to compare with: its site folder or a pack archive of "
            "it. The site then shows what changed since (regressions, new and fixed "
            "findings, changed inputs) and records the baseline's digest.",
        ),
    ] = None,
    label: Annotated[
        str | None,
        option(
            "--label",
            help="This build's label in history.json and the trend (default: the build "
            "time from SOURCE_DATE_EPOCH, if set).",
        ),
    ] = None,
    templates: Annotated[
        Path | None,
        option(
            "--templates",
            help="Folder of templates (and assets/) searched before the built-in ones.",
        ),
    ] = None,
    sarif: opt.SarifOpt = None,
    junit: opt.JunitOpt = None,
    markdown: opt.MarkdownOpt = None,
    site_url: opt.SiteUrlOpt = None,
    jobs: Annotated[
        int | None,
        option(
            "--jobs",
            "-j",
            envvar="SANDBOX_REPLAY_JOBS",
            help="Runs replayed and rendered at once, in separate processes "
            "(default: the number of cores; 1 builds in this process).",
        ),
    ] = None,
    scheduler: Annotated[
        str | None,
        option(
            "--scheduler",
            help="Address of a Dask distributed scheduler (tcp://host:8786) to replay and "
            "render the runs on; needs the extra sandbox-replay[dask].",
        ),
    ] = None,
    single_file: Annotated[
        bool,
        typer.Option(
            "--single-file",
            help="Also write single/<run>.html: each run page as one self-contained file "
            "(stylesheet and script inlined) to attach to a release.",
        ),
    ] = False,
    rebuild: Annotated[
        bool,
        typer.Option(
            "--rebuild",
            help="Replay and render every run, even those whose inputs, templates and "
            "version are unchanged since the last build into --out.",
        ),
    ] = False,
    forbidden_classes: opt.ForbiddenClassesOpt = None,
    policy: opt.PolicyOpt = None,
    cedar_schema: opt.CedarSchemaOpt = None,
    exclude: opt.ExcludeOpt = None,
    map_file: opt.MapOpt = None,
    rollback_from_teardown: opt.TeardownOpt = False,
    sensitivity: opt.SensitivityOpt = False,
    require_sensitivity: opt.RequireSensitivityOpt = False,
    quiet: opt.QuietOpt = False,
    root: opt.RootOpt = None,
) -> None:
    """Replay every run found and render the static report site.

    Inspect AI .eval logs and AgentDojo run logs given as PATH, or found under a PATH
    folder, are imported as `import inspect` and `import agentdojo` import them (--map,
    --forbidden-classes, --rollback-from-teardown) and shown with the log as their source.

    Exit 0 when the site is built, whatever the runs found; with --fail-on blocked,
    1 if any run was blocked or any folder that may hold a run was skipped (hidden,
    symbolic link, unreadable, too deep) and no --exclude names it; 2 on a usage error.
    """
    from sandbox_replay.importers.inspect_logs import InspectImportError
    from sandbox_replay.report.baseline import BaselineError, read_baseline
    from sandbox_replay.report.build import BuildConfig, BuildError, build_site, epoch_from_env
    from sandbox_replay.report.discover import DiscoveryError
    from sandbox_replay.report.parallel import SchedulerError

    set_output(quiet, False)
    found = _checked_paths(paths, fail_on, baseline)
    targets = opt.ExportOptions(sarif, junit, markdown, site_url).targets(out_dir)
    opt.check_jobs(jobs)
    policies = opt.PolicyOptions(forbidden_classes, policy, cedar_schema)
    table, chosen = policies.table(), policies.choice()
    inspect = opt.InspectOptions(map_file, rollback_from_teardown).import_options(None)
    with usage_errors(BaselineError, safe=True):
        previous = read_baseline(baseline) if baseline is not None else None
    with usage_errors(BuildError, DiscoveryError, SchedulerError, InspectImportError):
        config = BuildConfig(
            found,
            out_dir,
            templates,
            epoch_from_env(),
            progress=progress,
            jobs=jobs,
            scheduler=scheduler,
            single_file=single_file,
            rebuild=rebuild,
            forbidden=table,
            policies=chosen,
            exclude=tuple(exclude or ()),
            baseline=previous,
            label=label,
            inspect=inspect,
            exports=bool(targets.paths()),
            export_root=root,
            sensitivity=sensitivity,
            require_sensitivity=require_sensitivity,
        )
        result = build_site(config)
        say_policies(chosen)
    for warning in result.warnings:
        progress(warning)
    for path in write_exports(targets, result.export_runs) if targets.paths() else []:
        progress(f"wrote {path}")
    progress(result.summary())
    if result.changes is not None:
        progress(result.changes.summary())
    if result.fails(fail_on):
        raise typer.Exit(EXIT_BLOCKED)
    raise typer.Exit(EXIT_INCOMPLETE if result.incomplete else EXIT_PASS)
