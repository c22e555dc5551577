"""Rollbacks: every executed action must be recoverable by a verified rollback."""

from __future__ import annotations

from sandbox_replay.checks import harness
from sandbox_replay.checks.base import (
    LayerResult,
    RowFile,
    floor_breaks,
    repeated,
    shared,
    undeclared,
)
from sandbox_replay.load.run import (
    ROLLBACK_RECEIPTS,
    SIDE_EFFECT_RECEIPTS,
    RunInputs,
    rollback_id_of,
)
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.rows import Rollback, SideEffect, rows_below_floor

FLOOR = "rollback_floor"
MIN_ROLLBACKS = 2
ROWS = RowFile(ROLLBACK_RECEIPTS, FLOOR, "rollback_receipt", "rollback_id")


def floor_problems(rollback: Rollback) -> list[str]:
    """Return what of the row floor a rollback row breaks."""
    return floor_breaks(rollback)


def check(run: RunInputs) -> LayerResult:
    """Check each rollback row's floor and that every executed action has one.

    Every row meets the floor, names a declared request and has an id of its own; there
    are at least two rows; every executed side effect names a verified rollback of its
    own request.
    """
    if not run.files[ROLLBACK_RECEIPTS].ok:
        return LayerResult(Layer.ROLLBACKS, ran=False)
    result = LayerResult(Layer.ROLLBACKS)
    below = rows_below_floor(run.rollbacks.rows)
    # A request may have many rollbacks; a rollback id names one row.
    naming_undeclared, repeating = undeclared(run, run.rollbacks), repeated(run, run.rollbacks)
    for position, rollback in enumerate(run.rollbacks):
        problems = floor_problems(rollback) if position in below else []
        if position in naming_undeclared:
            problems.append(
                f"names request {rollback.request_id}, which no action request declares"
            )
        if position in repeating:
            problems.append(f"rollback id {rollback.rollback_id} repeats; only the first is joined")
        if problems:
            message = "rollback receipt " + "; ".join(problems)
            ROWS.add(result, codes.ROLLBACK_RECEIPT_INVALID, message, rollback, position)
    if len(run.rollbacks) < MIN_ROLLBACKS:
        message = f"{len(run.rollbacks)} rollback receipt(s); at least {MIN_ROLLBACKS} needed"
        result.add_for_file(codes.ROLLBACK_RECEIPTS_INSUFFICIENT, message, FLOOR, ROLLBACK_RECEIPTS)
    effects = RowFile(SIDE_EFFECT_RECEIPTS, FLOOR, "side_effect_receipt")
    for request_id, effect in shared(run, uncovered_executions):
        message = (
            f"{request_id} executed but its rollback ref names no verified rollback receipt for it"
        )
        effects.add(result, codes.ROLLBACK_RECEIPT_MISSING, message, effect, subject=request_id)
    harness.add_rollback_gap(run, result)
    result.counts = {
        "rollback_receipt_count": len(run.rollbacks),
        "rollback_verified_count": sum(r.rollback_verified is True for r in run.rollbacks),
    }
    return result


def rollback_of(run: RunInputs, rollback_ref: object) -> Rollback | None:
    """Return the rollback row a side effect's rollback ref names, None where none.

    The ref names it bare or as ``rollback/<rollback_id>`` (``rollback_id_of``).
    """
    if not isinstance(rollback_ref, str):
        return None
    return run.rollbacks.get(rollback_id_of(rollback_ref, run.rollbacks.by_key))


def uncovered_executions(run: RunInputs) -> list[tuple[str, SideEffect]]:
    """Return each executed request whose rollback ref names no verified rollback receipt
    for it, with its receipt, in request order."""
    return [
        (request_id, effect)
        for request_id, effect in zip(run.joined.ids, run.joined.effects, strict=True)
        if effect is not None
        and effect.execution_attempted is True
        and not rollback_covers(run, request_id, effect.rollback_receipt_ref)
    ]


def uncovered_requests(run: RunInputs) -> set[str]:
    """Return ``uncovered_executions``' requests, to look them up in."""
    return {request_id for request_id, _ in shared(run, uncovered_executions)}


def rollback_covers(run: RunInputs, request_id: str, rollback_ref: object) -> bool:
    """Say whether ``rollback_ref`` names a verified rollback receipt for ``request_id``."""
    rollback = rollback_of(run, rollback_ref)
    return (
        rollback is not None
        and rollback.request_id == request_id
        and rollback.rollback_verified is True
    )
