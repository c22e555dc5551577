"""Side effects: what each request did, held to the derived verdict and the declared one."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import repeat
from operator import attrgetter, is_, lt, or_, truth
from typing import Any, NamedTuple

from sandbox_replay import codes
from sandbox_replay.codes import Layer
from sandbox_replay.inputs import RunInputs
from sandbox_replay.layers.base import (
    NO_ROW,
    FloorScan,
    Join,
    LayerResult,
    derived_verdicts,
    describe,
    join,
    missing_fields,
    not_of_type,
    not_text,
    per_distinct,
    positions,
    scan_floor,
    shared,
)
from sandbox_replay.layers.rows import EFFECT_FIELDS, EFFECT_TEXT_FIELDS
from sandbox_replay.layers.verdicts import verdict_join

FLOOR = "side_effect_floor"
EXECUTING_VERDICTS = ("allow", "review")
_TYPED_FIELDS = ("execution_attempted", "side_effect_diff_count")
_JOINED_FIELDS = (*_TYPED_FIELDS, "rollback_receipt_ref")


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


class Outcome(NamedTuple):
    """What one request's receipt earns against the derived and the declared verdict."""

    codes: tuple[str, ...]  # its findings' codes, in the order they are reported
    matches: bool  # effect_matches: the receipt is what the derived verdict requires
    blocked_without_execution: bool  # derives to block, and execution_attempted is false


def _judge(derived: str, declared: Any, executed: Any, diff_count: Any) -> Outcome:
    """Judge a receipt (of these two fields) against the derived and the declared verdict."""
    row = {"execution_attempted": executed, "side_effect_diff_count": diff_count}
    matches = effect_matches(derived, row)
    found = []
    if effect_is_typed(row):
        if not matches:
            found.append(codes.SIDE_EFFECT_SEMANTIC_MISMATCH)
        if declared == "block" and not left_no_trace(row):
            found.append(codes.BLOCKED_ACTION_EXECUTED)
        elif declared in EXECUTING_VERDICTS and not executed_with_diff(row):
            found.append(codes.ALLOWED_ACTION_MISSING_DIFF)
    return Outcome(tuple(found), matches, derived == "block" and executed is False)


def receipt_join(run: RunInputs, scan: FloorScan | None = None) -> Join:
    """Join each request to its receipt: whether it executed, its diffs and rollback ref.

    ``scan``, the receipt file's, may hold those fields already.
    """
    return join(run.effect_by_request, run.derivations, _JOINED_FIELDS, scan)


def receipt_outcomes(run: RunInputs) -> list[Outcome]:
    """Judge each request's receipt, in order; each distinct four values are judged once."""
    receipts = shared(run, receipt_join).columns
    return per_distinct(
        _judge,
        shared(run, derived_verdicts),
        shared(run, verdict_join).columns["verdict"],
        receipts["execution_attempted"],
        receipts["side_effect_diff_count"],
    )


def _bad_counts(values: list[Any]) -> set[int]:
    """Return the positions whose diff count is not a non-negative int."""
    odd = set(not_of_type(values, int))
    if not odd:
        return set() if min(values, default=0) >= 0 else set(positions(map(lt, values, repeat(0))))
    return odd.union(i for i, value in enumerate(values) if i not in odd and value < 0)


def check(run: RunInputs) -> LayerResult:
    """Check each receipt's floor, then hold each request's receipt to both verdicts."""
    result = LayerResult(Layer.SIDE_EFFECTS)
    if not run.files["side_effect_receipts.json"].ok:
        result.ran = False
        return result
    scan = scan_floor(
        run.effects,
        EFFECT_TEXT_FIELDS,
        {"body_redacted": True},
        run.effect_by_request,
        unique="request_id",
        read=_JOINED_FIELDS,
    )
    executed = scan.columns["execution_attempted"]
    # The scan clears the text, the flag and repeats; typing and the join are the receipt's.
    suspects = scan.suspects.union(
        not_of_type(executed, bool),
        _bad_counts(scan.columns["side_effect_diff_count"]),
        shared(run, receipt_join, scan).unknown(scan.columns["request_id"], run.request_by_id),
    )
    seen: set[str] = set()
    for ref in map(run.effects.__getitem__, sorted(suspects)):
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
    request_ids = list(run.derivations)
    derivations = list(run.derivations.values())
    effects = shared(run, receipt_join).refs
    declared = shared(run, verdict_join).columns["verdict"]
    outcomes = shared(run, receipt_outcomes)
    found = list(map(attrgetter("codes"), outcomes))
    for i in positions(map(or_, map(is_, effects, repeat(NO_ROW)), map(truth, found))):
        request_id, effect = request_ids[i], effects[i]
        if effect is NO_ROW:
            result.add_for_row(
                codes.SIDE_EFFECT_RECEIPT_MISSING,
                f"{request_id} has no side-effect receipt, so what it did is unverified",
                FLOOR,
                run.request_by_id[request_id],
                "request_id",
                "action_request",
            )
            continue
        for code in found[i]:
            if code == codes.SIDE_EFFECT_SEMANTIC_MISMATCH:
                message = f"{request_id} derives to {derivations[i].verdict} but its receipt shows"
            else:
                message = f"{request_id} was declared {declared[i]} but its receipt shows"
            result.add_for_row(
                code,
                f"{message} {_shown(effect.row)}",
                FLOOR,
                effect,
                "request_id",
                "side_effect_receipt",
            )
    result.counts = {
        "side_effect_receipt_count": len(run.effects),
        "executed_action_count": sum(map(is_, executed, repeat(True))),
        "blocked_without_execution_count": sum(
            map(attrgetter("blocked_without_execution"), outcomes)
        ),
    }
    return result


def _shown(row: Mapping[str, Any]) -> str:
    executed = "executed" if row.get("execution_attempted") is True else "not executed"
    count = row.get("side_effect_diff_count")
    # Only a count is shown: any other value is the input's own text and stays out.
    shown = count if isinstance(count, int) and not isinstance(count, bool) else "no usable"
    return f"{executed} with {shown} diff(s)"
