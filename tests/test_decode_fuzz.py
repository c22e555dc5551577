"""The strict decoder accepts and refuses what a strict standard-library reading does.

The reference (``strict_reading``) is ``json.loads`` with every rule of the format added
on the value it returns: no key twice, no NaN or Infinity, no number overflowing to
infinity, no lone surrogate, the depth, string-length and (for list files) row limits.
Generated files mix duplicate keys, deep nesting, long strings, escapes, odd number forms
and bytes that are not UTF-8; the decoder must give the same answer and, on accepting a
file, the same value (types and float signs included) and float flag.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_replay.load.decode import LoadedFile, parse_input
from sandbox_replay.load.files import LoadLimits

KEY = "action_requests"


class Refused(Exception):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({key for key, _ in pairs}) != len(pairs):
        raise Refused("duplicate key")
    return dict(pairs)


def _refuse(text: str) -> Any:
    raise Refused(text)


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise Refused(text)
    return value


def _walk(value: Any, depth: int = 0) -> Any:
    """Yield (item, depth) for ``value`` and everything in it, keys included (depth of 0)."""
    yield value, depth
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, 0
            yield from _walk(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, depth + 1)


def strict_reading(raw: bytes, rows_key: str | None, limits: LoadLimits) -> Any:
    """Return the value a strict reading of ``raw`` gives, or raise ``Refused``."""
    try:
        doc = raw.decode("utf-8")
        value = json.loads(
            doc, object_pairs_hook=_unique, parse_constant=_refuse, parse_float=_finite
        )
    except ValueError as error:  # JSON syntax, a BOM, UTF-8, an int over the digit limit
        raise Refused(str(error)) from None
    if not isinstance(value, dict):
        raise Refused("not an object")
    items = list(_walk(value))
    containers = [depth for item, depth in items if isinstance(item, dict | list)]
    if max(containers) + 1 > limits.max_depth:
        raise Refused("too deep")
    for item, _ in items:
        if isinstance(item, str):
            if len(item) > limits.max_string_chars:
                raise Refused("too long")
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise Refused("lone surrogate") from None
    if rows_key is not None:
        rows = value.get(rows_key)
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            raise Refused("rows")
        if sum(isinstance(item, dict) for item, _ in items) > limits.max_rows + 1:
            raise Refused("too many objects")
    return value


def _holds_float(value: Any) -> bool:
    return any(isinstance(item, float) for item, _ in _walk(value))


def assert_decodes_as_the_reference(raw: bytes, rows_key: str | None, limits: LoadLimits) -> None:
    loaded = parse_input(raw, LoadedFile("action_requests.json"), rows_key, limits)
    try:
        expected = strict_reading(raw, rows_key, limits)
    except Refused:
        assert not loaded.ok, loaded.data
        assert loaded.findings
        return
    assert loaded.ok, [f.message for f in loaded.findings]
    assert repr(loaded.data) == repr(expected)  # repr tells 1 from 1.0 and True, -0.0 from 0.0
    assert loaded.may_hold_floats == _holds_float(expected)


def _mostly(valid: st.SearchStrategy[str], bad: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Draw from ``valid`` six times in seven: one bad piece anywhere refuses a file."""
    return st.sampled_from([valid] * 6 + [bad]).flatmap(lambda strategy: strategy)


_VALID_PIECES = st.sampled_from(
    [
        "a",
        "",
        "{",
        "]",
        ":",
        ",",
        " ",
        "\u00e9",
        "\U0001f600",
        "\x7f",
        '\\"',
        "\\\\",
        "\\/",
        "\\n",
        "\\t",
        "\\u0041",
        "\\u00e9",
        "\\ud83d\\ude00",
        "\\uDBFF\\uDFFF",
        "xxxxxxxx",
    ]
)
_BAD_PIECES = st.sampled_from(["\\ud800", "\\udc00", "\\x41", "\\u12", "\t", "\n", "\x00"])
_PIECES = _mostly(_VALID_PIECES, _BAD_PIECES)
_STRINGS = st.lists(_PIECES, max_size=6).map(lambda parts: '"' + "".join(parts) + '"')
_VALID_NUMBERS = st.one_of(
    st.sampled_from(
        [
            "0",
            "-0",
            "-0.0",
            "0e0",
            "1E+2",
            "1e-2",
            "2.5",
            "1e-999",
            "4.9e-324",
            "1.7976931348623157e308",
            "18446744073709551616",
            "-9223372036854775809",
        ]
    ),
    st.integers().map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)
_BAD_NUMBERS = st.one_of(
    st.sampled_from(
        [
            "1e999",
            "-1e999",
            "1.7976931348623159e308",
            "NaN",
            "Infinity",
            "-Infinity",
            "01",
            "+1",
            "1.",
            ".5",
            "-",
            "1e",
            "0x10",
        ]
    ),
    st.integers(4290, 4310).map(lambda digits: "9" * digits),
)
_NUMBERS = _mostly(_VALID_NUMBERS, _BAD_NUMBERS)
_WORDS = _mostly(st.sampled_from(["true", "false", "null"]), st.sampled_from(["nul", "True"]))
_SCALARS = st.one_of(_STRINGS, _NUMBERS, _WORDS)
_KEYS = st.one_of(st.sampled_from(['"k"', '"j"', '"\\u006b"', '"k "', '""']), _STRINGS)
_VALID_SPACES = st.sampled_from(["", " ", "\n", "\r\n", "\t"])
_SPACES = _mostly(_VALID_SPACES, st.sampled_from(["\x0c", "\u00a0"]))


def _object(pairs: list[tuple[str, str, str]]) -> str:
    return "{" + ",".join(f"{key}{space}:{space}{value}" for key, space, value in pairs) + "}"


_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
        st.lists(st.tuples(_KEYS, _SPACES, inner), max_size=3).map(_object),
    ),
    max_leaves=10,
)
_LIMITS = st.builds(
    LoadLimits,
    max_rows=st.sampled_from([1000, 1000, 1000, 3, 0]),
    max_string_chars=st.sampled_from([1000, 1000, 1000, 6, 0]),
    max_depth=st.sampled_from([64, 64, 64, 5, 4, 3, 1]),
)


@settings(max_examples=1000, deadline=None)
@given(
    pairs=st.lists(st.tuples(_KEYS, _SPACES, _VALUES), max_size=5),
    limits=_LIMITS,
    head=_mostly(st.sampled_from(["", " \n"]), st.sampled_from(["\ufeff", "\x0c"])),
    tail=_mostly(st.sampled_from(["", "\n"]), st.sampled_from([" x", "{}"])),
)
def test_object_files_decode_as_the_strict_reading(
    pairs: list[tuple[str, str, str]], limits: LoadLimits, head: str, tail: str
) -> None:
    assert_decodes_as_the_reference((head + _object(pairs) + tail).encode(), None, limits)


@settings(max_examples=600, deadline=None)
@given(
    rows=st.lists(
        st.lists(st.tuples(_KEYS, _SPACES, _VALUES), max_size=4).map(_object), max_size=6
    ),
    others=st.lists(st.tuples(_KEYS, _SPACES, _VALUES), max_size=2),
    limits=_LIMITS,
)
def test_list_files_decode_as_the_strict_reading(
    rows: list[str], others: list[tuple[str, str, str]], limits: LoadLimits
) -> None:
    top = [*others, (f'"{KEY}"', " ", "[" + ",\n".join(rows) + "]")]
    assert_decodes_as_the_reference(_object(top).encode(), KEY, limits)


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    bytes_in=st.sampled_from([b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"\x80", b""]),
)
def test_bytes_that_are_not_utf8_are_refused(data: st.DataObject, bytes_in: bytes) -> None:
    text = data.draw(_object_text())
    at = data.draw(st.integers(0, len(text)))
    raw = text.encode()[:at] + bytes_in + text.encode()[at:]
    assert_decodes_as_the_reference(raw, None, LoadLimits())


def _object_text() -> st.SearchStrategy[str]:
    return st.lists(st.tuples(_KEYS, _SPACES, _VALUES), max_size=3).map(_object)


LONG = 8192  # a limit at which strings are bounded by looking for marks, not measured


@settings(max_examples=100, deadline=None)
@given(
    length=st.integers(LONG - 3, LONG + 3),
    piece=st.sampled_from(["x", "\u00e9", "\\n", '\\"', "\\u0041"]),
    filler=st.sampled_from(['"a"', "1", '"x\\ny"']),
    rows=st.integers(0, 2000),
)
def test_long_strings_decode_as_the_strict_reading(
    length: int, piece: str, filler: str, rows: int
) -> None:
    long = '"' + piece * length + '"'  # each piece decodes to one character
    values = [filler] * rows + [long] + [filler] * 3
    raw = ('{"k": [' + ", ".join(values) + "]}").encode()
    assert_decodes_as_the_reference(raw, None, LoadLimits(max_string_chars=LONG))
