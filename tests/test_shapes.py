"""Requests judged once per shape are judged as if each were judged on its own.

A layer that judges each distinct shape of its inputs once (``side_effects.shape``) must
key on everything its judge reads: inputs of one shape are judged alike, whatever else
differs between them (True against 1, 0 against 0.0 and False, text against lists). Every
combination of the values below is judged, and each shape must earn one judgement.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import product
from typing import Any

from sandbox_replay.checks import side_effects
from sandbox_replay.model.rows import UNSET, SideEffect

# JSON values that compare or hash alike across types, text, lists, and not being held.
VALUES: list[Any] = [
    "allow",
    "block",
    "review",
    "",
    "other",
    True,
    False,
    1,
    0,
    0.0,
    1.0,
    2,
    -1,
    None,
    [],
    [1],
    UNSET,
]


def test_receipts_of_one_shape_are_judged_alike() -> None:
    effects: list[SideEffect | None] = [None]
    effects += [
        SideEffect(execution_attempted=attempted, side_effect_diff_count=count, line=2)
        for attempted, count in product(VALUES, VALUES)
    ]
    judged: dict[Any, set[side_effects.Outcome]] = defaultdict(set)
    for derived, declared, effect in product(("allow", "block", "review"), VALUES, effects):
        shape = side_effects.shape(derived, declared, effect)
        judged[shape].add(side_effects.judge(derived, declared, effect))
    assert len(judged) > 20  # the values above make many shapes
    assert all(len(outcomes) == 1 for outcomes in judged.values())
