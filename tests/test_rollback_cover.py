"""Whether executed requests are covered by rollbacks: tested at once, as one at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from sandbox_replay.inputs import InputMode, RowRef, RunInputs, _index_by
from sandbox_replay.layers.rollbacks import covered_each, rollback_covers
from sandbox_replay.policy import default_table

ABSENT = object()
IDS = ["r1", "r2", "r3"]
REFS = ["rb1", "rb2", "rb3"]
# What a field may hold in a malformed file: texts that match or not, and other JSON values.
VALUES = st.sampled_from([*IDS, *REFS, "", 1, True, None, ABSENT])
REF = st.one_of(st.sampled_from([*REFS, "rb9", "", 1, True, None]), st.just(["rb1"]))


def _run(rollbacks: list[tuple[Any, Any, Any]]) -> RunInputs:
    rows = []
    for rollback_id, request_id, verified in rollbacks:
        fields = {
            "rollback_id": rollback_id,
            "request_id": request_id,
            "rollback_verified": verified,
        }
        rows.append({key: value for key, value in fields.items() if value is not ABSENT})
    run = RunInputs(Path("."), InputMode.BUNDLE, default_table(), {})
    run.rollbacks = [RowRef("rollback_receipts.json", n, n + 3, row) for n, row in enumerate(rows)]
    run.rollback_by_id = _index_by(run.rollbacks, "rollback_id")
    return run


@given(
    rollbacks=st.lists(st.tuples(VALUES, VALUES, st.sampled_from([True, False, 1, None, ABSENT]))),
    pairs=st.lists(st.tuples(st.sampled_from(IDS), REF)),
)
@example(  # the rollback file lists the refs in order, as exporters write it
    rollbacks=[("rb1", "r1", True), ("rb2", "r2", True), ("rb3", "r3", False)],
    pairs=[("r1", "rb1"), ("r2", "rb2"), ("r3", "rb3")],
)
@example(  # in order but for one row naming another request, and one not verified by `1`
    rollbacks=[("rb1", "r1", True), ("rb2", "r3", True), ("rb3", "r3", 1)],
    pairs=[("r1", "rb1"), ("r2", "rb2"), ("r3", "rb3")],
)
@example(rollbacks=[("rb1", "r1", True)], pairs=[("r1", ["rb1"]), ("r1", "rb1")])  # unhashable
def test_covered_each_is_rollback_covers_for_each_pair(
    rollbacks: list[tuple[Any, Any, Any]], pairs: list[tuple[str, Any]]
) -> None:
    run = _run(rollbacks)
    request_ids = [request_id for request_id, _ in pairs]
    refs = [ref for _, ref in pairs]
    expected = [rollback_covers(run, request_id, ref) for request_id, ref in pairs]
    assert covered_each(run, request_ids, refs) == expected
