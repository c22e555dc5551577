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
    """Return the bytes of ``json.dumps(value, indent=2, ensure_ascii=True)`` and a newline.

    orjson writes them too, but for non-ASCII text, DEL, big integers, non-string keys and
    small floats: it is used only for a value the caller knows to hold no float, and its
    output only when it is plain ASCII.
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
    """Return a ``msgspec.Struct`` as the JSON object it is written as: its set fields, in order."""
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

    Objects are walked key by key and sequences cut every ``items_per_chunk`` items. An
    indented dump's layout depends only on depth, so each piece is dumped wrapped in as
    many one-item lists as it sits deep, and the wrappers cut off by a ``memoryview``.
    """
    yield from _chunks(value, 0, may_hold_floats, items_per_chunk)
    yield b"\n"


def list_chunks(
    batches: Iterable[Sequence[Any]],
    depth: int,
    *,
    may_hold_floats: bool = True,
    rows: bool = False,
) -> Iterator[bytes | memoryview]:
    """Yield, in pieces, the list of every item of ``batches`` as it reads at ``depth``: the
    bytes of the whole list dumped there, however its items are batched.

    With ``rows`` (typed rows holding no float) msgspec writes each batch, unless it holds
    text the record escapes.
    """
    opening = b"["
    for batch in batches:
        if batch:
            yield opening + _indent(depth + 1)
            items = batch if type(batch) is list else list(batch)
            fast = _rows_at_depth(items, depth) if rows else None
            yield _at_depth(items, depth, may_hold_floats, inner=True) if fast is None else fast
            opening = b","
    yield b"[]" if opening == b"[" else _indent(depth) + b"]"


def _rows_at_depth(rows: list[Any], depth: int) -> memoryview | None:
    """Return typed rows as ``_at_depth`` does, written by msgspec; None if they hold text
    msgspec would not escape as the record does."""
    encoded = msgspec.json.encode(rows)
    if not encoded.isascii() or b"\x7f" in encoded:
        return None
    head, tail = _wrapper_lengths(depth, inner=True)
    laid_out = msgspec.json.format(b"[" * depth + encoded + b"]" * depth, indent=2)
    return memoryview(laid_out)[head : len(laid_out) - tail]


def _indent(depth: int) -> bytes:
    return b"\n" + b"  " * depth


def _wrapper_lengths(depth: int, inner: bool) -> tuple[int, int]:
    """Return the bytes that ``depth`` one-item list wrappers add before and after a value
    (with ``inner``, its own brackets and the indents around its items too)."""
    head = sum(2 + 2 * level for level in range(1, depth + 1))
    tail = sum(2 + 2 * level for level in range(depth))
    if inner:
        head += 2 + 2 * (depth + 1)
        tail += 2 + 2 * depth
    return head, tail


def _at_depth(value: Any, depth: int, may_hold_floats: bool, inner: bool = False) -> memoryview:
    """Return ``value`` dumped as it reads at ``depth`` of an indented dump (no newline);
    with ``inner``, only the items of the non-empty list ``value``."""
    wrapped = value
    for _ in range(depth):
        wrapped = [wrapped]
    head, tail = _wrapper_lengths(depth, inner)
    dumped = dump_json(wrapped, may_hold_floats=may_hold_floats)
    return memoryview(dumped)[head : len(dumped) - tail - 1]  # and the dump's newline


def _is_rows(value: Any) -> bool:
    return type(value) is list and bool(value) and isinstance(value[0], msgspec.Struct)


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
    elif _is_sequence(value) and (
        len(value) > items_per_chunk or type(value) is not list or _is_rows(value)
    ):
        batches = (value[at : at + items_per_chunk] for at in range(0, len(value), items_per_chunk))
        rows = not may_hold_floats and _is_rows(value)
        yield from list_chunks(batches, depth, may_hold_floats=may_hold_floats, rows=rows)
    else:
        yield _at_depth(value, depth, may_hold_floats)


def write_chunks_atomic(path: Path, chunks: Iterable[bytes | memoryview]) -> None:
    """Write the concatenated ``chunks`` to ``path`` through a synced temp file beside it and
    a rename; on any error ``path`` is left as it was."""
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
    """Write ``chunks`` to ``out``, asking the kernel every ``WRITEBACK_STEP`` bytes to start
    writing them to disk, so the caller's closing sync has little left to wait for."""
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
    """Ask the kernel to start writing a range of the file to disk (``POSIX_FADV_DONTNEED``)."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is not None:
        advise(fd, offset, length, os.POSIX_FADV_DONTNEED)


def _create_temp(path: Path) -> tuple[int, str]:
    """Create a new temp file beside ``path``, mode 0666 less the umask (``mkstemp`` gives
    0600); return its descriptor and path."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    while True:
        tmp = os.path.join(path.parent, f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
