"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a synced temp file in the same folder and a rename."""
    write_chunks_atomic(path, (data,))


def dump_json(value: Any, *, may_hold_floats: bool = True) -> bytes:
    """Serialise a record the one way every record is written: 2-space indent, ASCII, newline.

    The bytes are always those of ``json.dumps(value, indent=2, ensure_ascii=True)`` and a
    newline. orjson writes the same bytes many times faster, except where the two differ:
    non-ASCII text and DEL (escaped by the standard library; checked on orjson's output),
    integers beyond 64 bits and non-string keys (orjson refuses them) and small floats
    (``1e-05`` against ``0.00001``, not visible in the output). So orjson is used only for
    a value the caller knows to hold no float, and its output only when it is plain ASCII.
    """
    if not may_hold_floats:
        try:
            fast = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
        except TypeError:  # orjson.JSONEncodeError included
            fast = b"\x7f"
        if fast.isascii() and b"\x7f" not in fast:
            return fast
    return (json.dumps(value, indent=2, ensure_ascii=True) + "\n").encode("ascii")


def iter_json_chunks(
    value: Any, *, may_hold_floats: bool = True, items_per_chunk: int = 4096
) -> Iterator[bytes]:
    """Yield ``dump_json(value)`` in pieces, so a large record is never held whole.

    Each value of a top-level object is serialised on its own (a long list
    ``items_per_chunk`` items at a time) and shifted one level in: the layout of an
    indented dump depends only on depth, so the pieces join to the very same bytes.
    """
    if not isinstance(value, dict) or not value or not all(type(k) is str for k in value):
        yield dump_json(value, may_hold_floats=may_hold_floats)
        return
    yield b"{"
    for position, (key, item) in enumerate(value.items()):
        name = json.encoder.encode_basestring_ascii(key).encode("ascii")
        yield (b"\n  " if position == 0 else b",\n  ") + name + b": "
        if isinstance(item, list) and len(item) > items_per_chunk:
            for start in range(0, len(item), items_per_chunk):
                piece = dump_json(
                    item[start : start + items_per_chunk], may_hold_floats=may_hold_floats
                )
                # piece is "[\n  <items>\n]\n"; its items go one level deeper.
                yield (b"[\n    " if start == 0 else b",\n    ") + piece[4:-3].replace(
                    b"\n", b"\n  "
                )
            yield b"\n  ]"
        else:
            yield dump_json(item, may_hold_floats=may_hold_floats)[:-1].replace(b"\n", b"\n  ")
    yield b"\n}\n"


def write_chunks_atomic(path: Path, chunks: Iterable[bytes]) -> None:
    """Write the concatenated ``chunks`` to ``path`` atomically, one piece at a time.

    The pieces go to a temp file in the same folder, which is synced and then renamed over
    ``path``; on any error the temp file is removed and ``path`` is left as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, value: Any) -> bytes:
    """Write a JSON record atomically and return the bytes written."""
    data = dump_json(value)
    write_bytes_atomic(path, data)
    return data
