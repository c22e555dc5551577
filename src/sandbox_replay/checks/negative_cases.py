"""Negative cases (fixture mode): eight planted cases that must each raise their code.

A negative-case file ``<case_id>.json`` holds ``case_id``, ``body_redacted: true`` and
its flag set to true. Raising the case's code proves that alarm works; a case that is
absent or does not fire leaves that alarm unproven, which blocks the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from sandbox_replay.checks.base import LayerResult
from sandbox_replay.load.run import RunInputs
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer


@dataclass(frozen=True)
class NegativeCase:
    """One expected negative case: its id (and file stem), the flag it sets, its code."""

    case_id: str
    flag: str
    code: str

    @property
    def file_name(self) -> str:
        return f"{self.case_id}.json"


NEGATIVE_CASES = (
    NegativeCase(
        "real_secret_material", "real_secret_material_included", codes.REAL_SECRET_FORBIDDEN
    ),
    NegativeCase(
        "live_network_access", "live_network_access_requested", codes.LIVE_NETWORK_FORBIDDEN
    ),
    NegativeCase(
        "raw_environment_export", "raw_environment_export_requested", codes.RAW_ENV_EXPORT_FORBIDDEN
    ),
    NegativeCase(
        "policy_after_execution", "policy_evaluated_after_execution", codes.AFTER_EXECUTION
    ),
    NegativeCase(
        "unlogged_side_effect", "side_effect_without_diff_receipt", codes.UNLOGGED_SIDE_EFFECT
    ),
    NegativeCase(
        "tool_output_policy_bypass",
        "tool_output_expands_authority",
        codes.TOOL_OUTPUT_AUTHORITY_BYPASS,
    ),
    NegativeCase(
        "executable_escape_payload",
        "executable_escape_payload_included",
        codes.EXECUTABLE_PAYLOAD_FORBIDDEN,
    ),
    NegativeCase(
        "security_benchmark_claim", "security_benchmark_claim_made", codes.SECURITY_BENCHMARK_CLAIM
    ),
)
NEGATIVE_CASE_FILES: dict[str, str | None] = {case.file_name: None for case in NEGATIVE_CASES}


@dataclass
class NegativeCaseOutcome:
    """What the negative-case layer observed: case -> codes raised, and the missing cases."""

    observed: dict[str, list[str]]
    missing: list[str]


def check(run: RunInputs) -> tuple[LayerResult, NegativeCaseOutcome]:
    """Fire each planted case's code, or report the case missing."""
    result = LayerResult(Layer.NEGATIVE_CASES)
    observed: dict[str, list[str]] = {}
    missing: list[str] = []
    for case in NEGATIVE_CASES:
        loaded = run.extra_files.get(case.file_name)
        data = loaded.data if loaded is not None else None
        line = loaded.key_line(case.flag) if loaded is not None else None
        fired = (
            data is not None
            and data.get("case_id") == case.case_id
            and data.get("body_redacted") is True
            and data.get(case.flag) is True
        )
        if fired:
            code = case.code
            message = f"negative case {case.case_id} sets {case.flag}: its alarm fired"
            observed[case.case_id] = [case.code]
        else:
            code = codes.NEGATIVE_CASE_MISSING
            message = (
                f"negative case {case.case_id} is absent or does not set {case.flag} "
                "(with its case_id and body_redacted true)"
            )
            missing.append(case.case_id)
        subject = case.case_id
        result.add(code, message, subject, subject, "negative_case", case.file_name, line)
    result.counts = {
        "expected_negative_case_count": len(NEGATIVE_CASES),
        "observed_negative_case_count": len(observed),
        "missing_negative_case_count": len(missing),
    }
    return result, NegativeCaseOutcome(observed, missing)
