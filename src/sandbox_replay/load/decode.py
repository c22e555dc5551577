"""Strict decoding of input files into plain rows, with the line each row starts on.

Every file is decoded one way: by msgspec, into dicts and lists, with what the JSON
grammar leaves open proved on its bytes and its decoded value (``parse_input``). Strictness
beyond the grammar: duplicate keys, NaN/Infinity and numbers out of range are errors, as
are invalid UTF-8, lone surrogate escapes and a byte-order mark. A refused file is read
again key by key and row by row by the standard library's scanner, only to word the
finding and name the line of the row or key at fault (``_describe_refusal``).

Limits (``LoadLimits``) are checked before the costly step they guard: the file size
before reading, the object count and the nesting depth on the raw bytes before decoding,
and string length only where some string may be longer than the limit (a file whose every
stretch of that length holds a line end or quote holds none).

The rows' start lines and the top-level keys' lines are read off the bytes: the braces and
line ends outside strings (``Layout.row_lines``), each key's spelling where it is asked for
(``_KeyLines``).
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate, chain
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from sandbox_replay.load.files import (
    FileChangedError,
    InputRefused,
    LoadLimits,
    inspect_input,
    read_same_file,
    sha256_of,
)
from sandbox_replay.model import codes
from sandbox_replay.model.census import ValueShape, census
from sandbox_replay.model.findings import Finding
from sandbox_replay.model.rows import KINDS, UNSET, InputRow

_WS = re.compile(r"[ \t\n\r]*")


@dataclass
class LoadedFile:
    """One input file: its top-level object, its rows (for list files) and their lines.

    ``data`` is None when the file could not be loaded; ``findings`` then says why.
    """

    name: str
    size: int = 0
    sha256: str = ""
    data: dict[str, Any] | None = None
    rows: list[Any] = field(default_factory=list)
    row_lines: list[int] = field(default_factory=list)
    key_lines: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    # False only when parsing proved the file holds no float (records then serialise fast).
    may_hold_floats: bool = True
    # What the rows' values hold, where parsing measured it (``census``): enough for the
    # records to tell that the values stand in the result as they are, or else None.
    row_shape: ValueShape | None = None
    # Every key a row can hold, where parsing proved that no row nests an object (so keys
    # occur only at row level): the keys the rows hold, or where the file was decoded into
    # typed rows the fields of their kind; None where it did not.
    row_keys: frozenset[str] | None = None
    # Each row (or the object) that carries a forbidden key: its subject, line and the keys.
    forbidden_keys: list[tuple[str, int | None, list[str]]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.data is not None

    @property
    def rows_are_flat(self) -> bool:
        """Whether parsing proved that no row nests an object (``row_keys`` are then known)."""
        return self.row_keys is not None

    def line_of(self, index: int) -> int | None:
        return self.row_lines[index] if 0 <= index < len(self.row_lines) else None

    def key_line(self, *keys: str) -> int:
        """Return the line of the first top-level key present, else 1."""
        for key in keys:
            if key in self.key_lines:
                return self.key_lines[key]
        return 1


class _Refused(Exception):
    """A value the strict parser refuses; carries the code and a safe message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _pairs_to_dict(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(codes.INPUT_DUPLICATE_KEY, f"duplicate key {_quote(key)}")
            seen.add(key)
    return obj


def _refuse_constant(name: str) -> Any:
    raise _Refused(codes.INPUT_NON_FINITE_NUMBER, f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Refused(codes.INPUT_NON_FINITE_NUMBER, "number overflows to infinity")
    return value


_DECODER = json.JSONDecoder(
    object_pairs_hook=_pairs_to_dict,
    parse_constant=_refuse_constant,
    parse_float=_finite_float,
)


def _quote(text: str, limit: int = 48) -> str:
    """Return a short, printable rendering of a key name for a message."""
    shown = text if len(text) <= limit else text[:limit] + "..."
    return repr(shown)


def _line_at(doc: str, pos: int) -> int:
    return doc.count("\n", 0, pos) + 1


def read_input(
    root: Path, name: str, limits: LoadLimits, *, digest: bool = True
) -> tuple[bytes | None, LoadedFile]:
    """Read one input file's bytes and (unless not ``digest``) its digest, refusing files
    that escape ``root`` or break limits."""
    loaded = LoadedFile(name=name)
    try:
        resolved, info = inspect_input(root, name, limits)
        try:
            raw = read_same_file(resolved, info, limits.max_file_bytes)
        except FileChangedError as exc:
            raise InputRefused(
                codes.INPUT_FILE_UNREADABLE, f"{name} {exc}; it was not used"
            ) from None
        except OSError as exc:
            raise InputRefused(
                codes.INPUT_FILE_UNREADABLE, f"{name} cannot be read ({exc.strerror})"
            ) from None
    except InputRefused as refused:
        loaded.findings.append(
            Finding(refused.code, refused.message, "strict_load_floor", name, "input_file", name)
        )
        return None, loaded
    loaded.size = len(raw)
    if digest:
        loaded.sha256 = sha256_of(raw)
    return raw, loaded


def parse_input(
    raw: bytes,
    loaded: LoadedFile,
    rows_key: str | None,
    limits: LoadLimits,
    kind: type[InputRow] | None = None,
) -> LoadedFile:
    """Parse ``raw`` strictly into ``loaded``; on refusal, record a finding and leave data None.

    With ``rows_key`` the top-level object must hold a list under that key, and each of its
    elements must be an object; their start lines are kept in ``row_lines``.

    One way in: msgspec decodes the file, refusing invalid UTF-8, NaN and Infinity, numbers
    out of range and lone surrogate escapes, and what the JSON grammar leaves open is proved
    on the bytes and the decoded value: the nesting depth (``Layout.depth``), that no key
    was dropped as a duplicate (the strings spelled in the text, ``Layout.strings``, are as
    many as the decoded value holds, keys included: ``census``), string lengths (only where
    one may exceed the limit), the file's shape and the row count. A file refused at any
    step is read again key by key and row by row (``_describe_refusal``) to word the
    finding and name its line.

    With ``kind``, a list file as exporters write it is decoded straight into rows of that
    kind (``_decode_typed_rows``); any other is decoded as any JSON, and its rows stay
    dicts until ``type_rows``.
    """
    if raw.startswith(b"\xef\xbb\xbf"):
        return _fail(loaded, codes.INPUT_NOT_UTF8, "starts with a byte-order mark", 1)
    layout = Layout.of(raw)
    too_many = limits.max_rows + 1  # the rows and the top object
    if rows_key is not None and layout.objects > too_many:
        # Rows past the limit, or objects nested in rows (a finding of their own): the file
        # fails closed either way, refused before anything is decoded. Where no string
        # holds a brace, the line is that of the first object past the limit.
        braces = raw.count(b"{")
        line = _line_of_nth(raw, b"{", too_many + 1) if layout.objects == braces else None
        return _fail(
            loaded,
            codes.INPUT_LIMIT_EXCEEDED,
            f"holds more objects than the limit of {limits.max_rows} rows (max_rows) allows; "
            "it was not decoded",
            line,
        )
    if layout.depth > limits.max_depth:
        return _describe_refusal(raw, loaded, rows_key, limits)
    if (
        kind is not None
        and rows_key is not None
        and _decode_typed_rows(raw, layout, loaded, rows_key, kind, limits)
    ):
        return loaded
    data = _decode(raw, limits)
    rows: list[Any] | None = []
    if data is not None and rows_key is not None:
        found = data.get(rows_key)
        if isinstance(found, list) and len(found) <= limits.max_rows:
            rows = found if set(map(type, found)) <= {dict} else None
        else:
            rows = None
    # Each object but the top one a row: no row nests one, every key stands in a row.
    flat = rows is not None and layout.objects == 1 + len(rows)
    if data is None or rows is None:
        return _describe_refusal(raw, loaded, rows_key, limits)
    # The rows' values stand three levels down: the top object, its list, each row.
    tally = census([data], shape_at=3)
    if tally.strings != layout.strings:
        return _describe_refusal(raw, loaded, rows_key, limits)
    loaded.data = data
    if rows_key is None:  # an object file's keys' lines, each found when it is asked for
        loaded.key_lines = _KeyLines(raw)
    else:  # a list file's few top-level keys, found now: its bytes are not kept
        lines = _KeyLines(raw)
        loaded.key_lines = {key: lines[key] for key in data if key in lines}
    loaded.may_hold_floats = tally.floats
    if rows_key is not None:
        loaded.row_shape = tally.shape
        loaded.rows = rows
        ahead = list(data.values())[: list(data).index(rows_key)]
        loaded.row_lines = layout.row_lines(len(rows), sum(type(v) in _CONTAINERS for v in ahead))
        if flat and len(data) == 1:  # keys stand only at row level
            loaded.row_keys = frozenset(set().union(*rows))
        _flag_unchecked(loaded, data, rows_key, flat)
    return loaded


class Layout(NamedTuple):
    """What a file's bytes spell outside its strings: its brackets, braces and line ends, in
    order (``text``), and how many strings it spells, keys included (``strings``)."""

    text: bytes
    strings: int

    @classmethod
    def of(cls, raw: bytes) -> Layout:
        return cls(*_outside_strings(raw, b"{}[]\n"))

    @property
    def depth(self) -> int:
        """The deepest nesting of arrays and objects."""
        brackets = self.text.translate(None, b"\n")
        if not brackets:
            return 0
        return max(accumulate(array("b", brackets.translate(_BRACKET_STEPS))))

    @property
    def objects(self) -> int:
        return self.text.count(b"{")

    def row_lines(self, count: int, container: int) -> list[int]:
        """Return the line each of ``count`` rows opens on: the ``{`` of each object in the
        list that is the top object's ``container``-th array or object value (0 for the
        first).

        Where every object is the top one or a row (rows nest none, as exporters write
        them), the rows' braces are the second on, and the line ends between braces count
        the lines. Otherwise (a row nesting an object, or objects under another key, are
        findings of their own) the walk counts the top object's array and object values as
        they open and takes the objects directly inside that list.
        """
        text = self.text
        if text.count(b"{") == count + 1:
            between = text.translate(None, b"}[]").split(b"{")
            return list(accumulate(map(len, between[1:-1]), initial=len(between[0]) + 1))[1:]
        lines, line, depth, containers, inside = [], 1, 0, -1, False
        for byte in text:
            if byte == 10:  # a line end
                line += 1
            elif byte in b"{[":
                depth += 1
                if depth == 2:  # a value of the top object opens: is it that list?
                    containers += 1
                    inside = containers == container and byte == 91
                elif inside and depth == 3 and byte == 123:  # an object in that list: a row
                    lines.append(line)
            else:
                depth -= 1
        return lines


def _strings_may_exceed(raw: bytes, limit: int) -> bool:
    """Return False where no string in ``raw`` can be longer than ``limit`` characters.

    Such a string spans more than ``limit`` bytes, and a run that long covers one of the
    file's aligned chunks of ``(limit + 2) // 2`` bytes whole. No string holds a raw line
    end, nor (where no backslash escapes one) a ``"``: if every chunk holds one of those,
    no string is that long.
    """
    if len(raw) <= limit:
        return False
    size = (limit + 2) // 2
    if size < _MIN_MARK_CHUNK:
        return True
    marks = [b"\n"] if b"\\" in raw else [b"\n", b'"']
    return any(
        all(raw.find(mark, start, start + size) == -1 for mark in marks)
        for start in range(0, len(raw) - size + 1, size)
    )


# Below this chunk size, looking for marks in every chunk costs more than measuring.
_MIN_MARK_CHUNK = 4096


def _outside_strings(raw: bytes, keep: bytes) -> tuple[bytes, int]:
    """Return the bytes of ``keep`` that stand outside strings in ``raw``, in order, and how
    many strings ``raw`` spells.

    Whole-buffer C passes, no loop per character: escaped backslashes and quotes are
    dropped, so every quote left delimits a string (two to each); then every byte but
    quotes and ``keep``. A string holding none of ``keep`` is then ``""``. Where every
    string is (each quote stands in a ``""``: the first quote opens a string, so the one
    after it closes it, and so on), only the quotes are dropped. Otherwise the ``""`` are
    dropped (a closing quote next to the following opening one only merges two strings
    with nothing outside between them), and the strings left are cut out by splitting on
    their quotes. ``keep`` must not hold a quote or a backslash.
    """
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    reduced = raw.translate(None, bytes(b for b in range(256) if b not in keep + b'"'))
    strings = reduced.count(b'"') // 2
    if reduced.count(b'""') == strings:
        return reduced.translate(None, b'"'), strings
    reduced = reduced.replace(b'""', b"")
    if b'"' in reduced:
        reduced = b"".join(reduced.split(b'"')[::2])
    return reduced, strings


def _fail(loaded: LoadedFile, code: str, message: str, line: int | None) -> LoadedFile:
    """Record why a file is refused, and leave it unloaded."""
    name = loaded.name
    where = f"{name}:{line}" if line else name
    loaded.findings.append(
        Finding(code, f"{where}: {message}", "strict_load_floor", name, "input_file", name, line)
    )
    loaded.data, loaded.rows, loaded.row_lines = None, [], []
    return loaded


def _decode(raw: bytes, limits: LoadLimits) -> dict[str, Any] | None:
    """Decode ``raw`` into its top-level object.

    None where the file breaks a rule of the format (the caller has checked the nesting
    depth): anything msgspec refuses, a top-level value that is not an object, a string or
    key longer than ``max_string_chars``. (A key given twice in one object, kept once,
    ``parse_input`` tells by counting.)
    """
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError:  # a number out of range included
        return None
    if type(data) is not dict:
        return None
    if _strings_may_exceed(raw, limits.max_string_chars) and _has_long_string(
        data, limits.max_string_chars
    ):
        return None
    return data


def _decode_typed_rows(
    raw: bytes,
    layout: Layout,
    loaded: LoadedFile,
    rows_key: str,
    kind: type[InputRow],
    limits: LoadLimits,
) -> bool:
    """Decode a list file as exporters write it straight into rows of ``kind``; say whether
    it was.

    Such a file is one object holding one list of flat rows, each key a field the format
    names for ``kind``. msgspec decodes it into typed rows (no dict per row), refusing at
    once a key the kind does not name; a typed row keeps only the last of a repeated key,
    so the strings spelled in the text (``Layout.strings``) must be exactly the keys and
    string values the rows hold: no key was given twice. The caller has proved the depth
    and object count. False, with ``loaded`` untouched, for any other file: ``parse_input``
    then decodes it as any JSON. A JSON key ``line`` sets the field the row's line is kept
    in and is not counted as held, so such a file goes that way too.
    """
    try:
        data = _TYPED_DECODERS[kind].decode(raw)
    except msgspec.DecodeError:  # a validation error included
        return False
    rows = data.get(rows_key)
    if len(data) != 1 or rows is None or len(rows) != layout.objects - 1:
        return False
    values = list(chain.from_iterable(map(msgspec.structs.astuple, rows)))
    # Every row holds its ``line`` (None until set), counted out with the fields not held.
    keys = 1 + len(values) - values.count(UNSET) - len(rows)
    tally = census(values)
    if layout.strings != keys + tally.strings:
        return False
    if _strings_may_exceed(raw, limits.max_string_chars) and _has_long_string(
        values, limits.max_string_chars
    ):
        return False
    lines = layout.row_lines(len(rows), 0)
    for row, line in zip(rows, lines, strict=True):
        row.line = line
    loaded.data = {rows_key: rows}
    loaded.key_lines = {rows_key: _KeyLines(raw)[rows_key]}
    loaded.may_hold_floats = tally.floats
    loaded.row_shape = tally.shape
    loaded.rows = rows
    loaded.row_lines = lines
    loaded.row_keys = frozenset(kind.__struct_fields__) - {"line"}
    return True


def type_rows(loaded: LoadedFile, kind: type[InputRow]) -> None:
    """Replace a loaded list file's decoded rows with rows of ``kind``, each with its line.

    The top-level object lets go of the decoded rows, so their dicts are freed now. Keys
    the format does not name for ``kind`` are dropped from them first (a typed row refuses
    them; nothing reads them). Rows that ``parse_input`` decoded typed already are left as
    they are.
    """
    if set(map(type, loaded.rows)) <= {kind}:
        return
    if loaded.data is not None:
        loaded.data = {key: value for key, value in loaded.data.items() if value is not loaded.rows}
    held = loaded.row_keys if loaded.row_keys is not None else set().union(*loaded.rows)
    for key in held - set(kind.__struct_fields__):
        for row in loaded.rows:
            row.pop(key, None)
    rows: list[InputRow] = msgspec.convert(loaded.rows, list[kind])  # type: ignore[valid-type]
    for row, line in zip(rows, loaded.row_lines, strict=True):
        row.line = line
    loaded.rows = rows


_TYPED_DECODERS: dict[type[InputRow], msgspec.json.Decoder[dict[str, list[InputRow]]]] = {
    kind: msgspec.json.Decoder(dict[str, list[kind]])  # type: ignore[valid-type]
    for kind in KINDS
}


def _describe_refusal(
    raw: bytes, loaded: LoadedFile, rows_key: str | None, limits: LoadLimits
) -> LoadedFile:
    """Word why ``raw`` was refused, reading it key by key and row by row to name the line."""
    read_key_by_key(raw, loaded, rows_key, limits)
    if loaded.ok:  # read this way, nothing is wrong with the file: only msgspec refused it
        return _fail(
            loaded, codes.INPUT_JSON_INVALID, "not valid JSON as the format reads it", None
        )
    return loaded


def read_key_by_key(
    raw: bytes, loaded: LoadedFile, rows_key: str | None, limits: LoadLimits
) -> LoadedFile:
    """Read ``raw`` as ``parse_input`` does, but one top-level value and one row at a time.

    The standard library's scanner reads each top-level value, and each row of the named
    list, on its own (``_parse_top_object``), so an error is placed on the line of the row
    or key that holds it: ``parse_input`` reads a file it refuses this way to word the
    finding. What it loads, ``parse_input`` loads (the tests hold the two to each other).
    """
    try:
        doc = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return _fail(loaded, codes.INPUT_NOT_UTF8, f"invalid UTF-8 at byte {exc.start}", line)
    if Layout.of(raw).depth > limits.max_depth:
        return _fail(
            loaded,
            codes.INPUT_LIMIT_EXCEEDED,
            f"nesting is deeper than the limit of {limits.max_depth} (max_depth)",
            _depth_exceeded_line(raw, limits.max_depth),
        )
    try:
        data = _parse_top_object(doc, rows_key, loaded, limits)
    except json.JSONDecodeError as exc:
        return _fail(loaded, codes.INPUT_JSON_INVALID, exc.msg, exc.lineno)
    except _RowError as exc:
        return _fail(loaded, exc.code, exc.message, exc.line)
    except RecursionError:
        # Only reachable with a max_depth above what the interpreter's stack allows.
        return _fail(
            loaded, codes.INPUT_LIMIT_EXCEEDED, "nesting is deeper than the parser allows", None
        )
    if isinstance(data, str):
        return _fail(loaded, codes.INPUT_TOP_LEVEL_NOT_OBJECT, f"top-level value is {data}", 1)
    surrogate_line = _lone_surrogate_line(raw, data)
    if surrogate_line is not None:
        return _fail(
            loaded,
            codes.INPUT_NOT_UTF8,
            "a string escapes a lone UTF-16 surrogate, which is not valid Unicode",
            surrogate_line,
        )
    if rows_key is not None:
        rows = data.get(rows_key)
        if not isinstance(rows, list):
            what = "missing" if rows is None else f"a {_json_type(rows)}, not a list"
            line = loaded.key_line(rows_key)
            return _fail(
                loaded, codes.INPUT_ROWS_NOT_LIST, f"top-level key {rows_key!r} is {what}", line
            )
        for index, row in enumerate(rows):
            if not isinstance(row, dict):
                return _fail(
                    loaded,
                    codes.INPUT_ROW_NOT_OBJECT,
                    f"row {index} of {rows_key!r} is a {_json_type(row)}, not an object",
                    loaded.line_of(index),
                )
    loaded.data = data
    loaded.may_hold_floats = _holds(data, float)
    if rows_key is not None:
        loaded.rows = data[rows_key]
        _flag_unchecked(loaded, data, rows_key, flat=False)
    return loaded


def _flag_unchecked(loaded: LoadedFile, data: dict[str, Any], rows_key: str, flat: bool) -> None:
    """Report what of a list file no layer would check: other top-level keys, nested objects.

    A list file holds exactly its list (as the original implementation's do); rows
    under a second key (``side_effect_receipts_2``) or an object inside a row are never
    read by the layers, so they are findings, not ignored. The file stays loaded: its
    list is still checked. ``flat`` says the file holds no object but the top one and
    the rows (so no row needs looking into).
    """
    name = loaded.name

    def add(code: str, message: str, line: int | None) -> None:
        where = f"{name}:{line}" if line else name
        loaded.findings.append(
            Finding(
                code, f"{where}: {message}", "strict_load_floor", name, "input_file", name, line
            )
        )

    for key in data:
        if key != rows_key:
            add(
                codes.INPUT_UNEXPECTED_KEY,
                f"top-level key {_quote(key)} besides {rows_key!r}; a list file holds only its list",
                loaded.key_lines.get(key),
            )
    for index, row in enumerate([] if flat else loaded.rows):
        nested = [key for key, value in row.items() if _holds(value, dict)]
        if nested:
            keys = ", ".join(_quote(key) for key in nested[:5])
            more = f" and {len(nested) - 5} more" if len(nested) > 5 else ""
            add(
                codes.INPUT_ROW_NESTED_OBJECT,
                f"row {index} of {rows_key!r} holds an object under {keys}{more}; "
                "the format names no object there",
                loaded.line_of(index),
            )


# A \\uD800-\\uDFFF escape that is not half of a high+low pair decodes to a lone surrogate:
# legal JSON grammar, but not Unicode, and it breaks every UTF-8 writer downstream.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _lone_surrogate_line(raw: bytes, data: Any) -> int | None:
    """Return the line of a lone surrogate escape if the parsed data holds one, else None."""
    match = _SURROGATE_ESCAPE.search(raw)
    if match is None or not _holds_lone_surrogate(data):
        return None
    return raw.count(b"\n", 0, match.start()) + 1


def _holds_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _holds(value: Any, kind: type) -> bool:
    """Return whether a value of ``kind`` occurs anywhere in ``value`` (an object's values
    are walked, not its keys), ``value`` itself included."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, kind):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


class _RowError(Exception):
    def __init__(self, code: str, message: str, line: int | None) -> None:
        super().__init__(message)
        self.code, self.message, self.line = code, message, line


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"


def _decode_value(doc: str, pos: int, limits: LoadLimits) -> tuple[Any, int]:
    try:
        value, end = _DECODER.raw_decode(doc, pos)
    except _Refused as exc:
        raise _RowError(exc.code, exc.message, _line_at(doc, pos)) from None
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise
        # int() digit limits and similar conversions surface as plain ValueError.
        raise _RowError(
            codes.INPUT_JSON_INVALID, "unparseable number", _line_at(doc, pos)
        ) from None
    if end - pos > limits.max_string_chars and _has_long_string(value, limits.max_string_chars):
        raise _RowError(
            codes.INPUT_LIMIT_EXCEEDED,
            f"a string is longer than the limit of {limits.max_string_chars} characters "
            "(max_string_chars)",
            _line_at(doc, pos),
        )
    return value, end


def _has_long_string(value: Any, limit: int) -> bool:
    """Return whether any string or key in ``value`` is longer than ``limit`` characters."""
    stack = [value]  # depth is already bounded, but a loop needs no stack frames at all
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) > limit:
                return True
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
    return False


_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKET_OR_QUOTE = bytes(b for b in range(256) if b not in b'[]{}"')
_DEPTH_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]|[\]}]', re.DOTALL)


_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_CONTAINERS = (dict, list)


class _KeyLines(dict[str, int]):
    """The lines of an object file's top-level keys, each found when it is first asked for.

    A key's spelling (as JSON writes it) is looked for followed by its colon, and taken
    where it stands at depth 1 (one bracket open before it, outside strings). Without a
    backslash in the file that is the only way to spell it; in a file with one, a key not
    found so may be spelled with other escapes, and the lines of all keys are then counted
    by the key-by-key parser, once (linear in the file).
    """

    def __init__(self, raw: bytes) -> None:
        super().__init__()
        self.raw = raw
        self.absent: set[str] = set()
        self.counted: dict[str, int] | None = None

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str) or key in self.absent:
            return False
        if dict.__contains__(self, key):
            return True
        line = self._find(key)
        if line is None:
            self.absent.add(key)
            return False
        self[key] = line
        return True

    def get(self, key: str, default: int | None = None) -> int | None:  # type: ignore[override]
        return self[key] if key in self else default  # noqa: SIM401 (get is this method)

    def __missing__(self, key: str) -> int:
        if key in self:  # found now, and kept
            return dict.__getitem__(self, key)
        raise KeyError(key)

    def _find(self, key: str) -> int | None:
        raw = self.raw
        for spelling in {json.dumps(key).encode(), json.dumps(key, ensure_ascii=False).encode()}:
            for match in re.finditer(re.escape(spelling) + rb"[ \t\n\r]*:", raw):
                if _depth_at(raw, match.start()) == 1:
                    return raw.count(b"\n", 0, match.start()) + 1
        if b"\\" not in raw:
            return None
        if self.counted is None:
            scratch = LoadedFile("")
            _parse_top_object(raw.decode("utf-8"), None, scratch, LoadLimits(max_rows=0))
            self.counted = scratch.key_lines
        return self.counted.get(key)


def _depth_at(raw: bytes, position: int) -> int:
    """Return how many arrays and objects are open at ``position`` (outside strings)."""
    before = raw[:position]
    if b"\\" in before:
        before = before.replace(b"\\\\", b"").replace(b'\\"', b"")
    reduced = before.translate(None, _NOT_BRACKET_OR_QUOTE).replace(b'""', b"")
    if b'"' in reduced:
        if reduced.count(b'"') % 2:  # ``position`` is inside a string
            return -1
        reduced = b"".join(reduced.split(b'"')[::2])
    return reduced.count(b"{") + reduced.count(b"[") - reduced.count(b"}") - reduced.count(b"]")


def _line_of_nth(raw: bytes, byte: bytes, n: int) -> int:
    """Return the line of the ``n``-th (1-based) ``byte`` in ``raw`` (which holds that many).

    A binary search on whole-buffer counts: about 30 passes in C, no Python loop per byte.
    """
    low, high = 0, len(raw)  # the n-th byte lies in raw[low:high]
    while high - low > 1:
        middle = (low + high) // 2
        if raw.count(byte, 0, middle) >= n:
            high = middle
        else:
            low = middle
    return raw.count(b"\n", 0, low) + 1


def _depth_exceeded_line(raw: bytes, limit: int) -> int | None:
    """Return the line where nesting first goes past ``limit`` (error path only)."""
    depth = 0
    for token in _DEPTH_TOKENS.finditer(raw):
        first = raw[token.start()]
        if first in b"[{":
            depth += 1
            if depth > limit:
                return raw.count(b"\n", 0, token.start()) + 1
        elif first in b"]}":
            depth -= 1
    return None


def _parse_top_object(
    doc: str, rows_key: str | None, loaded: LoadedFile, limits: LoadLimits
) -> dict[str, Any] | str:
    """Parse the document; return the object, or a string naming the wrong top-level type."""
    pos = _WS.match(doc, 0).end()  # type: ignore[union-attr]
    if pos >= len(doc):
        raise json.JSONDecodeError("empty file", doc, pos)
    if doc[pos] != "{":
        value, end = _decode_value(doc, pos, limits)
        _expect_end(doc, end)
        return f"a {_json_type(value)}, not an object"
    result: dict[str, Any] = {}
    pos = _WS.match(doc, pos + 1).end()  # type: ignore[union-attr]
    if doc.startswith("}", pos):
        _expect_end(doc, pos + 1)
        return result
    # Each key's line is counted on from the one before: linear in the file, where counting
    # from the start for every key took 63 s at 200,000 keys.
    line, counted_to = 1, 0
    while True:
        if not doc.startswith('"', pos):
            raise json.JSONDecodeError(
                "Expecting property name enclosed in double quotes", doc, pos
            )
        key_pos = pos
        key, pos = scanstring(doc, pos + 1, True)
        if len(key) > limits.max_string_chars:
            raise _RowError(
                codes.INPUT_LIMIT_EXCEEDED,
                f"a key is longer than the limit of {limits.max_string_chars} characters "
                "(max_string_chars)",
                _line_at(doc, key_pos),
            )
        pos = _WS.match(doc, pos).end()  # type: ignore[union-attr]
        if not doc.startswith(":", pos):
            raise json.JSONDecodeError("Expecting ':' delimiter", doc, pos)
        pos = _WS.match(doc, pos + 1).end()  # type: ignore[union-attr]
        if key in result:
            raise _RowError(
                codes.INPUT_DUPLICATE_KEY, f"duplicate key {_quote(key)}", _line_at(doc, pos)
            )
        line += doc.count("\n", counted_to, key_pos)
        counted_to = key_pos
        loaded.key_lines[key] = line
        if key == rows_key and doc.startswith("[", pos):
            result[key], pos = _parse_rows(doc, pos, loaded, limits)
        else:
            result[key], pos = _decode_value(doc, pos, limits)
        pos = _WS.match(doc, pos).end()  # type: ignore[union-attr]
        if doc.startswith(",", pos):
            pos = _WS.match(doc, pos + 1).end()  # type: ignore[union-attr]
            continue
        if doc.startswith("}", pos):
            _expect_end(doc, pos + 1)
            return result
        raise json.JSONDecodeError("Expecting ',' delimiter", doc, pos)


def _parse_rows(
    doc: str, pos: int, loaded: LoadedFile, limits: LoadLimits
) -> tuple[list[Any], int]:
    rows: list[Any] = []
    lines: list[int] = []
    line, counted_to = 1, 0
    pos = _WS.match(doc, pos + 1).end()  # type: ignore[union-attr]
    if doc.startswith("]", pos):
        loaded.row_lines = lines
        return rows, pos + 1
    while True:
        line += doc.count("\n", counted_to, pos)
        counted_to = pos
        if len(rows) >= limits.max_rows:
            raise _RowError(
                codes.INPUT_LIMIT_EXCEEDED,
                f"more than the limit of {limits.max_rows} rows (max_rows)",
                line,
            )
        value, pos = _decode_value(doc, pos, limits)
        rows.append(value)
        lines.append(line)
        pos = _WS.match(doc, pos).end()  # type: ignore[union-attr]
        if doc.startswith(",", pos):
            pos = _WS.match(doc, pos + 1).end()  # type: ignore[union-attr]
            continue
        if doc.startswith("]", pos):
            loaded.row_lines = lines
            return rows, pos + 1
        raise json.JSONDecodeError("Expecting ',' delimiter", doc, pos)


def _expect_end(doc: str, pos: int) -> None:
    pos = _WS.match(doc, pos).end()  # type: ignore[union-attr]
    if pos != len(doc):
        raise json.JSONDecodeError("Extra data", doc, pos)


FORBIDDEN_KEYS = frozenset(
    {
        "credential_value",
        "secret_value",
        "raw_environment",
        "raw_env",
        "raw_tool_output_body",
        "executable_payload",
        "host_absolute_path",
        "provider_payload",
        "real_target_identifier",
    }
)


def _forbidden_in(value: Any) -> Iterator[str]:
    """Yield every forbidden key at any depth of ``value``."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not FORBIDDEN_KEYS.isdisjoint(item):
                yield from sorted(FORBIDDEN_KEYS.intersection(item))
            stack.extend(v for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, dict | list))


def note_forbidden_keys(loaded: LoadedFile) -> None:
    """Record each row (or, for an object file, the object) that carries a forbidden key.

    Only the key is kept, never its value. Flat rows hold keys only at row level, so when
    parsing collected their keys, the rows are looked at only if one of those is forbidden.
    """
    if loaded.data is None:
        return
    units: list[tuple[Any, int | None, str]]
    if loaded.rows:
        top = {k: v for k, v in loaded.data.items() if v is not loaded.rows}
        units = [(top, 1, loaded.name)]
        flat_keys = loaded.row_keys
        if flat_keys is None or not FORBIDDEN_KEYS.isdisjoint(flat_keys):
            units.extend(
                (row, loaded.line_of(i), f"{loaded.name}#row{i}")
                for i, row in enumerate(loaded.rows)
            )
    else:
        units = [(loaded.data, 1, loaded.name)]
    for value, line, subject in units:
        keys = sorted(set(_forbidden_in(value)))
        if keys:
            loaded.forbidden_keys.append((subject, line, keys))


def load_input(root: Path, name: str, rows_key: str | None, limits: LoadLimits) -> LoadedFile:
    """Read and strictly parse one input file."""
    raw, loaded = read_input(root, name, limits)
    if raw is None:
        return loaded
    return parse_input(raw, loaded, rows_key, limits)
