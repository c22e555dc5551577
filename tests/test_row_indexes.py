"""The run's row indexes: the first row of each string key, in the order keys first occur."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox_replay.inputs import RowRef, _index_by


def _first_rows(rows: list[RowRef], key: str) -> dict[str, RowRef]:
    """The index as the layers expect it, spelled out row by row."""
    index: dict[str, RowRef] = {}
    for ref in rows:
        value = ref.row.get(key)
        if isinstance(value, str) and value not in index:
            index[value] = ref
    return index


def _refs(values: list[Any]) -> list[RowRef]:
    rows = [
        {"id": value, "n": n} if value != "<absent>" else {"n": n} for n, value in enumerate(values)
    ]
    return [RowRef("f.json", n, n + 3, row) for n, row in enumerate(rows)]


@pytest.mark.parametrize(
    "values",
    [
        [],
        ["a", "b", "c"],
        ["c", "a", "b"],  # the order the keys come in, not sorted
        ["a", "b", "a", "c", "b"],  # repeats: the first row wins, order of first occurrence
        ["a", 1, "b", None, "<absent>", "c"],  # not strings: left out
        [True, "a", 1.5, ["a"], "a"],
        ["a", "a"],
    ],
)
def test_the_index_holds_each_keys_first_row_in_first_occurrence_order(values: list[Any]) -> None:
    refs = _refs(values)
    index = _index_by(refs, "id")
    expected = _first_rows(refs, "id")
    assert list(index.items()) == list(expected.items())
    assert all(index[key] is expected[key] for key in expected)
