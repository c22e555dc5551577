"""Build the static report site: replay every run, build every view, render, then write.

The phases run in one direction and nothing touches the output folder before the last
(only the recovery below runs first, and it only puts back what a killed build moved):

1. replay every run (one progress line per run);
2. build every page's view-model;
3. render every page and asset, refusing two files at one path, and refusing any page
   that holds text the forbidden-material scan matched;
4. write (see "Crash safety" below). An output folder whose files already equal the new
   site is left untouched.

Phases 1 to 3 run per run in ``parallel.build_run``, in this process, in ``--jobs``
processes (fewer, when the runs would not fit in the memory available: ``memory``) or on
a Dask scheduler, and a run whose inputs, templates and version did not change since the
last build is reused instead (``incremental``). A run's pages do not wait
in memory for the others: a large run's listing sub-pages are built one at a time, and
each page is written as soon as it is rendered into the staging folder below, which is
not the output folder (a Dask worker returns its pages and this process writes them).
The pages that span runs (index, catalog, manifest, status) are rendered last.

Crash safety. A build killed at any instant (SIGKILL included) leaves the output folder
either byte for byte the previous site or byte for byte the new one, never a mix, and
holds no temporary file. The new site is written in full into a hidden sibling folder
``.<out>.new-<random>`` and made durable (one ``syncfs`` on Linux, else an fsync of each
file, then each folder: ``_sync_tree``); then, on Linux, one
``renameat2(RENAME_EXCHANGE)`` swaps it with the output folder atomically, and the
sibling (now the old site) is removed. Where that call is missing (other systems, some
file systems) the old site is first renamed aside to ``.<out>.old-<random>`` and the new
one renamed into place: a kill between those two renames leaves no output folder for an
instant, and the next build's recovery renames the old site back before anything else.
Every build starts with that recovery: it restores a site renamed aside when the output
folder is missing, then removes every ``.<out>.new-*`` and ``.<out>.old-*`` sibling
folder left by a killed build (or symlink: an ``--out`` link being replaced). One build
at a time writes a given output folder: each holds a lock (``_out_lock``) from before that
recovery to its end, and a second build waits for it. A symlink given as the output
folder is swapped out like a folder, never followed.
``tests/test_build_interrupt.py`` kills builds at random times and at every line of this
phase, on both paths.

Site layout (all links relative, so it opens from ``file://`` or any static host):
``index.html``; ``runs/<run>/index.html`` and ``runs/<run>/result.json`` (the run's result
record, byte for byte as ``run`` writes it); for a run with more than ``views.PAGE_ROWS``
join rows, findings or spans, ``runs/<run>/join/page-NNNN.html``,
``runs/<run>/findings/page-NNNN.html`` and ``runs/<run>/trace/page-NNNN.html``;
``codes/index.html``; ``policy/index.html`` (every rule of each policy in force, a column
per run); ``history.json`` (every build writes it: ``_history``); with ``--baseline``,
``changes/index.html`` (what changed since the baseline: ``changes_views``); ``build-status.json`` (``incremental``); ``assets/site.css`` and
``assets/site.js``; ``sandbox-replay-site.json``, the marker by which a later build knows
the folder is a site it may replace (``_marker``); with ``--single-file``,
``single/<run>.html`` (``single_file.py``); and ``manifest.json``:

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

import ctypes
import errno
import filecmp
import hashlib
import io
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, cast

from sandbox_replay.atomic import dump_json
from sandbox_replay.exports import ExportFacts
from sandbox_replay.exports.text import one_line
from sandbox_replay.forking import usable_cpus
from sandbox_replay.importers.inspect_logs import ImportOptions, InspectImportError
from sandbox_replay.load.files import (
    SITE_FORMAT,
    SITE_MANIFEST,
    FileChangedError,
    LoadLimits,
    SiteTooDeepError,
    open_regular,
    read_same_file,
    read_site_json,
    site_entries,
    site_marker_matches,
)
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
from sandbox_replay.report import incremental
from sandbox_replay.report.baseline import HISTORY, HISTORY_SCHEMA, Baseline
from sandbox_replay.report.changes_views import CHANGES_PAGE, build_changes_view
from sandbox_replay.report.discover import DiscoveredRun, SkippedFolder, discover, display_path
from sandbox_replay.report.inspect_runs import LogRuns, importing_logs
from sandbox_replay.report.memory import available_bytes, fit_jobs, input_bytes
from sandbox_replay.report.parallel import (
    MatchedTextError,
    RunBuilt,
    RunTask,
    refuse_matched,
    reuse_file,
    run_all,
)
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

try:
    import fcntl
except ImportError:  # Windows: no build lock (``_out_lock``)
    fcntl = None  # type: ignore[assignment]

SITE_SCHEMA = "sandbox-replay.site/1"
MANIFEST = SITE_MANIFEST
# ``SITE_MARKER``, by which ``build`` knows a folder it may replace is a site it built
# (``_marker``), is read by ``loader.site_marker_matches``, which ``pack`` uses too.
# The errors of a disk that is full, read-only or not ours to write: the user's to fix,
# reported in one line, not as a bug.
WRITE_FAULTS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})


class BuildError(ValueError):
    """The site cannot be built as asked (a usage problem, not a finding)."""


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

    @property
    def unexcluded(self) -> tuple[SkippedFolder, ...]:
        """Return the skipped folders no ``--exclude`` pattern accepts."""
        return tuple(folder for folder in self.skipped if folder.excluded_by is None)

    @property
    def any_blocked(self) -> bool:
        """Say whether ``--fail-on blocked`` fails: a run was blocked, or a folder that may
        hold one was skipped and not excluded."""
        return bool(self.unexcluded) or any(run.status == "blocked" for run in self.runs)


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


def _build_time(epoch: int | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _stderr(message: str) -> None:
    print(f"sandbox-replay: {message}", file=sys.stderr, flush=True)


class _Pages:
    """The site in memory: relative path → bytes, refusing a second file at one path."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.staged: set[str] = set()

    def add(self, path: str, data: bytes) -> None:
        if path in self.files or path in self.staged:
            raise BuildError(f"two pages map to {path}")
        self.files[path] = data

    def add_staged(self, path: str) -> None:
        if path in self.files or path in self.staged:
            raise BuildError(f"two pages map to {path}")
        self.staged.add(path)


def default_jobs() -> int:
    """Return the default number of build processes: the number of usable cores."""
    return usable_cpus()


def build_site(config: BuildConfig) -> BuildResult:
    """Replay every run under ``config.paths`` and write the report site to ``config.out_dir``.

    A full, read-only or forbidden disk (``WRITE_FAULTS``) is a ``BuildError`` naming the
    output folder and the path that failed; the previous site is then left as it was.
    """
    started = time.perf_counter()
    progress = config.progress or _stderr
    # Absolute and normalised, so `--out .` or `--out ..` names a folder with a parent.
    out_dir = Path(os.path.abspath(config.out_dir))
    _refuse_enclosing_out_dir(out_dir, [Path.cwd(), *config.paths], config.out_dir)
    _check_parents(out_dir)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        with (
            _out_lock(out_dir, progress),
            importing_logs(config.paths, config.cwd or Path.cwd(), config.inspect) as logs,
        ):
            _recover(out_dir)
            _check_out_dir(out_dir)
            return _build_locked(
                replace(config, paths=logs.paths), out_dir, progress, started, logs
            )
    except InspectImportError as error:
        raise BuildError(str(error)) from None
    except OSError as error:
        if error.errno not in WRITE_FAULTS:
            raise
        failed = f" ({one_line(str(error.filename))})" if error.filename else ""
        raise BuildError(
            f"cannot build the site into {config.out_dir}: {error.strerror}{failed}; "
            "the previous site there is unchanged"
        ) from None


def _build_locked(
    config: BuildConfig,
    out_dir: Path,
    progress: Callable[[str], None],
    started: float,
    logs: LogRuns,
) -> BuildResult:
    """Build the site, ``out_dir`` recovered, checked and locked (``build_site``)."""
    if config.templates is not None and not config.templates.is_dir():
        raise BuildError(f"templates folder {config.templates} does not exist")
    found = discover(config.paths, config.cwd, config.exclude)
    runs = tuple(map(logs.relabel, found.runs))
    for folder in found.skipped:
        progress(folder.note)
    build_time = _build_time(config.source_date_epoch)
    shown_time = build_time or "not recorded (SOURCE_DATE_EPOCH was not set)"
    forbidden = config.forbidden
    baseline = config.baseline
    settings = incremental.settings_hash(
        config.templates,
        shown_time,
        forbidden.sha256 if forbidden else "",
        _policies_digest(runs, config.policies) + _baseline_digest(baseline, config.label),
        single_file=config.single_file,
    )
    matched = (
        match_runs(baseline.runs, [(run.name, run.display_path) for run in runs])
        if baseline is not None
        else {}
    )
    extra = forbidden.classes if forbidden else ()
    # With rebuild, the last build's status is ignored, so every run is replayed afresh.
    # A symlinked output folder is replaced, not followed: what it points to is not reused.
    fresh = config.rebuild or out_dir.is_symlink()
    previous = {} if fresh else incremental.read_status(out_dir, settings)
    # Every run's inputs are hashed for the status file (1.3 GB at 600,000 requests). When
    # no run can be reused that needs waiting for only at the end: it runs in a thread
    # while the runs replay (file reads and hashlib let go of the interpreter lock).
    hashing = ThreadPoolExecutor(max_workers=1)
    pending_keys = hashing.submit(_run_keys, runs)
    hashing.shutdown(wait=False)
    keys = pending_keys.result().keys if previous else {}

    # The site is assembled in a hidden sibling folder, swapped in by the write phase; the
    # output folder itself is untouched until then (see "Crash safety").
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.new-", dir=out_dir.parent))
    try:
        pages = _Pages()
        summaries: dict[str, RunSummary] = {}
        run_files: dict[str, list[str]] = {}
        exports: dict[str, ExportFacts] = {}
        written_digests: dict[str, str] = {}  # staged result records, hashed as written
        needles: set[bytes] = set()

        # Phase 1 and 2 for reused runs: copy last build's pages of each unchanged run.
        reused = 0
        counter = _Counter(len(runs), started)
        tasks = []
        for run in runs:
            old = previous.get(tuple(keys[run.name].values())) if previous else None
            if old is None:
                if config.scheduler is None:
                    tasks.append(
                        RunTask(
                            run,
                            config.templates,
                            shown_time,
                            staging,
                            extra,
                            policy=config.policies.for_run(run.path),
                            single_file=config.single_file,
                            **_compared(baseline, matched, run.name),
                        )
                    )
                else:
                    # A worker reads the inputs itself, from its own working directory, and
                    # returns the pages: absolute paths, no staging folder.
                    remote = replace(run, path=run.path.resolve())
                    templates = config.templates.resolve() if config.templates else None
                    tasks.append(
                        RunTask(
                            remote,
                            templates,
                            shown_time,
                            None,
                            extra,
                            policy=config.policies.for_run(run.path),
                            single_file=config.single_file,
                            **_compared(baseline, matched, run.name),
                        )
                    )
                continue
            for path in old.files:
                reuse_file(staging, path, out_dir)
                pages.add_staged(path)
            summaries[run.name] = old.summary
            run_files[run.name] = list(old.files)
            exports[run.name] = old.exports
            reused += 1
            progress(
                f"{counter.next()} reused {run.display_path} as runs/{run.name}: "
                f"{old.summary.status} (inputs unchanged)"
            )

        # Phases 1-3 for the others: replay, view-models, render each run (in parallel).
        def done(task: RunTask, built: RunBuilt) -> None:
            for note in built.notes:
                progress(note)
            progress(
                f"{counter.next()} replayed {task.run.display_path} as runs/{task.run.name}: "
                f"{built.summary.status} (replay {built.replay_seconds:.1f}s, "
                f"pages {built.seconds - built.replay_seconds:.1f}s)"
            )

        jobs = config.jobs if config.jobs is not None else default_jobs()
        if config.scheduler is None:  # a cluster's workers have memory of their own
            sizes = [input_bytes(task.run.path) for task in tasks]
            fit = fit_jobs(sizes, jobs, available_bytes(), explicit=config.jobs is not None)
            if fit.note is not None:
                progress(fit.note)
            jobs = fit.jobs
        if len(tasks) == 1 and tasks[0].staging is not None:
            # One run to build: its processes share out its listing pages instead, and
            # it says how far it got (a large one takes a minute).
            tasks[0] = replace(tasks[0], page_jobs=jobs, progress=progress)
        try:
            results = run_all(tasks, jobs, config.scheduler, done)
        except MatchedTextError as error:
            raise BuildError(str(error)) from None
        for task, built in zip(tasks, results, strict=True):
            for path, data in built.files.items():
                pages.add(path, data)
            for path in built.written:
                pages.add_staged(path)
            summaries[task.run.name] = built.summary
            run_files[task.run.name] = sorted([*built.files, *built.written])
            result = f"runs/{task.run.name}/result.json"
            if result in built.written:  # streamed to the staging folder as it was hashed
                written_digests[result] = built.summary.result_sha256
            assert built.exports is not None  # build_run always makes them
            exports[task.run.name] = built.exports
            needles.update(built.needles)

        # Phase 2 and 3 for the pages that span runs.
        ordered = [summaries[run.name] for run in runs]
        snapshots = [
            exports[r.name].snapshot(r.name, r.source_path, dict(r.input_digests)) for r in ordered
        ]
        changes = (
            compare(baseline.runs, snapshots, baseline.manifest_sha256, baseline.label)
            if baseline is not None
            else None
        )
        history = _history(baseline, config.label or build_time, snapshots)
        index = build_index_view(ordered, shown_time, __version__, changes, history["builds"])
        catalog = build_catalog_view(ordered, shown_time, __version__)
        policy = build_policy_view(ordered, shown_time, __version__)
        if changes is not None:
            link = "../" + CHANGES_PAGE
            catalog = replace(catalog, chrome=replace(catalog.chrome, changes_href=link))
            policy = replace(policy, chrome=replace(policy.chrome, changes_href=link))
        renderer = Renderer(config.templates)
        pages.add("index.html", renderer.render("index.html", view=index))
        pages.add("codes/index.html", renderer.render("codes.html", view=catalog))
        pages.add("policy/index.html", renderer.render("policy.html", view=policy))
        if changes is not None:
            changes_view = build_changes_view(changes, shown_time, __version__)
            pages.add(CHANGES_PAGE, renderer.render("changes.html", view=changes_view))
        pages.add(HISTORY, dump_json(history))
        for asset in ASSETS:
            pages.add(asset, renderer.asset(asset))
        manifest = _manifest(
            runs, ordered, build_time, forbidden, config.policies, config.inspect, config.cwd
        )
        if baseline is not None:
            manifest["baseline"] = baseline.record()
        if config.label is not None:
            manifest["label"] = config.label
        if config.single_file:  # each run wrote its own (report/single_file.py)
            entries = manifest["runs"]
            assert isinstance(entries, list)
            for entry in entries:
                entry["single_file"] = single_file_path(entry["name"])
        manifest_bytes = dump_json(manifest)
        pages.add(MANIFEST, manifest_bytes)
        pages.add(SITE_MARKER, _marker(manifest_bytes))
        hashed = pending_keys.result()
        keys = hashed.keys
        for task, built in zip(tasks, results, strict=True):
            name = task.run.name
            changed = incremental.changed_while_built(hashed.files[name], built.input_digests)
            if changed:
                keys[name] = {**keys[name], "inputs_sha256": incremental.UNSETTLED}
                progress(
                    f"runs/{name}: {plural(changed, 'input file')} changed while this build "
                    "read them; its pages show what was replayed, and the next build "
                    "replays it again"
                )
        status = incremental.status_record(
            settings,
            [(keys[r.name], summaries[r.name], run_files[r.name], exports[r.name]) for r in runs],
        )
        pages.add(incremental.STATUS_FILE, dump_json(status))
        for path, data in pages.files.items():
            try:
                refuse_matched(path, data, frozenset(needles))
            except MatchedTextError as error:
                raise BuildError(str(error)) from None

        # Phase 4: write.
        unchanged = _write_site(out_dir, pages.files, staging, written_digests)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    elapsed = time.perf_counter() - started
    progress(
        f"{len(runs)} runs: {len(runs) - reused} built, {reused} reused, "
        f"in {elapsed:.1f}s "
        + (f"on the Dask scheduler {config.scheduler}" if config.scheduler else f"(--jobs {jobs})")
    )
    return BuildResult(
        out_dir=config.out_dir,
        runs=tuple(RunOutcome(s.name, s.status, s.headline) for s in ordered),
        file_count=len(pages.files) + len(pages.staged),
        unchanged=unchanged,
        reused=reused,
        exports=exports,
        skipped=found.skipped,
        changes=changes,
    )


def _baseline_digest(baseline: Baseline | None, label: str | None) -> str:
    """Return what of the baseline and label shapes every page ("" for neither)."""
    if baseline is None and label is None:
        return ""
    record = baseline.record() if baseline is not None else None
    return hashlib.sha256(json.dumps([record, label]).encode()).hexdigest()


def _compared(
    baseline: Baseline | None, matched: Mapping[str, tuple[RunSnapshot, str]], name: str
) -> dict[str, Any]:
    """Return a ``RunTask``'s baseline fields for run ``name`` (none without a baseline)."""
    if baseline is None:
        return {}
    before, how = matched.get(name, (None, ""))
    return {"compared": True, "baseline_run": before, "matched_by": how}


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


class _Counter:
    """The ``[k/N elapsed]`` a build's per-run line starts with, so a long build shows
    how far it got."""

    def __init__(self, total: int, started: float) -> None:
        self.total, self.started, self.done = total, started, 0

    def next(self) -> str:
        self.done += 1
        return f"[{self.done}/{self.total} {time.perf_counter() - self.started:.1f}s]"


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


def _inspect_import(
    runs: Sequence[DiscoveredRun], inspect: ImportOptions | None, cwd: Path
) -> dict[str, object]:
    """Record how the runs imported from Inspect AI logs were imported, when there are any."""
    if not any(run.source_sha256 is not None for run in runs):
        return {}
    options = inspect or ImportOptions()
    tool_map = options.tool_map
    shown = (
        {"path": display_path(tool_map.path, cwd), "sha256": tool_map.sha256}
        if tool_map.path is not None
        else None
    )
    return {
        "inspect_import": {
            "map": shown,
            "rollback_from_teardown": options.rollback_from_teardown,
        }
    }


def _manifest(
    runs: Sequence[DiscoveredRun],
    summaries: Sequence[RunSummary],
    build_time: str | None,
    forbidden: ForbiddenTable | None,
    policies: PolicyChoice,
    inspect: ImportOptions | None = None,
    cwd: Path | None = None,
) -> dict[str, object]:
    table = (
        {"forbidden_classes": {"path": forbidden.path, "sha256": forbidden.sha256}}
        if forbidden is not None
        else {}
    )

    def policy_of(run: DiscoveredRun) -> dict[str, object]:
        policy = policies.for_run(run.path)
        if policy is None:
            return {}
        source = policy.source
        return {"policy": {**source.record(), "path": source.path}}

    return {
        "schema_version": SITE_SCHEMA,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "build_time": build_time,
        **table,
        **_inspect_import(runs, inspect, cwd or Path.cwd()),
        "runs": [
            {
                "name": summary.name,
                "mode": run.mode.value,
                "status": summary.status,
                "source_path": run.display_path,
                **({"source_sha256": run.source_sha256} if run.source_sha256 is not None else {}),
                "page": f"runs/{summary.name}/index.html",
                "result": f"runs/{summary.name}/result.json",
                "result_sha256": summary.result_sha256,
                "input_digests": dict(summary.input_digests),
                **policy_of(run),
            }
            for run, summary in zip(runs, summaries, strict=True)
        ],
    }


def _refuse_enclosing_out_dir(out_dir: Path, inside: Sequence[Path], shown: Path) -> None:
    """Refuse an output folder that is, or holds, the working directory or an input path.

    The whole output folder is replaced, so either would be swept away with the old site.
    """
    if out_dir.parent == out_dir:
        raise BuildError(f"output folder {shown} is a filesystem root")
    for path in inside:
        absolute = Path(os.path.abspath(path))
        if absolute == out_dir or absolute.is_relative_to(out_dir):
            what = "the working directory" if path == inside[0] else f"the input {path}"
            raise BuildError(
                f"output folder {shown} holds {what}, which replacing it would remove; "
                "choose another --out"
            )


def _check_parents(out_dir: Path) -> None:
    for parent in out_dir.parents:
        if parent.exists() and not parent.is_dir():
            raise BuildError(f"output path {out_dir} lies under {parent}, which is a file")


def _check_out_dir(out_dir: Path) -> None:
    """Refuse an output folder that is not empty and not a site this tool built.

    A symlink given as ``--out`` is replaced by the site, never followed: what it points
    to is left as it is, so it needs no check.
    """
    if out_dir.is_symlink():
        return
    if out_dir.exists() and not out_dir.is_dir():
        raise BuildError(f"output path {out_dir} exists and is not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not _own_site(out_dir):
        raise BuildError(
            f"output folder {out_dir} is not empty and is not a site this tool built "
            f"(no {SITE_MARKER} that matches its {MANIFEST}); refusing to replace it: "
            "choose another --out"
        )


def _marker(manifest: bytes) -> bytes:
    """Return the site marker for a site whose ``manifest.json`` holds ``manifest``.

    ``sandbox-replay-site.json``, at the site root, written as every record is
    (``atomic.dump_json``): ``{"tool": "sandbox-replay", "site_format": 1,
    "manifest_sha256": "sha256:<hex of manifest.json's bytes>"}``. Only this tool writes
    it, and ``build`` replaces a folder that is not empty only where it finds one that
    matches (``_own_site``).
    """
    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    record = {"tool": TOOL_NAME, "site_format": SITE_FORMAT, "manifest_sha256": digest}
    return dump_json(record, may_hold_floats=False)


def _own_site(out_dir: Path) -> bool:
    """Say whether ``out_dir`` holds a site this tool built, which a build may replace.

    Its marker (``_marker``) must name this tool and site format and hold the digest of
    the folder's ``manifest.json``. A site built by this version before the marker
    existed is recognised by its manifest instead (``_unmarked_site``).
    """
    matches = site_marker_matches(out_dir)
    return _unmarked_site(out_dir) if matches is None else matches


# What the root of a site holds; ``runs/`` and ``single/`` hold one entry per run.
_SITE_ENTRIES = frozenset(
    {
        "index.html",
        "codes",
        "policy",
        "changes",
        "assets",
        "runs",
        "single",
        MANIFEST,
        "build-status.json",
        HISTORY,
    }
)


def _unmarked_site(out_dir: Path) -> bool:
    """Say whether ``out_dir`` is a site this very version built before it wrote a marker.

    Its manifest must be this tool's, of this version, and the folder must hold nothing a
    site does not: only the site's own entries at its root, and only the runs the
    manifest lists under ``runs/`` and ``single/``.
    """
    try:
        manifest = read_site_json(out_dir / MANIFEST, LoadLimits().max_file_bytes)
    except (OSError, FileChangedError, ValueError):
        return False
    if not (
        isinstance(manifest, dict)
        and manifest.get("schema_version") == SITE_SCHEMA
        and manifest.get("tool") == {"name": TOOL_NAME, "version": __version__}
        and isinstance(manifest.get("runs"), list)
    ):
        return False
    names = {entry.get("name") for entry in manifest["runs"] if isinstance(entry, dict)}
    if any(child.name not in _SITE_ENTRIES for child in out_dir.iterdir()):
        return False
    runs, single = out_dir / "runs", out_dir / "single"
    return (not runs.is_dir() or all(c.name in names for c in runs.iterdir())) and (
        not single.is_dir() or all(c.name.removesuffix(".html") in names for c in single.iterdir())
    )


@contextmanager
def _out_lock(out_dir: Path, progress: Callable[[str], None]) -> Iterator[None]:
    """Hold the lock on ``out_dir`` for a whole build: one build at a time writes a site.

    The lock is a kernel ``flock`` on ``.<out>.lock`` beside the output folder (not in it:
    the folder is swapped). A second build waits, saying so, and then builds on the first
    one's site. A killed build's lock goes with its process; the file it leaves is reused.
    The holder removes the file as it lets go, so a build that was waiting on that file
    finds it gone and locks the next one. Where ``fcntl`` is missing, nothing is locked.
    """
    if fcntl is None:
        yield
        return
    path = out_dir.parent / f".{out_dir.name}.lock"
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    while True:
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as error:
            if error.errno in WRITE_FAULTS:
                raise  # a full or read-only disk: ``build_site`` says so
            raise BuildError(f"cannot open the lock file {path}: {error.strerror}") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                progress(f"waiting for another build into {out_dir} to finish")
                fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            try:
                now = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                now = None
        except BaseException:
            os.close(fd)
            raise
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)  # the holder before removed this file: lock the one now there
    try:
        yield
    finally:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)


def _current_files(out_dir: Path) -> dict[str, bytes] | None:
    if not out_dir.is_dir() or out_dir.is_symlink():
        return None
    found: dict[str, bytes] = {}
    try:
        for relative, info in site_entries(out_dir):
            if stat.S_ISREG(info.st_mode):
                limit = LoadLimits().max_file_bytes
                found[relative] = read_same_file(out_dir / relative, info, limit)
            elif not stat.S_ISDIR(info.st_mode):
                return None
    except (OSError, FileChangedError, SiteTooDeepError):
        return None
    return found


def _leftovers(out_dir: Path) -> tuple[list[Path], list[Path]]:
    """Return the staging and retired sibling folders a killed build may have left.

    A retired one may be a symlink: the ``--out`` link a build was replacing.
    """
    pattern = re.compile(rf"\.{re.escape(out_dir.name)}\.(new|old)-[A-Za-z0-9_]+")
    found: dict[str, list[Path]] = {"new": [], "old": []}
    if out_dir.parent.is_dir():
        for sibling in sorted(out_dir.parent.iterdir()):
            match = pattern.fullmatch(sibling.name)
            if match and (sibling.is_dir() or sibling.is_symlink()):
                found[match.group(1)].append(sibling)
    return found["new"], found["old"]


def _present(path: Path) -> bool:
    """Say whether anything is at ``path``, a dangling symlink included."""
    return path.is_symlink() or path.exists()


def _remove(path: Path) -> None:
    """Remove a folder a build left, or a symlink in its place (never what it points to)."""
    if path.is_symlink():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def _recover(out_dir: Path) -> None:
    """Undo what a killed build left: restore a site renamed aside, remove temp folders."""
    staged, retired = _leftovers(out_dir)
    if retired and not _present(out_dir):
        # Killed between the two renames of the fallback swap: the old site is whole.
        retired[0].rename(out_dir)
        retired = retired[1:]
        _fsync_dir(out_dir.parent)
    for folder in staged + retired:
        _remove(folder)


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _sync_tree(root: Path) -> None:
    """Make every file and folder under ``root`` durable (before the swap publishes them).

    On Linux one ``syncfs`` of the file system holding ``root`` does it: the pages were
    written without an fsync each, which costs a journal commit per file (2,400 pages at
    600,000 requests). Elsewhere, or if that call fails, each file is fsynced, then each
    folder.
    """
    if _syncfs(root):
        return
    folders = {root}
    for path in sorted(root.rglob("*")):
        if path.is_dir():
            folders.add(path)
        elif path.is_file():
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
    for folder in sorted(folders):
        _fsync_dir(folder)


def _syncfs(folder: Path) -> bool:
    """Flush the whole file system holding ``folder`` (Linux ``syncfs``); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        syncfs = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return False
    syncfs.argtypes = [ctypes.c_int]
    syncfs.restype = ctypes.c_int
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return False
    try:
        done: int = syncfs(fd)
    finally:
        os.close(fd)
    return done == 0


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one atomic step (Linux ``renameat2``); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    renameat2.restype = ctypes.c_int
    done: int = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return done == 0


def _same_tree(staging: Path, out_dir: Path, digests: Mapping[str, str] | None = None) -> bool:
    """Say whether two folders hold the same files with the same bytes.

    ``digests`` gives the ``sha256:<hex>`` of staged files whose bytes were hashed as they
    were written. Files are compared a few kilobytes at a time, never read whole: at
    600,000 requests a run's result.json is 2.1 GB, and reading it whole from both folders
    took about 17 s (fresh memory is slow to touch on this machine) and 7.3 GB of memory.
    """

    def listing(root: Path) -> dict[str, int] | None:
        found = {}
        try:
            entries = site_entries(root)
        except (OSError, SiteTooDeepError):
            return None
        for relative, info in entries:
            if stat.S_ISREG(info.st_mode):
                found[relative] = info.st_size
            elif not stat.S_ISDIR(info.st_mode):
                return None
        return found

    if not out_dir.is_dir() or out_dir.is_symlink():
        return False
    new, old = listing(staging), listing(out_dir)
    if new is None or new != old:
        return False
    try:
        known = digests or {}
        return all(_same_file(staging / name, out_dir / name, known.get(name)) for name in new)
    finally:
        filecmp.clear_cache()  # a cached outcome is keyed on size and mtime alone


def _same_file(staged: Path, old: Path, digest: str | None) -> bool:
    """Say whether two files hold the same bytes (``digest``: the staged file's sha256).

    A reused run's pages are hard links to the old site's (``parallel.reuse_file``): the
    same file, not read at all. A staged file of known digest is not read either: only
    the old one is, to be hashed: at 600,000 requests the staged result record is 2.1 GB.
    Any other pair is compared by ``filecmp``.
    """
    if os.path.samefile(staged, old):
        return True
    if digest is not None:
        try:  # no symlink followed nor FIFO waited on, should one replace the old file
            handle = open_regular(old)
        except OSError:
            return False  # not one to keep: the site is replaced
        with handle:
            reader = cast(io.BufferedReader, handle)  # what ``open_regular`` opens
            return "sha256:" + hashlib.file_digest(reader, "sha256").hexdigest() == digest
    return filecmp.cmp(staged, old, shallow=False)


def _write_site(
    out_dir: Path,
    files: Mapping[str, bytes],
    staged: Path | None = None,
    digests: Mapping[str, str] | None = None,
) -> bool:
    """Write ``files`` as the whole content of ``out_dir``; return True if it already was.

    ``staged`` is a staging folder (``.<out>.new-*``) that already holds the other pages
    of the site, written there as they were rendered; ``files`` are added to it.
    ``digests`` are the sha256 of staged files hashed as they were written (``_same_tree``).
    """
    if staged is None and _current_files(out_dir) == dict(files):
        return True
    parent = out_dir.parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = staged or Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.new-", dir=parent))
    retired: Path | None = None
    try:
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)
        for relative, data in sorted(files.items()):
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        if staged is not None and _same_tree(staging, out_dir, digests):
            shutil.rmtree(staging, ignore_errors=True)
            return True
        _sync_tree(staging)
        # A symlink at ``out_dir`` (a dangling one too) is swapped out like a folder.
        if _present(out_dir) and _exchange(staging, out_dir):
            retired, staging = staging, out_dir
        else:
            if _present(out_dir):
                retired = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=parent))
                retired.rmdir()
                out_dir.rename(retired)
            staging.rename(out_dir)
        _fsync_dir(parent)
    except BaseException:
        if retired is not None and not _present(out_dir):
            retired.rename(out_dir)
            retired = None
        if staging != out_dir:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    if retired is not None:
        _remove(retired)
    return False
