"""Build the static report site: plan the runs, replay them, build the pages that span runs, write.

``build_site`` reads as its phases, and nothing touches the output folder before the last
(only ``publish.recover`` runs first, and it only puts back what a killed build moved):

1. ``_plan``: find the runs, hash their inputs, and decide which the last build's pages
   serve unchanged (``incremental``);
2. ``_replay``: build every other run (``parallel.build_run``: replay, view-models, pages)
   in this process, in ``--jobs`` processes (fewer, when the runs would not fit in the
   memory available: ``memory``) or on a Dask scheduler. A run's pages are written as
   they are rendered into the staging folder (``publish.new_staging``), not the output
   folder; a Dask worker returns its pages and this process writes them;
3. ``_shared_pages``: the pages that span runs (index, catalog, policy, changes, history,
   manifest, marker, status), then the forbidden-material check of every page in memory;
4. ``publish.write_site``: swap the staging folder in, atomically. An output folder whose
   files already equal the new site is left untouched.

Site layout (all links relative, so it opens from ``file://`` or any static host):
``index.html``; ``runs/<run>/index.html`` and ``runs/<run>/result.json`` (the run's result
record, byte for byte as ``run`` writes it); for a run with more than ``views.PAGE_ROWS``
join rows, findings or spans, ``runs/<run>/join/page-NNNN.html``,
``runs/<run>/findings/page-NNNN.html`` and ``runs/<run>/trace/page-NNNN.html``;
``codes/index.html``; ``policy/index.html`` (every rule of each policy in force, a column
per run); ``history.json`` (``_history``); with ``--baseline``, ``changes/index.html``
(``changes_views``); ``build-status.json`` (``incremental``); ``assets/site.css`` and
``assets/site.js``; ``sandbox-replay-site.json`` (``publish.site_marker``); with
``--single-file``, ``single/<run>.html`` (``single_file.py``); for an Inspect AI log that
could not be read, ``runs/<log>/index.html`` saying why (``inspect_runs.UnreadLog``); and
``manifest.json``:

    {"schema_version": "sandbox-replay.site/1",
     "tool": {"name", "version"}, "build_time": <ISO 8601 UTC or null>,
     "forbidden_classes": {"path", "sha256"} (only with --forbidden-classes),
     "baseline": {"manifest_sha256", "history_sha256" (null when it had none),
                  "label"} (only with --baseline: ``baseline.Baseline.record``),
     "label": <--label> (only with --label),
     "runs": [{"name", "mode", "status", "source_path" (relative to the working
               directory), "page", "result", "result_sha256",
               "source_sha256": "sha256:<hex>" (only for a run imported from an Inspect
               AI log, whose path is then source_path: ``inspect_runs``),
               "input_digests": {path: "sha256:<hex>"},
               "single_file": "single/<run>.html" (only with --single-file)}]}

It is written the way every record is (``atomic.dump_json``), so a later ``verify`` can
check a published site against its inputs. With ``SOURCE_DATE_EPOCH`` unset no time is
recorded anywhere, so equal inputs always give equal bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from sandbox_replay.atomic import dump_json
from sandbox_replay.exports import (
    ExportFacts,
    ExportRun,
    attach_changes,
    located_at,
    outside_root,
    source_root_of,
)
from sandbox_replay.forking import usable_cpus
from sandbox_replay.importers.inspect_logs import ImportOptions, InspectImportError
from sandbox_replay.load.files import SITE_MANIFEST as MANIFEST
from sandbox_replay.load.files import SITE_MARKER as SITE_MARKER
from sandbox_replay.load.scan import ForbiddenTable
from sandbox_replay.model.policy import PolicyChoice
from sandbox_replay.records.changes import (
    HISTORY_LIMIT,
    Changes,
    RunSnapshot,
    compare,
    history_entry,
    match_runs,
)
from sandbox_replay.report import incremental, publish
from sandbox_replay.report.baseline import HISTORY, HISTORY_SCHEMA, Baseline
from sandbox_replay.report.changes_views import CHANGES_PAGE, build_changes_view
from sandbox_replay.report.discover import DiscoveredRun, SkippedFolder, discover, display_path
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
from sandbox_replay.report.render import ASSETS, Renderer
from sandbox_replay.report.single_file import single_file_path
from sandbox_replay.report.site_views import (
    RunSummary,
    build_catalog_view,
    build_index_view,
    build_policy_view,
)
from sandbox_replay.report.views import plural
from sandbox_replay.version import TOOL_NAME, __version__

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
    # Whether exports are wanted (``BuildResult.export_runs``), and the root their paths
    # are relative to (``--root``; default: ``exports.repository_root()``).
    exports: bool = False
    export_root: Path | None = None


@dataclass(frozen=True)
class RunOutcome:
    name: str
    status: str
    headline: str


@dataclass(frozen=True)
class BuildResult:
    """What was built: the site folder, each run's status, how many files, and the folders
    that may hold a run but were not replayed."""

    out_dir: Path
    runs: tuple[RunOutcome, ...]
    file_count: int
    unchanged: bool
    reused: int = 0
    # What the exports show of each run, by name: replayed or reused, none replays again.
    exports: Mapping[str, ExportFacts] = field(default_factory=dict)
    skipped: tuple[SkippedFolder, ...] = ()
    # What changed since the baseline, with ``--baseline``.
    changes: Changes | None = None
    # With ``BuildConfig.exports``: every run as the exports' writers take it, and the
    # warnings of runs whose folder lies outside the exports' root.
    export_runs: tuple[ExportRun, ...] = ()
    warnings: tuple[str, ...] = ()
    # The Inspect AI logs that could not be read (the extra is missing).
    unread: tuple[UnreadLog, ...] = ()

    @property
    def unexcluded(self) -> tuple[SkippedFolder, ...]:
        """Return the skipped folders no ``--exclude`` pattern accepts."""
        return tuple(folder for folder in self.skipped if folder.excluded_by is None)

    @property
    def any_blocked(self) -> bool:
        """Say whether ``--fail-on blocked`` fails: a run was blocked, or a folder that may
        hold one was skipped and not excluded."""
        return bool(self.unexcluded) or any(run.status == "blocked" for run in self.runs)

    @property
    def incomplete(self) -> bool:
        """Say whether some run could not be read, so the site does not show every run."""
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


def default_jobs() -> int:
    """Return the default number of build processes: the number of usable cores."""
    return usable_cpus()


def _stderr(message: str) -> None:
    print(f"sandbox-replay: {message}", file=sys.stderr, flush=True)


def build_site(config: BuildConfig) -> BuildResult:
    """Replay every run under ``config.paths`` and write the report site to ``config.out_dir``.

    A full, read-only or forbidden disk (``WRITE_FAULTS``) is a ``BuildError`` naming the
    output folder and the path that failed; the previous site is then left as it was.
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
            importing_logs(config.paths, config.cwd or Path.cwd(), config.inspect) as logs,
        ):
            publish.recover(out_dir)
            publish.check_out_dir(out_dir)
            return _build(replace(config, paths=logs.paths), out_dir, progress, started, logs)
    except InspectImportError as error:
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
    """Build the site, ``out_dir`` recovered, checked and locked (``build_site``)."""
    plan = _plan(config, out_dir, logs, progress)
    staging = publish.new_staging(out_dir)
    try:
        site = _Site()
        counter = _Counter(len(plan.runs), started)
        _reuse(plan, staging, out_dir, site, progress, counter)
        built, jobs = _replay(config, plan, staging, site, progress, counter)
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


class _Site:
    """The site as it is gathered: pages in memory by path (refusing a second file at one
    path), pages already staged, and what each run gave."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.staged: set[str] = set()
        self.summaries: dict[str, RunSummary] = {}
        self.run_files: dict[str, list[str]] = {}
        self.exports: dict[str, ExportFacts] = {}
        self.digests: dict[str, str] = {}  # staged result records, hashed as written
        self.needles: set[bytes] = set()

    def add(self, path: str, data: bytes) -> None:
        self.add_staged(path)
        self.staged.discard(path)
        self.files[path] = data

    def add_staged(self, path: str) -> None:
        if path in self.files or path in self.staged:
            raise BuildError(f"two pages map to {path}")
        self.staged.add(path)

    def add_run(self, name: str, summary: RunSummary, files: list[str], facts: ExportFacts) -> None:
        self.summaries[name] = summary
        self.run_files[name] = files
        self.exports[name] = facts

    def ordered(self, runs: Sequence[DiscoveredRun]) -> list[RunSummary]:
        return [self.summaries[run.name] for run in runs]


class _Hashed(NamedTuple):
    """Each run's key in the status file (``incremental.run_key``) and its files' digests."""

    keys: dict[str, dict[str, str]]
    files: dict[str, dict[str, str]]


def _run_keys(runs: Sequence[DiscoveredRun]) -> _Hashed:
    """Hash every run's folder; both maps are by run name."""
    hashed = _Hashed({}, {})
    for run in runs:
        combined, files = incremental.inputs_digests(run.path)
        hashed.keys[run.name] = incremental.run_key(run, combined)
        hashed.files[run.name] = files
    return hashed


@dataclass(frozen=True)
class _Plan:
    """What the build does: its runs, the logs it cannot read, the pages' settings, each
    run's input hash, the runs the last build's pages serve, and each run's baseline run."""

    runs: tuple[DiscoveredRun, ...]
    skipped: tuple[SkippedFolder, ...]
    unread: tuple[UnreadLog, ...]
    build_time: str | None
    shown_time: str
    settings: str
    hashed: _Hashed
    reusable: Mapping[str, incremental.ReusableRun]
    matched: Mapping[str, tuple[RunSnapshot, str]]


def _plan(
    config: BuildConfig, out_dir: Path, logs: LogRuns, progress: Callable[[str], None]
) -> _Plan:
    """Find the runs, hash their inputs, and read which of them the last build may serve."""
    if config.templates is not None and not config.templates.is_dir():
        raise BuildError(f"templates folder {config.templates} does not exist")
    found = discover(config.paths, config.cwd, config.exclude)
    runs = tuple(map(logs.relabel, found.runs))
    for folder in found.skipped:
        progress(folder.note)
    names = {run.name: run.display_path for run in runs}
    for log in logs.unread:
        if log.name in names:
            raise BuildError(
                f"runs {names[log.name]} and {log.display_path} would both be published as "
                f"runs/{log.name}/; rename one of them"
            )
        names[log.name] = log.display_path
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
        _policies_digest(runs, config.policies) + _baseline_digest(baseline, config.label),
        single_file=config.single_file,
    )
    hashed = _run_keys(runs)
    # With rebuild, the last build's status is ignored, so every run is replayed afresh.
    # A symlinked output folder is replaced, not followed: what it points to is not reused.
    fresh = config.rebuild or out_dir.is_symlink()
    previous = {} if fresh else incremental.read_status(out_dir, settings)
    reusable = {}
    for run in runs:
        old = previous.get(tuple(hashed.keys[run.name].values()))
        if old is not None:
            reusable[run.name] = old
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
        **compared,
    )


class _Counter:
    """The ``[k/N elapsed]`` a build's per-run line starts with, so a long build shows
    how far it got."""

    def __init__(self, total: int, started: float) -> None:
        self.total, self.started, self.done = total, started, 0

    def next(self) -> str:
        self.done += 1
        return f"[{self.done}/{self.total} {time.perf_counter() - self.started:.1f}s]"


def _reuse(
    plan: _Plan,
    staging: Path,
    out_dir: Path,
    site: _Site,
    progress: Callable[[str], None],
    counter: _Counter,
) -> None:
    """Link the last build's pages of each run whose inputs did not change into ``staging``."""
    for run in plan.runs:
        old = plan.reusable.get(run.name)
        if old is None:
            continue
        for path in old.files:
            reuse_file(staging, path, out_dir)
            site.add_staged(path)
        site.add_run(run.name, old.summary, list(old.files), old.exports)
        progress(
            f"{counter.next()} reused {run.display_path} as runs/{run.name}: "
            f"{old.summary.status} (inputs unchanged)"
        )


def _replay(
    config: BuildConfig,
    plan: _Plan,
    staging: Path,
    site: _Site,
    progress: Callable[[str], None],
    counter: _Counter,
) -> tuple[list[tuple[RunTask, RunBuilt]], int]:
    """Build every run not reused; return each task with what it built, and the jobs used."""
    tasks = [
        _task(run, config, plan, staging) for run in plan.runs if run.name not in plan.reusable
    ]
    jobs = config.jobs if config.jobs is not None else default_jobs()
    if config.scheduler is None:  # a cluster's workers have memory of their own
        sizes = [input_bytes(task.run.path) for task in tasks]
        fit = fit_jobs(sizes, jobs, available_bytes(), explicit=config.jobs is not None)
        if fit.note is not None:
            progress(fit.note)
        jobs = fit.jobs
    if len(tasks) == 1 and tasks[0].staging is not None:
        # One run to build: its processes share out its listing pages instead, and it
        # says how far it got.
        tasks[0] = replace(tasks[0], page_jobs=jobs, progress=progress)

    def done(task: RunTask, built: RunBuilt) -> None:
        for note in built.notes:
            progress(note)
        progress(
            f"{counter.next()} replayed {task.run.display_path} as runs/{task.run.name}: "
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


def _shared_pages(config: BuildConfig, plan: _Plan, site: _Site) -> Changes | None:
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
    history = _history(baseline, config.label or plan.build_time, snapshots)
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
    manifest_bytes = dump_json(_manifest(config, plan.runs, ordered, plan.build_time))
    site.add(MANIFEST, manifest_bytes)
    site.add(SITE_MARKER, publish.site_marker(manifest_bytes))
    return changes


def _status_file(
    plan: _Plan, site: _Site, built: Sequence[tuple[RunTask, RunBuilt]], say: Callable[[str], None]
) -> None:
    """Add ``build-status.json``; a run whose inputs changed while read gets a key no build
    matches (``incremental.UNSETTLED``)."""
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
    config: BuildConfig, plan: _Plan, site: _Site, logs: LogRuns, changes: Changes | None
) -> tuple[tuple[ExportRun, ...], tuple[str, ...]]:
    """Return every run as the exports take it, named as the site names it, and the
    warnings of the folders (a run imported from a log: the log) outside their root."""
    if not config.exports:
        return (), ()
    root = config.export_root
    runs = []
    for run in plan.runs:
        export = ExportRun(run.name, site.exports[run.name], source_root_of(run.path, root))
        log = logs.logs.get(run.path.resolve())
        if log is not None:
            folder = source_root_of(log.parent, root)
            export = located_at(export, f"{folder}/{log.name}" if folder else log.name)
        runs.append(export)
    if changes is not None:
        runs = attach_changes(runs, changes)
    named = {logs.logs.get(run.path.resolve(), run.path) for run in plan.runs}
    warnings = (
        outside_root(path.parent if path.is_file() else path, root) for path in sorted(named)
    )
    return tuple(runs), tuple(warning for warning in warnings if warning is not None)


def _baseline_digest(baseline: Baseline | None, label: str | None) -> str:
    """Return what of the baseline and label shapes every page ("" for neither)."""
    if baseline is None and label is None:
        return ""
    record = baseline.record() if baseline is not None else None
    return hashlib.sha256(json.dumps([record, label]).encode()).hexdigest()


def _history(
    baseline: Baseline | None, label: str | None, snapshots: Sequence[RunSnapshot]
) -> dict[str, Any]:
    """Return ``history.json``: the baseline's builds (the last ones) and this one.

    ``{"schema_version": "sandbox-replay.history/1", "builds": [...]}``, oldest first, at
    most ``changes.HISTORY_LIMIT`` builds, each ``{"label": <--label, else the build time,
    else null>, "runs", "passed", "blocked", "findings", "findings_by_severity":
    {"critical", "high", "medium", "low"}, "findings_by_layer": {<layer>: n}}`` (expected
    negative-case alarms not counted). Every build writes it; a baseline's builds are
    carried forward, so a chain of builds each given the one before keeps the trend.
    """
    earlier = list(baseline.history) if baseline is not None else []
    builds = [*earlier, history_entry(label, snapshots)][-HISTORY_LIMIT:]
    return {"schema_version": HISTORY_SCHEMA, "builds": builds}


def _policies_digest(runs: Sequence[DiscoveredRun], policies: PolicyChoice) -> str:
    """Digest which policy each run is replayed with ("" when every run has the packaged one).

    By each run's shown path and the policy file's sha256, so it does not depend on where
    the folders are: a site rebuilt elsewhere (``verify``) hashes the same.
    """
    chosen = []
    for run in runs:
        policy = policies.for_run(run.path)
        if policy is not None:
            chosen.append([run.display_path, policy.source.kind, policy.source.sha256])
    if not chosen:
        return ""
    return hashlib.sha256(json.dumps(chosen).encode()).hexdigest()


def _inspect_import(config: BuildConfig, runs: Sequence[DiscoveredRun]) -> dict[str, object]:
    """Record how the runs imported from Inspect AI logs were imported, when there are any."""
    if not any(run.source_sha256 is not None for run in runs):
        return {}
    options = config.inspect or ImportOptions()
    tool_map = options.tool_map
    shown = (
        {"path": display_path(tool_map.path, config.cwd or Path.cwd()), "sha256": tool_map.sha256}
        if tool_map.path is not None
        else None
    )
    return {
        "inspect_import": {"map": shown, "rollback_from_teardown": options.rollback_from_teardown}
    }


def _manifest(
    config: BuildConfig,
    runs: Sequence[DiscoveredRun],
    summaries: Sequence[RunSummary],
    build_time: str | None,
) -> dict[str, object]:
    """Return ``manifest.json`` (its format is in the module docstring)."""
    forbidden = config.forbidden
    table = (
        {"forbidden_classes": {"path": forbidden.path, "sha256": forbidden.sha256}}
        if forbidden is not None
        else {}
    )

    def entry(run: DiscoveredRun, summary: RunSummary) -> dict[str, object]:
        policy = config.policies.for_run(run.path)
        source = policy.source if policy is not None else None
        return {
            "name": summary.name,
            "mode": run.mode.value,
            "status": summary.status,
            "source_path": run.display_path,
            **({"source_sha256": run.source_sha256} if run.source_sha256 is not None else {}),
            "page": f"runs/{summary.name}/index.html",
            "result": f"runs/{summary.name}/result.json",
            "result_sha256": summary.result_sha256,
            "input_digests": dict(summary.input_digests),
            **({"policy": {**source.record(), "path": source.path}} if source else {}),
            **({"single_file": single_file_path(summary.name)} if config.single_file else {}),
        }

    return {
        "schema_version": SITE_SCHEMA,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "build_time": build_time,
        **table,
        **_inspect_import(config, runs),
        "runs": [entry(run, summary) for run, summary in zip(runs, summaries, strict=True)],
        **({"baseline": config.baseline.record()} if config.baseline is not None else {}),
        **({"label": config.label} if config.label is not None else {}),
    }
