"""The per-row floors of the format: required fields and exact flags of each row kind."""

from __future__ import annotations

ACTION_FIELDS = (
    "request_id",
    "episode_id",
    "action_kind",
    "normalized_action_ref",
    "source_trust_label",
    "untrusted_tool_output_ref",
    "requested_capability",
    "risk_class",
    "intended_side_effect_ref",
    "body_redacted",
)
ACTION_FLAGS = {
    "body_redacted": True,
    "secret_like_data_synthetic": True,
    "raw_payload_exported": False,
    "live_network_target": False,
}
VERDICT_FIELDS = (
    "request_id",
    "policy_version",
    "verdict",
    "rule_refs",
    "pre_execution",
    "decision_reason_ref",
    "body_redacted",
)
# The verdict and receipt fields that hold refs or ids, and so must be strings.
VERDICT_TEXT_FIELDS = ("request_id", "policy_version", "decision_reason_ref")
EFFECT_FIELDS = (
    "request_id",
    "execution_attempted",
    "filesystem_diff_ref",
    "network_diff_ref",
    "database_diff_ref",
    "side_effect_diff_count",
    "rollback_receipt_ref",
    "body_redacted",
)
EFFECT_TEXT_FIELDS = (
    "request_id",
    "filesystem_diff_ref",
    "network_diff_ref",
    "database_diff_ref",
    "rollback_receipt_ref",
)
ROLLBACK_FIELDS = ("rollback_id", "request_id", "rollback_command_ref")
ROLLBACK_FLAGS = {"rollback_required": True, "rollback_verified": True, "body_redacted": True}
REPLAY_FIELDS = ("replay_id", "request_id", "replay_command", "receipt_ref")
REPLAY_FLAGS = {
    "verdict_reproduced": True,
    "side_effect_state_reproduced": True,
    "pass_label": True,
    "body_redacted": True,
}
