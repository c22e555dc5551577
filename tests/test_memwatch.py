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
