"""A list file decoded straight into typed rows loads exactly what the general decode does.

``parse_input`` with a row kind decodes a file as exporters write it (one list of flat
rows, each key a field of the kind) into typed rows, and proves that no key was unknown or
given twice by counting; any other file goes the general way (decoded as any JSON, then
``type_rows``). Each case here is loaded both ways and must give equal rows, lines, key
lines, float flag and findings; and the typed way must be the one taken exactly where the
file is as exporters write it.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_replay.load import decode
from sandbox_replay.load.decode import LoadedFile, parse_input, type_rows
from sandbox_replay.load.files import LoadLimits
from sandbox_replay.model.rows import ActionRequest

KEY = "action_requests"
NAME = "action_requests.json"
ROW = '{"request_id": "req_%d", "episode_id": "ep_1", "body_redacted": true, "risk_class": %d}'


def _file(rows: list[str], layout: str = "indented") -> bytes:
    if layout == "minified":
        return ('{"' + KEY + '":[' + ",".join(rows) + "]}").encode()
    body = ",\n    ".join(rows)
    return ('{\n  "' + KEY + '": [\n    ' + body + "\n  ]\n}\n").encode()


def _with(index: int, text: str) -> bytes:
    rows = [ROW % (i, i) for i in range(4)]
    rows[index] = text
    return _file(rows)


# Files as exporters write them: every key a field of the kind, none twice.
TYPED = {
    "indented": _with(0, ROW % (0, 0)),
    "minified": _file([ROW % (i, i) for i in range(3)], "minified"),
    "no_rows": b'{"action_requests": []}',
    "empty_row": _with(1, "{}"),
    "list_value": _with(2, '{"request_id": "r", "risk_class": ["a", "b:c", 1.5]}'),
    "float_value": _with(0, '{"request_id": "r", "risk_class": 0.25}'),
    "float_in_nested_list": _with(1, '{"request_id": "r", "risk_class": [["a"], [[2.5]]]}'),
    "escaped_key": _with(1, '{"request\\u005fid": "a", "episode_id": "x\\"y"}'),
    "colon_in_value": _with(1, '{"request_id": "a:b", "episode_id": "{:}"}'),
    "every_field": _file(
        ['{"' + '": 1, "'.join(f for f in ActionRequest.__struct_fields__ if f != "line") + '": 1}']
    ),
}
# Files that must go the general way, and load or be refused as it words them.
GENERAL = {
    "unknown_key": _with(1, '{"request_id": "a", "agent_ref": "x"}'),
    "forbidden_key": _with(1, '{"request_id": "a", "secret_value": "x"}'),
    "duplicate_field": _with(2, '{"request_id": "a", "request_id": "b"}'),
    "duplicate_escaped": _with(2, '{"request_id": "a", "request\\u005fid": "b"}'),
    "line_key": _with(1, '{"request_id": "a", "line": 7}'),
    "nested_object": _with(1, '{"request_id": "a", "risk_class": {"k": 1}}'),
    "extra_top_key": b'{"meta": [], "action_requests": []}',
    "duplicate_top_key": b'{"action_requests": [{"request_id": "a"}], "action_requests": []}',
    "row_not_object": _with(2, '"text"'),
    "nan": _with(3, '{"request_id": "a", "risk_class": NaN}'),
    "lone_surrogate": _with(1, '{"request_id": "a\\ud800"}'),
    "truncated": _with(0, ROW % (0, 0))[:-9],
}


def _load(raw: bytes, typed: bool, limits: LoadLimits) -> LoadedFile:
    loaded = parse_input(raw, LoadedFile(NAME), KEY, limits, ActionRequest if typed else None)
    if loaded.ok:
        type_rows(loaded, ActionRequest)
    return loaded


def _outcome(loaded: LoadedFile) -> dict[str, Any]:
    return {
        "ok": loaded.ok,
        "rows": [msgspec.structs.asdict(row) for row in loaded.rows],
        "row_lines": loaded.row_lines,
        "key_lines": {key: loaded.key_line(key) for key in (KEY, "meta")},
        "floats": loaded.may_hold_floats if loaded.ok else None,
        "findings": [(f.error_code, f.message, f.line) for f in loaded.findings],
    }


def _typed_way_taken(raw: bytes, limits: LoadLimits) -> bool:
    layout = decode.Layout.of(raw)
    return decode._decode_typed_rows(raw, layout, LoadedFile(NAME), KEY, ActionRequest, limits)


@pytest.mark.parametrize("case", sorted(TYPED))
def test_exporter_files_decode_typed_as_the_general_way_loads_them(case: str) -> None:
    raw = TYPED[case]
    typed, general = _load(raw, True, LoadLimits()), _load(raw, False, LoadLimits())
    assert _typed_way_taken(raw, LoadLimits())
    assert typed.ok
    assert _outcome(typed) == _outcome(general)


@pytest.mark.parametrize("case", sorted(GENERAL))
def test_other_files_go_the_general_way(case: str) -> None:
    raw = GENERAL[case]
    assert not _typed_way_taken(raw, LoadLimits())
    assert _outcome(_load(raw, True, LoadLimits())) == _outcome(_load(raw, False, LoadLimits()))


def test_a_forbidden_key_is_still_noted_when_the_kind_is_given() -> None:
    loaded = _load(GENERAL["forbidden_key"], True, LoadLimits())
    decode.note_forbidden_keys(loaded)  # as the loader does, before typing
    assert loaded.ok
    reference = parse_input(GENERAL["forbidden_key"], LoadedFile(NAME), KEY, LoadLimits())
    decode.note_forbidden_keys(reference)
    assert reference.forbidden_keys == [(f"{NAME}#row1", 4, ["secret_value"])]


def test_a_long_string_is_refused_either_way() -> None:
    raw = _with(1, '{"request_id": "' + "x" * 50 + '"}')
    limits = LoadLimits(max_string_chars=40)
    assert not _typed_way_taken(raw, limits)
    assert _outcome(_load(raw, True, limits)) == _outcome(_load(raw, False, limits))
    assert not _load(raw, True, limits).ok


_FIELDS = [f'"{name}"' for name in ActionRequest.__struct_fields__ if name != "line"]
_KEYS = st.sampled_from([*_FIELDS, '"request\\u005fid"', '"line"', '"agent_ref"', '"{"'])
_VALUES = st.sampled_from(
    [
        '"a"',
        '"b:c"',
        '"{x}"',
        '"q\\"r"',
        "1",
        "2.5",
        "true",
        "null",
        "[]",
        '["a", 1]',
        "[[1.5]]",
        "{}",
    ]
)
_ROWS = st.lists(
    st.lists(st.tuples(_KEYS, _VALUES), max_size=5).map(
        lambda pairs: "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    ),
    max_size=5,
)


@settings(max_examples=500, deadline=None)
@given(rows=_ROWS, layout=st.sampled_from(["indented", "minified"]))
def test_generated_files_load_the_same_typed_or_not(rows: list[str], layout: str) -> None:
    raw = _file(rows, layout)
    typed, general = _load(raw, True, LoadLimits()), _load(raw, False, LoadLimits())
    assert _outcome(typed) == _outcome(general)
