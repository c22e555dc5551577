"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import orjson


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a synced temp file in the same folder and a rename."""
    write_chunks_atomic(path, (data,))


def dump_json(value: Any, *, may_hold_floats: bool = True) -> bytes:
    """Serialise a record the one way every record is written: 2-space indent, ASCII, newline.

    The bytes are always those of ``json.dumps(value, indent=2, ensure_ascii=True)`` and a
    newline. orjson writes the same bytes faster, except where the two differ:
    non-ASCII text and DEL (escaped by the standard library; checked on orjson's output),
    integers beyond 64 bits and non-string keys (orjson refuses them) and small floats
    (``1e-05`` against ``0.00001``, not visible in the output). So orjson is used only for
    a value the caller knows to hold no float, and its output only when it is plain ASCII.
    """
    if not may_hold_floats:
        try:
            fast = orjson.dumps(
                value,
                default=struct_fields,
                option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE,
            )
        except TypeError:  # orjson.JSONEncodeError included
            fast = b"\x7f"
        if fast.isascii() and b"\x7f" not in fast:
            return fast
    text = json.dumps(value, indent=2, ensure_ascii=True, default=struct_fields)
    return (text + "\n").encode("ascii")


def struct_fields(value: Any) -> dict[str, Any]:
    """Return a typed row as the JSON object it is written as: the fields it holds, in order.

    The serialisers call this for a ``msgspec.Struct``; anything else they cannot write.
    """
    if not isinstance(value, msgspec.Struct):
        raise TypeError(f"{type(value).__name__} is not JSON serialisable")
    fields = zip(value.__struct_fields__, msgspec.structs.astuple(value), strict=True)
    return {name: item for name, item in fields if item is not msgspec.UNSET}


# Items of a long list dumped as one piece.
ITEMS_PER_CHUNK = 1024


def iter_json_chunks(
    value: Any, *, may_hold_floats: bool = True, items_per_chunk: int = ITEMS_PER_CHUNK
) -> Iterator[bytes | memoryview]:
    """Yield ``dump_json(value)`` in pieces, so a large record is never held whole.

    Objects (string keys only) are walked key by key, down to any depth; a list, or any
    other non-text sequence (such as rows projected on demand), is serialised
    ``items_per_chunk`` items at a time; everything else is serialised whole. The layout of
    an indented dump depends only on depth, so each piece is dumped wrapped in as many
    one-item lists as it sits deep, which puts it at its very depth; cutting off those
    wrappers leaves the exact bytes the whole dump holds there. They are cut off by a
    ``memoryview``, not a copy (which would copy the whole record once more), so a piece
    is ``bytes`` or a ``memoryview`` of bytes: a buffer to write, hash or join.
    """
    yield from _chunks(value, 0, may_hold_floats, items_per_chunk)
    yield b"\n"


def list_chunks(
    batches: Iterable[Sequence[Any]], depth: int, *, may_hold_floats: bool = True
) -> Iterator[bytes | memoryview]:
    """Yield, in pieces, the list of every item of ``batches`` as it reads at ``depth``.

    The bytes are those of the whole list dumped there, however its items are batched:
    each batch is dumped on its own and joined to the others as the dump joins items.
    """
    opening = b"["
    for batch in batches:
        if batch:
            yield opening + _indent(depth + 1)
            items = batch if type(batch) is list else list(batch)
            yield _at_depth(items, depth, may_hold_floats, inner=True)
            opening = b","
    yield b"[]" if opening == b"[" else _indent(depth) + b"]"


def struct_list_chunks(
    rows: list[Any], depth: int, may_hold_floats: bool, items_per_chunk: int
) -> Iterator[bytes | memoryview]:
    """Yield, in pieces, a list of typed rows as it reads at ``depth`` of the indented dump.

    msgspec writes a batch of rows in C, each as ``struct_fields`` has it; where a value
    may be a float or the batch holds text the record escapes (which msgspec writes
    otherwise), that batch goes the standard way instead.
    """
    batches = (rows[at : at + items_per_chunk] for at in range(0, len(rows), items_per_chunk))
    if may_hold_floats:
        yield from list_chunks(batches, depth, may_hold_floats=True)
        return
    opening = b"["
    for batch in batches:
        encoded = msgspec.json.encode(batch)
        yield opening + _indent(depth + 1)
        if encoded.isascii() and b"\x7f" not in encoded:
            wrapped = b"[" * depth + encoded + b"]" * depth
            head, tail = _wrapper_lengths(depth, inner=True)
            laid_out = msgspec.json.format(wrapped, indent=2)
            yield memoryview(laid_out)[head : len(laid_out) - tail]
        else:
            yield _at_depth(batch, depth, may_hold_floats, inner=True)
        opening = b","
    yield b"[]" if opening == b"[" else _indent(depth) + b"]"


def _indent(depth: int) -> bytes:
    return b"\n" + b"  " * depth


def _wrapper_lengths(depth: int, inner: bool) -> tuple[int, int]:
    """Return the bytes that ``depth`` one-item list wrappers add before and after a value.

    Each wrapper adds "[" + indent(level) before and indent(level - 1) + "]" after. With
    ``inner``, the value's own brackets and the indents around its items count too.
    """
    head = sum(2 + 2 * level for level in range(1, depth + 1))
    tail = sum(2 + 2 * level for level in range(depth))
    if inner:
        head += 2 + 2 * (depth + 1)
        tail += 2 + 2 * depth
    return head, tail


def _at_depth(value: Any, depth: int, may_hold_floats: bool, inner: bool = False) -> memoryview:
    """Return ``value`` dumped as it reads at ``depth`` of an indented dump (no newline after).

    With ``inner``, ``value`` is a non-empty list and only its items are returned, as they
    read one level deeper (without the brackets and the indents around them).
    """
    wrapped = value
    for _ in range(depth):
        wrapped = [wrapped]
    head, tail = _wrapper_lengths(depth, inner)
    dumped = dump_json(wrapped, may_hold_floats=may_hold_floats)
    return memoryview(dumped)[head : len(dumped) - tail - 1]  # and the dump's newline


def _is_sequence(value: Any) -> bool:
    return isinstance(value, list) or (
        isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray | tuple)
    )


def _chunks(
    value: Any, depth: int, may_hold_floats: bool, items_per_chunk: int
) -> Iterator[bytes | memoryview]:
    if type(value) is dict and value and all(type(k) is str for k in value):
        opening = b"{"
        for key, item in value.items():
            name = json.encoder.encode_basestring_ascii(key).encode("ascii")
            yield opening + _indent(depth + 1) + name + b": "
            opening = b","
            yield from _chunks(item, depth + 1, may_hold_floats, items_per_chunk)
        yield _indent(depth) + b"}"
    elif type(value) is list and value and isinstance(value[0], msgspec.Struct):
        yield from struct_list_chunks(value, depth, may_hold_floats, items_per_chunk)
    elif _is_sequence(value) and (len(value) > items_per_chunk or type(value) is not list):
        batches = (value[at : at + items_per_chunk] for at in range(0, len(value), items_per_chunk))
        yield from list_chunks(batches, depth, may_hold_floats=may_hold_floats)
    else:
        yield _at_depth(value, depth, may_hold_floats)


def write_chunks_atomic(path: Path, chunks: Iterable[bytes | memoryview]) -> None:
    """Write the concatenated ``chunks`` to ``path`` atomically, one piece at a time.

    The pieces go to a temp file in the same folder (``write_chunks``), which is synced
    and then renamed over ``path``; on any error the temp file is removed and ``path`` is
    left as it was. The file gets the mode a plain ``open`` would give it (0666 less the
    umask).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path)
    try:
        try:
            with open(fd, "wb", closefd=False) as out:
                write_chunks(out, chunks)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_chunks(out: BinaryIO, chunks: Iterable[bytes | memoryview]) -> None:
    """Write ``chunks`` to the open file ``out``, and start writing them back as they come.

    Every ``WRITEBACK_STEP`` bytes the kernel is asked to start writing what it holds of
    the file to disk (``_start_writeback``), so the disk works while the next pieces are
    made and the caller's closing sync has little left to wait for.
    """
    written = started = 0
    for chunk in chunks:
        written += out.write(chunk)
        if written - started >= WRITEBACK_STEP:
            out.flush()
            _start_writeback(out.fileno(), started, written - started)
            started = written


# Bytes written between two requests to start writing back (``write_chunks``).
WRITEBACK_STEP = 32 << 20


def _start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing a range of the file to disk, and not wait for it.

    ``POSIX_FADV_DONTNEED`` does that on Linux for the range's dirty pages (and lets go of
    those already clean); where ``posix_fadvise`` is missing the closing sync does it all.
    """
    advise = getattr(os, "posix_fadvise", None)
    if advise is not None:
        advise(fd, offset, length, os.POSIX_FADV_DONTNEED)


def _create_temp(path: Path) -> tuple[int, str]:
    """Create a new temp file beside ``path`` and return its descriptor and path.

    ``tempfile.mkstemp`` creates it 0600 whatever the umask; created here with mode 0666,
    the kernel applies the umask itself, with no process-wide ``os.umask`` call to read it.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    while True:
        tmp = os.path.join(path.parent, f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
