"""Process settings of the command line's own process: the collector's pace, the C allocator's.

Only ``cli.main`` calls ``tune_process``: a library caller or a test runner keeps its own.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc

# The commands that make one replay in a process that ends with it.
REPLAY_COMMANDS = ("run", "run-sandbox-bundle")

# glibc's mallopt parameters: the size from which a block gets a mapping of its own, and
# how much free memory at the heap's top is kept rather than handed back.
_M_MMAP_THRESHOLD = -3
_M_TRIM_THRESHOLD = -1


def tune_process(command: str | None) -> None:
    """Set the collector and the allocator for ``command``, this process's one command.

    A replay builds millions of objects, none in a reference cycle, that the collector
    would walk over and over: it runs far less often, and not at all for a replay command,
    which makes one replay and ends.
    """
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    _large_buffers_apart()
    if command in REPLAY_COMMANDS:
        gc.disable()


def _large_buffers_apart() -> None:
    """Have glibc map every large block on its own, and keep some free memory at its heap's top.

    glibc raises its mapping limit after freeing a mapped block, so the next input buffers
    would land in the heap and leave holes under the rows parsed after them; fixing the
    limit also fixes the trim threshold, set here so the record's pieces, encoded one after
    another, do not hand the heap's top back each time. Without glibc nothing changes.
    """
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, 1 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 8 << 20)
