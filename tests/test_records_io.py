"""The result record's pieces: chunked serialisation, typed row lists, the spans' digest.

Whatever writes them, the bytes are those of the standard library's ``json.dumps``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIRST_WAVE, replay_dir
from sandbox_replay import atomic
from sandbox_replay.atomic import (
    dump_json,
    iter_json_chunks,
    struct_fields,
    write_chunks_atomic,
)
from sandbox_replay.checks.trace import canonical_digest, spans_digest
from sandbox_replay.load.decode import LoadedFile, parse_input, type_rows
from sandbox_replay.load.files import LoadLimits
from sandbox_replay.load.run import InputMode, RunInputs
from sandbox_replay.model.census import NO_VALUES, ValueShape, census
from sandbox_replay.model.policy import default_table
from sandbox_replay.model.rows import UNSET, ActionRequest, PolicyVerdict, Rollback, Table
from sandbox_replay.records.build import REDACTED, build_records, redact
from sandbox_replay.records.recorded_rows import MAX_TEXT, derived_rows, record_rows


def _standard(value: Any) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=True) + "\n").encode("ascii")


def _holds_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        value = list(value.values())
    return isinstance(value, list) and any(map(_holds_float, value))


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
        "rows": spans,
        "empty": [],
        "listed": [spans[:3], []],
    }
    plain = dict(record)
    chunks = list(iter_json_chunks(record, may_hold_floats=False, items_per_chunk=8))
    assert b"".join(chunks) == _standard(plain) == dump_json(plain, may_hold_floats=False)
    # No piece holds more than a chunk of spans.
    assert max(bytes(chunk).count(b'"span_id"') for chunk in chunks) <= 8


row_values = st.one_of(
    scalars,
    st.text(min_size=MAX_TEXT - 1, max_size=MAX_TEXT + 2),
    st.lists(st.text(max_size=3), max_size=66),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
# Rollback rows (any row kind would do): each field held or not, with any value.
rollback_rows = st.fixed_dictionaries(
    {},
    optional={name: row_values for name in Rollback.__struct_fields__ if name != "line"},
)


def _scalar_of(value: Any) -> Any:
    """What the record shows of a value, spelled out (FORMAT 4: scalars, cut text)."""
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + "...[truncated]"
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, list) and len(value) <= 64 and all(isinstance(v, str) for v in value):
        return [_scalar_of(v) for v in value]
    return f"<{type(value).__name__}>"


@settings(max_examples=300, deadline=None)
@given(st.lists(rollback_rows, max_size=12), st.integers(min_value=1, max_value=4))
def test_record_rows_show_each_held_field_as_a_scalar_then_the_line(
    given_rows: list[dict[str, Any]], per_chunk: int
) -> None:
    rows = [Rollback(**row, line=line) for line, row in enumerate(given_rows, start=2)]
    shown = record_rows(Table.of("rollback_receipts.json", rows, "rollback_id"))
    expected = [
        {
            **{
                name: _scalar_of(row[name])
                for name in Rollback.__struct_fields__
                if name in row and name != "line"
            },
            "line": line,
        }
        for line, row in enumerate(given_rows, start=2)
    ]
    assert [struct_fields(row) for row in shown] == expected
    floats = _holds_float(expected)
    written = iter_json_chunks({"rows": shown}, may_hold_floats=floats, items_per_chunk=per_chunk)
    assert b"".join(written) == _standard({"rows": expected})


# Values at the edges of the rule as well: lists of 64 and 65 strings, a list holding a
# string of MAX_TEXT characters or one more.
edge_values = st.one_of(
    row_values,
    st.integers(min_value=64, max_value=65).map(lambda n: ["s"] * n),
    st.integers(min_value=MAX_TEXT, max_value=MAX_TEXT + 1).map(lambda n: ["a", "t" * n]),
)
edge_rows = st.fixed_dictionaries(
    {},
    optional={name: edge_values for name in Rollback.__struct_fields__ if name != "line"},
)


@settings(max_examples=400, deadline=None)
@given(st.lists(edge_rows, max_size=12), st.booleans(), st.booleans())
def test_rows_the_loader_measured_are_recorded_as_the_rule_says(
    given_rows: list[dict[str, Any]], other_key: bool, compact: bool
) -> None:
    # The loader measures the rows' values as it proves the file (``row_shape``); where
    # that shape says no value changes, the records list the rows without walking them.
    # Held to the rule spelled out, for rows decoded typed and (with a key the kind does
    # not name, or an object in a row) decoded as any JSON and typed after.
    rows_given = [{**row, "note": 1} if other_key else row for row in given_rows]
    raw = json.dumps({"rollback_receipts": rows_given}, indent=None if compact else 2)
    loaded = LoadedFile("rollback_receipts.json")
    parse_input(raw.encode(), loaded, "rollback_receipts", LoadLimits(), Rollback)
    assert loaded.ok and loaded.row_shape is not None
    # The shape is that of the rows' values: an object among them only if a row holds one.
    held = [value for row in rows_given for value in row.values()]
    assert (dict in loaded.row_shape.kinds) == any(isinstance(v, dict) for v in held)
    type_rows(loaded, Rollback)
    table = Table.of(loaded.name, loaded.rows, "rollback_id", loaded.row_shape)
    shown = record_rows(table)
    expected = [
        {
            **{
                name: _scalar_of(row[name])
                for name in Rollback.__struct_fields__
                if name in row and name != "line"
            },
            "line": typed.line,
        }
        for row, typed in zip(given_rows, loaded.rows, strict=True)
    ]
    assert [struct_fields(row) for row in shown] == expected


def test_a_shape_counts_kinds_and_lengths_one_level_and_the_next() -> None:
    values: list[Any] = ["abc", 7, None, ["x" * 9, "y"], UNSET, {"k": "v" * 4, "j": 2.5}]
    found = census(values)
    assert found.shape == ValueShape(
        kinds=frozenset({str, int, type(None), list, type(UNSET), dict}),
        longest=3,  # "abc" (and the list's two items, the object's two)
        widest=2,
        item_kinds=frozenset({str, float}),
        longest_item=9,
    )
    # Strings with the object's keys: "abc", "x...", "y", "vvvv", "k", "j".
    assert (found.strings, found.floats) == (6, True)
    assert census([[values]], shape_at=2).shape == found.shape
    assert census([]).shape == census([[]], shape_at=1).shape == NO_VALUES


# Request and verdict rows of one request each: each shape field held or not, any value.
_SHAPE = ("action_kind", "requested_capability", "risk_class")
derived_inputs = st.tuples(
    st.fixed_dictionaries({}, optional={name: row_values for name in _SHAPE}),
    st.none()
    | st.fixed_dictionaries({}, optional={"verdict": row_values, "rule_refs": row_values}),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(derived_inputs, max_size=8), st.integers(min_value=0, max_value=4100))
def test_derived_rows_show_the_copied_fields_as_scalars_and_none_where_not_held(
    given_inputs: list[tuple[dict[str, Any], dict[str, Any] | None]], plain: int
) -> None:
    # ``plain`` rows that need no projecting come first, so that the given ones fall in
    # the first or the second batch the projection looks at together.
    inputs: list[tuple[dict[str, Any], dict[str, Any] | None]]
    inputs = [({"action_kind": "a", "risk_class": "r"}, {"verdict": "allow"})] * plain
    inputs += given_inputs
    run = RunInputs(Path("."), InputMode.BUNDLE, default_table(), {})
    requests = [
        ActionRequest(request_id=f"req-{i}", **shape, line=i) for i, (shape, _) in enumerate(inputs)
    ]
    verdicts = [
        PolicyVerdict(request_id=f"req-{i}", **declared, line=i)
        for i, (_, declared) in enumerate(inputs)
        if declared is not None
    ]
    run.requests = Table.of("action_requests.json", requests, "request_id")
    run.verdicts = Table.of("policy_verdicts.json", verdicts, "request_id")
    run.derivations = dict(zip(run.requests.by_key, run.policy.derive_each(requests), strict=True))
    shown = derived_rows(run)[plain:]

    def copied(row: dict[str, Any] | None, name: str) -> Any:
        return _scalar_of(row[name]) if row is not None and name in row else None

    assert [
        (
            r.action_kind,
            r.requested_capability,
            r.risk_class,
            r.declared_verdict,
            r.declared_rule_refs,
        )
        for r in shown
    ] == [
        (
            *(copied(shape, name) for name in _SHAPE),
            copied(declared, "verdict"),
            copied(declared, "rule_refs"),
        )
        for shape, declared in given_inputs
    ]


def test_a_field_not_held_is_left_out_and_reads_as_none() -> None:
    row = Rollback(rollback_id="rb-1", line=3)
    assert row.request_id is UNSET
    assert row.get("request_id") is None
    assert struct_fields(row) == {"rollback_id": "rb-1", "line": 3}


def test_redaction_reaches_typed_rows() -> None:
    rows = [Rollback(rollback_id="has SECRET inside", request_id="clean", line=7)]
    redacted = redact({"rows": rows}, [b"SECRET"])
    assert redacted["rows"] == [{"rollback_id": REDACTED, "request_id": "clean", "line": 7}]


def test_spans_digest_is_the_canonical_digest_of_the_spans() -> None:
    outcome, records = replay_dir(FIRST_WAVE, InputMode.FIXTURE)
    spans = outcome.trace.spans
    assert len(spans) > 0
    expected = canonical_digest([struct_fields(span) for span in spans])
    assert spans_digest(spans, may_hold_floats=False) == expected
    assert spans_digest(spans, may_hold_floats=True) == expected
    assert outcome.trace.summary["trace_digest"] == expected
    # The record built twice is the same bytes.
    assert build_records(outcome).result_bytes == records.result_bytes


def test_spans_digest_hashes_a_long_list_piece_by_piece_as_one() -> None:
    outcome, _ = replay_dir(FIRST_WAVE, InputMode.FIXTURE)
    spans = outcome.trace.spans
    # Past two pieces of 4,096 spans, cut anywhere: at a piece's end, just past it.
    for count in (4096, 4097, 2 * 4096 + 1):
        many = (spans * (count // len(spans) + 1))[:count]
        expected = canonical_digest([struct_fields(span) for span in many])
        assert spans_digest(many, may_hold_floats=False) == expected


def test_a_long_write_starts_writeback_on_each_step_and_writes_every_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ``WRITEBACK_STEP`` written asks for the bytes since the last ask to go to disk."""
    asked: list[tuple[int, int]] = []
    monkeypatch.setattr(atomic, "WRITEBACK_STEP", 10)
    monkeypatch.setattr(atomic, "_start_writeback", lambda fd, at, size: asked.append((at, size)))
    chunks = [b"a" * 4, b"b" * 7, b"c" * 3, b"d" * 12, b"e"]
    target = tmp_path / "out.json"
    write_chunks_atomic(target, chunks)
    assert target.read_bytes() == b"".join(chunks)
    assert asked == [(0, 11), (11, 15)]
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temp file left


def test_writeback_is_skipped_where_the_platform_has_no_fadvise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(atomic, "WRITEBACK_STEP", 1)
    monkeypatch.delattr(os, "posix_fadvise", raising=False)
    write_chunks_atomic(tmp_path / "out.json", [b"x", b"yz"])
    assert (tmp_path / "out.json").read_bytes() == b"xyz"
