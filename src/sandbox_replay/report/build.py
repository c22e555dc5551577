"""Build the static report site: plan the runs, replay them, build the pages that span runs, write.

``build_site`` runs the phases ``_plan``, ``_replay`` (each page into the staging folder as
it is rendered), ``_shared_pages`` and ``publish.write_site`` (the atomic swap); nothing
touches the output folder before the last but ``publish.recover``.

Site layout (all links relative, so it opens from ``file://`` or any static host):
``index.html``, ``codes/index.html``, ``policy/index.html``, ``changes/index.html`` (with
``--baseline``), ``assets/``; per run ``runs/<run>/index.html``, its ``result.json`` (as
``run`` writes it), its listing sub-pages (``join/``, ``findings/``, ``trace/``) and with
``--single-file`` ``single/<run>.html``; a page for each log that could not be read
(``inspect_runs.UnreadLog``); ``manifest.json``, ``history.json`` (``manifest``),
``build-status.json`` (``incremental``) and ``sandbox-replay-site.json``
(``publish.site_marker``). Without ``SOURCE_DATE_EPOCH`` no time is recorded anywhere.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandbox_replay.atomic import dump_json
from sandbox_replay.exports import ExportFacts, ExportRun, attach_changes
from sandbox_replay.forking import usable_cpus
from sandbox_replay.importers.agentdojo_logs import AgentDojoImportError
from sandbox_replay.importers.inspect_logs import ImportOptions, InspectImportError
from sandbox_replay.load.files import SITE_MANIFEST as MANIFEST
from sandbox_replay.load.files import SITE_MARKER as SITE_MARKER
from sandbox_replay.load.scan import ForbiddenTable
from sandbox_replay.model.policy import PolicyChoice
from sandbox_replay.records.changes import Changes, RunSnapshot, compare, match_runs
from sandbox_replay.report import incremental, manifest, publish
from sandbox_replay.report.baseline import HISTORY, Baseline
from sandbox_replay.report.changes_views import CHANGES_PAGE, build_changes_view
from sandbox_replay.report.discover import DiscoveredRun, SkippedFolder, discover, exports_of
from sandbox_replay.report.inspect_runs import LogRuns, UnreadLog, importing_logs
from sandbox_replay.report.memory import available_bytes, fit_jobs, input_bytes
from sandbox_replay.report.parallel import (
    MatchedTextError,
    RunBuilt,
    RunTask,
    refuse_matched,
    reuse_file,
    run_all,
)
from sandbox_replay.report.publish import SITE_SCHEMA as SITE_SCHEMA
from sandbox_replay.report.publish import WRITE_FAULTS as WRITE_FAULTS
from sandbox_replay.report.publish import BuildError as BuildError
from sandbox_replay.report.publish import Site
from sandbox_replay.report.render import ASSETS, Renderer
from sandbox_replay.report.site_views import build_catalog_view, build_index_view, build_policy_view
from sandbox_replay.report.views import plural
from sandbox_replay.version import __version__

__all__ = ["MANIFEST", "SITE_MARKER", "SITE_SCHEMA", "WRITE_FAULTS", "BuildError"]


@dataclass(frozen=True)
class BuildConfig:
    """What one build needs: the run paths, where to write, and optional overrides."""

    paths: tuple[Path, ...]
    out_dir: Path
    templates: Path | None = None
    source_date_epoch: int | None = None
    cwd: Path | None = None
    progress: Callable[[str], None] | None = field(default=None, compare=False)
    jobs: int | None = None
    scheduler: str | None = None
    single_file: bool = False
    rebuild: bool = False
    # A user's forbidden-classes table, scanned for besides the packaged one.
    forbidden: ForbiddenTable | None = None
    # The policies the runs are replayed with (the packaged table where none is given).
    policies: PolicyChoice = field(default_factory=PolicyChoice)
    # Patterns of skipped folders accepted as not replayed (``discover.discover``).
    exclude: tuple[str, ...] = ()
    # A previous build to compare with (``--baseline``), read by ``baseline.read_baseline``.
    baseline: Baseline | None = None
    # The build's label in ``history.json`` (``--label``; else the build time, if any).
    label: str | None = None
    # How Inspect AI logs among the paths are imported (``inspect_runs``).
    inspect: ImportOptions | None = None
    # Whether to give ``BuildResult.export_runs``, with paths from ``--root`` (if given).
    exports: bool = False
    export_root: Path | None = None
    # Seeded escapes on every run (``checks.sensitivity``); required: a missed one blocks.
    sensitivity: bool = False
    require_sensitivity: bool = False

    def __post_init__(self) -> None:
        if self.templates is not None and not self.templates.is_dir():
            raise BuildError(f"templates folder {self.templates} does not exist")
        label = self.label
        if label is not None and (not label.strip() or len(label) > 100 or not label.isprintable()):
            raise BuildError("--label must be 1 to 100 printable characters")


@dataclass(frozen=True)
class RunOutcome:
    name: str
    status: str
    headline: str


@dataclass(frozen=True)
class BuildResult:
    """What was built: the site folder, each run's status, the files, what was not replayed."""

    out_dir: Path
    runs: tuple[RunOutcome, ...]
    file_count: int
    unchanged: bool
    reused: int = 0
    # What the exports show of each run, by name.
    exports: Mapping[str, ExportFacts] = field(default_factory=dict)
    skipped: tuple[SkippedFolder, ...] = ()
    # What changed since the baseline, with ``--baseline``.
    changes: Changes | None = None
    # With ``BuildConfig.exports``: the runs as the exports take them, and the warnings of
    # folders outside their root.
    export_runs: tuple[ExportRun, ...] = ()
    warnings: tuple[str, ...] = ()
    # The Inspect AI logs that could not be read (the extra is missing).
    unread: tuple[UnreadLog, ...] = ()

    @property
    def unexcluded(self) -> tuple[SkippedFolder, ...]:
        """Return the skipped folders no ``--exclude`` pattern accepts."""
        return tuple(folder for folder in self.skipped if folder.excluded_by is None)

    def fails(self, fail_on: str | None) -> bool:
        """Say whether ``--fail-on`` finds what it names: a run blocked or a folder that may
        hold one not replayed ("blocked"), or a change since the baseline."""
        if fail_on == "blocked":
            return bool(self.unexcluded) or any(run.status == "blocked" for run in self.runs)
        return fail_on is not None and self.changes is not None and self.changes.fails(fail_on)

    def summary(self) -> str:
        """Return the line that says what the site holds."""
        runs, blocked = len(self.runs), sum(1 for run in self.runs if run.status == "blocked")
        skipped = len(self.unexcluded)
        excluded = len(self.skipped) - skipped
        return (
            f"site {'unchanged' if self.unchanged else 'written'}: {self.out_dir}/index.html "
            f"({runs} run{'' if runs == 1 else 's'}, {blocked} blocked, {skipped} skipped"
            + (f", {excluded} excluded" if excluded else "")
            + f", {self.file_count} files)"
        )

    @property
    def incomplete(self) -> bool:
        """Say whether some run could not be read."""
        return bool(self.unread)


def epoch_from_env(environ: Mapping[str, str] | None = None) -> int | None:
    """Return ``SOURCE_DATE_EPOCH`` as an int, None when unset; raise on a bad value."""
    value = (environ if environ is not None else os.environ).get("SOURCE_DATE_EPOCH", "")
    if not value.strip():
        return None
    try:
        epoch = int(value.strip())
    except ValueError:
        raise BuildError(f"SOURCE_DATE_EPOCH must be an integer, got {value!r}") from None
    if epoch < 0:
        raise BuildError("SOURCE_DATE_EPOCH must not be negative")
    return epoch


def _stderr(message: str) -> None:
    print(f"sandbox-replay: {message}", file=sys.stderr, flush=True)


def build_site(config: BuildConfig) -> BuildResult:
    """Replay every run under ``config.paths`` and write the report site to ``config.out_dir``.

    A full, read-only or forbidden disk (``WRITE_FAULTS``) is a ``BuildError``; the previous
    site is then left as it was.
    """
    started = time.perf_counter()
    progress = config.progress or _stderr
    # Absolute and normalised, so `--out .` or `--out ..` names a folder with a parent.
    out_dir = Path(os.path.abspath(config.out_dir))
    publish.check_out_path(out_dir, [Path.cwd(), *config.paths], config.out_dir)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        with (
            publish.out_lock(out_dir, progress),
            importing_logs(
                config.paths, config.cwd or Path.cwd(), config.inspect, config.forbidden
            ) as logs,
        ):
            publish.recover(out_dir)
            publish.check_out_dir(out_dir)
            return _build(replace(config, paths=logs.paths), out_dir, progress, started, logs)
    except (InspectImportError, AgentDojoImportError) as error:
        raise BuildError(str(error)) from None
    except OSError as error:
        if error.errno not in WRITE_FAULTS:
            raise
        raise publish.write_fault(error, config.out_dir) from None


def _build(
    config: BuildConfig,
    out_dir: Path,
    progress: Callable[[str], None],
    started: float,
    logs: LogRuns,
) -> BuildResult:
    """Build the site into ``out_dir``, recovered, checked and locked."""
    plan = _plan(config, out_dir, logs, progress)
    staging = publish.new_staging(out_dir)
    try:
        site = Site()
        said = _Progress(progress, len(plan.runs), started)
        _reuse(plan, staging, out_dir, site, said)
        built, jobs = _replay(config, plan, staging, site, said)
        changes = _shared_pages(config, plan, site)
        _status_file(plan, site, built, progress)
        for path, data in site.files.items():
            try:
                refuse_matched(path, data, frozenset(site.needles))
            except MatchedTextError as error:
                raise BuildError(str(error)) from None
        unchanged = publish.write_site(out_dir, site.files, staging, site.digests)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    reused = len(plan.reusable)
    progress(
        f"{len(plan.runs)} runs: {len(plan.runs) - reused} built, {reused} reused, "
        f"in {time.perf_counter() - started:.1f}s "
        + (f"on the Dask scheduler {config.scheduler}" if config.scheduler else f"(--jobs {jobs})")
    )
    export_runs, warnings = _export_runs(config, plan, site, logs, changes)
    return BuildResult(
        out_dir=config.out_dir,
        runs=tuple(RunOutcome(s.name, s.status, s.headline) for s in site.ordered(plan.runs)),
        file_count=len(site.files) + len(site.staged),
        unchanged=unchanged,
        reused=reused,
        exports=site.exports,
        skipped=plan.skipped,
        changes=changes,
        export_runs=export_runs,
        warnings=warnings,
        unread=plan.unread,
    )


@dataclass(frozen=True)
class _Plan:
    """What the build does: its runs, their hashes, which are reused, and their baseline runs."""

    runs: tuple[DiscoveredRun, ...]
    skipped: tuple[SkippedFolder, ...]
    unread: tuple[UnreadLog, ...]
    build_time: str | None
    shown_time: str
    settings: str
    hashed: incremental.Hashed
    reusable: Mapping[str, incremental.ReusableRun]
    matched: Mapping[str, tuple[RunSnapshot, str]]


def _plan(
    config: BuildConfig, out_dir: Path, logs: LogRuns, progress: Callable[[str], None]
) -> _Plan:
    """Find the runs, hash their inputs, and read which of them the last build may serve."""
    found = discover(config.paths, config.cwd, config.exclude)
    runs = tuple(map(logs.relabel, found.runs))
    for folder in found.skipped:
        progress(folder.note)
    taken = {run.name: run.display_path for run in runs}
    for log in logs.unread:
        if log.name in taken:
            raise BuildError(
                f"runs {taken[log.name]} and {log.display_path} would both be published as "
                f"runs/{log.name}/; rename one of them"
            )
        progress(f"not read {log.display_path}: {log.reason}")
    epoch = config.source_date_epoch
    build_time = (
        None if epoch is None else datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    shown_time = build_time or "not recorded (SOURCE_DATE_EPOCH was not set)"
    forbidden, baseline = config.forbidden, config.baseline
    settings = incremental.settings_hash(
        config.templates,
        shown_time,
        forbidden.sha256 if forbidden else "",
        manifest.pages_digest(config, runs),
        single_file=config.single_file,
        sensitivity=(config.sensitivity, config.require_sensitivity),
    )
    hashed = incremental.hash_runs(runs)
    # With rebuild, the last build's status is ignored, so every run is replayed afresh.
    # A symlinked output folder is replaced, not followed: what it points to is not reused.
    fresh = config.rebuild or out_dir.is_symlink()
    previous = {} if fresh else incremental.read_status(out_dir, settings)
    keyed = {run.name: previous.get(tuple(hashed.keys[run.name].values())) for run in runs}
    reusable = {name: old for name, old in keyed.items() if old is not None}
    shown = [(run.name, run.display_path) for run in runs]
    matched = match_runs(baseline.runs, shown) if baseline is not None else {}
    return _Plan(
        runs,
        found.skipped,
        logs.unread,
        build_time,
        shown_time,
        settings,
        hashed,
        reusable,
        matched,
    )


def _task(run: DiscoveredRun, config: BuildConfig, plan: _Plan, staging: Path) -> RunTask:
    """Return the one task that builds ``run``, here (into ``staging``) or on a Dask worker."""
    policy = config.policies.for_run(run.path)
    templates = config.templates
    target: Path | None = staging
    if config.scheduler is not None:
        # A worker reads the inputs itself, from its own working directory, and returns
        # the pages: absolute paths, no staging folder.
        run, target = replace(run, path=run.path.resolve()), None
        templates = templates.resolve() if templates else None
    compared: dict[str, Any] = {}
    if config.baseline is not None:
        before, how = plan.matched.get(run.name, (None, ""))
        compared = {"compared": True, "baseline_run": before, "matched_by": how}
    return RunTask(
        run,
        templates,
        plan.shown_time,
        target,
        config.forbidden.classes if config.forbidden else (),
        policy=policy,
        single_file=config.single_file,
        sensitivity=config.sensitivity or config.require_sensitivity,
        require_sensitivity=config.require_sensitivity,
        **compared,
    )


class _Progress:
    """The build's progress lines; a run's line starts ``[k/N elapsed]``."""

    def __init__(self, say: Callable[[str], None], total: int, started: float) -> None:
        self.say, self.total, self.started, self.done = say, total, started, 0

    def __call__(self, message: str) -> None:
        self.say(message)

    def run(self, message: str) -> None:
        self.done += 1
        self.say(f"[{self.done}/{self.total} {time.perf_counter() - self.started:.1f}s] {message}")


def _reuse(plan: _Plan, staging: Path, out_dir: Path, site: Site, progress: _Progress) -> None:
    """Link the last build's pages of each run whose inputs did not change into ``staging``."""
    for run in plan.runs:
        old = plan.reusable.get(run.name)
        if old is None:
            continue
        for path in old.files:
            reuse_file(staging, path, out_dir)
            site.add_staged(path)
        site.add_run(run.name, old.summary, list(old.files), old.exports)
        progress.run(
            f"reused {run.display_path} as runs/{run.name}: {old.summary.status} (inputs unchanged)"
        )


def _replay(
    config: BuildConfig, plan: _Plan, staging: Path, site: Site, progress: _Progress
) -> tuple[list[tuple[RunTask, RunBuilt]], int]:
    """Build every run not reused; return each task with what it built, and the jobs used."""
    tasks = [
        _task(run, config, plan, staging) for run in plan.runs if run.name not in plan.reusable
    ]
    jobs = config.jobs if config.jobs is not None else usable_cpus()
    if config.scheduler is None:  # a cluster's workers have memory of their own
        sizes = [input_bytes(task.run.path) for task in tasks]
        fit = fit_jobs(sizes, jobs, available_bytes(), explicit=config.jobs is not None)
        if fit.note is not None:
            progress(fit.note)
        jobs = fit.jobs
    if len(tasks) == 1 and tasks[0].staging is not None:
        # One run to build: its processes share out its listing pages instead.
        tasks[0] = replace(tasks[0], page_jobs=jobs, progress=progress)

    def done(task: RunTask, built: RunBuilt) -> None:
        for note in built.notes:
            progress(note)
        progress.run(
            f"replayed {task.run.display_path} as runs/{task.run.name}: "
            f"{built.summary.status} (replay {built.replay_seconds:.1f}s, "
            f"pages {built.seconds - built.replay_seconds:.1f}s)"
        )

    try:
        results = run_all(tasks, jobs, config.scheduler, done)
    except MatchedTextError as error:
        raise BuildError(str(error)) from None
    for task, built in zip(tasks, results, strict=True):
        name = task.run.name
        for path, data in built.files.items():
            site.add(path, data)
        for path in built.written:
            site.add_staged(path)
        result = f"runs/{name}/result.json"
        if result in built.written:  # streamed to the staging folder as it was hashed
            site.digests[result] = built.summary.result_sha256
        assert built.exports is not None  # build_run always makes them
        site.add_run(name, built.summary, sorted([*built.files, *built.written]), built.exports)
        site.needles.update(built.needles)
    return list(zip(tasks, results, strict=True)), jobs


def _shared_pages(config: BuildConfig, plan: _Plan, site: Site) -> Changes | None:
    """Add the pages that span runs, and each unread log's page; return the changes."""
    ordered, shown_time, baseline = site.ordered(plan.runs), plan.shown_time, config.baseline
    snapshots = [
        site.exports[r.name].snapshot(r.name, r.source_path, dict(r.input_digests)) for r in ordered
    ]
    changes = (
        compare(baseline.runs, snapshots, baseline.manifest_sha256, baseline.label)
        if baseline is not None
        else None
    )
    history = manifest.history(baseline, config.label or plan.build_time, snapshots)
    listed = [*ordered, *(log.summary() for log in plan.unread)]
    index = build_index_view(listed, shown_time, __version__, changes, history["builds"])
    catalog = build_catalog_view(ordered, shown_time, __version__)
    policy = build_policy_view(ordered, shown_time, __version__)
    if changes is not None:
        link = "../" + CHANGES_PAGE
        catalog = replace(catalog, chrome=replace(catalog.chrome, changes_href=link))
        policy = replace(policy, chrome=replace(policy.chrome, changes_href=link))
    renderer = Renderer(config.templates)
    site.add("index.html", renderer.render("index.html", view=index))
    site.add("codes/index.html", renderer.render("codes.html", view=catalog))
    site.add("policy/index.html", renderer.render("policy.html", view=policy))
    if changes is not None:
        changes_view = build_changes_view(changes, shown_time, __version__)
        site.add(CHANGES_PAGE, renderer.render("changes.html", view=changes_view))
    for log in plan.unread:
        page = renderer.render("unread.html", view=log.view(shown_time, __version__))
        site.add(f"runs/{log.name}/index.html", page)
    site.add(HISTORY, dump_json(history))
    for asset in ASSETS:
        site.add(asset, renderer.asset(asset))
    manifest_bytes = dump_json(manifest.manifest(config, plan.runs, ordered, plan.build_time))
    site.add(MANIFEST, manifest_bytes)
    site.add(SITE_MARKER, publish.site_marker(manifest_bytes))
    return changes


def _status_file(
    plan: _Plan, site: Site, built: Sequence[tuple[RunTask, RunBuilt]], say: Callable[[str], None]
) -> None:
    """Add ``build-status.json``; a run whose inputs changed while read gets a key no build
    matches."""
    keys = plan.hashed.keys
    for task, result in built:
        name = task.run.name
        changed = incremental.changed_while_built(plan.hashed.files[name], result.input_digests)
        if changed:
            keys[name] = {**keys[name], "inputs_sha256": incremental.UNSETTLED}
            say(
                f"runs/{name}: {plural(changed, 'input file')} changed while this build "
                "read them; its pages show what was replayed, and the next build "
                "replays it again"
            )
    runs = [
        (keys[r.name], site.summaries[r.name], site.run_files[r.name], site.exports[r.name])
        for r in plan.runs
    ]
    site.add(incremental.STATUS_FILE, dump_json(incremental.status_record(plan.settings, runs)))


def _export_runs(
    config: BuildConfig, plan: _Plan, site: Site, logs: LogRuns, changes: Changes | None
) -> tuple[tuple[ExportRun, ...], tuple[str, ...]]:
    """Return every run as the exports take it and the warnings of ``discover.exports_of``;
    none unless exports are wanted."""
    if not config.exports:
        return (), ()
    runs, warnings = exports_of(plan.runs, site.exports, config.export_root, logs.logs)
    return tuple(attach_changes(runs, changes) if changes is not None else runs), tuple(warnings)
