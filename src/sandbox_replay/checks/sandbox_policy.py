"""Sandbox policy: the contract's verdicts, required fields and authority flags."""

from __future__ import annotations

from sandbox_replay.checks.base import (
    LayerResult,
    describe,
    missing_fields,
    strings_in,
    wrong_flags,
)
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
    policy = run.object(SANDBOX_POLICY)
    if policy is None:
        return LayerResult(Layer.SANDBOX_POLICY, ran=False)
    result = LayerResult(Layer.SANDBOX_POLICY)
    policy_id = policy.get("policy_id")
    subject = policy_id if isinstance(policy_id, str) and policy_id else SANDBOX_POLICY

    def add(code: str, message: str, *keys: str) -> None:
        line = run.key_line(SANDBOX_POLICY, *keys)
        result.add(code, message, FLOOR, subject, "sandbox_policy", SANDBOX_POLICY, line)

    incomplete = codes.POLICY_REQUIRED_FIELDS_INCOMPLETE
    absent = missing_fields(policy, ("policy_id", "policy_version"))
    if absent:
        add(incomplete, f"policy lacks {describe(absent)}", *absent)
    # Ids and versions are text: a version of another type would match no verdict row's
    # and turn off the check that each row cites it (the verdict layer reads a string only).
    named = ("policy_id", "policy_version")
    not_text = [k for k in named if k not in absent and not isinstance(policy.get(k), str)]
    if not_text:
        message = f"not a string: {describe(not_text)}; verdict rows cannot be held to it"
        add(incomplete, message, *not_text)
    allowed = strings_in(policy.get("allowed_verdicts"))
    lacking = [v for v in VERDICTS if v not in allowed]
    if lacking:
        message = f"allowed_verdicts lacks {describe(lacking)}"
        add(codes.POLICY_VERDICTS_INCOMPLETE, message, "allowed_verdicts")
    for key, needed in REQUIRED_LISTS.items():
        have = strings_in(policy.get(key))
        gaps = [f for f in needed if f not in have]
        if gaps:
            add(incomplete, f"{key} does not require {describe(gaps)}", key)
    overclaims = wrong_flags(policy, AUTHORITY_FLAGS)
    if overclaims:
        message = f"authority flags not exactly false: {describe(overclaims)}"
        add(codes.POLICY_AUTHORITY_OVERCLAIM, message, *overclaims)
    result.counts = {"allowed_verdict_count": len(allowed)}
    return result
