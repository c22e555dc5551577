"""The result record's JSON Schema models, and the types every schema model shares.

``schemas`` publishes them with the input files' models.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Sha256Ref = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Count = Annotated[int, Field(ge=0)]
Scalar = str | int | float | bool | None | list[str]
"""A value as the result record's row lists carry it: scalars, or a short list of strings."""


class Model(BaseModel):
    """Base of every schema model: extra keys are allowed, as in the format."""

    model_config = ConfigDict(extra="allow")


class ToolInfo(Model):
    name: str
    version: str


class FindingRecord(Model):
    """One finding; path and line locate the input row when known."""

    error_code: str
    message: str
    negative_case_id: str
    subject_id: str
    subject_kind: str
    layer: str
    path: str | None
    line: Annotated[int, Field(ge=1)] | None
    body_redacted: Literal[True]


class LayerRecord(Model):
    layer: str
    title: str
    status: Literal["pass", "blocked", "not_run"]
    finding_count: Count
    counts: dict[str, int]


class ScanHitRecord(Model):
    path: str
    class_id: str
    count: Count


class ScanClassRecord(Model):
    class_id: str
    label: str
    remediation: str


class ScanRecord(Model):
    """The forbidden-material scan: paths, classes and counts, never the matched text."""

    status: Literal["pass", "blocked"]
    files_scanned: Count
    bytes_scanned: Count
    blocking_hit_count: Count
    hits_by_class: dict[str, int]
    hits: list[ScanHitRecord]
    classes_hit: list[ScanClassRecord]
    class_count: Count
    body_redacted: Literal[True]


class TraceSpan(Model):
    """One span; fields copied from an input row keep whatever value the row held."""

    span_id: str
    session_id: str
    action_kind: Any
    sequence_index: Count
    episode_id: Any
    observation_ref: Any
    authority_verdict_id: str | None
    state_transition_ref: Any
    outcome: str
    target_ref: Any
    input_digest: Sha256Ref
    recovery_ref: Any


class TraceSummary(Model):
    action_kind_counts: dict[str, int]
    outcome_counts: dict[str, int]
    finding_count: Count
    trace_digest: Sha256Ref


class TraceRecord(Model):
    """The public trace: one span per request, its summary and its audit findings."""

    status: Literal["pass", "blocked", "not_run"]
    span_count: Count
    spans: list[TraceSpan]
    summary: TraceSummary
    audit: list[FindingRecord]


class SourceModuleRecord(Model):
    module_id: str
    path: str
    material_class: str | None
    sha256: str | None
    size: Count | None
    required_anchor_count: Count
    verified: bool


class InputFileRecord(Model):
    path: str
    kind: Literal["input", "source_module"]
    size: Count
    sha256: Sha256Ref
    loaded: bool
    forbidden_material_found: bool


_SCALAR_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string"},
        {"type": "integer"},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
        {"type": "array", "items": {"type": "string"}},
    ]
}


class RowRecord(Model):
    """A row of an input file as the result projects it: known fields and its line."""

    model_config = ConfigDict(
        extra="allow", json_schema_extra={"additionalProperties": _SCALAR_SCHEMA}
    )

    line: Annotated[int, Field(ge=1)] | None


class PolicySourceRecord(Model):
    """Which policy was in force (FORMAT 6)."""

    kind: Literal["table", "cedar"]
    id: str
    sha256: Sha256Ref
    rule_count: Count


class PolicyRuleCoverage(Model):
    """One rule of the policy in force and how many requests it determined."""

    rule_ref: str
    verdict: Literal["allow", "warn", "block", "review"]
    request_count: Count


class PolicyCoverageRecord(Model):
    """Policy coverage (FORMAT 6): every rule, and those no request exercised."""

    rules: list[PolicyRuleCoverage]
    unexercised_rule_refs: list[str]


class DerivedVerdictRecord(Model):
    """One request's derived verdict beside the declared one."""

    request_id: str
    action_kind: Scalar
    requested_capability: Scalar
    risk_class: Scalar
    derived_verdict: Literal["allow", "block", "review"]
    derived_rule_ref: str
    fail_closed: bool
    mismatched_fields: list[str]
    declared_verdict: Scalar
    declared_rule_refs: Scalar
    policy_derivation_passed: bool


class SeededMutantRecord(Model):
    target: str = Field(description="The request id (or module id) the escape was planted in.")
    outcome: Literal["caught", "caught_otherwise", "missed"]
    codes: list[str] = Field(description="The codes of the findings the mutant added.")


class SeededEscapeRecord(Model):
    escape_id: str
    fakes: str
    codes: list[str] = Field(description="A finding of any of these added is a catch.")
    applies_to: str
    outcome: Literal["caught", "caught_otherwise", "missed", "not_applicable"]
    rows_tried: Count
    caught: Count
    caught_otherwise: Count
    missed: Count
    not_applicable_reason: str | None
    mutants: list[SeededMutantRecord]


class SensitivityRecord(Model):
    """Seeded escapes replayed on the run's own rows (``--sensitivity``)."""

    required: bool
    escape_count: Count
    applicable_count: Count
    caught_count: Count
    missed_count: Count
    not_applicable_count: Count
    escapes: list[SeededEscapeRecord]


class BenchmarkRecord(Model):
    """What the harness's benchmark said of the run (the bundle manifest's ``benchmark``), as
    it said it, and the replay's count of executed requests labelled untrusted_tool_output.

    AgentDojo's ``security: true`` means the injection task's goal was met.
    """

    suite: str | None = None
    pipeline: str | None = None
    user_task_id: str | None = None
    injection_task_id: str | None = None
    attack_type: str | None = None
    utility: bool | None = None
    security: bool | None = None
    benchmark_version: str | None = None
    agentdojo_version: str | None = None
    stopped_after_tool_result: bool | None = None
    untrusted_executed_count: Count
    untrusted_executed: list[str] = Field(
        default_factory=list,
        description="The executed requests labelled untrusted_tool_output, sorted by id.",
    )


class ResultRecord(Model):
    """The result record of one run (``*_result.json``); see docs/FORMAT.md section 4."""

    schema_version: Literal["sandbox-replay.result/1"]
    tool: ToolInfo
    status: Literal["pass", "blocked"]
    input_mode: Literal["fixture", "exported_sandbox_policy_escape_bundle"]
    bundle_id: str
    benchmark: BenchmarkRecord | None = None  # only for a bundle imported with one
    expected_negative_cases: list[str]
    observed_negative_cases: dict[str, list[str]]
    missing_negative_cases: list[str]
    error_codes: list[str]
    finding_count: Count
    findings: list[FindingRecord]
    layers: list[LayerRecord]
    secret_exclusion_scan: ScanRecord
    authority_ceiling: dict[str, Literal[False]]
    public_agent_execution_trace: TraceRecord
    risk_classes: list[str]
    policy_source: PolicySourceRecord
    policy_coverage: PolicyCoverageRecord
    action_request_count: Count
    policy_verdict_count: Count
    allow_count: Count
    block_count: Count
    review_count: Count
    derived_allow_count: Count
    derived_block_count: Count
    derived_review_count: Count
    derived_policy_verdict_mismatch_count: Count
    side_effect_receipt_count: Count
    executed_action_count: Count
    blocked_without_execution_count: Count
    rollback_receipt_count: Count
    rollback_verified_count: Count
    cold_replay_count: Count
    cold_replay_pass_count: Count
    cold_replay_confirmed_count: Count
    source_module_manifest_status: str
    source_modules: list[SourceModuleRecord]
    input_files: list[InputFileRecord]
    request_rows: list[RowRecord]
    policy_verdict_rows: list[RowRecord]
    derived_policy_verdict_rows: list[DerivedVerdictRecord]
    side_effect_rows: list[RowRecord]
    rollback_rows: list[RowRecord]
    cold_replay_rows: list[RowRecord]
    body_in_receipt: Literal[False]
    sensitivity: SensitivityRecord | None = None
