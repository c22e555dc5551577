"""Watch the total memory of a process and everything it forks, while it runs.

``getrusage`` gives the peak RSS of the largest single process, which is what the
benchmarks print by default; but ``build --jobs N`` forks page helpers that share the
replay copy-on-write, and a run's true cost is then the sum over its processes. This
polls ``/proc/<pid>/smaps_rollup`` of the process tree (Linux only) and keeps the
largest total PSS seen: shared pages counted once, split between the processes that
share them. Reading ``smaps_rollup`` walks each process's page tables, which slows a
multi-GB process a little, so the benchmarks do it only when asked (``--total-memory``).
"""

from __future__ import annotations

import compileall
import os
import subprocess
import threading
import time
from pathlib import Path

PROC = Path("/proc")


def process_tree(pid: int) -> list[int]:
    """Return ``pid`` and every live descendant of it."""
    found = [pid]
    index = 0
    while index < len(found):
        current = found[index]
        index += 1
        try:
            tasks = os.listdir(PROC / str(current) / "task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = (PROC / str(current) / "task" / task / "children").read_text()
            except OSError:
                continue
            found.extend(int(child) for child in children.split())
    return found


def total_pss_kib(pid: int) -> int:
    """Return the summed PSS of ``pid``'s process tree in KiB (0 where unreadable)."""
    total = 0
    for member in process_tree(pid):
        try:
            text = (PROC / str(member) / "smaps_rollup").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1])
                break
    return total


class TotalMemoryWatch:
    """Poll a process tree's total PSS on a thread until stopped; ``peak_mb`` is the largest.

    Polled every 50 ms at first and half as often again after each poll, up to once a
    ``interval``: a short run is still seen, a long one is slowed little.
    """

    def __init__(self, pid: int, interval: float = 1.0) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TotalMemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        pause = min(0.05, self.interval)
        while not self._stop.is_set():
            self.peak_kib = max(self.peak_kib, total_pss_kib(self.pid))
            self._stop.wait(pause)
            pause = min(pause * 1.5, self.interval)

    @property
    def peak_mb(self) -> float:
        return self.peak_kib * 1024 / 1e6


def cpu_times() -> list[int] | None:
    """Return the machine's CPU time counters (``/proc/stat``, in ticks), or None."""
    try:
        first = (PROC / "stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    return list(map(int, first[1:])) if first and first[0] == "cpu" else None


class StealWatch:
    """The share of the machine's CPU time its hypervisor gave elsewhere (steal) over a block.

    On a VM, a run that takes 20 to 30% longer than the same run an hour before is often
    one during which the host ran other guests on this one's CPUs. Linux counts that time
    as steal; ``percent`` is its share of all CPU time that passed (None where there is no
    ``/proc/stat``, as outside Linux).
    """

    def __enter__(self) -> StealWatch:
        self.start = cpu_times()
        self.end: list[int] | None = None
        return self

    def __exit__(self, *exc: object) -> None:
        self.end = cpu_times()

    @property
    def percent(self) -> float | None:
        if self.start is None or self.end is None or len(self.start) < 8:
            return None
        passed = [after - before for before, after in zip(self.start, self.end, strict=False)]
        total = sum(passed[:8])  # user, nice, system, idle, iowait, irq, softirq, steal
        return 100 * passed[7] / total if total else 0.0


def compile_package() -> str:
    """Write the bytecode of sandbox-replay's modules, as installing a wheel does.

    An editable install writes it on first import, unless ``PYTHONDONTWRITEBYTECODE`` is
    set (as on this project's benchmark machine): then every run compiles each module
    edited since its bytecode was last written, 70 to 100 ms of start-up that a user's
    install never pays. Return a line saying what was done.
    """
    import sandbox_replay

    package = Path(sandbox_replay.__file__).parent
    compiled = compileall.compile_dir(package, quiet=1)
    return f"bytecode: sandbox_replay's modules compiled first ({'ok' if compiled else 'FAILED'})"


def available() -> bool:
    """Say whether this system has what the watch reads."""
    return (PROC / "self" / "smaps_rollup").exists()


def run_timed(
    command: list[str], *, env: dict[str, str] | None = None, watch: bool = False
) -> tuple[float, int, str, float | None]:
    """Run ``command``; return wall seconds, exit status, stderr and, with ``watch``, peak total PSS in MB."""
    start = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    if watch:
        with TotalMemoryWatch(process.pid) as watched:
            _, stderr = process.communicate()
        total: float | None = watched.peak_mb
    else:
        _, stderr = process.communicate()
        total = None
    return time.perf_counter() - start, process.returncode, stderr, total
