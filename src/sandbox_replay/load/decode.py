"""Strict decoding of input files into plain rows, with the line each row starts on.

One path: msgspec decodes the file, and what the grammar leaves open (depth, object count,
duplicate keys, string length) is proved on its bytes and decoded value (``proofs``). A
byte-order mark, invalid UTF-8, lone surrogate escapes, NaN, Infinity and numbers out of
range are refused too. Only a refused file is read again, to word its finding and name
its line (``refusal.find_fault``). One decoder and a count per rule it leaves open keeps
every guarantee in one place, without a second parser to keep in step.

Limits (``LoadLimits``) are checked before the costly step they guard: the file size
before reading, the object count and the nesting depth on the raw bytes before decoding.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

import msgspec

from sandbox_replay.load.files import (
    FileChangedError,
    InputRefused,
    LoadLimits,
    inspect_input,
    read_same_file,
    sha256_of,
)
from sandbox_replay.load.proofs import Layout, has_long_string, line_of_nth, strings_may_exceed
from sandbox_replay.load.refusal import find_fault, quote
from sandbox_replay.model import codes
from sandbox_replay.model.census import ValueShape, census
from sandbox_replay.model.findings import Finding
from sandbox_replay.model.rows import KINDS, UNSET, InputRow


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
    # What the rows' values hold (``census``), for the records to tell that the values
    # stand in the result as they are; None where it was not measured.
    row_shape: ValueShape | None = None
    # Every key a row can hold, where parsing proved that no row nests an object (keys
    # then occur only at row level); None where it did not.
    row_keys: frozenset[str] | None = None
    # Each row (or the object) that carries a forbidden key: its subject, line and the keys.
    forbidden_keys: list[tuple[str, int | None, list[str]]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.data is not None

    def line_of(self, index: int) -> int | None:
        return self.row_lines[index] if 0 <= index < len(self.row_lines) else None

    def key_line(self, *keys: str) -> int:
        """Return the line of the first top-level key present, else 1."""
        for key in keys:
            if key in self.key_lines:
                return self.key_lines[key]
        return 1


def read_input(root: Path, name: str, limits: LoadLimits) -> tuple[bytes | None, LoadedFile]:
    """Read one input file's bytes and digest, refusing files that escape ``root`` or break
    limits."""
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
    elements must be an object; their start lines are kept in ``row_lines``. With ``kind``,
    a list file as exporters write it is decoded straight into rows of that kind
    (``_decode_typed_rows``); any other stays dicts until ``type_rows``.
    """
    if raw.startswith(b"\xef\xbb\xbf"):
        return _fail(loaded, codes.INPUT_NOT_UTF8, "starts with a byte-order mark", 1)
    layout = Layout.of(raw)
    too_many = limits.max_rows + 1  # the rows and the top object
    if rows_key is not None and layout.objects > too_many:
        # Rows past the limit, or objects nested in rows (a finding of their own): refused
        # before anything is decoded. Where no string holds a brace, the line is that of
        # the first object past the limit.
        braces = raw.count(b"{")
        line = line_of_nth(raw, b"{", too_many + 1) if layout.objects == braces else None
        return _fail(
            loaded,
            codes.INPUT_LIMIT_EXCEEDED,
            f"holds more objects than the limit of {limits.max_rows} rows (max_rows) allows; "
            "it was not decoded",
            line,
        )
    if layout.depth > limits.max_depth:
        return _refuse(raw, loaded, rows_key, limits)
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
        rows = None
        if isinstance(found, list) and len(found) <= limits.max_rows:
            rows = found if set(map(type, found)) <= {dict} else None
    if data is None or rows is None:
        return _refuse(raw, loaded, rows_key, limits)
    # The rows' values stand three levels down: the top object, its list, each row.
    tally = census([data], shape_at=3)
    if tally.strings != layout.strings:  # a key was given twice
        return _refuse(raw, loaded, rows_key, limits)
    loaded.data = data
    loaded.key_lines = _key_lines(raw, list(data))
    loaded.may_hold_floats = tally.floats
    if rows_key is not None:
        flat = layout.objects == 1 + len(rows)  # no row nests an object
        loaded.row_shape = tally.shape
        loaded.rows = rows
        ahead = list(data.values())[: list(data).index(rows_key)]
        loaded.row_lines = layout.row_lines(len(rows), sum(type(v) in _CONTAINERS for v in ahead))
        if flat and len(data) == 1:  # keys stand only at row level
            loaded.row_keys = frozenset(set().union(*rows))
        _flag_unchecked(loaded, data, rows_key, flat)
    return loaded


_CONTAINERS = (dict, list)
_TOP_VALUES = msgspec.json.Decoder(dict[str, msgspec.Raw])
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_WS = re.compile(rb"[ \t\n\r]*")


def _key_lines(raw: bytes, keys: list[str]) -> dict[str, int]:
    """Return the line of each top-level key of a file the strict decode accepted.

    ``keys`` are its object's keys, in file order and none twice; each value between two
    keys is passed over by the length of its bytes (``msgspec.Raw``).
    """
    sizes = [0] * len(keys)
    if len(keys) > 1:
        sizes = [len(memoryview(value)) for value in _TOP_VALUES.decode(raw).values()]
    lines: dict[str, int] = {}
    line, pos, counted = 1, 0, 0
    for key, size in zip(keys, sizes, strict=True):
        pos = raw.index(b'"', pos)  # only white space, a comma or the brace stand before it
        line += raw.count(b"\n", counted, pos)
        lines[key], counted = line, pos
        pos = _STRING.match(raw, pos).end()  # type: ignore[union-attr]
        pos = _WS.match(raw, raw.index(b":", pos) + 1).end() + size  # type: ignore[union-attr]
    return lines


def _refuse(raw: bytes, loaded: LoadedFile, rows_key: str | None, limits: LoadLimits) -> LoadedFile:
    """Record why the strict decode refused ``raw``, on the line at fault."""
    fault = find_fault(raw, rows_key, limits)
    loaded.key_lines = fault.key_lines
    return _fail(loaded, fault.code, fault.message, fault.line)


def _fail(loaded: LoadedFile, code: str, message: str, line: int | None) -> LoadedFile:
    """Record why a file is refused, and leave it unloaded."""
    _add(loaded, code, message, line)
    loaded.data, loaded.rows, loaded.row_lines = None, [], []
    return loaded


def _add(loaded: LoadedFile, code: str, message: str, line: int | None) -> None:
    name = loaded.name
    where = f"{name}:{line}" if line else name
    loaded.findings.append(
        Finding(code, f"{where}: {message}", "strict_load_floor", name, "input_file", name, line)
    )


def _decode(raw: bytes, limits: LoadLimits) -> dict[str, Any] | None:
    """Decode ``raw`` into its top-level object; None where msgspec refuses it, it is not
    an object, or a string or key is longer than ``max_string_chars``."""
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError:  # a number out of range included
        return None
    if type(data) is not dict:
        return None
    limit = limits.max_string_chars
    if strings_may_exceed(raw, limit) and has_long_string(data, limit):
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

    Such a file is one object holding one list of flat rows, each key a field of ``kind``.
    A typed row keeps only the last of a repeated key, so the strings the text spells must
    be exactly the keys and string values the rows hold. False, with ``loaded`` untouched,
    for any other file. A JSON key ``line`` sets the field the row's line is kept in and is
    not counted as held, so such a file goes the general way too.
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
    limit = limits.max_string_chars
    if strings_may_exceed(raw, limit) and has_long_string(values, limit):
        return False
    lines = layout.row_lines(len(rows), 0)
    for row, line in zip(rows, lines, strict=True):
        row.line = line
    loaded.data = {rows_key: rows}
    loaded.key_lines = _key_lines(raw, [rows_key])
    loaded.may_hold_floats = tally.floats
    loaded.row_shape = tally.shape
    loaded.rows = rows
    loaded.row_lines = lines
    loaded.row_keys = frozenset(kind.__struct_fields__) - {"line"}
    return True


_TYPED_DECODERS: dict[type[InputRow], msgspec.json.Decoder[dict[str, list[InputRow]]]] = {
    kind: msgspec.json.Decoder(dict[str, list[kind]])  # type: ignore[valid-type]
    for kind in KINDS
}


def type_rows(loaded: LoadedFile, kind: type[InputRow]) -> None:
    """Replace a loaded list file's decoded rows with rows of ``kind``, each with its line.

    The top-level object lets go of the decoded rows. Keys the format does not name for
    ``kind`` are dropped from them first (a typed row refuses them; nothing reads them).
    Rows decoded typed already are left as they are.
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


def _flag_unchecked(loaded: LoadedFile, data: dict[str, Any], rows_key: str, flat: bool) -> None:
    """Report what of a list file no layer would check: other top-level keys, nested objects.

    A list file holds exactly its list; rows under a second key or an object inside a row
    are never read by the layers, so they are findings, not ignored. The file stays
    loaded. ``flat`` says no row nests an object.
    """
    for key in data:
        if key != rows_key:
            _add(
                loaded,
                codes.INPUT_UNEXPECTED_KEY,
                f"top-level key {quote(key)} besides {rows_key!r}; a list file holds only its list",
                loaded.key_lines.get(key),
            )
    for index, row in enumerate([] if flat else loaded.rows):
        nested = [key for key, value in row.items() if _holds_object(value)]
        if nested:
            keys = ", ".join(quote(key) for key in nested[:5])
            more = f" and {len(nested) - 5} more" if len(nested) > 5 else ""
            _add(
                loaded,
                codes.INPUT_ROW_NESTED_OBJECT,
                f"row {index} of {rows_key!r} holds an object under {keys}{more}; "
                "the format names no object there",
                loaded.line_of(index),
            )


def _holds_object(value: Any) -> bool:
    """Return whether ``value`` is or holds (at any depth) an object."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            return True
        if isinstance(item, list):
            stack.extend(item)
    return False


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
