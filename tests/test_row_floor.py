"""A row that meets its kind's plain floor is one the layer's floor check finds nothing in.

Each layer lists what a row breaks only for the rows ``rows_below_floor`` returns; so the
two must agree on every row: a row that meets the plain floor (and, for a receipt, is
typed) has no floor problem, and a row with no floor problem meets it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_replay.checks import actions, cold_replay, rollbacks, side_effects, verdicts
from sandbox_replay.checks.base import is_nonempty, missing_fields, not_text
from sandbox_replay.model.rows import (
    UNSET,
    ActionRequest,
    ColdReplay,
    InputRow,
    PolicyVerdict,
    Rollback,
    SideEffect,
    rows_below_floor,
)

# Values a field may hold: text (blank or not), the booleans and numbers equal to them,
# null, lists (empty or not), an object, and not being held at all.
VALUES = st.sampled_from(
    [
        "ref-1",
        "allow",
        "",
        " ",
        "\u2003",
        "\x1c",
        True,
        False,
        1,
        0,
        1.0,
        -1,
        None,
        [],
        ["rule:a"],
        [""],
        {"k": 1},
        UNSET,
    ]
)


def rows_of(kind: type[InputRow]) -> st.SearchStrategy[Any]:
    fields = [name for name in kind.__struct_fields__ if name != "line"]
    return st.fixed_dictionaries({name: VALUES for name in fields}).map(
        lambda values: kind(**values, line=2)
    )


def meets_plain_floor(row: InputRow) -> bool:
    """Say whether the row meets its plain floor, as the layers tell: read down a list of
    it, between two rows that meet theirs (so that a column is good or not by this row)."""
    clean = type(row)(**{name: "ref" for name in type(row).PLAIN}, **type(row).FLAGS, line=1)
    return 1 not in rows_below_floor([clean, row, clean])


@settings(max_examples=200, deadline=None)
@given(st.lists(rows_of(Rollback), max_size=6))
def test_a_list_of_rows_is_below_the_floor_exactly_where_each_row_is(rows: list[Rollback]) -> None:
    assert rows_below_floor(rows) == {
        i for i, row in enumerate(rows) if rollbacks.floor_problems(row)
    }


@settings(max_examples=600, deadline=None)
@given(rows_of(ActionRequest))
def test_a_request_meets_the_plain_floor_exactly_when_it_has_no_floor_problem(
    row: ActionRequest,
) -> None:
    assert meets_plain_floor(row) == (actions.floor_problems(row) == [])


@settings(max_examples=600, deadline=None)
@given(rows_of(Rollback))
def test_a_rollback_meets_the_plain_floor_exactly_when_it_has_no_floor_problem(
    row: Rollback,
) -> None:
    assert meets_plain_floor(row) == (rollbacks.floor_problems(row) == [])


@settings(max_examples=600, deadline=None)
@given(rows_of(ColdReplay))
def test_a_replay_meets_the_plain_floor_exactly_when_it_has_no_floor_problem(
    row: ColdReplay,
) -> None:
    assert meets_plain_floor(row) == (cold_replay.floor_problems(row) == [])


@settings(max_examples=600, deadline=None)
@given(rows_of(SideEffect))
def test_a_typed_receipt_meets_the_plain_floor_exactly_when_it_has_no_floor_problem(
    row: SideEffect,
) -> None:
    clean = meets_plain_floor(row) and side_effects.effect_is_typed(row)
    assert clean == (side_effects.floor_problems(row) == [])


@settings(max_examples=600, deadline=None)
@given(rows_of(PolicyVerdict))
def test_a_verdict_row_lists_the_same_problems_whichever_way_its_fields_are_read(
    row: PolicyVerdict,
) -> None:
    if meets_plain_floor(row):
        # What ``floor_problems`` takes as read for such a row.
        missing = missing_fields(row, PolicyVerdict.REQUIRED)
        assert missing == ([] if is_nonempty(row.rule_refs) else ["rule_refs"])
        assert not_text(row, PolicyVerdict.TEXT, missing) == []
        plain = verdicts.floor_problems(row, {"allow", "block", "review"}, "ref-1", plain=True)
        read = verdicts.floor_problems(row, {"allow", "block", "review"}, "ref-1", plain=False)
        assert plain == read
    else:
        assert verdicts.floor_problems(row, {"allow", "block", "review"}, "ref-1", plain=False)
