"""The run's row indexes: the first row of each string key, in the order keys first occur."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox_replay.checks.base import repeated, undeclared
from sandbox_replay.load.run import InputMode, RunInputs, joined_rows
from sandbox_replay.model.policy import default_table
from sandbox_replay.model.rows import ActionRequest, ColdReplay, Rollback, Table
from sandbox_replay.records.build import column_of

ABSENT = object()


def _rows(values: list[Any]) -> list[Rollback]:
    return [
        Rollback(line=n) if value is ABSENT else Rollback(rollback_id=value, line=n)
        for n, value in enumerate(values)
    ]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], []),
        (["a", "b", "c"], [("a", 0), ("b", 1), ("c", 2)]),
        (["c", "a", "b"], [("c", 0), ("a", 1), ("b", 2)]),  # as they come, not sorted
        (["a", "b", "a", "c", "b"], [("a", 0), ("b", 1), ("c", 3)]),  # the first row wins
        (["a", 1, "b", None, ABSENT, "c"], [("a", 0), ("b", 2), ("c", 5)]),  # strings only
        ([True, "a", 1.5, ["a"], "a"], [("a", 1)]),
        (["a", "a"], [("a", 0)]),
    ],
)
def test_the_index_holds_each_keys_first_row_in_first_occurrence_order(
    values: list[Any], expected: list[tuple[str, int]]
) -> None:
    rows = _rows(values)
    table = Table.of("rollback_receipts.json", rows, "rollback_id")
    assert [(key, row.line) for key, row in table.by_key.items()] == expected
    assert all(table.by_key[key] is rows[position] for key, position in expected)
    assert all(table.get(key) is rows[position] for key, position in expected)
    assert table.get("no such key") is None


_KEYS = st.one_of(
    st.sampled_from(["a", "b", "c", ""]),
    st.none(),
    st.integers(-1, 1),
    st.booleans(),
    st.lists(st.sampled_from(["a", "b"]), max_size=2),
    st.just(ABSENT),
)


@given(st.lists(_KEYS, max_size=12))
def test_the_index_is_each_string_keys_first_row_for_any_keys(values: list[Any]) -> None:
    """The index, made in C, is what a plain walk keeping each string key's first row gives."""
    rows = _rows(values)
    expected: dict[str, Rollback] = {}
    for row in rows:
        if type(row.rollback_id) is str:
            expected.setdefault(row.rollback_id, row)
    table = Table.of("rollback_receipts.json", rows, "rollback_id")
    assert list(table.by_key.items()) == list(expected.items())
    assert all(table.by_key[key] is row for key, row in expected.items())
    assert table.rows is rows


@given(
    st.lists(st.sampled_from(["r1", "r2", "r3", "r4"]), unique=True, max_size=4),
    st.lists(st.one_of(st.sampled_from(["r1", "r2", "r3", "r4", "rx"]), st.none()), max_size=6),
    st.booleans(),
)
def test_joined_rows_are_each_ids_first_row_whether_the_file_is_in_request_order(
    ids: list[str], keys: list[Any], aligned: bool
) -> None:
    """A file listing exactly the ids in their order is read in order; any other is looked
    up: both give each id's first row and its position, None where none names it."""
    if aligned:
        keys = list(ids)
    rows = [ColdReplay(request_id=key, line=n) for n, key in enumerate(keys)]
    table = Table.of("cold_replay.json", rows, "request_id")
    joined, at = joined_rows(table, ids)
    assert len(joined) == len(at) == len(ids)
    assert all(row is table.by_key.get(rid) for rid, row in zip(ids, joined, strict=True))
    first = {rid: keys.index(rid) for rid in ids if rid in keys}
    assert list(at) == [first.get(rid) for rid in ids]


def _run_with_replays(ids: list[str], keys: list[Any], replay_ids: list[Any]) -> RunInputs:
    run = RunInputs(Path("."), InputMode.BUNDLE, default_table(), {})
    requests = [ActionRequest(request_id=rid, line=n) for n, rid in enumerate(ids)]
    run.requests = Table.of("action_requests.json", requests, "request_id")
    run.derivations = dict(zip(ids, run.policy.derive_each(requests), strict=True))
    replays = [
        ColdReplay(request_id=key, replay_id=replay_id, line=n)
        for n, (key, replay_id) in enumerate(zip(keys, replay_ids, strict=True))
    ]
    run.replays = Table.of("cold_replay.json", replays, "request_id")
    return run


@given(
    st.lists(st.sampled_from(["r1", "r2", "r3", "r4"]), unique=True, max_size=4),
    st.lists(_KEYS, max_size=8),
    st.lists(_KEYS, min_size=8, max_size=8),
    st.booleans(),
)
def test_strays_are_the_rows_a_walk_finds_undeclared_or_repeated(
    ids: list[str], keys: list[Any], replay_ids: list[Any], aligned: bool
) -> None:
    """The rows naming an undeclared request and those repeating an id are what a walk
    with a set of the ids seen finds, whether the file is in request order or not; a
    value that is not a string is neither."""
    if aligned:
        keys = list(ids)
    run = _run_with_replays(ids, keys, replay_ids[: len(keys)])
    seen: set[str] = set()
    seen_replay_ids: set[str] = set()
    expected_undeclared, expected_repeats, expected_replay_repeats = set(), set(), set()
    for at, row in enumerate(run.replays):
        if type(row.request_id) is str:
            if row.request_id not in ids:
                expected_undeclared.add(at)
            if row.request_id in seen:
                expected_repeats.add(at)
            seen.add(row.request_id)
        if type(row.replay_id) is str:
            if row.replay_id in seen_replay_ids:
                expected_replay_repeats.add(at)
            seen_replay_ids.add(row.replay_id)
    assert undeclared(run, run.replays) == expected_undeclared
    assert repeated(run, run.replays) == expected_repeats
    assert repeated(run, run.replays, "replay_id") == expected_replay_repeats
    if aligned:
        assert run.joined.takes_whole(run.replays)


@given(
    st.lists(_KEYS, max_size=8),
    st.sampled_from(["typed", "dicts", "mixed"]),
    st.sampled_from(["rollback_id", "request_id", "replay_id"]),
)
def test_a_column_is_each_rows_get_whatever_the_rows_are(
    values: list[Any], rows_are: str, name: str
) -> None:
    """``column_of`` reads typed rows in C: it gives what each row's ``get`` gives, None
    for a field a row does not hold or its kind does not declare."""
    rows: list[Any] = _rows(values)
    if rows_are == "dicts":
        rows = [msgspec.to_builtins(row) for row in rows]
    elif rows_are == "mixed":
        rows = [*rows, ColdReplay(replay_id="x", line=0)]
    assert column_of(rows, name) == [row.get(name) for row in rows]
