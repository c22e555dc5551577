"""Rows read by position and columns read without their rows equal the rows themselves.

A site page joins its requests to the rows of other lists by position (``rows_at``), and
the view indexes are built from one column of each list (``column``): both must give
exactly what building the rows and reading them gives.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIRST_WAVE, REPO, replay_dir
from sandbox_replay.inputs import InputMode
from sandbox_replay.lazyrows import LazyRows, PickedRows
from sandbox_replay.pipeline import ReplayConfig, replay
from sandbox_replay.records import ProjectedRows, _project, build_records
from test_records_io import _ref, field_tuples, row_lists

sys.path.insert(0, str(REPO / "benchmarks"))

from generate_bundle import generate

NAMES = ("a", "b", "flag", "refs", "extra", "line", "absent")


@settings(max_examples=300, deadline=None)
@given(row_lists, field_tuples, st.data())
def test_projected_rows_at_and_columns_equal_the_projection(
    plain: list[Any], fields: tuple[str, ...], data: st.DataObject
) -> None:
    refs = [_ref(row, line) for line, row in enumerate(plain, start=2)]
    expected = [_project(ref, fields) for ref in refs]
    projected = ProjectedRows(refs, fields)
    positions = data.draw(st.lists(st.integers(0, len(refs) - 1), max_size=20)) if refs else []
    assert projected.rows_at(positions) == [expected[p] for p in positions]
    for name in NAMES:
        assert projected.column(name) == [row.get(name) for row in expected]


def _row_lists(result: dict[str, Any]) -> dict[str, LazyRows]:
    lists = {name: rows for name, rows in result.items() if isinstance(rows, LazyRows)}
    lists["spans"] = result["public_agent_execution_trace"]["spans"]
    return lists


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("rows_at") / "bundle"
    generate(folder, 40, seed=5, failing_fraction=0.3)
    outcome = replay(ReplayConfig(folder, InputMode.BUNDLE))
    _, fixture = replay_dir(FIRST_WAVE, InputMode.FIXTURE)
    # Odd values where the verdict columns are read: missing and unusable verdicts.
    hostile = replay(ReplayConfig(REPO / "tests" / "data" / "hostile_bundle", InputMode.BUNDLE))
    return [build_records(outcome).result, fixture.result, build_records(hostile).result]


def test_every_row_list_read_by_position_and_column_equals_its_rows(
    results: list[dict[str, Any]],
) -> None:
    for result in results:
        lists = _row_lists(result)
        assert {"request_rows", "derived_policy_verdict_rows", "spans"} <= set(lists)
        for name, rows in lists.items():
            built = list(rows)
            assert built, name
            positions = [*reversed(range(len(built))), 0, len(built) - 1, 0]
            assert rows.rows_at(positions) == [built[p] for p in positions], name
            assert rows.rows_at([]) == []
            for key in {*built[0], *built[-1], "absent"}:
                assert rows.column(key) == [row.get(key) for row in built], (name, key)
                at = rows.column_at(positions, key)
                assert at == [built[p].get(key) for p in positions], (name, key)
                picked = PickedRows(rows, positions)
                assert picked.column(key) == at, (name, key)
                assert picked[1] == built[positions[1]]
                assert PickedRows(built, positions).column(key) == at, (name, key)


def test_derived_verdict_columns_equal_the_rows_where_verdicts_are_missing_or_odd(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "bundle"
    generate(folder, 12, seed=3, failing_fraction=0.0)
    path = folder / "policy_verdicts.json"
    data = json.loads(path.read_text())
    verdicts = data["policy_verdicts"]
    del verdicts[0]  # a request with no verdict row
    verdicts[1]["verdict"] = 7
    verdicts[2]["verdict"] = ["block", "allow"]
    verdicts[3]["verdict"] = "x" * 600  # longer than a record shows
    del verdicts[4]["verdict"]
    path.write_text(json.dumps(data))
    rows = build_records(replay(ReplayConfig(folder, InputMode.BUNDLE))).result[
        "derived_policy_verdict_rows"
    ]
    built = list(rows)
    declared = [row.get("declared_verdict") for row in built]
    assert None in declared and 7 in declared and declared.count(None) >= 2
    positions = [3, 0, 7, 3]
    for key in ("derived_verdict", "declared_verdict", "policy_derivation_passed"):
        assert rows.column(key) == [row.get(key) for row in built], key
        assert rows.column_at(positions, key) == [built[p].get(key) for p in positions], key
