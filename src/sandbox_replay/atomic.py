"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a synced temp file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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


def write_json_atomic(path: Path, value: Any) -> bytes:
    """Write a JSON record atomically and return the bytes written."""
    data = dump_json(value)
    write_bytes_atomic(path, data)
    return data
