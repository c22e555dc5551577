"""Action requests: the row floor, and the request's shape against the policy."""

from __future__ import annotations

from operator import attrgetter

from sandbox_replay.checks.base import (
    LayerResult,
    derived_verdicts,
    describe,
    floor_breaks,
    repeated,
    shared,
    subject_of,
)
from sandbox_replay.load.run import ACTION_REQUESTS, RunInputs
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.rows import ActionRequest, rows_below_floor

FLOOR = "action_request_floor"
MIN_RISK_CLASSES = 4
KIND = "action_request"


def floor_problems(request: ActionRequest) -> list[str]:
    """Return what of the row floor a request breaks: required text and exact flags."""
    return floor_breaks(request, "flags not as required")


def _add(
    result: LayerResult, request: ActionRequest, position: int, code: str, message: str
) -> None:
    subject = subject_of(request, "request_id", ACTION_REQUESTS, position)
    result.add_for_row(code, message, FLOOR, ACTION_REQUESTS, request, subject, KIND)


def check(run: RunInputs) -> LayerResult:
    """Check each request's floor and whether its shape is one the policy recognises.

    Every row meets the floor; a request id names one row only (a repeat is a finding and
    is not joined); a request whose risk class is known must have that class's shape, and
    a policy that fails to evaluate it is a finding. An unknown risk class derives to
    block by the fail-closed rule, which is no finding of its own (FORMAT 7.6): the
    verdict, side-effect and trace layers hold the records to that block.
    """
    result = LayerResult(Layer.ACTION_REQUESTS)
    if not run.files[ACTION_REQUESTS].ok:
        result.ran = False
        return result
    below = rows_below_floor(run.requests.rows)
    repeating = repeated(run, run.requests)
    for position, request in enumerate(run.requests):
        if position in below:
            problems = floor_problems(request)
            if problems:
                _add(
                    result,
                    request,
                    position,
                    codes.ACTION_REQUEST_INVALID,
                    "action request " + "; ".join(problems),
                )
        request_id = request.request_id
        if not isinstance(request_id, str):
            continue
        if position in repeating:
            _add(
                result,
                request,
                position,
                codes.ACTION_REQUEST_DUPLICATE,
                f"request id {request_id} appears on more than one row; only the first is joined",
            )
            continue
        derivation = run.derivations[request_id]
        if derivation.mismatched_fields:
            _add(
                result,
                request,
                position,
                codes.ACTION_POLICY_SHAPE_MISMATCH,
                f"{request_id} does not match its risk class on "
                f"{describe(derivation.mismatched_fields)}; derives to block by {derivation.rule_ref}",
            )
        if derivation.error_policy_ids:
            _add(
                result,
                request,
                position,
                codes.ACTION_POLICY_EVALUATION_ERROR,
                f"{request_id}: evaluating policy {describe(derivation.error_policy_ids)} "
                f"failed; derives to block by {derivation.rule_ref}",
            )
    # Only a string equals a rule's risk class.
    risk_classes = {c for c in map(attrgetter("risk_class"), run.requests) if type(c) is str}
    decided = (
        (run.requests.by_key[request_id].get("risk_class"), derivation)
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
            ACTION_REQUESTS,
            1,
        )
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
