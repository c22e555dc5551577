"""Action requests: the row floor, and the request's shape against the policy."""

from __future__ import annotations

from operator import attrgetter

from sandbox_replay.checks.base import (
    Gap,
    LayerResult,
    RowFile,
    derived_verdicts,
    describe,
    floor_breaks,
    repeated,
    shared,
)
from sandbox_replay.load.run import ACTION_REQUESTS, RunInputs
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.rows import ActionRequest, rows_below_floor

FLOOR = "action_request_floor"
MIN_RISK_CLASSES = 4
ROWS = RowFile(ACTION_REQUESTS, FLOOR, "action_request")


def floor_problems(request: ActionRequest) -> list[str]:
    """Return what of the row floor a request breaks: required text and exact flags."""
    return floor_breaks(request, "flags not as required")


def check(run: RunInputs) -> LayerResult:
    """Check each request's floor and whether its shape is one the policy recognises.

    Every row meets the floor; a request id names one row only (a repeat is a finding and
    is not joined); a request whose risk class is known must have that class's shape, and
    a policy that fails to evaluate it is a finding. An unknown risk class derives to
    block by the fail-closed rule, which is no finding of its own (FORMAT 7.6): the
    verdict, side-effect and trace layers hold the records to that block.
    """
    if not run.files[ACTION_REQUESTS].ok:
        return LayerResult(Layer.ACTION_REQUESTS, ran=False)
    result = LayerResult(Layer.ACTION_REQUESTS)
    below = rows_below_floor(run.requests.rows)
    repeating = repeated(run, run.requests)
    for position, request in enumerate(run.requests):
        for code, message in _row_gaps(run, request, position in below, position in repeating):
            ROWS.add(result, code, message, request, position)
    recognized = _recognized_classes(run)
    if len(recognized) < MIN_RISK_CLASSES:
        message = f"{len(recognized)} distinct recognised risk classes; at least {MIN_RISK_CLASSES} needed"
        result.add_for_file(codes.ACTION_RISK_COVERAGE_LOW, message, FLOOR, ACTION_REQUESTS)
    derived = shared(run, derived_verdicts)
    result.counts = {
        "action_request_count": len(run.requests),
        "risk_class_count": len(recognized),
        "derived_allow_count": derived.count("allow"),
        "derived_block_count": derived.count("block"),
        "derived_review_count": derived.count("review"),
        "fail_closed_count": sum(d.fail_closed for d in run.derivations.values()),
        "unrecognized_shape_count": sum(not d.recognized for d in run.derivations.values()),
    }
    return result


def _row_gaps(run: RunInputs, request: ActionRequest, below: bool, repeating: bool) -> list[Gap]:
    """Return a request row's gaps: its floor, a repeated id, its shape against its class."""
    problems = floor_problems(request) if below else []
    found = (
        [(codes.ACTION_REQUEST_INVALID, "action request " + "; ".join(problems))]
        if problems
        else []
    )
    request_id = request.request_id
    if not isinstance(request_id, str):
        return found
    if repeating:
        message = f"request id {request_id} appears on more than one row; only the first is joined"
        return [*found, (codes.ACTION_REQUEST_DUPLICATE, message)]
    derivation = run.derivations[request_id]
    if derivation.mismatched_fields:
        message = (
            f"{request_id} does not match its risk class on "
            f"{describe(derivation.mismatched_fields)}; derives to block by {derivation.rule_ref}"
        )
        found.append((codes.ACTION_POLICY_SHAPE_MISMATCH, message))
    if derivation.error_policy_ids:
        message = (
            f"{request_id}: evaluating policy {describe(derivation.error_policy_ids)} "
            f"failed; derives to block by {derivation.rule_ref}"
        )
        found.append((codes.ACTION_POLICY_EVALUATION_ERROR, message))
    return found


def _recognized_classes(run: RunInputs) -> set[str]:
    """Return the distinct risk classes the policy recognises among the requests."""
    # Only a string equals a rule's risk class.
    risk_classes = {c for c in map(attrgetter("risk_class"), run.requests) if type(c) is str}
    decided = (
        (run.requests.by_key[request_id].get("risk_class"), derivation)
        for request_id, derivation in run.derivations.items()
    )
    return run.policy.recognized_classes(risk_classes, decided)
