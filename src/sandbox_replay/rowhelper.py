"""The result record's copied row lists, serialised by a helper process during the replay.

Five of the record's row lists copy one input file each: every row's known fields, in
the format's order, and its line (``records.COPIED_LISTS``). Building and serialising
them holds the GIL for about a quarter of a 60,000-request validation, at its very end,
while the machine's other core does little. They depend on nothing but their own file's
bytes, so a helper process forked before the load reads those files itself and writes the
lists, as the record holds them, to an unlinked temporary file, while this process loads,
checks and traces. The record then copies their bytes in (``RowListHelper.attach``).

The helper is trusted with nothing. A list is used only when this process loaded its
file by the fast path for plain list files (``loader._parse_list_file_fast``: flat rows,
no float), from bytes of the same sha256 as the helper read, with the same number of rows
as the helper found, and when the forbidden-material scan matched nothing (a match
rewrites the record). The helper parses a file a batch of rows at a time: it cuts the
file before each ``{``, and with as many of those as this process found rows, each
``{`` opens a row, so the cuts fall exactly between rows and each row parses as it does
in the whole file. Any other case (a file the helper could not read or cut, a helper that
died) leaves that list to be built here as before: the bytes are the same either way.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import signal
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import accumulate, repeat
from operator import add, sub
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from sandbox_replay.atomic import Verbatim, list_chunks
from sandbox_replay.blockwrite import BlockWriter, read_range
from sandbox_replay.forking import die_with_parent
from sandbox_replay.inputs import RowRef
from sandbox_replay.lazyrows import ROWS_PER_CHUNK
from sandbox_replay.loader import (
    FileChangedError,
    InputRefused,
    LoadLimits,
    inspect_input,
    open_same_file,
)
from sandbox_replay.pipeline import Replay
from sandbox_replay.records import COPIED_LISTS, ProjectedRows, RunRecords, project_rows

# Below this many bytes in the copied files together, the lists take well under 50 ms to
# build: not worth a process.
HELPER_MIN_BYTES = 8 * 1024 * 1024
# The depth of the row lists in the record: values of its top-level keys.
_LIST_DEPTH = 1
_READ_SIZE = 4 * 1024 * 1024
# Rows parsed, projected and serialised together: as many as the record's chunks hold.
_BATCH_ROWS = ROWS_PER_CHUNK


class _Unusable(Exception):
    """The helper cannot serialise this file (the record builds the list instead)."""


@dataclass(frozen=True)
class Section:
    """One list the helper wrote: what it read, and where its bytes are in the spool."""

    key: str
    sha256: str
    rows: int
    offset: int
    length: int


def _cut(text: bytes, last: bool) -> list[Any]:
    """Parse the rows in ``text``, which runs from one row's ``{`` to the next row's.

    Between two rows comes ","; after the last, the "]" and "}" closing the list and the
    file. A cut anywhere else leaves a string or an object open, so the batch does not
    parse.
    """
    text = text.rstrip()
    for closer in (b"}", b"]") if last else (b",",):
        if not text.endswith(closer):
            raise _Unusable("rows are not cut where they end")
        text = text[: -len(closer)].rstrip()
    try:
        rows = orjson.loads(b"[" + text + b"]")
    except orjson.JSONDecodeError:
        raise _Unusable("a batch of rows does not parse") from None
    if any(type(row) is not dict for row in rows):
        raise _Unusable("a batch of rows is not one object per cut")
    return list(rows)


class _RowReader:
    """Read a plain list file a piece at a time and give its rows a batch at a time.

    A row starts at each ``{`` after the first (which opens the file's object), and its
    line is one more than the line ends before that ``{``. ``rows`` and ``digest`` say,
    once every batch was read, how many rows there were and the sha256 of every byte.
    """

    def __init__(self, handle: BinaryIO, name: str, fields: Sequence[str]) -> None:
        self.handle = handle
        self.name = name
        self.names = tuple(dict.fromkeys(fields))  # as ``ProjectedRows`` keeps them
        self.rows = 0
        self.hash = hashlib.sha256()

    @property
    def digest(self) -> str:
        return "sha256:" + self.hash.hexdigest()

    def batches(self) -> Iterator[list[dict[str, Any]]]:
        """Yield the rows as the record shows them (``project_rows``), a batch at a time."""
        buf = b""
        starts: list[int] = []  # in ``buf``: the "{" of each row not yet given
        lines: list[int] = []  # and the line it is on
        line = 1  # the line the end of ``buf`` is on
        top = True  # whether the next "{" is the file's own
        while piece := self.handle.read(_READ_SIZE):
            self.hash.update(piece)
            # Where each "{" of the piece is in ``buf``, and its line, in C: the piece
            # split at every "{", each part's length and line ends summed up to it.
            parts = piece.split(b"{")
            spans = map(add, map(len, parts[:-1]), repeat(1))
            found = list(accumulate(spans, initial=len(buf) - 1))[1:]
            ends = list(map(bytes.count, parts, repeat(b"\n")))
            found_lines = list(accumulate(ends[:-1], initial=line))[1:]
            line += sum(ends)
            if top and found:
                del found[0], found_lines[0]
                top = False
            starts += found
            lines += found_lines
            buf += piece
            while len(starts) > _BATCH_ROWS:
                rows = _cut(buf[starts[0] : starts[_BATCH_ROWS]], False)
                yield self._project(rows, lines[:_BATCH_ROWS])
                del starts[:_BATCH_ROWS], lines[:_BATCH_ROWS]
            keep = starts[0] if starts else len(buf)  # only the rows not yet given
            buf = buf[keep:]
            starts = list(map(sub, starts, repeat(keep)))
        if starts:
            yield self._project(_cut(buf[starts[0] :], True), lines)

    def _project(self, rows: list[Any], lines: list[int]) -> list[dict[str, Any]]:
        if len(rows) != len(lines):
            raise _Unusable("a batch does not hold one row per cut")
        first = self.rows
        self.rows += len(rows)
        refs = list(map(RowRef, repeat(self.name), range(first, self.rows), lines, rows))
        return project_rows(refs, self.names)


def _serialise(
    root: Path, name: str, fields: Sequence[str], limits: LoadLimits, out: BlockWriter
) -> tuple[str, int, int]:
    """Write one file's list to ``out``; return the file's sha256, its rows and the bytes."""
    try:
        path, info = inspect_input(root, name, limits)
        handle = open_same_file(path, info, limits.max_file_bytes)
    except (InputRefused, FileChangedError):
        raise _Unusable("the file could not be opened") from None
    written = 0
    with handle:
        reader = _RowReader(handle, name, fields)
        for piece in list_chunks(reader.batches(), _LIST_DEPTH, may_hold_floats=False):
            out.write(piece)
            written += len(piece)
    return reader.digest, reader.rows, written


def _helper_main(root: Path, limits: LoadLimits, spool: int, report: int) -> None:
    """The helper process: serialise each copied list into ``spool``, report to ``report``."""
    sections = []
    with BlockWriter(spool) as out:  # around the page cache, to be read back once
        for key, name, fields in COPIED_LISTS:
            before = out.written
            try:
                sha256, rows, length = _serialise(root, name, fields, limits, out)
            except _Unusable:
                continue
            sections.append([key, sha256, rows, before, length])
    os.write(report, orjson.dumps(sections))


class RowListHelper:
    """A helper process serialising the copied row lists of one run (see the module doc)."""

    def __init__(self, pid: int, report: int, spool: int) -> None:
        self._pid: int | None = pid
        self._report = report
        self._spool = spool
        self._sections: dict[str, Section] | None = None

    @classmethod
    def start(cls, root: Path, limits: LoadLimits, spool_dir: Path) -> RowListHelper | None:
        """Fork a helper for the run in ``root`` and return it; None when not worth one.

        Not worth one: the copied files are small together, this process may use only one
        CPU, or the system cannot fork. ``spool_dir`` holds the helper's unlinked temporary
        file (the record's own folder: it has room for the record).
        """
        if not hasattr(os, "fork") or len(os.sched_getaffinity(0)) < 2:
            return None
        size = 0
        for _, name, _ in COPIED_LISTS:
            with contextlib.suppress(OSError):
                size += (root / name).lstat().st_size
        if size < HELPER_MIN_BYTES:
            return None
        spool = tempfile.TemporaryFile(dir=spool_dir)  # noqa: SIM115  (closed by close())
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            spool.close()
            os.close(read_end)
            os.close(write_end)
            return None
        if pid == 0:  # the helper: never returns
            status = 1
            try:
                die_with_parent()
                os.nice(19)  # the CPU this process's own threads leave idle is enough
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                gc.disable()  # it builds no cycle and exits soon
                os.close(read_end)
                _helper_main(root, limits, spool.fileno(), write_end)
                status = 0
            finally:
                os._exit(status)
        os.close(write_end)
        fd = os.dup(spool.fileno())
        spool.close()
        return cls(pid, read_end, fd)

    def sections(self) -> dict[str, Section]:
        """Wait for the helper to finish and return the lists it wrote, by record key."""
        if self._sections is None:
            message = b""
            while chunk := os.read(self._report, 65536):
                message += chunk
            self._wait()
            try:
                found = orjson.loads(message) if message else []
                self._sections = {entry[0]: Section(*entry) for entry in found}
            except (orjson.JSONDecodeError, TypeError):
                self._sections = {}
        return self._sections

    def attach(self, records: RunRecords, replay: Replay) -> tuple[RunRecords, int]:
        """Return ``records`` writing every list the helper made that is usable, and how many."""
        if replay.scan.matched_texts:
            return records, 0
        sections = self.sections()
        verbatim: dict[str, Verbatim] = {}
        for key, name, _ in COPIED_LISTS:
            section = sections.get(key)
            loaded = replay.run.files.get(name)
            listed = records.result.get(key)
            if (
                section is not None
                and loaded is not None
                and loaded.ok
                and loaded.rows_are_flat
                and not loaded.may_hold_floats
                and loaded.sha256 == section.sha256
                and len(loaded.rows) == section.rows
                and isinstance(listed, ProjectedRows)
                and len(listed) == section.rows
            ):
                verbatim[key] = Verbatim(self._reader(section))
        if not verbatim:
            return records, 0
        return replace(records, verbatim=verbatim), len(verbatim)

    def _reader(self, section: Section) -> Callable[[], Iterator[bytes]]:
        return partial(read_range, self._spool, section.offset, section.length)

    def _wait(self) -> None:
        if self._pid is not None:
            os.waitpid(self._pid, 0)
            self._pid = None

    def close(self) -> None:
        """Stop the helper if it still runs, and free its temporary file."""
        if self._pid is not None:
            with contextlib.suppress(OSError):
                os.kill(self._pid, signal.SIGKILL)
            self._wait()
        for fd in (self._report, self._spool):
            with contextlib.suppress(OSError):
                os.close(fd)
