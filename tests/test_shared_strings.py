"""Strings shared by the loader: equal category values become one object, and nothing
read off a row changes."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from conftest import EXPORTED_BUNDLE
from sandbox_replay.load.files import LoadLimits
from sandbox_replay.load.run import InputMode, load_run, share_strings
from sandbox_replay.model.policy import default_table
from sandbox_replay.model.rows import UNSET, ActionRequest

FIELDS = ("action_kind", "risk_class")
# Strings made anew each time (as a decoder makes them), and values that are not strings.
_TEXT = st.sampled_from(["exec", "read", "write"]).map(lambda text: "".join(list(text)))
_VALUE = st.one_of(_TEXT, st.just(UNSET), st.none(), st.sampled_from([True, 1, 1.0, 0, False]))


def _rows(values: list[tuple[Any, Any]]) -> list[ActionRequest]:
    return [
        ActionRequest(action_kind=kind, risk_class=risk, line=n)
        for n, (kind, risk) in enumerate(values)
    ]


@given(st.lists(st.tuples(_VALUE, _VALUE), max_size=10))
def test_equal_strings_become_one_object_and_no_value_changes(
    values: list[tuple[Any, Any]],
) -> None:
    rows = _rows(values)
    before = [[getattr(row, name) for name in FIELDS] for row in rows]
    share_strings(rows, FIELDS, {})
    after = [[getattr(row, name) for name in FIELDS] for row in rows]
    # Each value is still equal to what it was, and of its type (True stays True, not 1).
    assert [[(type(v), v) for v in row] for row in after] == [
        [(type(v), v) for v in row] for row in before
    ]
    for column in range(len(FIELDS)):
        held = [row[column] for row in before]
        if all(type(v) is str or v is None or v is UNSET for v in held):
            first: dict[str, Any] = {}
            for value in (row[column] for row in after):
                if type(value) is str:
                    assert value is first.setdefault(value, value)
        else:  # a field holding anything else is not touched
            assert all(a[column] is b[column] for a, b in zip(after, before, strict=True))


def test_the_pool_is_shared_between_files() -> None:
    pool: dict[Any, Any] = {}
    first, second = _rows([("".join("exec"), "x")]), _rows([("".join("exec"), "y")])
    share_strings(first, FIELDS, pool)
    share_strings(second, FIELDS, pool)
    assert second[0].action_kind is first[0].action_kind


def test_a_loaded_run_holds_each_category_value_once() -> None:
    run = load_run(EXPORTED_BUNDLE, InputMode.BUNDLE, default_table(), LoadLimits())
    checked = 0
    for table in (run.requests, run.verdicts, run.effects, run.rollbacks, run.replays):
        for name in type(table.rows[0]).SHARED:
            objects: dict[str, Any] = {}
            for row in table.rows:
                value = getattr(row, name)
                if type(value) is str:
                    assert value is objects.setdefault(value, value)
                    checked += 1
    assert checked > len(run.requests) * 5  # every request's categories, and the verdicts'
