"""Fit the number of build processes to the memory the machine has available.

Each process replays a whole run in memory, so ``--jobs`` multiplies the peak, estimated
from the size of the input files (the factors below; see ``docs/performance.md``). Runs
that would not fit get fewer processes, and the build says so; a ``--jobs`` given
explicitly is kept, with a warning. Without ``/proc/meminfo`` nothing is checked.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

BASE_BYTES = 60 * 1024 * 1024
PER_INPUT_BYTE = 2.5
HELPER_PER_INPUT_BYTE = 1.7


@dataclass(frozen=True)
class JobsFit:
    """How many processes to use, and what to tell the user about it (None: nothing)."""

    jobs: int
    note: str | None = None


def available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """Return the memory the system reports available to new work, or None if unknown."""
    try:
        text = meminfo.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == "MemAvailable":
            amount, _, unit = value.strip().partition(" ")
            if amount.isdigit() and unit == "kB":
                return int(amount) * 1024
    return None


def input_bytes(folder: Path) -> int:
    """Return the size of the files directly in a run folder (what a replay loads)."""
    total = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return total


def run_need(size: int, page_jobs: int = 1) -> int:
    """Return the estimated peak memory of building one run of ``size`` input bytes."""
    helpers = max(0, page_jobs - 1)
    return int(BASE_BYTES + PER_INPUT_BYTE * size + helpers * HELPER_PER_INPUT_BYTE * size)


def need(sizes: Sequence[int], jobs: int) -> int:
    """Return the estimated peak of building runs of ``sizes`` with ``jobs`` processes.

    A single run shares its pages out to ``jobs - 1`` helpers; several runs are built
    ``jobs`` at a time, so at worst the largest ``jobs`` of them are in memory at once.
    """
    if len(sizes) == 1:
        return run_need(sizes[0], jobs)
    return sum(run_need(size) for size in sorted(sizes, reverse=True)[:jobs])


def fit_jobs(sizes: Sequence[int], jobs: int, available: int | None, *, explicit: bool) -> JobsFit:
    """Return how many of ``jobs`` processes to use for runs of ``sizes`` input bytes."""
    if not sizes or available is None or need(sizes, jobs) <= available:
        return JobsFit(jobs)
    wanted = f"--jobs {jobs} may need about {_gb(need(sizes, jobs))}"
    has = f"{_gb(available)} is available"
    if explicit:
        return JobsFit(jobs, f"warning: {wanted} of memory and {has}; kept as given")
    fitting = [j for j in range(jobs - 1, 0, -1) if need(sizes, j) <= available]
    if fitting:
        return JobsFit(fitting[0], f"using --jobs {fitting[0]}: {wanted} of memory and {has}")
    return JobsFit(
        1,
        f"warning: using --jobs 1, which may still need about {_gb(need(sizes, 1))} of "
        f"memory; {has}",
    )


def _gb(size: int) -> str:
    return f"{size / 1e9:.1f} GB"
