"""The benchmarks' total-memory watch sees a child's memory, forked helpers included."""

from __future__ import annotations

import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import memwatch

pytestmark = pytest.mark.skipif(not memwatch.available(), reason="needs /proc smaps_rollup")

# A child that forks a grandchild; each then fills 60 MB of its own and holds it a while.
FORKING = """
import os, time
pid = os.fork()
block = bytearray(os.urandom(60_000_000))
time.sleep(1.5)
if pid:
    os.waitpid(pid, 0)
"""


def test_the_watch_sums_a_process_and_what_it_forks() -> None:
    wall, status, _, total = memwatch.run_timed([sys.executable, "-c", FORKING], watch=True)
    assert status == 0
    assert wall >= 1.5
    assert total is not None and total >= 115  # two private 60 MB blocks, and more


def test_without_watch_nothing_is_polled() -> None:
    _, status, _, total = memwatch.run_timed([sys.executable, "-c", "pass"])
    assert (status, total) == (0, None)


def test_compile_package_leaves_every_module_current_bytecode() -> None:
    """What a benchmarked run imports is read compiled, as from a wheel's install."""
    import importlib.util
    from pathlib import Path

    import sandbox_replay

    assert memwatch.compile_package().endswith("(ok)")
    sources = sorted(Path(sandbox_replay.__file__).parent.rglob("*.py"))
    assert len(sources) > 40
    for source in sources:
        cached = Path(importlib.util.cache_from_source(str(source))).read_bytes()
        assert cached[:4] == importlib.util.MAGIC_NUMBER
        flags = int.from_bytes(cached[4:8], "little")
        if flags == 0:  # stamped with the source's time and size
            stat = source.stat()
            assert int.from_bytes(cached[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
            assert int.from_bytes(cached[12:16], "little") == stat.st_size & 0xFFFFFFFF
        else:  # stamped with the source's hash (SOURCE_DATE_EPOCH set)
            assert cached[8:16] == importlib.util.source_hash(source.read_bytes())


def test_steal_is_the_share_of_cpu_time_the_host_took(monkeypatch: pytest.MonkeyPatch) -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice, in ticks
    readings = iter([[100, 0, 50, 800, 10, 0, 0, 40, 5, 0], [160, 0, 70, 900, 10, 0, 0, 70, 9, 0]])
    monkeypatch.setattr(memwatch, "cpu_times", lambda: next(readings))
    with memwatch.StealWatch() as steal:
        pass
    # 60 + 20 + 100 + 30 ticks passed (guest time is counted in user already); 30 stolen
    assert steal.percent == pytest.approx(100 * 30 / 210)


def test_steal_is_unknown_without_proc_stat(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memwatch, "cpu_times", lambda: None)
    with memwatch.StealWatch() as steal:
        pass
    assert steal.percent is None


def test_cpu_times_reads_the_machine_line() -> None:
    times = memwatch.cpu_times()
    assert times is not None and len(times) >= 8 and sum(times) > 0
