"""Replay and render one run of the site, in this process, a pool of processes, or on Dask.

``build_run`` replays one run folder and renders its pages, each checked first against the
text the forbidden-material scan matched: into a staging folder as they are rendered, or,
given none (a Dask worker), returned as bytes. ``run_all`` runs many.
"""

from __future__ import annotations

import hashlib
import html
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_replay.atomic import write_chunks
from sandbox_replay.checks.pipeline import ReplayConfig, replay
from sandbox_replay.exports import ExportFacts
from sandbox_replay.forking import die_with_parent as _die_with_parent
from sandbox_replay.load.scan import ForbiddenClass, scanner_with
from sandbox_replay.model.policy import Policy
from sandbox_replay.records.build import RunRecords, build_records
from sandbox_replay.records.changes import RunChange, RunSnapshot
from sandbox_replay.report.changes_views import with_changes
from sandbox_replay.report.discover import DiscoveredRun
from sandbox_replay.report.page_forks import MatchedTextError as MatchedTextError
from sandbox_replay.report.page_forks import render_shared
from sandbox_replay.report.render import ASSETS, Renderer
from sandbox_replay.report.search_index import js_string
from sandbox_replay.report.single_file import single_file_page, single_file_path
from sandbox_replay.report.site_views import RunSummary, summarize_run
from sandbox_replay.report.views import RunPages, RunView, build_run_pages, subpage_paths
from sandbox_replay.version import __version__


class SchedulerError(ValueError):
    """The Dask scheduler cannot be used (extra not installed, or unreachable)."""


@dataclass(frozen=True)
class RunTask:
    """One run to build: where it is, how pages are rendered, and where they go."""

    run: DiscoveredRun
    templates: Path | None
    shown_time: str
    staging: Path | None
    # A user's forbidden classes, scanned for besides the packaged ones.
    forbidden: tuple[ForbiddenClass, ...] = ()
    page_jobs: int = 1
    # The policy in force for this run; None for the packaged table.
    policy: Policy | None = None
    # Told each phase of the run as it ends, for a lone run built here.
    progress: Callable[[str], None] | None = field(default=None, compare=False)
    # With ``--baseline``: the baseline run (None: a run new since) and how it was matched.
    compared: bool = False
    baseline_run: RunSnapshot | None = None
    matched_by: str = ""
    # With ``--single-file``: also write ``single/<run>.html`` (``single_file``).
    single_file: bool = False
    # Seeded escapes replayed (``checks.sensitivity``), and whether a missed one blocks.
    sensitivity: bool = False
    require_sensitivity: bool = False


@dataclass
class RunBuilt:
    """One built run: its summary, its pages (site-relative) and what to refuse elsewhere."""

    summary: RunSummary
    files: dict[str, bytes] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    needles: frozenset[bytes] = frozenset()
    seconds: float = 0.0
    replay_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # for the build's progress lines
    # The sha256 of each file the replay read, by path in the run folder.
    input_digests: dict[str, str] = field(default_factory=dict)
    # What the exports show of the run, so that exporting it needs no second replay.
    exports: ExportFacts | None = None


def needles_of(matched: Iterable[bytes]) -> frozenset[bytes]:
    """Return the byte strings no page may hold: each match raw, HTML-escaped, and as the
    search index writes it."""
    found: set[bytes] = set()
    for text in matched:
        found.add(text)
        decoded = text.decode("utf-8", errors="ignore")
        found.add(html.escape(decoded, quote=True).encode())
        found.add(js_string(decoded)[1:-1].encode("utf-8"))
    found.discard(b"")
    return frozenset(found)


def refuse_matched(path: str, data: bytes, needles: frozenset[bytes]) -> None:
    if any(needle in data for needle in needles):
        raise MatchedTextError(
            f"{path} would contain text the forbidden-material scan matched; nothing was written"
        )


def _staged_path(staging: Path, relative: str) -> Path:
    """Return ``staging / relative`` after making its folders, never ``staging`` itself (a
    worker left running by a killed build must not recreate a removed staging folder)."""
    folder = staging
    for part in Path(relative).parent.parts:
        folder = folder / part
        folder.mkdir(exist_ok=True)
    return staging / relative


def put_file(staging: Path, relative: str, data: bytes) -> None:
    """Write one file under ``staging`` (the whole folder is synced before the swap)."""
    _staged_path(staging, relative).write_bytes(data)


def reuse_file(staging: Path, relative: str, previous: Path) -> None:
    """Put the previous build's copy of a page into ``staging``: a hard link where possible
    (pages are never rewritten in place, so the link cannot change the old site)."""
    target = _staged_path(staging, relative)
    try:
        os.link(previous / relative, target)
    except OSError:
        put_file(staging, relative, (previous / relative).read_bytes())


def build_run(task: RunTask) -> RunBuilt:
    """Replay one run and render its pages: the result record, the run page that shows its
    digest, then the sub-pages (``page_forks.render_shared``)."""
    started = time.perf_counter()
    progress = task.progress
    say = None if progress is None else lambda text: progress(f"runs/{task.run.name}: {text}")
    scanner = scanner_with(task.forbidden) if task.forbidden else None
    outcome = replay(
        ReplayConfig(
            task.run.path,
            task.run.mode,
            policy=task.policy,
            scanner=scanner,
            progress=say,
            sensitivity=task.sensitivity,
            require_sensitivity=task.require_sensitivity,
        )
    )
    records = build_records(outcome)
    replayed = time.perf_counter()
    out = _RunOutput(task, records, needles_of(outcome.scan.matched_texts), say)
    change = None
    if task.compared:
        facts = ExportFacts.of(outcome, records.result, summary=False)
        digests = {str(f["path"]): str(f["sha256"]) for f in records.result["input_files"]}
        after = facts.snapshot(task.run.name, task.run.display_path, digests)
        change = RunChange(after, task.baseline_run, task.matched_by)

    def make_pages() -> RunPages:
        pages = build_run_pages(task.run, outcome, records, task.shown_time, __version__)
        return pages if change is None else with_changes(pages, change)

    paths = subpage_paths(records)
    forks = task.staging is not None and hasattr(os, "fork")
    helpers = min(task.page_jobs - 1, len(paths)) if forks else 0
    notes: list[str] = []
    digest, view = render_shared(
        make_pages,
        len(paths),
        out.renderer,
        helpers,
        out.emit,
        out.write_result,
        out.run_page,
        notes.append,
        _Heartbeat(len(paths), say).tick,
    )
    if say is not None:
        shared = f" ({helpers + 1} processes)" if helpers else ""
        say(f"rendered the run page and {len(paths)} listing pages{shared}")
    summary = summarize_run(view, digest)
    return RunBuilt(
        summary,
        out.files,
        out.written(paths),
        out.needles,
        seconds=time.perf_counter() - started,
        replay_seconds=replayed - started,
        notes=notes,
        input_digests={info.path: info.sha256 for info in outcome.inputs},
        exports=ExportFacts.of(outcome, records.result, summary.headline),
    )


class _RunOutput:
    """Where one run's pages go: into the staging folder, or with none into ``files``."""

    def __init__(
        self,
        task: RunTask,
        records: RunRecords,
        needles: frozenset[bytes],
        say: Callable[[str], None] | None,
    ) -> None:
        self.task, self.records, self.needles, self.say = task, records, needles, say
        self.name = task.run.name
        self.result_path = f"runs/{self.name}/result.json"
        self.renderer = Renderer(task.templates)
        self.files: dict[str, bytes] = {}
        self.extra: list[str] = []  # the gaps pages and search index, made with the run page

    def emit(self, relative: str, data: bytes) -> None:
        self.emit_site(f"runs/{self.name}/{relative}", data)

    def emit_site(self, path: str, data: bytes) -> None:
        refuse_matched(path, data, self.needles)
        if self.task.staging is None:
            self.files[path] = data
        else:
            put_file(self.task.staging, path, data)

    def write_result(self) -> str:
        """Write the result record; return its ``sha256:<hex>``."""
        staging, path = self.task.staging, self.result_path
        if staging is None:
            data = self.records.result_bytes
            refuse_matched(path, data, self.needles)
            self.files[path] = data
            return "sha256:" + hashlib.sha256(data).hexdigest()
        writing = time.perf_counter()
        digest = _stream_result(self.records, staging, path, self.needles)
        if self.say is not None:
            size = (staging / path).stat().st_size
            took = time.perf_counter() - writing
            self.say(f"wrote result.json ({size / 1e6:.1f} MB) in {took:.1f}s")
        return "sha256:" + digest

    def run_page(self, pages: RunPages, digest: str) -> RunView:
        """Render the run page (and single file), the gaps pages and the search index."""
        staging, renderer = self.task.staging, self.renderer
        if staging is not None:
            size = (staging / self.result_path).stat().st_size
        else:
            size = len(self.files[self.result_path])
        view = pages.run_view(digest, size)
        self.emit("index.html", renderer.render("run.html", view=view))
        if self.task.single_file:
            single = renderer.render("run.html", view=pages.single_view(digest, size))
            css, js = (renderer.asset(asset) for asset in ASSETS)
            self.emit_site(single_file_path(self.name), single_file_page(single, css, js))
        for relative, page in pages.gap_pages():
            self.emit(relative, renderer.render_listing(page))
            self.extra.append(relative)
        for relative, data in pages.search_files():
            self.emit(relative, data)
            self.extra.append(relative)
        return view

    def written(self, paths: Sequence[str]) -> list[str]:
        """Return the site paths written into the staging folder (none without one)."""
        if self.task.staging is None:
            return []
        own = (f"runs/{self.name}/{p}" for p in (*paths, *self.extra, "index.html"))
        single = [single_file_path(self.name)] if self.task.single_file else []
        return [self.result_path, *own, *single]


def _stream_result(
    records: RunRecords, staging: Path, relative: str, needles: frozenset[bytes]
) -> str:
    """Write the result record in pieces, each checked for matched text with the tail of the
    one before; return its sha256."""
    digest = hashlib.sha256()
    overlap = max((len(n) for n in needles), default=1) - 1

    def checked(chunks: Iterable[bytes | memoryview]) -> Iterator[bytes | memoryview]:
        tail = b""
        for chunk in chunks:
            if needles:  # nothing to look for (and no copy of the chunk to make) most times
                seen = tail + chunk
                refuse_matched(relative, seen, needles)
                tail = seen[-overlap:] if overlap else b""
            digest.update(chunk)
            yield chunk

    with _staged_path(staging, relative).open("wb") as out:
        write_chunks(out, checked(records.result_chunks()))
        # Synced here, so the wait overlaps the sub-pages the page helpers render.
        out.flush()
        os.fsync(out.fileno())
    return digest.hexdigest()


HEARTBEAT_SECONDS = 10.0


class _Heartbeat:
    """Say, at most every ``HEARTBEAT_SECONDS``, how many listing pages this process rendered."""

    def __init__(self, count: int, say: Callable[[str], None] | None) -> None:
        self.count, self.say, self.done = count, say, 0
        self.started = self.last = time.perf_counter()

    def tick(self) -> None:
        self.done += 1
        if self.say is None:
            return
        now = time.perf_counter()
        if now - self.last >= HEARTBEAT_SECONDS:
            self.last = now
            self.say(
                f"rendering listing pages: {self.done} of {self.count} done by this process "
                f"({now - self.started:.0f}s)"
            )


def _dask_client(address: str) -> Any:
    try:
        from distributed import Client
    except ImportError:
        raise SchedulerError(
            "--scheduler needs the Dask extra: pip install 'sandbox-replay[dask]'"
        ) from None
    try:
        return Client(address, timeout=30)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError) as error:
        raise SchedulerError(f"cannot reach the Dask scheduler at {address}: {error}") from None


def run_all(
    tasks: Sequence[RunTask],
    jobs: int,
    scheduler: str | None,
    done: Callable[[RunTask, RunBuilt], None],
) -> list[RunBuilt]:
    """Build every task; call ``done`` as each finishes; return the results in task order."""
    results: dict[int, RunBuilt] = {}
    for index, built in _completed(tasks, jobs, scheduler):
        results[index] = built
        done(tasks[index], built)
    return [results[i] for i in range(len(tasks))]


def _completed(
    tasks: Sequence[RunTask],
    jobs: int,
    scheduler: str | None,
) -> Iterator[tuple[int, RunBuilt]]:
    if not tasks:
        return
    if scheduler is not None:
        client = _dask_client(scheduler)
        try:
            from distributed import as_completed as dask_completed

            futures = client.map(build_run, list(tasks), pure=False)
            order = {future.key: i for i, future in enumerate(futures)}
            for future in dask_completed(futures):  # type: ignore[no-untyped-call]
                yield order[future.key], future.result()
        finally:
            client.close()
        return
    if len(tasks) == 1 or jobs <= 1:
        for index, task in enumerate(tasks):
            yield index, build_run(task)
        return
    with ProcessPoolExecutor(
        max_workers=min(jobs, len(tasks)), initializer=_die_with_parent
    ) as pool:
        pending = {pool.submit(build_run, task): i for i, task in enumerate(tasks)}
        for future in as_completed(pending):
            yield pending[future], future.result()
