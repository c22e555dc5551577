"""Building with several processes gives the same bytes as building in one."""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest

from conftest import FIXTURES, REPO, project_policies
from sandbox_replay.report import page_forks, parallel
from sandbox_replay.report.build import BuildConfig, build_site

sys.path.insert(0, str(REPO / "benchmarks"))

from generate_bundle import generate


def quiet(message: str) -> None:
    """Swallow progress lines in tests."""


def tree(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_two_jobs_build_the_same_site_as_one(tmp_path: Path) -> None:
    sites = {}
    for jobs in (1, 2):
        out = tmp_path / f"site-{jobs}"
        config = BuildConfig(
            (FIXTURES,), out, cwd=REPO, progress=quiet, jobs=jobs, policies=project_policies()
        )
        build_site(config)
        sites[jobs] = tree(out)
    assert sites[1] == sites[2]
    assert len(sites[1]) > 15


def _large_run_built_alone(tmp_path: Path) -> tuple[Path, Path]:
    """Generate a run with a few pages per listing; build its site in one process."""
    bundle = generate(tmp_path / "in" / "big", 1100, seed=5, failing_fraction=0.1)
    single = tmp_path / "single"
    build_site(BuildConfig((bundle.parent,), single, cwd=tmp_path, progress=quiet, jobs=1))
    return bundle, single


def test_a_large_run_shares_its_pages_between_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle, single = _large_run_built_alone(tmp_path)
    forks: list[int] = []

    def counted_fork() -> int:
        pid = real_fork()
        if pid:
            forks.append(pid)
        return pid

    real_fork = os.fork
    monkeypatch.setattr(os, "fork", counted_fork)
    forked = tmp_path / "forked"
    build_site(BuildConfig((bundle.parent,), forked, cwd=tmp_path, progress=quiet, jobs=2))
    # One run, two jobs: one process forked to render pages while this one writes the record.
    assert len(forks) == 1
    assert tree(forked) == tree(single)
    assert any(name.endswith("trace/page-0003.html") for name in tree(forked))


def test_a_lone_run_says_each_phase_and_many_runs_one_line_each(tmp_path: Path) -> None:
    bundle = generate(tmp_path / "in" / "big", 1100, seed=5, failing_fraction=0.1)
    said: list[str] = []
    build_site(BuildConfig((bundle.parent,), tmp_path / "one", progress=said.append, jobs=2))
    phases = [
        r"runs/big: loaded and scanned 11 files \([\d.]+ MB, \d+ rows\) in [\d.]+s",
        r"runs/big: checked the rows against every layer in [\d.]+s",
        r"runs/big: built the trace \(1100 spans\) in [\d.]+s",
        r"runs/big: wrote result\.json \([\d.]+ MB\) in [\d.]+s",
        r"runs/big: rendered the run page and \d+ listing pages \(2 processes\)",
        r"\[1/1 [\d.]+s\] replayed .* as runs/big: blocked \(replay [\d.]+s, pages [\d.]+s\)",
    ]
    lines = iter(said)
    for phase in phases:  # in this order, other lines between them allowed
        assert any(re.fullmatch(phase, line) for line in lines), (phase, said)
    shutil.copytree(FIXTURES / "first_wave", tmp_path / "in" / "first_wave")
    said.clear()
    build_site(BuildConfig((bundle.parent,), tmp_path / "two", progress=said.append, jobs=2))
    assert not [line for line in said if "loaded and scanned" in line]
    # Each run's line says how far the build got: [k/N elapsed].
    replayed = [line for line in said if " replayed " in line]
    assert [line.split("]")[0].split()[0] for line in replayed] == ["[1/2", "[2/2"]


@pytest.mark.parametrize("count", [1, 7, page_forks._PageQueue.TOKENS, 5000])
def test_the_page_queue_hands_out_every_page_once(count: int) -> None:
    queue = page_forks._PageQueue(count)
    try:
        first, second = iter(queue), iter(queue)
        claimed: list[int] = []
        # Two claimants taking turns, as two processes would.
        for claimant in itertools.cycle((first, second)):
            page = next(claimant, None)
            if page is None:
                break
            claimed.append(page)
        claimed.extend(first)
        claimed.extend(second)
    finally:
        queue.close()
    assert sorted(claimed) == list(range(count))


class _Pages:
    """The part of ``RunPages`` that ``render_shared`` reads: numbered pages."""

    def __init__(self, count: int) -> None:
        self.subpage_paths = tuple(f"page-{n}.html" for n in range(count))

    def subpages(self, numbers: Any) -> Any:
        return ((self.subpage_paths[n], n) for n in numbers)


class _Renderer:
    def render_listing(self, page: int) -> bytes:
        return f"page {page}".encode()


def _no_view(pages: Any, digest: str) -> Any:
    return None


def _wait_for(marker: Path, seconds: float = 60) -> None:
    """Wait until a forked helper has made ``marker`` (or the time is up)."""
    deadline = time.monotonic() + seconds
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def _render_40_pages_with_a_helper(
    emit: Any, write_result: Any, say: Any = lambda message: None
) -> None:
    page_forks.render_shared(
        lambda: cast(Any, _Pages(40)),
        40,
        cast(Any, _Renderer()),
        1,
        emit,
        write_result,
        _no_view,
        say,
    )


def test_matched_text_in_a_helpers_page_stops_the_run(tmp_path: Path) -> None:
    parent = os.getpid()
    marker = tmp_path / "helper-met-it"

    def emit(relative: str, data: bytes) -> None:
        if os.getpid() != parent:
            marker.touch()
            raise parallel.MatchedTextError(relative)

    def write_result() -> str:
        # Hold this process back until the helper has taken a page and refused it.
        _wait_for(marker)
        return "sha256:-"

    with pytest.raises(parallel.MatchedTextError, match="listing page would contain"):
        _render_40_pages_with_a_helper(emit, write_result)
    assert marker.exists()


def test_pages_are_written_once_each_whoever_renders_them(tmp_path: Path) -> None:
    written = tmp_path / "written"
    written.mkdir()

    def emit(relative: str, data: bytes) -> None:
        (written / relative).write_bytes(data)
        with (tmp_path / "log").open("a") as log:
            log.write(relative + "\n")

    def run_page(pages: Any, digest: str) -> Any:
        emit("index.html", digest.encode())
        return "the run view"

    made = _Pages(300)
    digest, view = page_forks.render_shared(
        lambda: cast(Any, made), 300, cast(Any, _Renderer()), 2, emit, lambda: "sha256:-", run_page
    )
    assert (digest, view) == ("sha256:-", "the run view")
    logged = (tmp_path / "log").read_text().split()
    assert sorted(logged) == sorted(["index.html", *(f"page-{n}.html" for n in range(300))])
    assert (written / "index.html").read_bytes() == b"sha256:-"
    assert (written / "page-299.html").read_bytes() == b"page 299"


def test_progress_names_every_run_once_and_sums_up(tmp_path: Path) -> None:
    lines: list[str] = []
    result = build_site(
        BuildConfig((FIXTURES,), tmp_path / "site", cwd=REPO, progress=lines.append, jobs=2)
    )
    names = sorted(
        line.split(" as runs/")[1].split(":")[0] for line in lines if " as runs/" in line
    )
    assert names == sorted(run.name for run in result.runs)
    assert lines[-1].startswith(f"{len(result.runs)} runs: {len(result.runs)} built, 0 reused")


def test_pages_of_a_helper_that_dies_are_rendered_again(tmp_path: Path) -> None:
    """A helper killed mid-queue (as by the out-of-memory killer) loses no page."""
    parent = os.getpid()
    written = tmp_path / "written"
    written.mkdir()
    marker = tmp_path / "helper-took-a-page"

    def emit(relative: str, data: bytes) -> None:
        if os.getpid() != parent:
            (written / relative).write_bytes(data[:2])  # half a page, then killed
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        (written / relative).write_bytes(data)

    def write_result() -> str:
        _wait_for(marker)  # until the helper has taken a page and died on it
        return "sha256:-"

    said: list[str] = []
    _render_40_pages_with_a_helper(emit, write_result, said.append)
    assert marker.exists()
    assert {p.name: p.read_bytes() for p in written.iterdir()} == {
        f"page-{n}.html": f"page {n}".encode() for n in range(40)
    }
    assert len(said) == 1
    assert said[0].startswith("a process rendering listing pages ended with signal 9 (SIGKILL)")


def test_a_build_whose_page_helper_is_killed_writes_the_whole_site(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle, single = _large_run_built_alone(tmp_path)
    parent = os.getpid()
    marker = tmp_path / "helper-took-a-page"
    real_put, real_stream = parallel.put_file, parallel._stream_result

    def put_then_die(staging: Path, relative: str, data: bytes) -> None:
        if os.getpid() != parent and "/page-" in relative:
            real_put(staging, relative, data[: len(data) // 2])
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        real_put(staging, relative, data)

    def stream_once_the_helper_died(*args: Any) -> str:
        _wait_for(marker)  # until the helper has taken a page and died on it
        return str(real_stream(*args))

    monkeypatch.setattr(parallel, "put_file", put_then_die)
    monkeypatch.setattr(parallel, "_stream_result", stream_once_the_helper_died)
    said: list[str] = []
    killed = tmp_path / "killed"
    build_site(BuildConfig((bundle.parent,), killed, cwd=tmp_path, progress=said.append, jobs=2))
    assert marker.exists()
    assert tree(killed) == tree(single)
    notes = [line for line in said if "ended with signal 9 (SIGKILL)" in line]
    assert len(notes) == 1 and "pages it may have held" in notes[0]
    assert sorted(os.listdir(tmp_path)) == ["helper-took-a-page", "in", "killed", "single"]
