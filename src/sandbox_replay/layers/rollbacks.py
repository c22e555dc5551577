"""Rollbacks: every executed action must be recoverable by a verified rollback."""

from __future__ import annotations

from collections import deque
from itertools import compress, repeat
from operator import and_, eq, is_, itemgetter, not_
from typing import Any

from sandbox_replay import codes
from sandbox_replay.codes import Layer
from sandbox_replay.inputs import RowRef, RunInputs, rollback_id_of
from sandbox_replay.layers import harness
from sandbox_replay.layers.base import (
    NO_ROW,
    FloorScan,
    LayerResult,
    describe,
    joined,
    missing_fields,
    not_text,
    positions,
    read_joined,
    row_dicts,
    scan_floor,
    shared,
    wrong_flags,
)
from sandbox_replay.layers.rows import ROLLBACK_FIELDS, ROLLBACK_FLAGS
from sandbox_replay.layers.side_effects import receipt_join

FLOOR = "rollback_floor"
MIN_ROLLBACKS = 2


def check(run: RunInputs) -> LayerResult:
    """Check each rollback row's floor and that every executed action has one."""
    result = LayerResult(Layer.ROLLBACKS)
    if not run.files["rollback_receipts.json"].ok:
        result.ran = False
        return result
    scan = scan_floor(
        run.rollbacks,
        ROLLBACK_FIELDS,
        ROLLBACK_FLAGS,
        run.rollback_by_id,
        unique="rollback_id",
        read=("request_id",),
    )
    uncovered, all_named = _uncovered(run, scan)
    suspects = set(scan.suspects)
    if not all_named:  # else every row names a request: nothing to look up
        known = map(run.request_by_id.__contains__, scan.columns["request_id"])
        suspects.update(positions(map(not_, known)))
    seen: set[str] = set()
    for ref in map(run.rollbacks.__getitem__, sorted(suspects)):
        row = ref.row
        problems = []
        missing = missing_fields(row, ROLLBACK_FIELDS)
        if missing:
            problems.append(f"missing or empty: {describe(missing)}")
        wrong_type = not_text(row, ROLLBACK_FIELDS, missing)
        if wrong_type:
            problems.append(f"not a string: {describe(wrong_type)}")
        flags = wrong_flags(row, ROLLBACK_FLAGS)
        if flags:
            problems.append(f"not true: {describe(flags)}")
        request_id = row.get("request_id")
        if isinstance(request_id, str) and request_id not in run.request_by_id:
            problems.append(f"names request {request_id}, which no action request declares")
        rollback_id = row.get("rollback_id")
        if isinstance(rollback_id, str):
            if rollback_id in seen:
                problems.append(f"rollback id {rollback_id} repeats; only the first is joined")
            seen.add(rollback_id)
        if problems:
            result.add_for_row(
                codes.ROLLBACK_RECEIPT_INVALID,
                "rollback receipt " + "; ".join(problems),
                FLOOR,
                ref,
                "rollback_id",
                "rollback_receipt",
            )
    if len(run.rollbacks) < MIN_ROLLBACKS:
        result.add(
            codes.ROLLBACK_RECEIPTS_INSUFFICIENT,
            f"{len(run.rollbacks)} rollback receipt(s); at least {MIN_ROLLBACKS} needed",
            FLOOR,
            "rollback_receipts",
            "input_file",
            "rollback_receipts.json",
            1,
        )
    for request_id, effect in uncovered:
        if not rollback_covers(run, request_id, effect.get("rollback_receipt_ref")):
            result.add_for_row(
                codes.ROLLBACK_RECEIPT_MISSING,
                f"{request_id} executed but its rollback ref names no verified rollback "
                "receipt for it",
                FLOOR,
                effect,
                "request_id",
                "side_effect_receipt",
            )
    harness.add_rollback_gap(run, result)
    result.counts = {
        "rollback_receipt_count": len(run.rollbacks),
        "rollback_verified_count": sum(map(is_, scan.columns["rollback_verified"], repeat(True))),
    }
    return result


def rollback_covers(run: RunInputs, request_id: str, rollback_ref: object) -> bool:
    """Say whether ``rollback_ref`` names a verified rollback receipt for ``request_id``.

    The ref names it bare or as ``rollback/<rollback_id>`` (``rollback_id_of``).
    """
    if not isinstance(rollback_ref, str):
        return False
    rollback = run.rollback_by_id.get(rollback_id_of(rollback_ref, run.rollback_by_id))
    return (
        rollback is not None
        and rollback.get("request_id") == request_id
        and rollback.get("rollback_verified") is True
    )


def covered_each(run: RunInputs, request_ids: list[str], refs: list[Any]) -> list[bool]:
    """Return ``rollback_covers(run, request_id, ref)`` for each request and its ref.

    A ref that finds a verified rollback row naming its request is covered, which is
    tested for every pair at once in C (by position where the rollback file lists the
    refs in order: ``joined``); only the others are put to ``rollback_covers``.
    """
    try:
        rows = row_dicts(joined(run.rollback_by_id, _rollback_ids(run, refs)))
    except TypeError:  # a ref that cannot be hashed: put every pair to the exact test
        rows = row_dicts([NO_ROW] * len(refs))
    names = map(eq, map(dict.get, rows, repeat("request_id")), request_ids)
    verified = map(is_, map(dict.get, rows, repeat("rollback_verified")), repeat(True))
    covered = list(map(and_, names, verified))
    for at in positions(map(not_, covered)):
        covered[at] = rollback_covers(run, request_ids[at], refs[at])
    return covered


def _rollback_ids(run: RunInputs, refs: list[Any]) -> list[Any]:
    """Return the rollback id each ref names (``rollback_id_of``), in order."""
    return list(map(rollback_id_of, refs, repeat(run.rollback_by_id)))


def _uncovered(run: RunInputs, scan: FloorScan) -> tuple[list[tuple[str, RowRef]], bool]:
    """Return, in order, each executed request and its receipt, unless surely covered.

    An executed request is surely covered when its receipt's rollback ref finds a
    rollback row that names the request and is verified, which is ``rollback_covers``
    tested for every executed request at once in C; only the others are put to it.
    ``scan``, of the rollback file, has read the two fields of every rollback row.

    Also say whether every rollback row was found to name an executed request (then
    every row certainly names a request).
    """
    request_ids = list(run.derivations)
    receipts = shared(run, receipt_join)
    executed = list(positions(map(is_, receipts.columns["execution_attempted"], repeat(True))))
    requests = list(map(request_ids.__getitem__, executed))
    refs = list(map(receipts.columns["rollback_receipt_ref"].__getitem__, executed))
    try:
        rollbacks = joined(run.rollback_by_id, _rollback_ids(run, refs))
    except TypeError:  # a ref that cannot be hashed: put every request to the exact test
        return [(request_ids[i], receipts.refs[i]) for i in executed], False
    found = read_joined(run.rollback_by_id, rollbacks, ("request_id", "rollback_verified"), scan)
    names = list(map(eq, found["request_id"], requests))
    covered = map(and_, names, map(is_, found["rollback_verified"], repeat(True)))
    uncovered = [(requests[i], receipts.refs[executed[i]]) for i in positions(map(not_, covered))]
    # One byte per rollback row, set for each row found (by its RowRef.index) to name one.
    named = bytearray(len(run.rollbacks))
    deque(map(named.__setitem__, map(itemgetter(1), compress(rollbacks, names)), repeat(1)), 0)
    return uncovered, 0 not in named
