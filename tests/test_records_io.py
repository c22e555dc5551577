"""The result record's pieces: chunked serialisation and row lists built when read.

Each fast path must give exactly what the plain code gives: ``json.dumps`` for the
chunked writer, ``_project`` for projected rows, the standard canonical digest for spans.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIRST_WAVE, replay_dir
from sandbox_replay.atomic import dump_json, iter_json_chunks
from sandbox_replay.inputs import InputMode, RowRef
from sandbox_replay.lazyrows import ROWS_PER_CHUNK, LazyRows
from sandbox_replay.records import (
    MAX_TEXT,
    REDACTED,
    ProjectedRows,
    _project,
    build_records,
    redact,
)
from sandbox_replay.trace import canonical_digest, spans_digest


def _standard(value: Any) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=True) + "\n").encode("ascii")


def _holds_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        value = list(value.values())
    return isinstance(value, list) and any(map(_holds_float, value))


class _Rows(LazyRows):
    """A lazy row list over plain rows, to feed the writer something that is not a list."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def build(self, start: int, stop: int) -> list[dict[str, Any]]:
        return [dict(row) for row in self.rows[start:stop]]


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(["é", "\x7f", "line\nbreak", '"quoted"', "\\"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=7),
        st.dictionaries(st.text(max_size=4), inner, max_size=5),
        st.dictionaries(st.integers(max_value=3), inner, min_size=1, max_size=2),
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(values, st.integers(min_value=1, max_value=4), st.booleans())
def test_chunks_join_to_the_standard_dump(value: Any, per_chunk: int, floats: bool) -> None:
    # Saying "no float" is the caller's promise: only made here when it holds.
    floats = floats or _holds_float(value)
    chunks = iter_json_chunks(value, may_hold_floats=floats, items_per_chunk=per_chunk)
    assert b"".join(chunks) == _standard(value)


def test_long_lists_nested_in_objects_are_cut_into_pieces() -> None:
    spans = [{"span_id": f"span:{i}", "outcome": "blocked", "n": i} for i in range(50)]
    record = {
        "status": "pass",
        "trace": {"span_count": 50, "spans": spans, "summary": {"deeper": {"rows": spans}}},
        "rows": _Rows(spans),
        "empty": _Rows([]),
        "listed": [spans[:3], []],
    }
    plain = {**record, "rows": spans, "empty": []}
    chunks = list(iter_json_chunks(record, may_hold_floats=False, items_per_chunk=8))
    assert b"".join(chunks) == _standard(plain) == dump_json(plain, may_hold_floats=False)
    # No piece holds more than a chunk of spans.
    assert max(bytes(chunk).count(b'"span_id"') for chunk in chunks) <= 8


def _ref(row: dict[str, Any], line: int | None = 7) -> RowRef:
    return RowRef("rows.json", 0, line, row)


FIELDS = ("a", "b", "flag", "refs", "b")  # a field named twice keeps its first place
row_values = st.one_of(
    scalars,
    st.text(min_size=MAX_TEXT - 1, max_size=MAX_TEXT + 2),
    st.lists(st.text(max_size=3), max_size=66),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
rows = st.dictionaries(st.sampled_from(["a", "b", "flag", "refs", "extra", "line"]), row_values)
# Rows that hold every field, their values mostly plain: the bulk path's usual input.
plain_values = st.one_of(st.text(max_size=4), st.booleans(), st.none(), st.integers())
mostly_plain = st.one_of(plain_values, plain_values, plain_values, row_values)
complete_rows = st.fixed_dictionaries(
    {name: mostly_plain for name in ("a", "b", "flag", "refs", "line")},
    optional={"extra": row_values},
)
row_lists = st.one_of(st.lists(rows, max_size=12), st.lists(complete_rows, max_size=12))
# A field called "line" keeps its place and takes the row's line as its value.
field_tuples = st.sampled_from([FIELDS, ("a", "line", "b")])


@settings(max_examples=400, deadline=None)
@given(row_lists, st.integers(min_value=-14, max_value=14), field_tuples)
def test_projected_rows_equal_the_exact_projection(
    plain: list[Any], at: int, fields: tuple[str, ...]
) -> None:
    refs = [_ref(row, line) for line, row in enumerate(plain, start=2)]
    expected = [_project(ref, fields) for ref in refs]
    projected = ProjectedRows(refs, fields)
    assert len(projected) == len(expected)
    assert list(projected) == expected
    assert projected == expected
    assert projected[1:-1] == expected[1:-1]
    assert projected[::2] == expected[::2]
    if -len(expected) <= at < len(expected):
        assert projected[at] == expected[at]
    else:
        with pytest.raises(IndexError):
            projected[at]
    # Serialised exactly as the plain list would be.
    assert b"".join(iter_json_chunks({"rows": projected}, items_per_chunk=3)) == _standard(
        {"rows": expected}
    )


def test_projected_rows_of_plain_rows_keep_field_order_and_line() -> None:
    row = {"extra": 1, "b": "x" * MAX_TEXT, "a": None, "refs": ["r"], "flag": True}
    many = [_ref(row, line) for line in range(ROWS_PER_CHUNK + 3)]
    projected = ProjectedRows(many, FIELDS)
    first = next(iter(projected))
    assert list(first) == ["a", "b", "flag", "refs", "line"]
    assert [r["line"] for r in projected] == list(range(ROWS_PER_CHUNK + 3))


def test_redaction_reaches_rows_built_when_read() -> None:
    refs = [_ref({"a": "has SECRET inside", "b": "clean", "flag": 1, "refs": []})]
    redacted = redact({"rows": ProjectedRows(refs, FIELDS)}, [b"SECRET"])
    assert redacted["rows"] == [{"a": REDACTED, "b": "clean", "flag": 1, "refs": [], "line": 7}]


def test_spans_digest_is_the_canonical_digest_of_the_spans() -> None:
    outcome, records = replay_dir(FIRST_WAVE, InputMode.FIXTURE)
    spans = outcome.trace.spans
    assert len(spans) > 0
    expected = canonical_digest(list(spans))
    assert spans_digest(spans, may_hold_floats=False) == expected
    assert spans_digest(spans, may_hold_floats=True) == expected
    assert outcome.trace.summary["trace_digest"] == expected
    # The record built twice is the same bytes; the spans read twice are equal dicts.
    assert build_records(outcome).result_bytes == records.result_bytes
    assert list(spans) == spans[:] == [spans[i] for i in range(len(spans))]
