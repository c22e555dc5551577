"""Nothing is lost when a build or a run is killed: the old output or the new, never a mix.

Two kinds of kill:

- *SIGKILL at random times.* ``sandbox-replay build fixtures`` is started again and again
  over a complete site and killed after a delay drawn from a seeded RNG, the delays spread
  over the whole measured length of a build. After each kill the site folder must be, file
  for file and byte for byte, the previous complete build or the new one. The builds
  alternate between two ``SOURCE_DATE_EPOCH`` values so that old and new differ. The same
  is done to ``run``, whose records must each be whole JSON, old or new.
- *A kill at every step of the write phase.* Random kills rarely land in the few
  milliseconds the swap takes, so the write phase is also replayed in a forked child that
  ends itself with ``os._exit`` at its n-th executed line, for every n until the write
  completes: on the atomic-exchange path (Linux) and on the two-rename fallback. After each
  such kill the folder is checked, then the next build's recovery runs and must leave the
  old or the new site with no temporary folder beside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from conftest import (
    FIRST_WAVE,
    FIXTURES,
    REPO,
    edit_json,
    project_policies,
    project_sensitivity,
    replay_dir,
)
from sandbox_replay.load.run import InputMode
from sandbox_replay.records import build as records
from sandbox_replay.report import publish
from sandbox_replay.report.build import BuildConfig, build_site

pytestmark = pytest.mark.skipif(
    not hasattr(os, "fork") or not hasattr(signal, "SIGKILL"), reason="needs fork and SIGKILL"
)

EPOCHS = (1_700_000_000, 1_800_000_000)
SEED = 20261130
KILLS = 10
KILLED = 137  # the exit status a child uses to stand for SIGKILL

Tree = dict[str, str]


def quiet(message: str) -> None:
    """Swallow progress lines in tests."""


def tree(folder: Path) -> Tree:
    """Return every entry under ``folder`` as relative path → sha256 (``"<kind>"`` if not a file)."""
    found: Tree = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            found[name] = "<not a file>"
        elif path.is_file():
            found[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def siblings(site: Path) -> list[str]:
    """Return the hidden folders a build keeps beside ``site`` while it writes."""
    return sorted(p.name for p in site.parent.iterdir() if p.name.startswith(f".{site.name}."))


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from sandbox_replay.cli import main; main()", *args]


def _env(epoch: int) -> dict[str, str]:
    return {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}


def _spread(rng: random.Random, span: float, count: int) -> list[float]:
    """Return ``count`` delays covering ``[0, span)``: one random point in each equal slice."""
    return [span * (i + rng.random()) / count for i in range(count)]


def _kill_after(args: list[str], delay: float, env: Mapping[str, str]) -> int | None:
    """Start ``args``, SIGKILL it after ``delay`` seconds; return its exit code if it finished."""
    process = subprocess.Popen(
        args, cwd=REPO, env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        return process.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait()
        return None


# ---------------------------------------------------------------------------------------
# SIGKILL at random times


def test_build_killed_at_random_times_leaves_old_or_new_site(tmp_path: Path) -> None:
    references = {}
    for epoch in EPOCHS:
        out = tmp_path / f"ref-{epoch}" / "site"
        config = BuildConfig(
            (FIXTURES,),
            out,
            source_date_epoch=epoch,
            cwd=REPO,
            progress=quiet,
            policies=project_policies(),
            sensitivity=project_sensitivity(),  # as the command reads pyproject.toml
        )
        build_site(config)
        references[epoch] = tree(out)
    assert references[EPOCHS[0]] != references[EPOCHS[1]]

    site = tmp_path / "work" / "site"
    started = time.monotonic()
    subprocess.run(
        _cli("build", "fixtures", "--out", str(site)),
        cwd=REPO,
        env=_env(EPOCHS[0]),
        check=True,
        capture_output=True,
    )
    duration = time.monotonic() - started
    state = EPOCHS[0]
    assert tree(site) == references[state]

    rng = random.Random(SEED)
    outcomes = []
    for delay in _spread(rng, duration * 1.1, KILLS):
        target = EPOCHS[1] if state == EPOCHS[0] else EPOCHS[0]
        code = _kill_after(_cli("build", "fixtures", "--out", str(site)), delay, _env(target))
        assert code in (None, 0)
        now = tree(site)
        assert now in (references[state], references[target]), (
            f"killed after {delay:.3f}s of ~{duration:.3f}s: the site is neither the old "
            f"build nor the new one ({len(now)} files)"
        )
        new = now == references[target]
        outcomes.append("new" if new else "old")
        state = target if new else state
    assert "old" in outcomes, "no kill landed before a build finished; the delays are off"

    subprocess.run(
        _cli("build", "fixtures", "--out", str(site)),
        cwd=REPO,
        env=_env(EPOCHS[0]),
        check=True,
        capture_output=True,
    )
    assert tree(site) == references[EPOCHS[0]]
    assert siblings(site) == [], "the rerun left a temporary folder beside the site"


def _changed_copy(tmp_path: Path) -> Path:
    """Return a copy of the fixture whose records differ from the original's."""
    copy = tmp_path / "changed" / "first_wave"
    shutil.copytree(FIRST_WAVE, copy)
    with edit_json(copy / "policy_verdicts.json") as data:
        data["policy_verdicts"][0]["decision_reason_ref"] = "reason:changed_for_the_kill_test"
    return copy


def test_run_killed_at_random_times_leaves_whole_records(tmp_path: Path) -> None:
    inputs = (FIRST_WAVE, _changed_copy(tmp_path))
    references = []
    for folder in inputs:
        out = tmp_path / f"ref-{len(references)}"
        subprocess.run(
            _cli("run", "--input", str(folder), "--out", str(out)), cwd=REPO, capture_output=True
        )
        references.append({p.name: p.read_bytes() for p in out.iterdir()})
    assert references[0] != references[1]

    out = tmp_path / "records"
    started = time.monotonic()
    subprocess.run(
        _cli("run", "--input", str(inputs[0]), "--out", str(out)), cwd=REPO, capture_output=True
    )
    duration = time.monotonic() - started
    rng = random.Random(SEED)
    for index, delay in enumerate(_spread(rng, duration * 1.1, KILLS)):
        folder = inputs[(index + 1) % 2]
        _kill_after(_cli("run", "--input", str(folder), "--out", str(out)), delay, os.environ)
        for name in references[0]:
            data = (out / name).read_bytes()
            json.loads(data)
            assert data in (references[0][name], references[1][name]), name
        # A temp file a kill left is hidden and never a record name.
        for path in out.iterdir():
            assert path.name in references[0] or path.name.startswith("."), path.name

    subprocess.run(
        _cli("run", "--input", str(inputs[0]), "--out", str(out)), cwd=REPO, capture_output=True
    )
    for name, data in references[0].items():
        assert (out / name).read_bytes() == data


# ---------------------------------------------------------------------------------------
# A kill at every executed line of the write phase


# Two small sites for the write phase: the new one changes a page, drops a run and adds one.
OLD_SITE = {
    "index.html": b"<p>old index</p>",
    "manifest.json": b'{"build": "old"}',
    "runs/a/index.html": b"<p>old run a</p>",
}
NEW_SITE = {
    "index.html": b"<p>new index</p>",
    "manifest.json": b'{"build": "new"}',
    "runs/b/index.html": b"<p>new run b</p>",
}


def _as_tree(files: Mapping[str, bytes]) -> Tree:
    return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


def _killed_at_line(limit: int, traced: frozenset[str], action: Callable[[], Any]) -> bool:
    """Run ``action`` in a forked child that dies at its ``limit``-th traced line.

    Lines are counted in the functions named in ``traced``. Return True if the child was
    stopped, False if ``action`` completed first.
    """
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        count = 0

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            nonlocal count
            if event == "line":
                count += 1
                if count >= limit:
                    os._exit(KILLED)
            return local

        def tracer(frame: FrameType, event: str, arg: Any) -> Any:
            return local if frame.f_code.co_name in traced else None

        try:
            sys.settrace(tracer)
            action()
            sys.settrace(None)
        except BaseException:
            os._exit(3)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code in (0, KILLED), f"the child failed with exit status {code}"
    return code == KILLED


# The functions of the write phase whose lines are kill points. Comparing the sites
# (``same_tree``) and syncing a folder (``_fsync_dir``) change nothing on disk, so a
# kill inside them is the same as one at the line that calls them.
WRITE_PHASE = frozenset({"recover", "_leftovers", "write_site", "_exchange"})


def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip fsync: a killed process loses nothing the kernel already holds, and it is slow."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def _sweep_write_phase(tmp_path: Path, use_exchange: bool) -> int:
    old, new = OLD_SITE, NEW_SITE
    old_tree, new_tree = _as_tree(old), _as_tree(new)
    site = tmp_path / "sweep" / "site"
    pristine = tmp_path / "pristine" / "site"
    publish.write_site(pristine, old)

    def write() -> None:
        if not use_exchange:
            publish._exchange = lambda a, b: False  # type: ignore[assignment]
        publish.recover(site)
        publish.write_site(site, new)

    limit = 0
    while True:
        limit += 1
        assert limit < 5000, "the write phase never completed"
        shutil.rmtree(site.parent, ignore_errors=True)
        shutil.copytree(pristine, site)
        stopped = _killed_at_line(limit, WRITE_PHASE, write)
        now = tree(site) if site.is_dir() else None
        if use_exchange or now is not None:
            assert now in (old_tree, new_tree), f"killed at line {limit}: a mixed site"
        publish.recover(site)  # what the next build does first
        assert tree(site) in (old_tree, new_tree), f"killed at line {limit}: not recovered"
        assert siblings(site) == [], f"killed at line {limit}: recovery left {siblings(site)}"
        if not stopped:
            assert tree(site) == new_tree
            return limit


def _exchange_works(tmp_path: Path) -> bool:
    a, b = tmp_path / "probe-a", tmp_path / "probe-b"
    a.mkdir()
    b.mkdir()
    return publish._exchange(a, b)


def test_a_kill_at_every_line_of_the_exchange_leaves_old_or_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not _exchange_works(tmp_path):
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here")
    _no_fsync(monkeypatch)
    steps = _sweep_write_phase(tmp_path, use_exchange=True)
    assert steps > 20  # the sweep really walked the write phase


def test_a_kill_at_every_line_of_the_fallback_is_recovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_fsync(monkeypatch)
    steps = _sweep_write_phase(tmp_path, use_exchange=False)
    assert steps > 20


def test_a_kill_at_every_line_of_a_record_write_leaves_old_or_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_fsync(monkeypatch)
    _, old = replay_dir(FIRST_WAVE)
    _, new = replay_dir(_changed_copy(tmp_path))
    out = tmp_path / "records"
    traced = frozenset({"write_records", "write_bytes_atomic"})
    written: dict[str, set[bytes]] = {}

    def write_new() -> None:
        records.write_records(new, InputMode.FIXTURE, out)

    for source in (new, old):
        records.write_records(source, InputMode.FIXTURE, out)
        for path in out.iterdir():
            written.setdefault(path.name, set()).add(path.read_bytes())
    limit = 0
    while True:
        limit += 1
        assert limit < 5000
        stopped = _killed_at_line(limit, traced, write_new)
        for name, versions in written.items():
            data = (out / name).read_bytes()
            assert data in versions, f"killed at line {limit}: {name} is neither old nor new"
        for path in out.iterdir():
            if path.name not in written:
                path.unlink()  # a temp file the kill left (hidden, never read as a record)
        records.write_records(old, InputMode.FIXTURE, out)
        if not stopped:
            break
    assert limit > 8
