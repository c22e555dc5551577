"""Sandbox policy: the contract's verdicts, required fields and authority flags."""

from __future__ import annotations

from sandbox_replay.checks.base import LayerResult, describe, missing_fields, wrong_flags
from sandbox_replay.load.run import SANDBOX_POLICY, RunInputs
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.policy import VERDICTS
from sandbox_replay.model.rows import ActionRequest, PolicyVerdict, SideEffect

AUTHORITY_FLAGS = {
    name: False
    for name in (
        "live_secret_handling_authorized",
        "live_network_access_authorized",
        "host_filesystem_mutation_authorized",
        "tool_output_expands_authority",
        "executable_payload_export_authorized",
        "security_benchmark_claim_authorized",
        "provider_calls_authorized",
        "release_authorized",
    )
}
REQUIRED_LISTS = {
    "required_action_fields": ActionRequest.REQUIRED,
    "required_verdict_fields": PolicyVerdict.REQUIRED,
    "required_effect_fields": SideEffect.REQUIRED,
}
FLOOR = "sandbox_policy_floor"


def check(run: RunInputs) -> LayerResult:
    """Check that the policy allows every verdict, requires every field and claims no authority."""
    result = LayerResult(Layer.SANDBOX_POLICY)
    policy = run.object(SANDBOX_POLICY)
    if policy is None:
        result.ran = False
        return result
    policy_id = policy.get("policy_id")
    subject = policy_id if isinstance(policy_id, str) and policy_id else SANDBOX_POLICY

    def add(code: str, message: str, *keys: str) -> None:
        line = run.key_line(SANDBOX_POLICY, *keys)
        result.add(code, message, FLOOR, subject, "sandbox_policy", SANDBOX_POLICY, line)

    absent = missing_fields(policy, ("policy_id", "policy_version"))
    if absent:
        add(codes.POLICY_REQUIRED_FIELDS_INCOMPLETE, f"policy lacks {describe(absent)}", *absent)
    # Ids and versions are text: a version of another type would match no verdict row's
    # and turn off the check that each row cites it (the verdict layer reads a string only).
    not_text = [
        k
        for k in ("policy_id", "policy_version")
        if k not in absent and not isinstance(policy.get(k), str)
    ]
    if not_text:
        add(
            codes.POLICY_REQUIRED_FIELDS_INCOMPLETE,
            f"not a string: {describe(not_text)}; verdict rows cannot be held to it",
            *not_text,
        )
    allowed = policy.get("allowed_verdicts")
    allowed_set = {v for v in allowed if isinstance(v, str)} if isinstance(allowed, list) else set()
    lacking = [v for v in VERDICTS if v not in allowed_set]
    if lacking:
        add(
            codes.POLICY_VERDICTS_INCOMPLETE,
            f"allowed_verdicts lacks {describe(lacking)}",
            "allowed_verdicts",
        )
    for key, needed in REQUIRED_LISTS.items():
        declared = policy.get(key)
        have = {f for f in declared if isinstance(f, str)} if isinstance(declared, list) else set()
        gaps = [f for f in needed if f not in have]
        if gaps:
            add(
                codes.POLICY_REQUIRED_FIELDS_INCOMPLETE,
                f"{key} does not require {describe(gaps)}",
                key,
            )
    overclaims = wrong_flags(policy, AUTHORITY_FLAGS)
    if overclaims:
        add(
            codes.POLICY_AUTHORITY_OVERCLAIM,
            f"authority flags not exactly false: {describe(overclaims)}",
            *overclaims,
        )
    result.counts = {"allowed_verdict_count": len(allowed_set)}
    return result
