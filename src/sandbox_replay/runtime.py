"""Process settings of the command line's own process: the collector's pace, the C allocator's.

Only ``cli.main`` calls ``tune_process``: the process is then the command's alone, so its
collector and heap are ours to set; a library caller or a test runner keeps its own.
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

    A replay builds millions of rows, refs and record pieces, none in a reference cycle;
    at the default threshold the collector would walk the live ones over and over. What
    the imports made is frozen out of its view and it runs far less often, so cyclic
    garbage is still collected; a replay command, which makes one replay and ends, turns
    it off.
    """
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    _large_buffers_apart()
    if command in REPLAY_COMMANDS:
        gc.disable()


def _large_buffers_apart() -> None:
    """Have glibc map every block of 1 MiB or more on its own, and keep up to 8 MiB of free
    memory at its heap's top.

    A replay reads each input file whole into one buffer and lets it go once parsed. glibc
    maps such a block apart, but after freeing one raises that size limit to the block's
    size, so the next buffers land in the heap and leave holes under the rows parsed after
    them. Fixing the limit keeps every large buffer a mapping returned when freed. Fixing it
    also fixes the trim threshold low, and the record's pieces, encoded one after another,
    would hand the heap's top back and fault it in again for each: hence the 8 MiB kept.
    Without glibc nothing changes.
    """
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, 1 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 8 << 20)
