"""Helpers for processes this tool forks from itself."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def usable_cpus() -> int:
    """Return how many CPUs this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on every system
        return max(1, os.cpu_count() or 1)


def die_with_parent() -> None:
    """Have Linux kill this (forked) process when its parent dies, so none is left writing
    files; elsewhere a no-op. A parent dead before the call is the caller's to check."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
