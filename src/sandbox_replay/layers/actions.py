"""Action requests: the row floor, and the request's shape against the policy table."""

from __future__ import annotations

from itertools import compress

from sandbox_replay import codes
from sandbox_replay.codes import Layer
from sandbox_replay.inputs import RunInputs
from sandbox_replay.layers.base import (
    LayerResult,
    derived_verdicts,
    describe,
    missing_fields,
    positions,
    scan_floor,
    shared,
    wrong_flags,
)
from sandbox_replay.layers.rows import ACTION_FIELDS, ACTION_FLAGS

FLOOR = "action_request_floor"
MIN_RISK_CLASSES = 4
# The required fields that hold text; body_redacted is a flag, held by ACTION_FLAGS.
ACTION_TEXT_FIELDS = tuple(f for f in ACTION_FIELDS if f not in ACTION_FLAGS)


def check(run: RunInputs) -> LayerResult:
    """Check each request's floor and whether its shape is one the policy recognises."""
    result = LayerResult(Layer.ACTION_REQUESTS)
    if not run.files["action_requests.json"].ok:
        result.ran = False
        return result
    # Derivations are shared by requests of one shape: ask each distinct one once.
    derivations = list(run.derivations.values())
    distinct = dict(zip(map(id, derivations), derivations, strict=True))
    closed_ids = {key for key, derivation in distinct.items() if derivation.fail_closed}
    fail_closed = list(map(closed_ids.__contains__, map(id, derivations)))
    scan = scan_floor(
        run.requests,
        ACTION_TEXT_FIELDS,
        ACTION_FLAGS,
        run.request_by_id,
        unique="request_id",
        read=("risk_class",),
    )
    # A request that derives fail-closed is looked at on its (first) row: a known risk
    # class in the wrong shape is a finding there. When each row is its own request, the
    # derivations are in row order.
    if len(run.request_by_id) == len(run.requests):
        closed_rows = positions(fail_closed)
    else:
        closed = set(compress(run.derivations, fail_closed))
        closed_rows = positions(map(closed.__contains__, scan.columns["request_id"]))
    suspects = scan.suspects.union(closed_rows)
    seen: set[str] = set()
    for ref in map(run.requests.__getitem__, sorted(suspects)):
        row = ref.row
        problems = []
        missing = missing_fields(row, ACTION_FIELDS)
        if missing:
            problems.append(f"missing or empty: {describe(missing)}")
        not_text = [
            f
            for f in ACTION_FIELDS
            if f not in missing and f != "body_redacted" and not isinstance(row.get(f), str)
        ]
        if not_text:
            problems.append(f"not a string: {describe(not_text)}")
        flags = wrong_flags(row, ACTION_FLAGS)
        if flags:
            problems.append(f"flags not as required: {describe(flags)}")
        if problems:
            result.add_for_row(
                codes.ACTION_REQUEST_INVALID,
                "action request " + "; ".join(problems),
                FLOOR,
                ref,
                "request_id",
                "action_request",
            )
        request_id = row.get("request_id")
        if not isinstance(request_id, str):
            continue
        if request_id in seen:
            result.add_for_row(
                codes.ACTION_REQUEST_DUPLICATE,
                f"request id {request_id} appears on more than one row; only the first is joined",
                FLOOR,
                ref,
                "request_id",
                "action_request",
            )
            continue
        seen.add(request_id)
        # An unknown risk class derives to block by the fail-closed rule, and that is no
        # finding of its own (FORMAT 7.6): the verdict, side-effect and trace layers hold
        # the records to that block. A known class in the wrong shape is a finding.
        derivation = run.derivations[request_id]
        if derivation.mismatched_fields:
            result.add_for_row(
                codes.ACTION_POLICY_SHAPE_MISMATCH,
                f"{request_id} does not match its risk class on "
                f"{describe(derivation.mismatched_fields)}; derives to block by {derivation.rule_ref}",
                FLOOR,
                ref,
                "request_id",
                "action_request",
            )
        if derivation.error_policy_ids:
            result.add_for_row(
                codes.ACTION_POLICY_EVALUATION_ERROR,
                f"{request_id}: evaluating policy {describe(derivation.error_policy_ids)} "
                f"failed; derives to block by {derivation.rule_ref}",
                FLOOR,
                ref,
                "request_id",
                "action_request",
            )
    risk_classes = scan.columns["risk_class"]
    decided = (
        (run.request_by_id[request_id].get("risk_class"), derivation)
        for request_id, derivation in run.derivations.items()
    )
    recognized = run.policy.recognized_classes(risk_classes, decided)
    if len(recognized) < MIN_RISK_CLASSES:
        result.add(
            codes.ACTION_RISK_COVERAGE_LOW,
            f"{len(recognized)} distinct recognised risk classes; at least {MIN_RISK_CLASSES} needed",
            FLOOR,
            "action_requests",
            "input_file",
            "action_requests.json",
            1,
        )
    derived = shared(run, derived_verdicts)
    result.counts = {
        "action_request_count": len(run.requests),
        "risk_class_count": len(recognized),
        "derived_allow_count": derived.count("allow"),
        "derived_block_count": derived.count("block"),
        "derived_review_count": derived.count("review"),
        "fail_closed_count": sum(fail_closed),
        "unrecognized_shape_count": sum(not d.recognized for d in run.derivations.values()),
    }
    return result
