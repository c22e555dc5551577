"""Side effects: what each request did, held to the derived verdict and the declared one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox_replay import codes
from sandbox_replay.codes import Layer
from sandbox_replay.inputs import RunInputs
from sandbox_replay.layers.base import LayerResult, describe, missing_fields, not_text
from sandbox_replay.layers.rows import EFFECT_FIELDS, EFFECT_TEXT_FIELDS

FLOOR = "side_effect_floor"
EXECUTING_VERDICTS = ("allow", "review")


def effect_is_typed(row: Mapping[str, Any]) -> bool:
    """Say whether the fields the semantic checks read have usable types."""
    count = row.get("side_effect_diff_count")
    return (
        isinstance(row.get("execution_attempted"), bool)
        and isinstance(count, int)
        and not isinstance(count, bool)
        and count >= 0
    )


def left_no_trace(row: Mapping[str, Any]) -> bool:
    """Say whether the receipt shows no execution and no diff."""
    return row.get("execution_attempted") is False and row.get("side_effect_diff_count") == 0


def executed_with_diff(row: Mapping[str, Any]) -> bool:
    """Say whether the receipt shows an execution that left at least one diff."""
    count = row.get("side_effect_diff_count")
    return (
        row.get("execution_attempted") is True
        and isinstance(count, int)
        and not isinstance(count, bool)
        and count >= 1
    )


def effect_matches(verdict: str, row: Mapping[str, Any] | None) -> bool:
    """Say whether a receipt is what ``verdict`` requires: no trace for block, a diff otherwise."""
    if row is None or not effect_is_typed(row):
        return False
    if verdict == "block":
        return left_no_trace(row)
    if verdict in EXECUTING_VERDICTS:
        return executed_with_diff(row)
    return True


def check(run: RunInputs) -> LayerResult:
    """Check each receipt's floor, then hold each request's receipt to both verdicts."""
    result = LayerResult(Layer.SIDE_EFFECTS)
    if not run.files["side_effect_receipts.json"].ok:
        result.ran = False
        return result
    seen: set[str] = set()
    for ref in run.effects:
        row = ref.row
        problems = []
        missing = missing_fields(row, EFFECT_FIELDS)
        if missing:
            problems.append(f"missing or empty: {describe(missing)}")
        wrong_type = not_text(row, EFFECT_TEXT_FIELDS, missing)
        if wrong_type:
            problems.append(f"not a string: {describe(wrong_type)}")
        if not effect_is_typed(row):
            problems.append(
                "execution_attempted must be a boolean and side_effect_diff_count "
                "a non-negative integer"
            )
        if row.get("body_redacted") is not True:
            problems.append("body_redacted is not true")
        request_id = row.get("request_id")
        if isinstance(request_id, str):
            if request_id not in run.request_by_id:
                problems.append(f"names request {request_id}, which no action request declares")
            elif request_id in seen:
                problems.append(f"second receipt for {request_id}; only the first is joined")
            seen.add(request_id)
        if problems:
            result.add_for_row(
                codes.SIDE_EFFECT_RECEIPT_INVALID,
                "side-effect receipt " + "; ".join(problems),
                FLOOR,
                ref,
                "request_id",
                "side_effect_receipt",
            )
    for request_id, derivation in run.derivations.items():
        effect = run.effect_by_request.get(request_id)
        if effect is None:
            result.add_for_row(
                codes.SIDE_EFFECT_RECEIPT_MISSING,
                f"{request_id} has no side-effect receipt, so what it did is unverified",
                FLOOR,
                run.request_by_id[request_id],
                "request_id",
                "action_request",
            )
            continue
        if not effect_is_typed(effect.row):
            continue
        if not effect_matches(derivation.verdict, effect.row):
            result.add_for_row(
                codes.SIDE_EFFECT_SEMANTIC_MISMATCH,
                f"{request_id} derives to {derivation.verdict} but its receipt shows "
                f"{_shown(effect.row)}",
                FLOOR,
                effect,
                "request_id",
                "side_effect_receipt",
            )
        verdict_ref = run.verdict_by_request.get(request_id)
        declared = verdict_ref.get("verdict") if verdict_ref is not None else None
        if declared == "block" and not left_no_trace(effect.row):
            result.add_for_row(
                codes.BLOCKED_ACTION_EXECUTED,
                f"{request_id} was declared block but its receipt shows {_shown(effect.row)}",
                FLOOR,
                effect,
                "request_id",
                "side_effect_receipt",
            )
        elif declared in EXECUTING_VERDICTS and not executed_with_diff(effect.row):
            result.add_for_row(
                codes.ALLOWED_ACTION_MISSING_DIFF,
                f"{request_id} was declared {declared} but its receipt shows {_shown(effect.row)}",
                FLOOR,
                effect,
                "request_id",
                "side_effect_receipt",
            )
    result.counts = {
        "side_effect_receipt_count": len(run.effects),
        "executed_action_count": sum(
            1 for ref in run.effects if ref.get("execution_attempted") is True
        ),
        "blocked_without_execution_count": sum(
            1
            for request_id, derivation in run.derivations.items()
            if derivation.verdict == "block"
            and (effect := run.effect_by_request.get(request_id)) is not None
            and left_no_trace(effect.row)
        ),
    }
    return result


def _shown(row: Mapping[str, Any]) -> str:
    executed = "executed" if row.get("execution_attempted") is True else "not executed"
    count = row.get("side_effect_diff_count")
    # Only a count is shown: any other value is the input's own text and stays out.
    shown = count if isinstance(count, int) and not isinstance(count, bool) else "no usable"
    return f"{executed} with {shown} diff(s)"
