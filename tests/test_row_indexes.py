"""The run's row indexes: the first row of each string key, in the order keys first occur."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox_replay.inputs import RowRef, _index_by

ABSENT = object()


def _refs(values: list[Any]) -> list[RowRef]:
    rows = [
        {"n": n} if value is ABSENT else {"id": value, "n": n} for n, value in enumerate(values)
    ]
    return [RowRef("f.json", n, n + 3, row) for n, row in enumerate(rows)]


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
    refs = _refs(values)
    index = _index_by(refs, "id")
    assert [(key, ref.index) for key, ref in index.items()] == expected
    assert all(index[key] is refs[position] for key, position in expected)
