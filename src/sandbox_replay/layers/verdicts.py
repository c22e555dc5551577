"""Policy verdicts: the row floor, and each declared verdict against the derived one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox_replay import codes
from sandbox_replay.codes import Layer
from sandbox_replay.inputs import SANDBOX_POLICY, RunInputs
from sandbox_replay.layers.base import LayerResult, describe, missing_fields, not_text
from sandbox_replay.layers.rows import VERDICT_FIELDS, VERDICT_TEXT_FIELDS
from sandbox_replay.policy import VERDICTS, Derivation

FLOOR = "policy_verdict_floor"
COVERAGE = ("allow", "block", "review")


def derivation_passes(derivation: Derivation, verdict: Mapping[str, Any] | None) -> bool:
    """Say whether a verdict row matches the derived verdict and cites the derived rule."""
    if verdict is None:
        return False
    refs = verdict.get("rule_refs")
    return (
        verdict.get("verdict") == derivation.verdict
        and isinstance(refs, list)
        and derivation.rule_ref in refs
    )


def check(run: RunInputs) -> LayerResult:
    """Check each verdict row's floor, then hold every request's verdict to its derivation."""
    result = LayerResult(Layer.POLICY_VERDICTS)
    if not run.files["policy_verdicts.json"].ok:
        result.ran = False
        return result
    policy = run.object(SANDBOX_POLICY) or {}
    allowed = policy.get("allowed_verdicts")
    allowed_verdicts = (
        {v for v in allowed if isinstance(v, str)} if isinstance(allowed, list) else set(VERDICTS)
    )
    policy_version = policy.get("policy_version")
    seen: set[str] = set()
    for ref in run.verdicts:
        row = ref.row
        problems = []
        missing = missing_fields(row, VERDICT_FIELDS)
        if missing:
            problems.append(f"missing or empty: {describe(missing)}")
        wrong_type = not_text(row, VERDICT_TEXT_FIELDS, missing)
        if wrong_type:
            problems.append(f"not a string: {describe(wrong_type)}")
        verdict = row.get("verdict")
        if "verdict" not in missing and not (
            isinstance(verdict, str) and verdict in allowed_verdicts
        ):
            problems.append("verdict is not one of the policy's allowed verdicts")
        refs = row.get("rule_refs")
        if "rule_refs" not in missing and not (
            isinstance(refs, list) and all(isinstance(r, str) and r for r in refs)
        ):
            problems.append("rule_refs is not a list of rule ref strings")
        if row.get("pre_execution") is not True:
            problems.append("pre_execution is not true")
        if row.get("body_redacted") is not True:
            problems.append("body_redacted is not true")
        approval = row.get("approval_ref")
        if approval is not None and not isinstance(approval, str):
            problems.append("approval_ref is neither null nor a string")
        version = row.get("policy_version")
        if (
            isinstance(policy_version, str)
            and "policy_version" not in missing
            and (version != policy_version)
        ):
            problems.append("policy_version differs from the sandbox policy's version")
        request_id = row.get("request_id")
        if isinstance(request_id, str):
            if request_id in seen:
                problems.append(f"second verdict row for {request_id}; only the first is joined")
            seen.add(request_id)
        if problems:
            result.add_for_row(
                codes.VERDICT_INVALID,
                "policy verdict " + "; ".join(problems),
                FLOOR,
                ref,
                "request_id",
                "policy_verdict",
            )
        if isinstance(request_id, str) and request_id not in run.request_by_id:
            result.add_for_row(
                codes.VERDICT_SEMANTIC_MISMATCH,
                f"verdict row names request {request_id}, which no action request declares",
                FLOOR,
                ref,
                "request_id",
                "policy_verdict",
            )
    mismatches = 0
    for request_id, derivation in run.derivations.items():
        verdict_ref = run.verdict_by_request.get(request_id)
        if verdict_ref is None:
            request = run.request_by_id[request_id]
            result.add_for_row(
                codes.VERDICT_MISSING,
                f"{request_id} has no verdict row (derived verdict: {derivation.verdict})",
                FLOOR,
                request,
                "request_id",
                "action_request",
            )
            continue
        if not derivation_passes(derivation, verdict_ref.row):
            mismatches += 1
            declared = verdict_ref.get("verdict")
            # Only a known verdict is named: anything else is the input's own text.
            declared_text = declared if declared in VERDICTS else "no usable verdict"
            if declared == derivation.verdict:
                detail = f"does not cite the derived rule {derivation.rule_ref}"
            else:
                detail = (
                    f"declares {declared_text} but derives to {derivation.verdict} "
                    f"by {derivation.rule_ref}"
                )
            result.add_for_row(
                codes.VERDICT_SEMANTIC_MISMATCH,
                f"{request_id} {detail}",
                FLOOR,
                verdict_ref,
                "request_id",
                "policy_verdict",
            )
    declared = [ref.get("verdict") for ref in run.verdicts]
    lacking = [v for v in COVERAGE if v not in declared]
    if lacking:
        result.add(
            codes.VERDICT_COVERAGE_INCOMPLETE,
            f"no declared verdict is {describe(lacking)}; allow, block and review must all occur",
            FLOOR,
            "policy_verdicts",
            "input_file",
            "policy_verdicts.json",
            1,
        )
    result.counts = {
        "policy_verdict_count": len(run.verdicts),
        "allow_count": declared.count("allow"),
        "block_count": declared.count("block"),
        "review_count": declared.count("review"),
        "warn_count": declared.count("warn"),
        "derived_policy_verdict_mismatch_count": mismatches,
    }
    return result
