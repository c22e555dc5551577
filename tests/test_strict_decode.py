"""The loader's one decoder: what it loads, what it refuses, and the line it names.

Files exporters write load as a strict standard-library reading loads them
(``test_decode_fuzz.strict_reading``), with their rows' and keys' lines; every edge a
strict reader must refuse or accept gives the findings pinned here, each on its line.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_replay.load.decode import LoadedFile, parse_input
from sandbox_replay.load.files import LoadLimits
from sandbox_replay.model import codes
from test_decode_fuzz import Refused, assert_decodes_as_the_reference, strict_reading

KEY = "action_requests"
ROW = '{"request_id": "req_%d", "episode_id": "ep_1", "body_redacted": true, "n": %d}'


def _file(rows: list[str], layout: str = "indented") -> bytes:
    if layout == "minified":
        return ('{"' + KEY + '":[' + ",".join(rows) + "]}").encode()
    body = ",\n    ".join(rows)
    return ('{\n  "' + KEY + '": [\n    ' + body + "\n  ]\n}\n").encode()


def _rows(count: int = 4) -> list[str]:
    return [ROW % (i, i) for i in range(count)]


def _with(index: int, text: str) -> list[str]:
    rows = _rows()
    rows[index] = text
    return rows


PLAIN = {
    "indented": _file(_rows()),
    "minified": _file(_rows(), "minified"),
    "crlf": _file(_rows()).replace(b"\n", b"\r\n"),
    "no_rows": b'{"action_requests": []}',
    "empty_row": _file(_with(1, "{}")),
    "list_values": _file(_with(2, '{"request_id": "r", "rule_refs": ["a", "b:c"]}')),
    "float_value": _file(_with(0, '{"request_id": "r", "score": 0.00001}')),
    "unicode": _file(_with(3, '{"request_id": "r\\u00e9", "note": "caf\u00e9 \\ud83d\\ude00"}')),
    "escapes": _file(_with(1, '{"request_id": "a\\"b\\\\", "note": "x\\n\\t\\/\\u0000\\u007f"}')),
    "space_before_colon": _file(_with(1, '{"request_id" : "a", "n" :1}')),
    "line_end_before_colon": _file(_with(1, '{"request_id"\n: "a", "n"\r\n :1}')),
    "nested_lists": _file(_with(1, '{"request_id": "a", "m": [[], [["x", 1, null]], true]}')),
    "empty_string_key": _file(_with(1, '{"": "", "request_id": "a"}')),
    "negative_zero": _file(_with(1, '{"request_id": "a", "n": -0, "m": -0.0}')),
    "big_integers": _file(
        _with(1, '{"request_id": "a", "n": 18446744073709551616, "m": [-9223372036854775809]}')
    ),
    "float_in_list": _file(_with(1, '{"request_id": "a", "m": [1, [2.5e-3]]}')),
    "exponent_is_float": _file(_with(1, '{"request_id": "a", "n": 1E5}')),
    "tiny_float": _file(_with(1, '{"request_id": "a", "n": 1e-999}')),
    "delete_char": _file(_with(1, '{"request_id": "a\x7fb"}')),
}
PLAIN["brace_in_string"] = _file(_with(1, '{"request_id": "{a}", "m": ["{", "}{"]}'))
PLAIN["brace_in_key"] = _file(_with(1, '{"{": "a", "request_id": "b"}'))
PLAIN["colon_in_key"] = _file(_with(1, '{"request_id": "a", "x:y": 1}'))
PLAIN["comma_in_key"] = _file(_with(1, '{"a,b": "c", "request_id": "d"}'))
PLAIN["colons_and_commas_in_listed_strings"] = _file(
    _with(2, '{"request_id": "r", "rule_refs": ["a:b", ",c:", ":", ""], "e": ""}')
)
PLAIN["integer_at_digit_limit"] = _file(_with(3, '{"request_id": "a", "n": %s}' % ("9" * 4300)))
FLOATS = {"float_value", "negative_zero", "float_in_list", "exponent_is_float", "tiny_float"}
HANDED_ON = {
    "duplicate_key": _file(_with(2, '{"request_id": "a", "request_id": "b"}')),
    "duplicate_key_spaced": _file(_with(2, '{"request_id": "a", "request_id" : "b"}')),
    "duplicate_in_nested": _file(_with(1, '{"request_id": "a", "m": {"k": 1, "k": 2}}')),
    "nested_object": _file(_with(1, '{"request_id": "a", "m": {"k": 1}}')),
    "nested_empty_object": _file(_with(1, '{"request_id": "a", "m": [{}]}')),
    "escaped_quote_colon": _file(_with(1, '{"request_id": "a\\": b"}')),
    "nan": _file(_with(3, '{"request_id": "a", "n": NaN}')),
    "infinity": _file(_with(3, '{"request_id": "a", "n": -Infinity}')),
    "overflow": _file(_with(3, '{"request_id": "a", "n": 1e999}')),
    "row_not_object": _file(_with(2, '"just text"')),
    "extra_top_key": b'{"meta": 1, "action_requests": []}',
    "duplicate_top_key": b'{"action_requests": [], "action_requests": []}',
    "rows_not_list": b'{"action_requests": {"a": 1}}',
    "trailing_comma": _file(_rows()).replace(b"\n  ]", b",\n  ]"),
    "truncated": _file(_rows())[:-20],
    "top_level_list": b"[1, 2]",
    # Strings holding a `{` are told apart by quote parity, which an escape would upset.
    "brace_in_string_and_an_escape": _file(_with(1, '{"request_id": "{a}", "m": "\\n"}')),
    # Valid, but with an escape the keys are counted by their colons, and one is spaced.
    "escape_and_space_before_colon": _file(_with(1, '{"request_id" : "a\\"b"}')),
    "duplicate_key_escaped_file": _file(_with(2, '{"request_id": "a\\"", "request_id": "b"}')),
    "duplicate_key_minified": _file(_with(2, '{"request_id":"a","request_id":"b"}'), "minified"),
    "duplicate_key_list_value": _file(_with(2, '{"m": ["a"], "m": 1}')),
    "duplicate_key_with_a_colon": _file(_with(2, '{"x:y": 1, "x:y": 2}')),
    # A key whose name the layout count would miss, beside a dropped duplicate it would
    # otherwise make up for: the names send the count to the quotes.
    "duplicate_key_beside_a_key_with_a_colon": _file(_with(2, '{"a:b": 1, "c": 1, "c": 2}')),
    "duplicate_key_beside_a_key_with_a_comma": _file(_with(2, '{"a,b": 1, "c": 1, "c": 2}')),
    "duplicate_key_beside_a_key_with_a_brace": _file(_with(2, '{"{": 1, "c": 1, "c": 2}')),
    "duplicate_key_after_listed_colons": _file(_with(2, '{"m": ["a", ":b"], "c": 1, "c": 2}')),
    # The layout keeps line ends: a key parted from its colon by one does not read `"":`,
    # and would make up for the dropped duplicate.
    "duplicate_key_with_a_line_end_before_a_colon": _file(_with(2, '{"m": "a", "m"\n: 1}')),
    "duplicate_top_key_same_value": b'{"action_requests": [], "action_requests": []}',
    # Arrays and objects before the rows' list: the rows are those of the right list.
    "lists_before_the_rows": b'{"a": [{"k": 1}],\n"b": 2, "c": {"d": [3]},\n"action_requests": ['
    + b'\n{"request_id": "r1"},\n\n{"request_id": "r2"}]}',
    "rows_before_a_list": b'{"action_requests": [{"request_id": "r1"},\n{"request_id": "r2"}],'
    + b'\n"z": [{"k": "{"}]}',
    "nested_object_in_list": _file(_with(1, '{"request_id": "a", "m": [[{"k": 1}]]}')),
    "negative_infinity_overflow": _file(_with(3, '{"request_id": "a", "n": -1e999}')),
    "just_over_max_double": _file(_with(3, '{"request_id": "a", "n": 1.7976931348623159e308}')),
    "integer_over_digit_limit": _file(_with(3, '{"request_id": "a", "n": %s}' % ("9" * 5000))),
    "lone_high_surrogate": _file(_with(1, '{"request_id": "a\\ud800"}')),
    "lone_low_surrogate": _file(_with(1, '{"request_id": "a\\udc00b"}')),
    "high_surrogate_then_letter": _file(_with(1, '{"request_id": "\\ud800\\u0041"}')),
    "two_high_surrogates": _file(_with(1, '{"request_id": "\\ud800\\ud800"}')),
    "surrogate_key": _file(_with(1, '{"\\udfff": "a"}')),
    "control_character": _file(_with(1, '{"request_id": "a\x01b"}')),
    "raw_newline_in_string": _file(_with(1, '{"request_id": "a\nb"}')),
    "nul_in_string": _file(_with(1, '{"request_id": "a\x00b"}')),
    "bad_escape": _file(_with(1, '{"request_id": "a\\x41"}')),
    "form_feed_outside": b"\x0c" + _file(_rows()),
    "leading_zero": _file(_with(3, '{"request_id": "a", "n": 01}')),
    "plus_sign": _file(_with(3, '{"request_id": "a", "n": +1}')),
    "bare_decimal_point": _file(_with(3, '{"request_id": "a", "n": 1.}')),
    "comment": b"/* c */" + _file(_rows()),
    "empty_file": b"",
    "extra_data": _file(_rows()) + b"{}",
}
# Bytes that are not UTF-8, each placed inside a string value of an otherwise plain file.
NOT_UTF8 = {
    "utf16_surrogate": b"\xed\xa0\x80",
    "overlong_slash": b"\xc0\xaf",
    "over_max_code_point": b"\xf4\x90\x80\x80",
    "truncated_sequence": b"\xe2\x82",
    "lone_continuation": b"\x80",
    "invalid_byte": b"\xff",
}
for _case, _bytes in NOT_UTF8.items():
    HANDED_ON["not_utf8_" + _case] = _file(_with(1, '{"request_id": "a@b"}')).replace(b"@", _bytes)


# What each file gives: loaded or not, its findings (code, message, line), its rows' lines
# where loaded, and its top-level keys' lines (as far as a refused file was read).
EXPECTED: dict[
    str, tuple[bool, list[tuple[str, str, int | None]], list[int] | None, dict[str, int]]
] = {
    "bad_escape": (
        False,
        [(codes.INPUT_JSON_INVALID, "Invalid \\escape", 4)],
        None,
        {"action_requests": 2},
    ),
    "bare_decimal_point": (
        False,
        [(codes.INPUT_JSON_INVALID, "Expecting ',' delimiter", 6)],
        None,
        {"action_requests": 2},
    ),
    "brace_in_string_and_an_escape": (True, [], [3, 4, 5, 6], {"action_requests": 2}),
    "comment": (False, [(codes.INPUT_JSON_INVALID, "Expecting value", 1)], None, {}),
    "control_character": (
        False,
        [(codes.INPUT_JSON_INVALID, "Invalid control character at", 4)],
        None,
        {"action_requests": 2},
    ),
    "duplicate_in_nested": (
        False,
        [(codes.INPUT_DUPLICATE_KEY, "duplicate key 'k'", 4)],
        None,
        {"action_requests": 2},
    ),
    "duplicate_key": (
        False,
        [(codes.INPUT_DUPLICATE_KEY, "duplicate key 'request_id'", 5)],
        None,
        {"action_requests": 2},
    ),
    "duplicate_key_after_listed_colons": (
        False,
        [(codes.INPUT_DUPLICATE_KEY, "duplicate key 'c'", 5)],
        None,
        {"action_requests": 2},
    ),
    "duplicate_key_beside_a_key_with_a_brace": (
        False,
        [(codes.INPUT_DUPLICATE_KEY, "duplicate key 'c'", 5)],
        None,
        {"action_requests": 2},
    ),
    "duplicate_key_beside_a_key_with_a_colon": (
        False,
        [(codes.INPUT_DUPLICATE_KEY, "duplicate key 'c'", 5)],
        None,
        {"action_requests": 2},
    ),
    "duplicate_key_beside_a_key_with_a_comma": (
        False,
        [(codes.INPUT_DUPLICATE_KEY, "duplicate key 'c'", 5)],
        None,
        {"action_requests": 2},
    ),
    "duplicate_key_escaped_file": (
        False,
        [(codes.INPUT_DUPLICATE_KEY, "duplicate key 'request_id'", 5)],
        None,
        {"action_requests": 2},
    ),
    "duplicate_key_list_value": (
        False,
        [(codes.INPUT_DUPLICATE_KEY, "duplicate key 'm'", 5)],
        None,
        {"action_requests": 2},
    ),
    "duplicate_key_minified": (
        False,
        [(codes.INPUT_DUPLICATE_KEY, "duplicate key 'request_id'", 1)],
        None,
        {"action_requests": 1},
    ),
    "duplicate_key_spaced": (
        False,
        [(codes.INPUT_DUPLICATE_KEY, "duplicate key 'request_id'", 5)],
        None,
        {"action_requests": 2},
    ),
    "duplicate_key_with_a_colon": (
        False,
        [(codes.INPUT_DUPLICATE_KEY, "duplicate key 'x:y'", 5)],
        None,
        {"action_requests": 2},
    ),
    "duplicate_key_with_a_line_end_before_a_colon": (
        False,
        [(codes.INPUT_DUPLICATE_KEY, "duplicate key 'm'", 5)],
        None,
        {"action_requests": 2},
    ),
    "duplicate_top_key": (
        False,
        [(codes.INPUT_DUPLICATE_KEY, "duplicate key 'action_requests'", 1)],
        None,
        {"action_requests": 1},
    ),
    "duplicate_top_key_same_value": (
        False,
        [(codes.INPUT_DUPLICATE_KEY, "duplicate key 'action_requests'", 1)],
        None,
        {"action_requests": 1},
    ),
    "empty_file": (False, [(codes.INPUT_JSON_INVALID, "empty file", 1)], None, {}),
    "escape_and_space_before_colon": (True, [], [3, 4, 5, 6], {"action_requests": 2}),
    "escaped_quote_colon": (True, [], [3, 4, 5, 6], {"action_requests": 2}),
    "extra_data": (
        False,
        [(codes.INPUT_JSON_INVALID, "Extra data", 9)],
        None,
        {"action_requests": 2},
    ),
    "extra_top_key": (
        True,
        [
            (
                codes.INPUT_UNEXPECTED_KEY,
                "top-level key 'meta' besides 'action_requests'; a list file holds only its list",
                1,
            )
        ],
        [],
        {"action_requests": 1, "meta": 1},
    ),
    "form_feed_outside": (False, [(codes.INPUT_JSON_INVALID, "Expecting value", 1)], None, {}),
    "high_surrogate_then_letter": (
        False,
        [
            (
                codes.INPUT_NOT_UTF8,
                "a string escapes a lone UTF-16 surrogate, which is not valid Unicode",
                4,
            )
        ],
        None,
        {"action_requests": 2},
    ),
    "infinity": (
        False,
        [(codes.INPUT_NON_FINITE_NUMBER, "non-finite number -Infinity", 6)],
        None,
        {"action_requests": 2},
    ),
    "integer_over_digit_limit": (
        False,
        [(codes.INPUT_JSON_INVALID, "unparseable number", 6)],
        None,
        {"action_requests": 2},
    ),
    "just_over_max_double": (
        False,
        [(codes.INPUT_NON_FINITE_NUMBER, "number overflows to infinity", 6)],
        None,
        {"action_requests": 2},
    ),
    "leading_zero": (
        False,
        [(codes.INPUT_JSON_INVALID, "Expecting ',' delimiter", 6)],
        None,
        {"action_requests": 2},
    ),
    "lists_before_the_rows": (
        True,
        [
            (
                codes.INPUT_UNEXPECTED_KEY,
                "top-level key 'a' besides 'action_requests'; a list file holds only its list",
                1,
            ),
            (
                codes.INPUT_UNEXPECTED_KEY,
                "top-level key 'b' besides 'action_requests'; a list file holds only its list",
                2,
            ),
            (
                codes.INPUT_UNEXPECTED_KEY,
                "top-level key 'c' besides 'action_requests'; a list file holds only its list",
                2,
            ),
        ],
        [4, 6],
        {"a": 1, "action_requests": 3, "b": 2, "c": 2},
    ),
    "lone_high_surrogate": (
        False,
        [
            (
                codes.INPUT_NOT_UTF8,
                "a string escapes a lone UTF-16 surrogate, which is not valid Unicode",
                4,
            )
        ],
        None,
        {"action_requests": 2},
    ),
    "lone_low_surrogate": (
        False,
        [
            (
                codes.INPUT_NOT_UTF8,
                "a string escapes a lone UTF-16 surrogate, which is not valid Unicode",
                4,
            )
        ],
        None,
        {"action_requests": 2},
    ),
    "nan": (
        False,
        [(codes.INPUT_NON_FINITE_NUMBER, "non-finite number NaN", 6)],
        None,
        {"action_requests": 2},
    ),
    "negative_infinity_overflow": (
        False,
        [(codes.INPUT_NON_FINITE_NUMBER, "number overflows to infinity", 6)],
        None,
        {"action_requests": 2},
    ),
    "nested_empty_object": (
        True,
        [
            (
                codes.INPUT_ROW_NESTED_OBJECT,
                "row 1 of 'action_requests' holds an object under 'm'; the format names no object there",
                4,
            )
        ],
        [3, 4, 5, 6],
        {"action_requests": 2},
    ),
    "nested_object": (
        True,
        [
            (
                codes.INPUT_ROW_NESTED_OBJECT,
                "row 1 of 'action_requests' holds an object under 'm'; the format names no object there",
                4,
            )
        ],
        [3, 4, 5, 6],
        {"action_requests": 2},
    ),
    "nested_object_in_list": (
        True,
        [
            (
                codes.INPUT_ROW_NESTED_OBJECT,
                "row 1 of 'action_requests' holds an object under 'm'; the format names no object there",
                4,
            )
        ],
        [3, 4, 5, 6],
        {"action_requests": 2},
    ),
    "not_utf8_invalid_byte": (
        False,
        [(codes.INPUT_NOT_UTF8, "invalid UTF-8 at byte 128", 4)],
        None,
        {},
    ),
    "not_utf8_lone_continuation": (
        False,
        [(codes.INPUT_NOT_UTF8, "invalid UTF-8 at byte 128", 4)],
        None,
        {},
    ),
    "not_utf8_over_max_code_point": (
        False,
        [(codes.INPUT_NOT_UTF8, "invalid UTF-8 at byte 128", 4)],
        None,
        {},
    ),
    "not_utf8_overlong_slash": (
        False,
        [(codes.INPUT_NOT_UTF8, "invalid UTF-8 at byte 128", 4)],
        None,
        {},
    ),
    "not_utf8_truncated_sequence": (
        False,
        [(codes.INPUT_NOT_UTF8, "invalid UTF-8 at byte 128", 4)],
        None,
        {},
    ),
    "not_utf8_utf16_surrogate": (
        False,
        [(codes.INPUT_NOT_UTF8, "invalid UTF-8 at byte 128", 4)],
        None,
        {},
    ),
    "nul_in_string": (
        False,
        [(codes.INPUT_JSON_INVALID, "Invalid control character at", 4)],
        None,
        {"action_requests": 2},
    ),
    "overflow": (
        False,
        [(codes.INPUT_NON_FINITE_NUMBER, "number overflows to infinity", 6)],
        None,
        {"action_requests": 2},
    ),
    "plus_sign": (
        False,
        [(codes.INPUT_JSON_INVALID, "Expecting value", 6)],
        None,
        {"action_requests": 2},
    ),
    "raw_newline_in_string": (
        False,
        [(codes.INPUT_JSON_INVALID, "Invalid control character at", 4)],
        None,
        {"action_requests": 2},
    ),
    "row_not_object": (
        False,
        [(codes.INPUT_ROW_NOT_OBJECT, "row 2 of 'action_requests' is a string, not an object", 5)],
        None,
        {"action_requests": 2},
    ),
    "rows_before_a_list": (
        True,
        [
            (
                codes.INPUT_UNEXPECTED_KEY,
                "top-level key 'z' besides 'action_requests'; a list file holds only its list",
                3,
            )
        ],
        [1, 2],
        {"action_requests": 1, "z": 3},
    ),
    "rows_not_list": (
        False,
        [(codes.INPUT_ROWS_NOT_LIST, "top-level key 'action_requests' is a object, not a list", 1)],
        None,
        {"action_requests": 1},
    ),
    "surrogate_key": (
        False,
        [
            (
                codes.INPUT_NOT_UTF8,
                "a string escapes a lone UTF-16 surrogate, which is not valid Unicode",
                4,
            )
        ],
        None,
        {"action_requests": 2},
    ),
    "top_level_list": (
        False,
        [(codes.INPUT_TOP_LEVEL_NOT_OBJECT, "top-level value is a list, not an object", 1)],
        None,
        {},
    ),
    "trailing_comma": (
        False,
        [(codes.INPUT_JSON_INVALID, "Expecting value", 7)],
        None,
        {"action_requests": 2},
    ),
    "truncated": (
        False,
        [(codes.INPUT_JSON_INVALID, "Expecting value", 6)],
        None,
        {"action_requests": 2},
    ),
    "two_high_surrogates": (
        False,
        [
            (
                codes.INPUT_NOT_UTF8,
                "a string escapes a lone UTF-16 surrogate, which is not valid Unicode",
                4,
            )
        ],
        None,
        {"action_requests": 2},
    ),
}
# The rows' lines of plain files, where not [3, 4, 5, 6]; the rows' key stands on line 2
# where they do not start on line 1.
ROW_LINES = {"minified": [1, 1, 1, 1], "no_rows": [], "line_end_before_colon": [3, 4, 7, 8]}


def _parse(raw: bytes, limits: LoadLimits) -> LoadedFile:
    return parse_input(raw, LoadedFile(name="action_requests.json"), KEY, limits)


def _findings(loaded: LoadedFile) -> list[tuple[str, str, int | None]]:
    return [(f.error_code, f.message, f.line) for f in loaded.findings]


@pytest.mark.parametrize("case", sorted(PLAIN))
def test_plain_files_load_as_the_strict_reading(case: str) -> None:
    loaded = _parse(PLAIN[case], LoadLimits())
    assert loaded.ok and loaded.row_keys is not None and not loaded.findings
    assert loaded.data == strict_reading(PLAIN[case], KEY, LoadLimits())
    assert loaded.row_lines == ROW_LINES.get(case, [3, 4, 5, 6])
    assert loaded.key_line(KEY) == (1 if loaded.row_lines[:1] in ([], [1]) else 2)
    assert loaded.may_hold_floats == (case in FLOATS)


@pytest.mark.parametrize("case", sorted(HANDED_ON))
def test_other_files_give_their_findings_on_their_lines(case: str) -> None:
    ok, findings, row_lines, key_lines = EXPECTED[case]
    loaded = _parse(HANDED_ON[case], LoadLimits())
    name = "action_requests.json"
    assert _findings(loaded) == [
        (code, f"{name}:{line}: {message}" if line else f"{name}: {message}", line)
        for code, message, line in findings
    ]
    assert loaded.ok == ok
    assert {key: loaded.key_line(key) for key in key_lines} == key_lines
    if ok:
        assert loaded.row_lines == row_lines
        assert loaded.data == strict_reading(HANDED_ON[case], KEY, LoadLimits())
    else:
        assert loaded.key_lines == key_lines  # as far as the file was read
        with pytest.raises(Refused):
            strict_reading(HANDED_ON[case], KEY, LoadLimits())


def test_the_keys_of_flat_rows_are_kept_for_the_forbidden_key_check() -> None:
    loaded = _parse(PLAIN["comma_in_key"], LoadLimits())
    assert loaded.row_keys == {"a,b", "request_id", "episode_id", "body_redacted", "n"}
    loaded = _parse(HANDED_ON["nested_object"], LoadLimits())
    assert loaded.ok and loaded.row_keys is None


def _codes_and_lines(loaded: LoadedFile) -> list[tuple[str, int | None]]:
    return [(f.error_code, f.line) for f in loaded.findings]


def test_duplicate_key_is_found_on_its_line() -> None:
    loaded = _parse(HANDED_ON["duplicate_key"], LoadLimits())
    assert _codes_and_lines(loaded) == [(codes.INPUT_DUPLICATE_KEY, 5)]


LIMIT = codes.INPUT_LIMIT_EXCEEDED


@pytest.mark.parametrize(
    ("limits", "found", "said"),
    [
        # Rows longer than the string limit are measured string by string; none is too long.
        (LoadLimits(max_string_chars=40), [], ""),
        (LoadLimits(max_string_chars=5), [(LIMIT, 2)], "a key is longer than the limit of 5"),
        (LoadLimits(max_depth=3), [], ""),
        (LoadLimits(max_depth=2), [(LIMIT, 3)], "nesting is deeper than the limit of 2"),
        (LoadLimits(max_rows=3), [(LIMIT, 6)], "holds more objects than the limit of 3 rows"),
    ],
)
def test_limits_are_held_on_their_lines(limits: LoadLimits, found: list[Any], said: str) -> None:
    loaded = _parse(PLAIN["indented"], limits)
    assert _codes_and_lines(loaded) == found
    assert all(said in f.message for f in loaded.findings)
    assert_decodes_as_the_reference(PLAIN["indented"], KEY, limits)


def test_a_row_key_over_the_string_limit_is_refused_even_without_rows() -> None:
    loaded = _parse(PLAIN["no_rows"], LoadLimits(max_string_chars=10))
    assert _codes_and_lines(loaded) == [(LIMIT, 1)]


LONG = 10_000  # a limit above which strings are bounded by looking for quotes, not measured


@pytest.mark.parametrize(
    ("text", "fits"),
    [
        ("x" * LONG, True),
        ("x" * (LONG + 1), False),
        ("\u00e9" * LONG, True),  # more bytes than the limit, but not more characters
        ("x" * (LONG - 10) + "\\n" * 11, False),  # an escape: measured, and too long
        ("x" * (LONG - 10) + "\\n" * 10, True),
    ],
)
@pytest.mark.parametrize("layout", ["indented", "minified"])
def test_long_strings_in_a_long_file(text: str, fits: bool, layout: str) -> None:
    rows = [ROW % (i, i) for i in range(400)]
    rows[200] = '{"request_id": "' + text + '"}'
    raw = _file(rows, layout)
    assert len(raw) > 2 * LONG
    loaded = _parse(raw, LoadLimits(max_string_chars=LONG))
    assert loaded.ok == fits
    assert _codes_and_lines(loaded) == (
        [] if fits else [(LIMIT, 203 if layout == "indented" else 1)]
    )
    assert_decodes_as_the_reference(raw, KEY, LoadLimits(max_string_chars=LONG))


def test_a_long_key_in_a_long_file_is_refused_on_its_row_line() -> None:
    rows = [ROW % (i, i) for i in range(400)]
    rows[7] = '{"%s": 1}' % ("k" * (LONG + 1))
    loaded = _parse(_file(rows), LoadLimits(max_string_chars=LONG))
    assert _codes_and_lines(loaded) == [(LIMIT, 10)]
    assert "a string is longer than the limit of 10000" in loaded.findings[0].message


# Text pieces that exercise the proofs: quotes and escapes, braces, colons after quotes,
# surrogates (paired and lone), non-ASCII, and numbers at the edges of both parsers.
_TEXTS = st.sampled_from(
    [
        "a",
        "",
        "{",
        "}",
        "[",
        ":",
        '\\"',
        '\\":',
        "\\\\",
        "\\n",
        "\\u00e9",
        "\u00e9",
        "\\ud83d\\ude00",
        "\\ud800",
        "\\udc00",
        "\\u0041",
        " ",
        "\\/",
        "\x7f",
        "\t",
        ",",
        ",:",
    ]
)
_STRINGS = st.lists(_TEXTS, max_size=4).map(lambda parts: '"' + "".join(parts) + '"')
_NUMBERS = st.sampled_from(
    [
        "0",
        "-0",
        "1",
        "-1",
        "1.5",
        "-0.0",
        "1e5",
        "1E-5",
        "1e999",
        "-1e999",
        "1e-999",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775809",
        "NaN",
        "Infinity",
        "01",
        "1.",
        "9" * 30,
    ]
)
_SCALARS = st.one_of(_STRINGS, _NUMBERS, st.sampled_from(["true", "false", "null"]))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
        st.lists(st.tuples(st.sampled_from(['"k"', '"j"']), inner), max_size=2).map(
            lambda pairs: "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
        ),
    ),
    max_leaves=6,
)
_KEYS = st.sampled_from(
    ['"request_id"', '"n"', '"m"', '"\\u006e"', '"{"', '"a\\"b"', '"x:y"', '","', '""']
)
_COLONS = st.sampled_from([":", ": ", " :", "\n:"])
_ROWS = st.lists(
    st.lists(st.tuples(_KEYS, _COLONS, _VALUES), max_size=4).map(
        lambda pairs: "{" + ", ".join(k + c + v for k, c, v in pairs) + "}"
    ),
    max_size=5,
)


@settings(max_examples=1000, deadline=None)
@given(rows=_ROWS, layout=st.sampled_from(["indented", "minified"]))
def test_generated_files_load_as_the_strict_reading(rows: list[str], layout: str) -> None:
    raw = _file(rows, layout)
    assert_decodes_as_the_reference(raw, KEY, LoadLimits(max_depth=6))
