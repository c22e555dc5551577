"""Side effects: what each request did, held to the derived verdict and the declared one."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, NamedTuple

from sandbox_replay.checks import harness
from sandbox_replay.checks.base import (
    LayerResult,
    RowFile,
    floor_breaks,
    repeated,
    shared,
    undeclared,
)
from sandbox_replay.load.run import SIDE_EFFECT_RECEIPTS, RunInputs
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.rows import SideEffect, rows_below_floor

FLOOR = "side_effect_floor"
EXECUTING_VERDICTS = ("allow", "review")
ROWS = RowFile(SIDE_EFFECT_RECEIPTS, FLOOR, "side_effect_receipt")


def effect_is_typed(row: SideEffect) -> bool:
    """Say whether the fields the semantic checks read have usable types."""
    count = row.side_effect_diff_count
    return (
        isinstance(row.execution_attempted, bool)
        and isinstance(count, int)
        and not isinstance(count, bool)
        and count >= 0
    )


def left_no_trace(row: SideEffect) -> bool:
    """Say whether the receipt shows no execution and no diff."""
    return row.execution_attempted is False and row.side_effect_diff_count == 0


def executed_with_diff(row: SideEffect) -> bool:
    """Say whether the receipt shows an execution that left at least one diff."""
    count = row.side_effect_diff_count
    return (
        row.execution_attempted is True
        and isinstance(count, int)
        and not isinstance(count, bool)
        and count >= 1
    )


class Outcome(NamedTuple):
    """What one request's receipt earns against the derived and the declared verdict."""

    codes: tuple[str, ...]  # its findings' codes, in the order they are reported
    matches: bool  # a typed receipt that shows what the derived verdict requires
    blocked_without_execution: bool  # derives to block, and execution_attempted is false


def judge(derived: str, declared: Any, effect: SideEffect | None) -> Outcome:
    """Judge a request's receipt against its derived and its declared verdict.

    A receipt whose fields are not usable (``effect_is_typed``) matches nothing and earns
    no finding here: the floor reports it.
    """
    if effect is None:
        return Outcome((), False, False)
    blocked_without_execution = derived == "block" and effect.execution_attempted is False
    if not effect_is_typed(effect):
        return Outcome((), False, blocked_without_execution)
    no_trace, with_diff = left_no_trace(effect), executed_with_diff(effect)
    # What the derived verdict requires: no trace for block, a diff for the others.
    if derived == "block":
        matches = no_trace
    else:
        matches = with_diff if derived in EXECUTING_VERDICTS else True
    found = []
    if not matches:
        found.append(codes.SIDE_EFFECT_SEMANTIC_MISMATCH)
    if declared == "block" and not no_trace:
        found.append(codes.BLOCKED_ACTION_EXECUTED)
    elif declared in EXECUTING_VERDICTS and not with_diff:
        found.append(codes.ALLOWED_ACTION_MISSING_DIFF)
    return Outcome(tuple(found), matches, blocked_without_execution)


def receipt_outcomes(run: RunInputs) -> list[Outcome]:
    """Judge each request's receipt, in request order (as ``run.joined`` lists them).

    Requests of one ``shape`` share one judgement: a run has only a few dozen shapes.
    """
    outcomes = []
    judged: dict[Hashable, Outcome] = {}
    joined = run.joined
    for derivation, verdict, effect in zip(
        run.derivations.values(), joined.verdicts, joined.effects, strict=True
    ):
        declared = verdict.verdict if verdict is not None else None
        key = shape(derivation.verdict, declared, effect)
        outcome = judged.get(key)
        if outcome is None:
            outcome = judged[key] = judge(derivation.verdict, declared, effect)
        outcomes.append(outcome)
    return outcomes


def unmatched_requests(run: RunInputs) -> set[str]:
    """Return the requests whose receipt does not show what their derived verdict requires
    (or that have none)."""
    outcomes = shared(run, receipt_outcomes)
    return {
        request_id
        for request_id, outcome in zip(run.joined.ids, outcomes, strict=True)
        if not outcome.matches
    }


def shape(derived: str, declared: Any, effect: SideEffect | None) -> Hashable:
    """Return what ``judge`` reads of its arguments: two requests alike in it are judged
    alike. A declared verdict that is not a string, an ``execution_attempted`` that is
    not a boolean and a ``side_effect_diff_count`` that is not an integer each read the
    same as None (a bool is not an integer here, so ``True`` and ``1`` stay apart)."""
    if effect is None:
        return derived, declared if type(declared) is str else None
    attempted, count = effect.execution_attempted, effect.side_effect_diff_count
    return (
        derived,
        declared if type(declared) is str else None,
        attempted if type(attempted) is bool else None,
        count if type(count) is int else None,
    )


def floor_problems(effect: SideEffect) -> list[str]:
    """Return what of the row floor a receipt breaks."""
    problems = floor_breaks(effect, flags_word=None)
    if not effect_is_typed(effect):
        problems.append(
            "execution_attempted must be a boolean and side_effect_diff_count "
            "a non-negative integer"
        )
    if effect.body_redacted is not True:
        problems.append("body_redacted is not true")
    return problems


def check(run: RunInputs) -> LayerResult:
    """Check each receipt's floor, then hold each request's receipt to both verdicts.

    Every row meets the floor and names a declared request, once; every request has a
    receipt; a receipt shows what the derived verdict requires (no trace for block, an
    execution with a diff otherwise) and what the declared verdict promised.
    """
    if not run.files[SIDE_EFFECT_RECEIPTS].ok:
        return LayerResult(Layer.SIDE_EFFECTS, ran=False)
    result = LayerResult(Layer.SIDE_EFFECTS)
    below = rows_below_floor(run.effects.rows)
    naming_undeclared, repeating = undeclared(run, run.effects), repeated(run, run.effects)
    for position, effect in enumerate(run.effects):
        clean = position not in below and effect_is_typed(effect)
        problems = [] if clean else floor_problems(effect)
        request_id = effect.request_id
        if position in naming_undeclared:
            problems.append(f"names request {request_id}, which no action request declares")
        elif position in repeating:
            problems.append(f"second receipt for {request_id}; only the first is joined")
        if problems:
            message = "side-effect receipt " + "; ".join(problems)
            ROWS.add(result, codes.SIDE_EFFECT_RECEIPT_INVALID, message, effect, position)
    outcomes = shared(run, receipt_outcomes)
    joined = run.joined
    for request_id, derivation, verdict, receipt, outcome in zip(
        joined.ids, run.derivations.values(), joined.verdicts, joined.effects, outcomes, strict=True
    ):
        if receipt is None:
            message = f"{request_id} has no side-effect receipt, so what it did is unverified"
            result.add_for_request(
                codes.SIDE_EFFECT_RECEIPT_MISSING, message, FLOOR, run, request_id
            )
            continue
        for code in outcome.codes:
            if code == codes.SIDE_EFFECT_SEMANTIC_MISMATCH:
                message = f"{request_id} derives to {derivation.verdict} but its receipt shows"
            else:
                declared = verdict.verdict if verdict is not None else None
                message = f"{request_id} was declared {declared} but its receipt shows"
            ROWS.add(result, code, f"{message} {_shown(receipt)}", receipt, subject=request_id)
    harness.add_benchmark_disagreement(run, result)
    result.counts = {
        "side_effect_receipt_count": len(run.effects),
        "executed_action_count": sum(e.execution_attempted is True for e in run.effects),
        "blocked_without_execution_count": sum(
            outcome.blocked_without_execution for outcome in outcomes
        ),
    }
    return result


def _shown(row: SideEffect) -> str:
    executed = "executed" if row.execution_attempted is True else "not executed"
    count = row.side_effect_diff_count
    # Only a count is shown: any other value is the input's own text and stays out.
    shown = count if isinstance(count, int) and not isinstance(count, bool) else "no usable"
    return f"{executed} with {shown} diff(s)"
