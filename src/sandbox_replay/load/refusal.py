"""Why a refused file was refused, and on which line: read only after the strict decode fails.

The standard library's scanner reads the file again one top-level value, and one row of
the named list, at a time, so a fault is placed on the line of the key or row holding
it. Nothing read here is loaded; the key lines it passes keep their places for the
checks that name a refused file's keys (``Fault.key_lines``).
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any, NamedTuple

from sandbox_replay.load.files import LoadLimits
from sandbox_replay.load.proofs import Layout, depth_exceeded_line, has_long_string, line_at
from sandbox_replay.model import codes

_WS = re.compile(r"[ \t\n\r]*")
# A \uD800-\uDFFF escape not half of a high+low pair decodes to a lone surrogate: legal
# JSON grammar, but not Unicode, and it breaks every UTF-8 writer downstream.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class Fault(NamedTuple):
    """What is wrong with a file: its code, message and line, and the top-level keys' lines
    read before the fault."""

    code: str
    message: str
    line: int | None
    key_lines: dict[str, int]


class _Fault(Exception):
    def __init__(self, code: str, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.line = code, message, line


def quote(text: str, limit: int = 48) -> str:
    """Return a short, printable rendering of a key name for a message."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _pairs_to_dict(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Fault(codes.INPUT_DUPLICATE_KEY, f"duplicate key {quote(key)}")
            seen.add(key)
    return obj


def _refuse_constant(name: str) -> Any:
    raise _Fault(codes.INPUT_NON_FINITE_NUMBER, f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Fault(codes.INPUT_NON_FINITE_NUMBER, "number overflows to infinity")
    return value


_DECODER = json.JSONDecoder(
    object_pairs_hook=_pairs_to_dict, parse_constant=_refuse_constant, parse_float=_finite_float
)


def find_fault(raw: bytes, rows_key: str | None, limits: LoadLimits) -> Fault:
    """Word why the strict decode refused ``raw``: the first fault in file order."""
    lines: dict[str, int] = {}
    rows_at: list[int] = []
    try:
        doc = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return Fault(codes.INPUT_NOT_UTF8, f"invalid UTF-8 at byte {exc.start}", line, lines)
    if Layout.of(raw).depth > limits.max_depth:
        message = f"nesting is deeper than the limit of {limits.max_depth} (max_depth)"
        at = depth_exceeded_line(raw, limits.max_depth)
        return Fault(codes.INPUT_LIMIT_EXCEEDED, message, at, lines)
    try:
        data = _read_top(doc, rows_key, limits, lines, rows_at)
        _check_value(raw, data, rows_key, lines, rows_at)
    except json.JSONDecodeError as exc:
        return Fault(codes.INPUT_JSON_INVALID, exc.msg, exc.lineno, lines)
    except _Fault as exc:
        return Fault(exc.code, exc.message, exc.line, lines)
    except RecursionError:  # only with a max_depth above what the interpreter's stack allows
        message = "nesting is deeper than the parser allows"
        return Fault(codes.INPUT_LIMIT_EXCEEDED, message, None, lines)
    # Read this way nothing is wrong: only the strict decode refused it.
    return Fault(codes.INPUT_JSON_INVALID, "not valid JSON as the format reads it", None, lines)


def _check_value(
    raw: bytes,
    data: dict[str, Any] | str,
    rows_key: str | None,
    lines: dict[str, int],
    rows_at: list[int],
) -> None:
    """Raise the fault of a value read whole: its type, a lone surrogate, the rows' types."""
    if isinstance(data, str):
        raise _Fault(codes.INPUT_TOP_LEVEL_NOT_OBJECT, f"top-level value is {data}", 1)
    match = _SURROGATE_ESCAPE.search(raw)
    if match is not None and _holds_lone_surrogate(data):
        message = "a string escapes a lone UTF-16 surrogate, which is not valid Unicode"
        raise _Fault(codes.INPUT_NOT_UTF8, message, raw.count(b"\n", 0, match.start()) + 1)
    if rows_key is None:
        return
    rows = data.get(rows_key)
    if not isinstance(rows, list):
        what = "missing" if rows is None else f"a {_json_type(rows)}, not a list"
        message = f"top-level key {rows_key!r} is {what}"
        raise _Fault(codes.INPUT_ROWS_NOT_LIST, message, lines.get(rows_key, 1))
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            message = f"row {index} of {rows_key!r} is a {_json_type(row)}, not an object"
            line = rows_at[index] if index < len(rows_at) else None
            raise _Fault(codes.INPUT_ROW_NOT_OBJECT, message, line)


def _read_top(
    doc: str, rows_key: str | None, limits: LoadLimits, lines: dict[str, int], rows_at: list[int]
) -> dict[str, Any] | str:
    """Read the document; return the object, or a string naming the wrong top-level type."""
    pos = _skip(doc, 0)
    if pos >= len(doc):
        raise json.JSONDecodeError("empty file", doc, pos)
    if doc[pos] != "{":
        value, end = _value(doc, pos, limits)
        _expect_end(doc, end)
        return f"a {_json_type(value)}, not an object"
    result: dict[str, Any] = {}
    pos = _skip(doc, pos + 1)
    if doc.startswith("}", pos):
        _expect_end(doc, pos + 1)
        return result
    line, counted_to = 1, 0  # each key's line counted on from the one before
    while True:
        if not doc.startswith('"', pos):
            raise json.JSONDecodeError(
                "Expecting property name enclosed in double quotes", doc, pos
            )
        key_pos = pos
        key, pos = scanstring(doc, pos + 1, True)
        if len(key) > limits.max_string_chars:
            raise _too_long("a key", limits, line_at(doc, key_pos))
        pos = _skip(doc, pos)
        if not doc.startswith(":", pos):
            raise json.JSONDecodeError("Expecting ':' delimiter", doc, pos)
        pos = _skip(doc, pos + 1)
        if key in result:
            raise _Fault(
                codes.INPUT_DUPLICATE_KEY, f"duplicate key {quote(key)}", line_at(doc, pos)
            )
        line += doc.count("\n", counted_to, key_pos)
        counted_to = key_pos
        lines[key] = line
        if key == rows_key and doc.startswith("[", pos):
            result[key], pos = _read_rows(doc, pos, limits, rows_at)
        else:
            result[key], pos = _value(doc, pos, limits)
        pos = _skip(doc, pos)
        if doc.startswith(",", pos):
            pos = _skip(doc, pos + 1)
            continue
        if doc.startswith("}", pos):
            _expect_end(doc, pos + 1)
            return result
        raise json.JSONDecodeError("Expecting ',' delimiter", doc, pos)


def _read_rows(doc: str, pos: int, limits: LoadLimits, rows_at: list[int]) -> tuple[list[Any], int]:
    """Read the rows' list at ``pos`` a row at a time, noting the line each row opens on."""
    rows: list[Any] = []
    line, counted_to = 1, 0
    pos = _skip(doc, pos + 1)
    if doc.startswith("]", pos):
        return rows, pos + 1
    while True:
        line += doc.count("\n", counted_to, pos)
        counted_to = pos
        if len(rows) >= limits.max_rows:
            message = f"more than the limit of {limits.max_rows} rows (max_rows)"
            raise _Fault(codes.INPUT_LIMIT_EXCEEDED, message, line)
        value, pos = _value(doc, pos, limits, line)
        rows.append(value)
        rows_at.append(line)
        pos = _skip(doc, pos)
        if doc.startswith(",", pos):
            pos = _skip(doc, pos + 1)
            continue
        if doc.startswith("]", pos):
            return rows, pos + 1
        raise json.JSONDecodeError("Expecting ',' delimiter", doc, pos)


def _value(doc: str, pos: int, limits: LoadLimits, line: int | None = None) -> tuple[Any, int]:
    """Read one value at ``pos``; a fault in it is placed on its first line."""
    try:
        value, end = _DECODER.raw_decode(doc, pos)
    except _Fault as exc:
        raise _Fault(exc.code, exc.message, line or line_at(doc, pos)) from None
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise
        # int() digit limits and similar conversions surface as plain ValueError.
        message = "unparseable number"
        raise _Fault(codes.INPUT_JSON_INVALID, message, line or line_at(doc, pos)) from None
    if end - pos > limits.max_string_chars and has_long_string(value, limits.max_string_chars):
        raise _too_long("a string", limits, line or line_at(doc, pos))
    return value, end


def _too_long(what: str, limits: LoadLimits, line: int) -> _Fault:
    limit = limits.max_string_chars
    message = f"{what} is longer than the limit of {limit} characters (max_string_chars)"
    return _Fault(codes.INPUT_LIMIT_EXCEEDED, message, line)


def _skip(doc: str, pos: int) -> int:
    return _WS.match(doc, pos).end()  # type: ignore[union-attr]


def _expect_end(doc: str, pos: int) -> None:
    pos = _skip(doc, pos)
    if pos != len(doc):
        raise json.JSONDecodeError("Extra data", doc, pos)


_JSON_TYPES = {
    type(None): "null",
    bool: "boolean",
    int: "number",
    float: "number",
    str: "string",
    list: "list",
    dict: "object",
}


def _json_type(value: object) -> str:
    return _JSON_TYPES[type(value)]


def _holds_lone_surrogate(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
