"""The result record's row lists, serialised by a helper process during the replay.

Five of the record's row lists copy one input file each: every row's known fields, in
the format's order, and its line (``records.COPIED_LISTS``); a sixth, the derived rows,
is made of two of those files, the requests and their verdicts. Building and serialising
them holds the GIL for about a quarter of a 60,000-request validation, at its very end,
while the machine's other core does little. They depend on nothing but those files'
bytes and the packaged policy table, so a helper process forked before the load reads
the files itself and writes the lists, as the record holds them, to an unlinked
temporary file (read back from the page cache), while this process loads, checks and
traces. It reports each list as soon as it is written, in the record's order. When the
record is written and comes to a list, it copies that list's bytes in if the helper
reported it by then (``RowListHelper.attach``). A list the helper is still making is
waited for only while, at the pace the helper shows, it would be done before this process
could build it, and never longer than that would take (``RowListHelper._await``); a list
still not reported, or not begun, is built here while the helper goes on with the next.
``build`` uses one the same way for a lone run it builds with processes to spare
(``report.parallel.build_run``).

The helper decodes each batch of rows with msgspec into a struct of the fields the
record keeps: a value the record would change (a long text or list, an object, a float)
fails the batch, and so leaves the list to be built here. Encoded compact and laid out
by ``msgspec.json.format``, the structs give the record's own bytes for ASCII text
(``atomic.encoded_list_chunks``); other text leaves the list to be built here too.

The helper is trusted with nothing. A copied list is used only when this process loaded
its file by the fast path for plain list files (``loader._parse_list_file_fast``: flat
rows, no float), from bytes of the same sha256 as the helper read, with the same number
of rows as the helper found, and when the forbidden-material scan matched nothing (a
match rewrites the record). The derived rows are used only when both their files are so
proven, this run derives with the packaged table, and the helper made as many rows as
this process derived. The helper parses a file a batch of rows at a time: it cuts the
file before each ``{``, and with as many of those as this process found rows, each
``{`` opens a row, so the cuts fall exactly between rows and each row parses as it does
in the whole file. Any other case (a file the helper could not read or cut, a helper that
died or is late) leaves that list to be built here: the bytes are the same either way.

Beside the request rows the helper also makes the trace's input digest of each request
row (``trace.packed_input_digests``), in the file's order, and reports them right after
those rows, before the trace needs them (``INPUT_DIGESTS``). The trace takes them
(``RowListHelper.input_digests``) only when the request rows are proven as above and
there is one digest per row, picking each span's by its row's place in the file; in any
other case, or if they are not reported yet, it makes them itself without waiting.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import hashlib
import mmap
import os
import select
import signal
import struct
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cache, partial
from itertools import accumulate, repeat
from operator import attrgetter
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import msgspec
import orjson

from sandbox_replay.atomic import Verbatim, encoded_list_chunks, json_chunks
from sandbox_replay.forking import die_with_parent, usable_cpus
from sandbox_replay.inputs import ACTION_REQUESTS, RunInputs
from sandbox_replay.layers.verdicts import derivation_passes
from sandbox_replay.lazyrows import ROWS_PER_CHUNK
from sandbox_replay.loader import (
    FileChangedError,
    InputRefused,
    LoadedFile,
    LoadLimits,
    inspect_input,
    open_same_file,
)
from sandbox_replay.pipeline import Replay
from sandbox_replay.policy import DERIVATION_FIELDS, PolicyTable, default_table
from sandbox_replay.records import (
    COPIED_LISTS,
    MAX_TEXT,
    DerivedRows,
    ProjectedRows,
    RunRecords,
)
from sandbox_replay.trace import DIGEST_SIZE, DIGESTED_FIELDS, packed_input_digests

# The record's lists the helper makes, in the record's order: the copied lists, and the
# derived rows (made of the request and verdict files) after the verdict rows.
REQUEST_LIST, VERDICT_LIST, DERIVED_LIST = (
    "request_rows",
    "policy_verdict_rows",
    "derived_policy_verdict_rows",
)
HELPED_LISTS = (REQUEST_LIST, VERDICT_LIST, DERIVED_LIST, *(key for key, _, _ in COPIED_LISTS[2:]))
# Not a list of the record: the trace's input digest of each request row, in the file's
# order, 32 bytes each, reported after the request rows they are made beside.
INPUT_DIGESTS = "input_digests"

# Below this many bytes in the copied files together, the lists take well under 50 ms to
# build: not worth a process.
HELPER_MIN_BYTES = 8 * 1024 * 1024
# The depth of the row lists in the record: values of its top-level keys.
_LIST_DEPTH = 1
# The helper reads its files this many bytes at a time.
_READ_SIZE = 4 * 1024 * 1024
# Rows parsed, projected and serialised together: as many as the record's chunks hold.
_BATCH_ROWS = ROWS_PER_CHUNK
# The least this process took to build a list, per row, at 60,000 requests (1.34 µs for the
# rollback rows; the request rows took 3.3, the derived rows 4.9): the record waits for a
# list the helper is making at most this long per row, so waiting never costs more than
# building the list here would.
_OWN_SECONDS_PER_ROW = 1.3e-6
# How often a record waiting for a list looks at the helper's progress on it.
_WAIT_POLL_SECONDS = 0.01


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


# A value ``records._scalar`` keeps as it is, and as the standard library dumps it; any
# other value (a float, an object, a longer text or list) fails its batch's decoding, which
# leaves the list to the record. A field a row lacks stays UNSET, which is not written.
_Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT)]
_Kept = _Text | int | bool | None | Annotated[list[_Text], msgspec.Meta(max_length=64)]


@cache
def _row_codec(names: tuple[str, ...]) -> tuple[msgspec.json.Decoder[Any], msgspec.json.Encoder]:
    """Return the decoder of a batch of rows as ``records.project_rows`` has them, and an encoder.

    A row decodes to a struct of the known fields in ``names`` order, then ``line`` (set
    once the row's line is known); fields it does not know are skipped unread, and a
    ``line`` of its own is overwritten. Encoded, a struct writes its fields in that order
    and leaves out the UNSET ones: the projected row, in the record's compact JSON.
    """
    fields = [(name, _Kept | msgspec.UnsetType, msgspec.UNSET) for name in names]
    row: Any = msgspec.defstruct("CopiedRow", [*fields, ("line", Any, None)], gc=False)
    return msgspec.json.Decoder(list[row]), msgspec.json.Encoder()


def _cut(text: bytes, last: bool, decoder: msgspec.json.Decoder[Any]) -> list[Any]:
    """Decode the rows in ``text``: from a row's ``{`` to the next batch's, or the file's end.

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
        rows: list[Any] = decoder.decode(b"[" + text + b"]")
    except msgspec.ValidationError:
        raise _Unusable("a row holds a value the record does not copy as it is") from None
    except msgspec.DecodeError:
        raise _Unusable("a batch of rows does not parse") from None
    return rows


# Deleting every byte but these leaves where rows may start and lines end.
_ALL_BUT_BRACES_AND_LINES = bytes(b for b in range(256) if b not in b"{\n")


def _nth_brace(text: bytes, n: int) -> int:
    """Return where the ``n``-th ``{`` of ``text`` after its first is (there are more)."""
    at = text.find(b"{")
    for _ in range(n):
        at = text.find(b"{", at + 1)
    return at


class _RowReader:
    """Read a plain list file a piece at a time and give its rows a batch at a time.

    A row starts at each ``{`` after the first (which opens the file's object), and its
    line is one more than the line ends before that ``{``. ``rows`` and ``digest`` say,
    once every batch was read, how many rows there were and the sha256 of every byte.
    """

    def __init__(
        self,
        handle: BinaryIO,
        size: int,
        name: str,
        fields: Sequence[str],
        seen: Callable[[list[Any]], None] | None = None,
    ) -> None:
        self.handle = handle
        self.size = size  # the file's size when opened: it is read no further
        self.name = name
        self.names = tuple(dict.fromkeys(fields))  # as ``ProjectedRows`` keeps them
        self.decoder, self.encoder = _row_codec(self.names)
        self.seen = seen  # shown each batch of decoded rows, before it is serialised
        self.rows = 0
        self.hash = hashlib.sha256()

    @property
    def digest(self) -> str:
        return "sha256:" + self.hash.hexdigest()

    def batches(self) -> Iterator[bytes]:
        """Yield the rows as the record shows them (``project_rows``), a batch at a time.

        Each batch is a compact JSON list, plain ASCII (``atomic.encoded_list_chunks``).
        A batch is every row whose end was read, up to ``_BATCH_ROWS`` of them: the rows
        from the first not given to the last ``{`` read so far.
        """
        buf = b""  # from the "{" of the first row not yet given (or the file's start)
        lines: list[int] = []  # the line of each row whose "{" is in ``buf``
        line = 1  # the line the end of ``buf`` is on
        top = True  # whether the next "{" is the file's own
        left = self.size + 1  # one byte more would mean the file grew
        while piece := self.handle.read(min(_READ_SIZE, left)):
            left -= len(piece)
            if not left:
                raise _Unusable("the file grew while it was read")
            self.hash.update(piece)
            # The line of each "{" of the piece, in C: the line ends between them counted
            # on the piece cut down to its "{" and line ends.
            ends = list(map(len, piece.translate(None, _ALL_BUT_BRACES_AND_LINES).split(b"{")))
            found_lines = list(accumulate(ends[:-1], initial=line))[1:]
            line += sum(ends)
            buf += piece
            if top and found_lines:  # rows start at the "{" after the file's own
                del found_lines[0]
                buf = buf[buf.index(b"{") + 1 :]
                top = False
            lines += found_lines
            while len(lines) > 1:  # every row but the last has ended
                cut = _nth_brace(buf, _BATCH_ROWS) if len(lines) > _BATCH_ROWS else buf.rfind(b"{")
                first = buf.find(b"{")
                rows = _cut(buf[first:cut], False, self.decoder)
                given = min(len(lines) - 1, _BATCH_ROWS)
                yield self._project(rows, lines[:given])
                del lines[:given]
                buf = buf[cut:]
        if lines:
            yield self._project(_cut(buf[buf.find(b"{") :], True, self.decoder), lines)

    def _project(self, rows: list[Any], lines: list[int]) -> bytes:
        if len(rows) != len(lines):
            raise _Unusable("a batch does not hold one row per cut")
        self.rows += len(rows)
        if self.seen is not None:
            self.seen(rows)
        deque(map(setattr, rows, repeat("line"), lines), maxlen=0)
        encoded = self.encoder.encode(rows)
        if not encoded.isascii() or b"\x7f" in encoded:  # the record escapes those
            raise _Unusable("a row holds text the record writes escaped")
        return encoded


class _Progress:
    """How many rows of each list the helper has made, in memory it shares with this process.

    One 8-byte slot per list the helper makes (``HELPED_LISTS``): -1 until the helper
    begins the list, then the rows made so far, set after each batch. Made before the
    fork, the mapping is the same memory in both processes; only the helper writes it.
    A count read here is a hint for how long to wait, never a reason to trust a list.
    """

    _SLOT = struct.Struct("=q")

    def __init__(self) -> None:
        self._places = {key: place * self._SLOT.size for place, key in enumerate(HELPED_LISTS)}
        self._memory = mmap.mmap(-1, self._SLOT.size * len(HELPED_LISTS))  # MAP_SHARED
        for key in HELPED_LISTS:
            self.set(key, -1)

    def set(self, key: str, rows: int) -> None:
        self._SLOT.pack_into(self._memory, self._places[key], rows)

    def get(self, key: str) -> int | None:
        """Return the rows of ``key`` made so far; None if the helper has not begun it."""
        (rows,) = self._SLOT.unpack_from(self._memory, self._places[key])
        return None if rows < 0 else int(rows)

    def close(self) -> None:
        self._memory.close()


class _Spool:
    """The helper's temporary file, written piece by piece, counting what was written.

    ``progress``, if given, is the list's slot in the shared ``_Progress``: ``counting``
    puts in it how many of the list's rows are made, batch after batch.
    """

    def __init__(self, fd: int, progress: Callable[[int], None] | None = None) -> None:
        self.fd = fd
        self.written = 0
        self.progress = progress

    def counting(self, batches: Iterable[bytes], made: Callable[[], int]) -> Iterator[bytes]:
        """Yield ``batches``; once each is taken, tell ``progress`` the rows ``made`` so far."""
        for batch in batches:
            yield batch
            if self.progress is not None:
                self.progress(made())

    def writelines(self, pieces: Iterable[bytes | memoryview]) -> None:
        for piece in pieces:
            view = memoryview(piece).cast("B")
            while view:
                done = os.write(self.fd, view)
                self.written += done
                view = view[done:]


def _serialise(
    root: Path,
    name: str,
    fields: Sequence[str],
    limits: LoadLimits,
    out: _Spool,
    seen: Callable[[list[Any]], None] | None = None,
) -> tuple[str, int]:
    """Write one file's list to ``out``; return the file's sha256 and its rows.

    ``seen``, if given, is shown each batch of the file's rows as decoded.
    """
    try:
        path, info = inspect_input(root, name, limits)
        handle = open_same_file(path, info, limits.max_file_bytes)
    except (InputRefused, FileChangedError):
        raise _Unusable("the file could not be opened") from None
    with handle:
        reader = _RowReader(handle, os.fstat(handle.fileno()).st_size, name, fields, seen)
        batches = out.counting(reader.batches(), lambda: reader.rows)
        out.writelines(encoded_list_chunks(batches, _LIST_DEPTH))
    return reader.digest, reader.rows


def _helper_main(
    root: Path, limits: LoadLimits, spool: int, report: int, progress: _Progress | None = None
) -> None:
    """The helper process: write each list into ``spool`` and report it on ``report``.

    Each list is written after the last one, through the page cache, and not synced:
    the record's process reads it back soon after, from memory, and the file is unlinked,
    so its pages are dropped unwritten when both close it, unless the kernel's writeback
    comes first (30 s by default, or far more dirty memory than 600,000 requests make).
    Syncing each list cost the helper 0.1 s of disk writes at 60,000 requests, and the
    run about as much. Its report line (JSON: the key, then the file's sha256,
    the rows, the offset and the length, or the key alone for a list it could not make)
    follows once every byte of it is in the file. The derived rows follow the verdict
    rows, as in the record; their line names no file (its sha256 is empty). ``progress``,
    if given, is told how far each list is while it is made.
    """
    derived = _DerivedRows(default_table())
    digests = _InputDigests()
    seen = {
        REQUEST_LIST: digests.beside(derived.take_requests),
        VERDICT_LIST: derived.take_verdicts,
    }
    write = partial(_write_list, spool, report, progress)
    for key, name, fields in COPIED_LISTS:
        made = write(key, partial(_serialise, root, name, fields, limits, seen=seen.get(key)))
        if key in seen and not made:  # decoded in part, or not at all: no derived rows
            derived.broken = digests.broken = True
        if key == REQUEST_LIST:
            _write_list(spool, report, None, INPUT_DIGESTS, digests.serialise)
        if key == VERDICT_LIST:
            write(DERIVED_LIST, derived.serialise)


def _write_list(
    spool: int,
    report: int,
    progress: _Progress | None,
    key: str,
    write: Callable[..., tuple[str, int]],
) -> bool:
    """Write one list with ``write(out, ...)`` at the end of ``spool``; report it. Say if made."""
    offset = os.lseek(spool, 0, os.SEEK_END)  # after what any list before left
    out = _Spool(spool, None if progress is None else partial(progress.set, key))
    if progress is not None:
        progress.set(key, 0)  # begun
    entry: list[Any] = [key]
    try:
        sha256, rows = write(out)
    except (_Unusable, OSError):
        pass
    else:
        entry += [sha256, rows, offset, out.written]
    os.write(report, orjson.dumps(entry) + b"\n")
    return len(entry) > 1


class _InputDigests:
    """The trace's input digest of each request row, made as the helper decodes them.

    ``beside`` wraps the request rows' other hook: each batch is also shown to ``take``,
    which packs its digests as the trace makes them (``trace.packed_input_digests``) if
    every action ref, capability and risk class in it is text. A batch with another
    value (or a field missing), or a file decoded in part, leaves them to the trace.
    """

    def __init__(self) -> None:
        self.packed = bytearray()
        self.rows = 0
        self.broken = False

    def beside(self, take: Callable[[list[Any]], None]) -> Callable[[list[Any]], None]:
        def both(rows: list[Any]) -> None:
            take(rows)
            self.take(rows)

        return both

    def take(self, rows: list[Any]) -> None:
        if self.broken:
            return
        columns = [list(map(attrgetter(name), rows)) for name in DIGESTED_FIELDS]
        if not all(set(map(type, values)) <= {str} for values in columns):
            self.broken = True
            return
        self.packed += packed_input_digests(*columns).packed
        self.rows += len(rows)

    def serialise(self, out: _Spool) -> tuple[str, int]:
        """Write the digests to ``out``; their report names no file (the request rows do)."""
        if self.broken:
            raise _Unusable("a request's digested fields are not all text")
        out.writelines([memoryview(self.packed)])
        return "", self.rows


class _DerivedRows:
    """The record's derived rows (``records.DerivedRows``), made from what the helper read.

    ``take_requests`` is shown every batch of the request file, then ``take_verdicts``
    every batch of the verdict file, as the helper decodes them; each keeps only what the
    derived rows show. As ``inputs.load_run`` indexes them, the first row of each string
    request id counts, in the order of those first rows; so does the first verdict row of
    each request id. Requests that agree on what a derivation reads share one.
    """

    def __init__(self, table: PolicyTable) -> None:
        self.table = table
        self.broken = False  # a file it needs was not decoded whole
        self.made = 0  # the rows serialised so far
        self.places: dict[str, int] = {}  # each request id's place among the rows
        self.shown: list[tuple[Any, ...]] = []  # what each row shows of its request
        self.declared: list[tuple[Any, Any] | None] = []  # its verdict row's fields, if any
        self._by_shape: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._by_declared: dict[tuple[str, ...], tuple[Any, Any]] = {}

    def take_requests(self, rows: list[Any]) -> None:
        for row in rows:
            request_id = row.request_id
            if type(request_id) is str and request_id not in self.places:
                self.places[request_id] = len(self.shown)
                self.shown.append(self._shown(row))
                self.declared.append(None)

    def take_verdicts(self, rows: list[Any]) -> None:
        for row in rows:
            place = self.places.get(row.request_id) if type(row.request_id) is str else None
            if place is not None and self.declared[place] is None:
                self.declared[place] = self._declared(_value(row.verdict), _value(row.rule_refs))

    def _declared(self, verdict: Any, rule_refs: Any) -> tuple[Any, Any]:
        """Return ``(verdict, rule_refs)``, one tuple for all rows that declare the same.

        Most rows declare one of a few verdicts and rule lists: shared, 600,000 verdict
        rows hold about 150 MB less. Only texts are shared (True and 1 are equal keys).
        """
        declared = (verdict, rule_refs)
        if type(verdict) is not str or type(rule_refs) is not list:
            return declared
        if not all(type(ref) is str for ref in rule_refs):
            return declared
        return self._by_declared.setdefault((verdict, *rule_refs), declared)

    def _shown(self, row: Any) -> tuple[Any, ...]:
        """Return the row's shown fields and derivation, made once per distinct shape."""
        values = tuple(_value(getattr(row, name)) for name in DERIVATION_FIELDS)
        texts = all(type(v) is str for v in values)  # True and 1 are equal keys, not rows
        shown = self._by_shape.get(values) if texts else None
        if shown is None:
            shown = self._show(values)
            if texts:
                self._by_shape[values] = shown
        return shown

    def _show(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        request = dict(zip(DERIVATION_FIELDS, values, strict=True))
        derivation = self.table.derive(request)
        return (
            request["action_kind"],
            request["requested_capability"],
            request["risk_class"],
            derivation,
        )

    def serialise(self, out: _Spool) -> tuple[str, int]:
        """Write the derived rows to ``out`` as the record holds them; return "" and their count."""
        if self.broken:
            raise _Unusable("the request or verdict file was not decoded whole")
        batches = out.counting(self._batches(), lambda: self.made)
        out.writelines(encoded_list_chunks(batches, _LIST_DEPTH))
        return "", len(self.shown)

    def _batches(self) -> Iterator[bytes]:
        """Yield the rows a batch at a time, serialised; ``made`` counts those yielded."""
        ids = list(self.places)
        for start in range(0, len(ids), _BATCH_ROWS):
            stop = start + _BATCH_ROWS
            rows = list(
                map(
                    _derived_row, ids[start:stop], self.shown[start:stop], self.declared[start:stop]
                )
            )
            encoded = msgspec.json.encode(rows)
            if not encoded.isascii() or b"\x7f" in encoded:
                raise _Unusable("a derived row holds text the record writes escaped")
            self.made += len(rows)
            yield encoded


def _value(value: Any) -> Any:
    """Return a decoded field's value as ``dict.get`` gives it: None where the row lacks it."""
    return None if value is msgspec.UNSET else value


def _derived_row(
    request_id: str, shown: tuple[Any, ...], declared: tuple[Any, Any] | None
) -> dict[str, Any]:
    """Return one derived row as ``records.DerivedRows`` builds it."""
    action_kind, capability, risk_class, derivation = shown
    verdict, rule_refs = declared if declared is not None else (None, None)
    row = None if declared is None else {"verdict": verdict, "rule_refs": rule_refs}
    return {
        "request_id": request_id,
        "action_kind": action_kind,
        "requested_capability": capability,
        "risk_class": risk_class,
        "derived_verdict": derivation.verdict,
        "derived_rule_ref": derivation.rule_ref,
        "fail_closed": derivation.fail_closed,
        "mismatched_fields": list(derivation.mismatched_fields),
        "declared_verdict": verdict,
        "declared_rule_refs": rule_refs,
        "policy_derivation_passed": derivation_passes(derivation, row),
    }


def _run_when_idle() -> None:
    """Let this process run only on CPU time nothing else wants.

    The helper must not slow the replay it works beside: the thread that hashes and
    scans each file while it is parsed needs the second CPU first. With ``SCHED_IDLE``
    the kernel also counts a CPU running only this process as idle when it places a
    waking thread. Measured at 60,000 requests: the load took 1.2 to 1.7 s beside a
    helper at ``nice`` 19, and 1.2 to 1.5 s beside one at ``SCHED_IDLE``, as with none.
    """
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux
        os.nice(19)


def _read(fd: int, offset: int, length: int) -> Iterator[bytes]:
    """Yield the ``length`` bytes of ``fd`` from ``offset``, a piece at a time."""
    end = offset + length
    while offset < end:
        piece = os.pread(fd, min(_READ_SIZE, end - offset), offset)
        if not piece:
            raise OSError(errno.EIO, "the helper's temporary file ends before its list")
        offset += len(piece)
        yield piece


class RowListHelper:
    """A helper process serialising the copied row lists of one run (see the module doc).

    ``used`` counts the lists the record took from it so far.
    """

    def __init__(
        self, pid: int, report: int, spool: int, progress: _Progress | None = None
    ) -> None:
        self._pid: int | None = pid
        self._report = report
        self._spool = spool
        self._progress = progress
        self._ended = False  # the helper closed its end of the report pipe (it exited)
        self._unread = b""
        self._reported: dict[str, Section | None] = {}  # None: it could not make the list
        self._taken: dict[str, Section | None] = {}  # what each list's writing decided
        self._closed = False
        self.used = 0

    @classmethod
    def start(cls, root: Path, limits: LoadLimits, spool_dir: Path) -> RowListHelper | None:
        """Fork a helper for the run in ``root`` and return it; None when not worth one.

        Not worth one: the copied files are small together, this process may use only one
        CPU, or the system cannot fork. The helper's unlinked temporary file is in
        ``spool_dir`` (the record's own folder: it has room for the record).
        """
        if not hasattr(os, "fork") or usable_cpus() < 2:
            return None
        size = 0
        for _, name, _ in COPIED_LISTS:
            with contextlib.suppress(OSError):
                size += (root / name).lstat().st_size
        if size < HELPER_MIN_BYTES:
            return None
        progress = _Progress()
        with tempfile.TemporaryFile(dir=spool_dir) as spool:
            reader = os.dup(spool.fileno())  # read with ``pread``: the offset is the helper's
            read_end, write_end = os.pipe()
            try:
                pid = os.fork()
            except OSError:
                for fd in (reader, read_end, write_end):
                    os.close(fd)
                return None
            if pid == 0:  # the helper: never returns
                status = 1
                try:
                    die_with_parent()
                    _run_when_idle()
                    signal.signal(signal.SIGINT, signal.SIG_DFL)
                    gc.disable()  # it builds no cycle and exits soon
                    os.close(read_end)
                    _helper_main(root, limits, spool.fileno(), write_end, progress)
                    status = 0
                finally:
                    os._exit(status)
        os.close(write_end)
        os.set_blocking(read_end, False)
        return cls(pid, read_end, reader, progress)

    def attach(self, records: RunRecords, replay: Replay) -> RunRecords:
        """Return ``records``, each of its lists to be taken from the helper if usable then.

        Nothing is taken when the forbidden-material scan matched (the record is redacted).
        Write the records before ``close``: a list read after it is built here.
        """
        if replay.scan.matched_texts:
            return records
        run = replay.run
        verbatim = {}
        for key, name, _ in COPIED_LISTS:
            listed = records.result.get(key)
            loaded = run.files.get(name)
            if isinstance(listed, ProjectedRows) and loaded is not None:
                usable = partial(self._copied, key, len(listed), loaded)
                verbatim[key] = self._verbatim(key, listed, usable, records.may_hold_floats)
        derived = records.result.get(DERIVED_LIST)
        if isinstance(derived, DerivedRows) and run.table is default_table():
            usable = partial(self._derived, len(derived), run)
            verbatim[DERIVED_LIST] = self._verbatim(
                DERIVED_LIST, derived, usable, records.may_hold_floats
            )
        return replace(records, verbatim=verbatim)

    def _verbatim(
        self,
        key: str,
        listed: Sequence[Any],
        usable: Callable[[], Section | None],
        may_hold_floats: bool,
    ) -> Verbatim:
        """Return the list ``key`` as the record holds it: the helper's bytes, or built here.

        Whether the helper's are used is decided once, when the list is first written.
        """

        def pieces() -> Iterable[bytes | memoryview]:
            if key not in self._taken:
                self._taken[key] = usable()
                self.used += self._taken[key] is not None
            section = self._taken[key]
            if section is None or self._closed:  # after ``close`` its file may be another's
                return json_chunks(listed, _LIST_DEPTH, may_hold_floats=may_hold_floats)
            return _read(self._spool, section.offset, section.length)

        return Verbatim(pieces)

    def input_digests(self, run: RunInputs) -> bytes | None:
        """Return the trace's input digest of each request row of ``run``, in file order.

        Only if the helper made them from the very bytes the request file was parsed from:
        its request rows are proven so (``_proven``), and it made them beside those rows,
        one per row. Never waited for: None if not reported yet, or not usable.
        """
        requests = run.files.get(ACTION_REQUESTS)
        if self._closed or requests is None:
            return None
        self._read_reports()
        rows = len(requests.rows)
        if self._proven(self._reported.get(REQUEST_LIST), requests, rows) is None:
            return None
        section = self._reported.get(INPUT_DIGESTS)
        if section is None or section.rows != rows or section.length != DIGEST_SIZE * rows:
            return None
        made = os.pread(self._spool, section.length, section.offset)  # one piece: no join
        return made if len(made) == section.length else None

    def _copied(self, key: str, rows: int, loaded: LoadedFile) -> Section | None:
        """Return the helper's section for the copied list ``key`` if it is usable now."""
        if self._may_prove(loaded, rows):
            self._await(key, rows)  # still not reported, it is late: built here
        else:
            self._read_reports()  # it could not be used: nothing to wait for
        return self._proven(self._reported.get(key), loaded, rows)

    def _derived(self, rows: int, run: RunInputs) -> Section | None:
        """Return the helper's derived rows if usable now: made of the very files loaded here.

        They are when both files they are made of are, as copied lists, and the helper
        made as many rows as this process derived (with the packaged table, as it did).
        """
        self._read_reports()
        for key, name, _ in COPIED_LISTS:
            if key in (REQUEST_LIST, VERDICT_LIST):
                loaded = run.files[name]
                if self._proven(self._reported.get(key), loaded, len(loaded.rows)) is None:
                    return None  # and so not worth waiting for
        self._await(DERIVED_LIST, rows)
        section = self._reported.get(DERIVED_LIST)
        return section if section is not None and section.rows == rows else None

    def _await(self, key: str, rows: int) -> None:
        """Take in the helper's reports; wait for list ``key`` if it is worth waiting for.

        It is while the helper is making the list (it has begun it and not reported it)
        and would finish sooner than this process could build its ``rows`` rows, which is
        taken to be ``rows * _OWN_SECONDS_PER_ROW`` seconds: the wait ends by then, when the
        list is reported, when the helper exits, or as soon as the rows it makes meanwhile
        show that at its pace it would finish later. So a wait costs at most about as long
        as building the list here, which happens after it. In a slow run at 60,000
        requests the record waited 0.08 s for the cold-replay rows, which take 0.11 s to
        build here; at 600,000 the helper has been late with its last list, which then
        took this process about a second to build.
        """
        self._read_reports()
        if self._closed or self._progress is None:
            return
        started = time.monotonic()
        deadline = started + rows * _OWN_SECONDS_PER_ROW
        first = self._progress.get(key)
        while key not in self._reported and not self._ended and first is not None:
            made, now = self._progress.get(key) or 0, time.monotonic()
            if now >= deadline:
                return
            if made > first and now + (rows - made) * (now - started) / (made - first) > deadline:
                return  # at the pace it has kept since the wait began, it would be later
            timeout = min(_WAIT_POLL_SECONDS, deadline - now)
            if select.select([self._report], [], [], timeout)[0]:
                self._read_reports()

    @staticmethod
    def _may_prove(loaded: LoadedFile, rows: int) -> bool:
        """Say whether a list of ``loaded`` could be proven: parsed fast, with ``rows`` rows."""
        return (
            loaded.ok
            and loaded.rows_are_flat
            and not loaded.may_hold_floats
            and len(loaded.rows) == rows
        )

    @classmethod
    def _proven(cls, section: Section | None, loaded: LoadedFile, rows: int) -> Section | None:
        """Return ``section`` if it is of the very bytes ``loaded`` was parsed from, and fast."""
        proven = (
            section is not None
            and cls._may_prove(loaded, rows)
            and loaded.sha256 == section.sha256
            and section.rows == rows
        )
        return section if proven else None

    def _read_reports(self) -> None:
        """Take in every report line the helper has written so far, without waiting."""
        while True:
            try:
                chunk = os.read(self._report, 65536)
            except BlockingIOError:
                break
            if not chunk:
                self._ended = True
                break
            self._unread += chunk
        *lines, self._unread = self._unread.split(b"\n")
        for line in lines:
            try:
                key, *rest = orjson.loads(line)
                self._reported[key] = Section(key, *rest) if rest else None
            except (orjson.JSONDecodeError, TypeError, ValueError):
                continue

    def _stop(self) -> None:
        if self._pid is not None:
            with contextlib.suppress(OSError):
                os.kill(self._pid, signal.SIGKILL)
            os.waitpid(self._pid, 0)
            self._pid = None

    def close(self) -> None:
        """Stop the helper if it still runs, and free its temporary file (once: no-op after)."""
        if self._closed:  # its descriptors' numbers may belong to other files by now
            return
        self._stop()
        self._closed = True
        if self._progress is not None:
            self._progress.close()
        for fd in (self._report, self._spool):
            with contextlib.suppress(OSError):
                os.close(fd)
