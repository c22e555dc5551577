"""Strict loading of input files into plain rows, with the line each row starts on.

The parser is the standard library's C scanner, driven one top-level value at a time so
that every row of a file's named list is decoded separately: that gives each row its
start line (for links from findings to the exact input line) at no extra pass, and lets
an error inside a row name the row's line. Strictness beyond the JSON grammar: duplicate
keys, NaN/Infinity and numbers that overflow to infinity are errors, as are invalid
UTF-8 and a byte-order mark.

A plain list file, as exporters write it, is first parsed whole (by msgspec, else
orjson) and proved to be what that parser would have loaded (``_parse_list_file_fast``);
so is an object file (``_parse_object_file_fast``), whose keys' lines are found when
asked. Any other file, and any error, goes the row-by-row way, which alone words the
findings.
msgspec's typed decoding stops at the first value nested deeper than a list in a row, and
orjson refuses nesting deeper than 1,024 levels on its own, so that first parse needs no
depth check.

Limits (``LoadLimits``) are checked before the costly step they guard: the file size
before reading, the nesting depth on the raw bytes before parsing (so the C scanner never
recurses deep), the row count while rows are decoded, and string length only on a row or
value whose text span is longer than the limit (a shorter span cannot hold such a string).
"""

from __future__ import annotations

import errno
import hashlib
import json
import operator
import os
import re
import stat
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from io import BufferedReader
from itertools import accumulate, chain, compress, repeat
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, cast

import msgspec
import orjson
import re2

from sandbox_replay import codes
from sandbox_replay.findings import Finding
from sandbox_replay.version import TOOL_NAME

_WS = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class LoadLimits:
    """Resource limits applied to every input file; defaults are documented in the README."""

    max_file_bytes: int = 512 * 1024 * 1024
    max_rows: int = 2_000_000
    max_string_chars: int = 1_000_000
    max_depth: int = 64


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
    # Every key any row holds, where parsing proved that no row nests an object (so keys
    # occur only at row level) and collected them; None where it did not.
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


class InputRefused(Exception):
    """An input file refused before it was parsed: the finding code and a safe message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def inspect_input(root: Path, name: str, limits: LoadLimits) -> tuple[Path, os.stat_result]:
    """Check the input file ``root / name`` before it is opened; return its path and ``stat``.

    Raises ``InputRefused`` for a file that is missing, resolves outside ``root``, is
    not a regular file or is over ``max_file_bytes``. Open the path with
    ``read_same_file`` or ``open_same_file``, which check it is still that file.
    """
    path = root / name
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise InputRefused(codes.INPUT_FILE_MISSING, f"{name} is missing") from None
    except OSError as exc:
        raise InputRefused(
            codes.INPUT_FILE_UNREADABLE, f"{name} cannot be inspected ({exc.strerror})"
        ) from None
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise InputRefused(codes.INPUT_FILE_UNREADABLE, f"{name} cannot be resolved") from None
    if not resolved.is_relative_to(root.resolve()):
        raise InputRefused(
            codes.INPUT_PATH_OUTSIDE_ROOT,
            f"{name} resolves outside the input folder and was not opened",
        )
    if stat.S_ISLNK(info.st_mode):
        info = resolved.stat()
    if not stat.S_ISREG(info.st_mode):
        raise InputRefused(codes.INPUT_FILE_UNREADABLE, f"{name} is not a regular file")
    if info.st_size > limits.max_file_bytes:
        raise InputRefused(
            codes.INPUT_LIMIT_EXCEEDED,
            f"{name} is {info.st_size} bytes, over the limit of {limits.max_file_bytes} "
            "bytes (max_file_bytes); it was not read",
        )
    return resolved, info


def read_input(root: Path, name: str, limits: LoadLimits) -> tuple[bytes | None, LoadedFile]:
    """Read one input file's bytes and digest, refusing files that escape ``root`` or break limits."""
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


class FileChangedError(Exception):
    """A file was not the one inspected by the time it was opened, or changed while read."""


# For reading a file that may be hostile: no following a symlink put in its place, no
# waiting on a FIFO put there.
SAFE_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class NotRegularError(OSError):
    """What ``open_regular`` found at the path is not a regular file (a FIFO, a device...)."""


def open_regular(path: Path) -> BinaryIO:
    """Open a file to read that must be regular, where a hostile writer may swap it.

    No symlink put at ``path`` is followed (``OSError`` with ELOOP) and no FIFO put there
    is waited on; anything but a regular file raises ``NotRegularError``.
    """
    handle = open(os.open(path, SAFE_OPEN_FLAGS), "rb")  # noqa: SIM115  (returned open)
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        handle.close()
        raise NotRegularError(errno.EINVAL, f"not a regular file: {path.name}")
    return handle


def open_same_file(path: Path, inspected: os.stat_result | None, limit: int) -> BinaryIO:
    """Open the file at ``path`` to read, which must still be the one ``inspected`` (its ``stat``).

    The checks on a path (where it resolves, what kind of file, how large) hold for the
    file that was there when they ran; a hostile writer may swap it before it is opened.
    So the file is opened with ``open_regular``, then ``fstat`` of the open file must show
    the same device and inode (unless ``inspected`` is None: a caller that checks the
    bytes' digest instead) and a size within ``limit``. Raises ``FileChangedError``
    (saying what changed) or ``OSError``.
    """
    try:
        handle = open_regular(path)
    except NotRegularError:
        raise FileChangedError("is no longer a regular file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symlink now stands where the file was
            raise FileChangedError("was replaced by a symlink before it was opened") from None
        raise
    try:
        opened = os.fstat(handle.fileno())
        if inspected is not None and (opened.st_dev, opened.st_ino) != (
            inspected.st_dev,
            inspected.st_ino,
        ):
            raise FileChangedError("was replaced by another file before it was opened")
        if opened.st_size > limit:
            raise FileChangedError(f"grew past the limit of {limit} bytes (max_file_bytes)")
    except BaseException:
        handle.close()
        raise
    return handle


def read_same_file(path: Path, inspected: os.stat_result | None, limit: int) -> bytes:
    """Read the file at ``path``, which must still be the one ``inspected`` (``open_same_file``).

    Exactly the size the open file had is read, and one more byte would mean it grew while
    it was read. Raises ``FileChangedError`` (saying what changed) or ``OSError``.
    """
    with open_same_file(path, inspected, limit) as handle:
        size = os.fstat(handle.fileno()).st_size
        raw = handle.read(size + 1)
    if len(raw) != size:
        raise FileChangedError("changed size while it was read")
    return raw


# Deeper than any site this tool builds (``runs/<run>/join/page-NNNN.html``: 3 folders).
SITE_DEPTH = 32


class SiteTooDeepError(ValueError):
    """A folder under a site nests deeper than ``SITE_DEPTH``: no site this tool built."""


def site_entries(root: Path) -> list[tuple[str, os.stat_result]]:
    """Return every entry under ``root``: its posix path relative to ``root`` and its ``lstat``.

    Sorted by that path. Walked without recursion (``Path.rglob`` recurses, and a hostile
    folder a thousand levels deep ended it with ``RecursionError``) and without following
    a symlink; a folder deeper than ``SITE_DEPTH`` raises ``SiteTooDeepError``. Raises
    ``OSError`` for a folder that cannot be listed.
    """
    found: list[tuple[str, os.stat_result]] = []
    pending = [("", 0)]
    while pending:
        prefix, depth = pending.pop()
        with os.scandir(root / prefix) as listing:
            for entry in listing:
                relative = prefix + entry.name
                info = entry.stat(follow_symlinks=False)
                found.append((relative, info))
                if stat.S_ISDIR(info.st_mode):
                    if depth + 1 >= SITE_DEPTH:
                        raise SiteTooDeepError(f"{relative} lies {SITE_DEPTH} folders deep")
                    pending.append((relative + "/", depth + 1))
    return sorted(found, key=lambda item: item[0])


# A built site's root holds its manifest and the marker naming it a site this tool built
# (``report.build._marker`` writes it; ``build`` and ``pack`` read it here).
SITE_MANIFEST = "manifest.json"
SITE_MARKER = "sandbox-replay-site.json"
SITE_FORMAT = 1
_MARKER_BYTES = 4096


def read_site_json(path: Path, limit: int) -> object:
    """Read a JSON file of a site: a regular file (no symlink followed, no FIFO waited on)
    of at most ``limit`` bytes, nested at most 1,024 deep (orjson's bound). Raises
    ``OSError``, ``FileChangedError`` or ``ValueError``."""
    return orjson.loads(read_same_file(path, None, limit))


def site_marker_matches(site: Path) -> bool | None:
    """Say whether ``site`` holds a marker of a site this tool built; ``None``: no marker.

    The marker must name this tool and site format and hold the digest of the folder's
    ``manifest.json`` as it is now (``report.build._marker`` gives its format).
    """
    try:
        marker = read_site_json(site / SITE_MARKER, _MARKER_BYTES)
    except FileNotFoundError:
        return None
    except (OSError, FileChangedError, ValueError):
        return False
    if not isinstance(marker, dict):
        return False
    try:
        with open_regular(site / SITE_MANIFEST) as handle:
            reader = cast(BufferedReader, handle)  # what ``open_regular`` opens
            digest = "sha256:" + hashlib.file_digest(reader, "sha256").hexdigest()
    except OSError:
        return False
    return (
        marker.get("tool") == TOOL_NAME
        and marker.get("site_format") == SITE_FORMAT
        and marker.get("manifest_sha256") == digest
    )


def sha256_of(raw: bytes) -> str:
    """Return a file's digest as ``LoadedFile.sha256`` spells it."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def parse_input(
    raw: bytes, loaded: LoadedFile, rows_key: str | None, limits: LoadLimits
) -> LoadedFile:
    """Parse ``raw`` strictly into ``loaded``; on error, record a finding and leave data None.

    With ``rows_key`` the top-level object must hold a list under that key, and each of its
    elements must be an object; their start lines are kept in ``row_lines``.
    """
    name = loaded.name

    def fail(code: str, message: str, line: int | None) -> LoadedFile:
        where = f"{name}:{line}" if line else name
        loaded.findings.append(
            Finding(
                code, f"{where}: {message}", "strict_load_floor", name, "input_file", name, line
            )
        )
        loaded.data, loaded.rows, loaded.row_lines = None, [], []
        return loaded

    if raw.startswith(b"\xef\xbb\xbf"):
        return fail(codes.INPUT_NOT_UTF8, "starts with a byte-order mark", 1)
    too_many = limits.max_rows + 1  # the rows and the top object
    braces = raw.count(b"{")
    objects = _objects(raw) if rows_key is not None and braces > too_many else 0
    if objects > too_many:
        # Rows past the limit, or objects nested in rows (a finding of their own): the file
        # fails closed either way, refused before anything is decoded. Where no string
        # holds a brace, the line is that of the first object past the limit.
        line = _line_of_nth(raw, b"{", too_many + 1) if objects == braces else None
        return fail(
            codes.INPUT_LIMIT_EXCEEDED,
            f"holds more objects than the limit of {limits.max_rows} rows (max_rows) allows; "
            "it was not decoded",
            line,
        )
    fast = _parse_list_file_fast(raw, rows_key, loaded, limits)
    if fast is not None:
        loaded.data, loaded.rows = fast
        return loaded
    if rows_key is None:
        whole = _parse_object_file_fast(raw, limits)
        if whole is not None:
            loaded.data = whole
            loaded.key_lines = _KeyLines(raw)
            # As the key-by-key path says it: a file holding no float lets the records be
            # dumped by orjson (by the standard library, a 600,000-request record took 45 s).
            loaded.may_hold_floats = _holds(whole, float)
            return loaded
    try:
        doc = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return fail(codes.INPUT_NOT_UTF8, f"invalid UTF-8 at byte {exc.start}", line)
    if _max_depth(raw) > limits.max_depth:
        return fail(
            codes.INPUT_LIMIT_EXCEEDED,
            f"nesting is deeper than the limit of {limits.max_depth} (max_depth)",
            _depth_exceeded_line(raw, limits.max_depth),
        )
    try:
        data = _parse_top_object(doc, rows_key, loaded, limits)
    except json.JSONDecodeError as exc:
        return fail(codes.INPUT_JSON_INVALID, exc.msg, exc.lineno)
    except _RowError as exc:
        return fail(exc.code, exc.message, exc.line)
    except RecursionError:
        # Only reachable with a max_depth above what the interpreter's stack allows.
        return fail(codes.INPUT_LIMIT_EXCEEDED, "nesting is deeper than the parser allows", None)
    if isinstance(data, str):
        return fail(codes.INPUT_TOP_LEVEL_NOT_OBJECT, f"top-level value is {data}", 1)
    surrogate_line = _lone_surrogate_line(raw, data)
    if surrogate_line is not None:
        return fail(
            codes.INPUT_NOT_UTF8,
            "a string escapes a lone UTF-16 surrogate, which is not valid Unicode",
            surrogate_line,
        )
    loaded.data = data
    if loaded.may_hold_floats:
        loaded.may_hold_floats = _holds(data, float)
    if rows_key is not None:
        rows = data.get(rows_key)
        if not isinstance(rows, list):
            what = "missing" if rows is None else f"a {_json_type(rows)}, not a list"
            line = loaded.key_line(rows_key)
            return fail(codes.INPUT_ROWS_NOT_LIST, f"top-level key {rows_key!r} is {what}", line)
        for index, row in enumerate(rows):
            if not isinstance(row, dict):
                return fail(
                    codes.INPUT_ROW_NOT_OBJECT,
                    f"row {index} of {rows_key!r} is a {_json_type(row)}, not an object",
                    loaded.line_of(index),
                )
        loaded.rows = rows
        _flag_unchecked(loaded, data, rows_key)
    return loaded


def _flag_unchecked(loaded: LoadedFile, data: dict[str, Any], rows_key: str) -> None:
    """Report what of a list file no layer would check: other top-level keys, nested objects.

    A list file holds exactly its list (as the original implementation's do); rows
    under a second key (``side_effect_receipts_2``) or an object inside a row are never
    read by the layers, so they are findings, not ignored. The file stays loaded: its
    list is still checked. Only the row-by-row parser gets here; the fast path proves a
    file holds neither.
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
    for index, row in enumerate(loaded.rows):
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


_KEY_SPACE_COLON = re2.compile(rb'"[ \t\n\r]+:')
# A key name holding a byte the layout keeps (the others it keeps, a quote, a backslash and
# a line end, stand in a name only escaped, and a file with an escape is counted otherwise).
_HOLDS_LAYOUT = re.compile(r"[{:,]")
# Deleting every byte but these leaves a file's layout: where objects open, lines end,
# strings are delimited, colons and commas stand, and whether any escape occurs.
_ALL_BUT_LAYOUT = bytes(b for b in range(256) if b not in b'{\n"\\:,')
# Rows of a file msgspec decoded as plain nest no deeper than this: the top object, its
# list, the rows and their lists.
_PLAIN_DEPTH = 4


def _parse_list_file_fast(
    raw: bytes, rows_key: str | None, loaded: LoadedFile, limits: LoadLimits
) -> tuple[dict[str, Any], list[Any]] | None:
    """Parse a plain list file in one C call; return None to use the row-by-row parser.

    Return the top-level object and its rows. Plain means: the top-level object holds
    only ``rows_key`` and its rows are flat objects (their values scalars or lists of
    them); a string may hold a ``{`` only if no string holds an escape. That is what
    exporters write, and for it the strictness of the row-by-row parser is proved with
    whole-buffer counts and C-level passes instead of a Python hook per object:

    - The file is decoded by msgspec into the plain types (``_decode_plain``), else by
      orjson. Both refuse invalid UTF-8, NaN/Infinity, numbers that overflow to infinity
      and lone surrogate escapes, as the strict parser does. msgspec reads an integer of
      up to 4,300 digits exactly and refuses a longer one, as the standard library does;
      orjson parses an integer too big for 64 bits into a float, so a file in which any
      float is found is decoded again by the standard library's scanner, whose numbers
      are the strict parser's.
    - Every ``{`` outside strings opens the top object or a row: so no row nests an
      object, and the rows' start lines are those of the second such ``{`` on.
    - No key was a duplicate (both decoders, like a dict, keep the last):
      ``_no_key_dropped``.
    - Nesting depth is read off the parsed values (msgspec's plain rows nest at most
      ``_PLAIN_DEPTH`` deep, by their type), and string lengths are measured only if
      ``_strings_may_exceed`` the limit.

    Anything else, including any error, falls back to the row-by-row parser, which
    reports it exactly.
    """
    if rows_key is None or len(rows_key) > limits.max_string_chars:
        return None
    data = _decode_plain(raw)
    plain = data is not None
    if data is None:
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
    if type(data) is not dict or list(data) != [rows_key]:
        return None
    rows = data[rows_key]
    if type(rows) is not list or len(rows) > limits.max_rows:
        return None
    if not plain and rows and set(map(type, rows)) != {dict}:
        return None
    layout = raw.translate(None, _ALL_BUT_LAYOUT)
    # Between one `{` and the next, only line ends count: their number gives the lines.
    between_braces = layout.translate(None, b'"\\:,').split(b"{")
    if len(between_braces) != 2 + len(rows) and b"\\" not in layout:
        # A `{` may sit in a string. Without escapes, strings are every other stretch
        # between quotes; the rest holds only the `{`, line ends, colons and commas outside
        # strings.
        outside = b"".join(layout.split(b'"')[::2])
        between_braces = outside.translate(None, b":,").split(b"{")
    if len(between_braces) != 2 + len(rows):
        return None
    # msgspec's types leave no float and no deeper nesting to look for in plain rows.
    values = None if plain and limits.max_depth >= _PLAIN_DEPTH else _RowValues.of(rows)
    if values is not None and values.depth > limits.max_depth:
        return None
    if _strings_may_exceed(raw, layout, limits.max_string_chars) and _has_long_string(
        rows, limits.max_string_chars
    ):
        return None
    row_keys = frozenset(set().union(*rows))
    if not _no_key_dropped(raw, layout, rows, row_keys | {rows_key}, values):
        return None
    may_hold_floats = False
    if values is not None and float in values.kinds:
        decoded = _decode_with_stdlib(raw)
        if decoded is None:
            return None
        data, may_hold_floats = decoded
        rows = data[rows_key]
    top_line = len(between_braces[0]) + 1
    lines = accumulate(map(len, between_braces[1:-1]), initial=top_line)
    loaded.row_lines = list(lines)[1:]
    loaded.key_lines[rows_key] = raw.count(b"\n", 0, raw.index(b'"')) + 1
    loaded.may_hold_floats = may_hold_floats
    loaded.row_keys = row_keys
    return data, rows


# A list file as exporters write it: a top object of lists of objects, each value a
# string, integer, boolean, null or a list of those. msgspec decodes such a file into
# the same dicts and lists as orjson, checking the types as it parses, and faster. Any
# other file fails this decoding at its first other value (a float, a nested list or
# object), and is parsed by orjson: a plain file but for its last row is decoded twice.
_PlainScalar = str | int | bool | None
_PLAIN_DECODER = msgspec.json.Decoder(dict[str, list[dict[str, _PlainScalar | list[_PlainScalar]]]])


def _decode_plain(raw: bytes) -> dict[str, Any] | None:
    """Decode a plain list file; None if ``raw`` is not one (or not JSON at all).

    msgspec refuses what orjson refuses here (invalid UTF-8, NaN, Infinity, overflowing
    numbers, lone surrogate escapes) and reads an integer of any length up to the
    standard library's 4,300 digits exactly, as the standard library does. Like orjson
    and a dict, it keeps a duplicate key's last value: ``_no_key_dropped`` catches that.
    """
    try:
        data: dict[str, Any] = _PLAIN_DECODER.decode(raw)
    except msgspec.DecodeError:  # msgspec.ValidationError included
        return None
    return data


class _RowValues(NamedTuple):
    """What the values of flat rows hold: their types, how many strings, how deep."""

    kinds: set[type]
    strings: int
    depth: int

    @classmethod
    def of(cls, rows: list[dict[str, Any]]) -> _RowValues:
        """Walk the values in C, one level of lists at a time."""
        types = list(map(type, chain.from_iterable(map(dict.values, rows))))
        kinds = set(types)
        strings = types.count(str)
        depth = 3 if rows else 2  # the top object, its list and the rows
        values: Iterable[Any] = chain.from_iterable(map(dict.values, rows))
        nested = list in kinds
        while nested:
            depth += 1
            lists = compress(values, map(operator.is_, types, repeat(list)))
            values = list(chain.from_iterable(lists))
            types = list(map(type, values))
            kinds.update(types)
            strings += types.count(str)
            nested = list in types
        return cls(kinds, strings, depth)


def _strings_may_exceed(raw: bytes, layout: bytes, limit: int) -> bool:
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
    marks = [b"\n"] if b"\\" in layout else [b"\n", b'"']
    return any(
        all(raw.find(mark, start, start + size) == -1 for mark in marks)
        for start in range(0, len(raw) - size + 1, size)
    )


# Below this chunk size, looking for marks in every chunk costs more than measuring.
_MIN_MARK_CHUNK = 4096


def _decode_with_stdlib(raw: bytes) -> tuple[dict[str, Any], bool] | None:
    """Decode ``raw`` with the standard library; return the object and whether it held a float."""
    seen_float = False

    def finite_float(text: str) -> float:
        nonlocal seen_float
        seen_float = True
        return _finite_float(text)

    decoder = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=finite_float)
    try:
        data = decoder.decode(raw.decode("utf-8"))
    except (ValueError, _Refused, RecursionError):
        return None
    return data, seen_float


def _no_key_dropped(
    raw: bytes,
    layout: bytes,
    rows: list[dict[str, Any]],
    names: frozenset[str],
    values: _RowValues | None,
) -> bool:
    """Return whether every key in ``raw`` survived parsing (so none was a duplicate).

    Rows are flat, so keys occur only in the top object (its one key) and the rows; a
    dropped duplicate would leave more keys in the text than the parsed ``keys``. Each
    count below is of the keys in the text plus, at worst, some that are not keys, so it
    equals ``keys`` only if no key was dropped. ``names`` holds every parsed key (so
    also the name of any dropped one).

    - With a backslash, every ``"key":`` token is counted, once no key is followed by
      whitespace before its colon (a string may add an escaped quote before a colon).
    - Without one, no string holds a ``"``. Where no name holds a byte ``layout`` keeps
      and no line end stands before a colon (the only whitespace ``layout`` keeps), each
      key reads ``"":`` there (its quotes, then its colon); nothing else does, as a ``,``
      or ``:`` parts any two strings, and string values are never followed by a colon.
    - Otherwise every ``"`` delimits a string, and each key and string value spells two:
      the quotes are counted against the parsed keys and string values.
    """
    keys = 1 + sum(map(len, rows))
    if b"\\" in layout:
        return _KEY_SPACE_COLON.search(raw) is None and raw.count(b'":') == keys
    if b"\n:" not in layout and not any(map(_HOLDS_LAYOUT.search, names)):
        return layout.count(b'"":') == keys
    strings = (values if values is not None else _RowValues.of(rows)).strings
    return layout.count(b'"') == 2 * (keys + strings)


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


def _max_depth(raw: bytes) -> int:
    """Return the deepest nesting of arrays and objects in ``raw``, brackets in strings aside.

    Whole-buffer C passes only, no per-character Python loop: escaped backslashes and
    quotes are dropped, then every byte but brackets and quotes. A string without a
    bracket is then ``""`` and vanishes; only if one held a bracket are strings cut out
    by splitting on quotes. The running sum of +1/-1 steps peaks at the depth.
    """
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    reduced = raw.translate(None, _NOT_BRACKET_OR_QUOTE).replace(b'""', b"")
    if b'"' in reduced:
        reduced = b"".join(reduced.split(b'"')[::2])
    if not reduced:
        return 0
    return max(accumulate(array("b", reduced.translate(_BRACKET_STEPS))))


_NOT_BRACE_OR_QUOTE = bytes(b for b in range(256) if b not in b'{"')
_NOT_QUOTE_OR_COLON = bytes(b for b in range(256) if b not in b'":')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_CONTAINERS = (dict, list)


def _parse_object_file_fast(raw: bytes, limits: LoadLimits) -> dict[str, Any] | None:
    """Parse an object file (no row list) in one C call; None to use the row-by-row parser.

    The file is decoded by msgspec into plain values, which refuses what the strict
    parser refuses (invalid UTF-8, NaN/Infinity, overflowing numbers, lone surrogate
    escapes) and reads integers exactly; the rest of the strictness is proved on the
    whole buffer: the nesting depth (``_max_depth``), string lengths (only where one may
    exceed the limit), and that no key was dropped as a duplicate (the keys spelled in
    the text, ``_keys_in_text``, are as many as the parsed objects hold). Anything else,
    including any error, goes to the row-by-row parser, which words the finding. Each
    top-level key's line is found when asked (``_KeyLines``): a file of 3 million keys
    took 30 s to parse key by key, against 2 s for this.
    """
    if _max_depth(raw) > limits.max_depth:
        return None
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    if type(data) is not dict:
        return None
    layout = raw.translate(None, _ALL_BUT_LAYOUT)
    if _strings_may_exceed(raw, layout, limits.max_string_chars) and _has_long_string(
        data, limits.max_string_chars
    ):
        return None
    if _keys_in_text(raw) != _keys_parsed(data):
        return None
    return data


def _keys_in_text(raw: bytes) -> int:
    """Count the keys ``raw`` spells: the colons outside strings (valid JSON has no other).

    Escaped backslashes and quotes are dropped first, so every quote left delimits a
    string; then every byte but quotes and colons. A string without a colon is then
    ``""`` and is dropped; so is a closing quote next to the following opening one,
    which only merges two strings with nothing outside between them. Where quotes are
    left (strings holding a colon), the strings are cut out by splitting on quotes.
    """
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    layout = raw.translate(None, _NOT_QUOTE_OR_COLON).replace(b'""', b"")
    if b'"' in layout:
        layout = b"".join(layout.split(b'"')[::2])
    return layout.count(b":")


def _keys_parsed(value: Any) -> int:
    """Count the keys of every object in a parsed value (one container at a time, in C)."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            total += len(item)
            item = list(item.values())
        stack.extend(compress(item, map(isinstance, item, repeat(_CONTAINERS))))
    return total


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


def _objects(raw: bytes) -> int:
    """Return how many objects ``raw`` opens (``{`` outside strings), in whole-buffer passes.

    As in ``_max_depth``: escaped backslashes and quotes are dropped, then every byte but
    braces and quotes; strings are then the stretches between quotes.
    """
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    reduced = raw.translate(None, _NOT_BRACE_OR_QUOTE).replace(b'""', b"")
    if b'"' in reduced:
        reduced = b"".join(reduced.split(b'"')[::2])
    return reduced.count(b"{")


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
