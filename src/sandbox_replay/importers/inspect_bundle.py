"""Turn the tool calls of Inspect AI samples into the files of one bundle (FORMAT.md).

Per tool call: an action request (shaped by the map file, bodies only as digests); a
verdict row where an approval event decided it; a side-effect row counting the sandbox
events of the call's own work (``inspect_events.Effects``); with ``teardown``, a rollback row per executed call standing for the
sample's sandbox teardown. Inspect records no rollback or cold replay, and the manifest
says so. Nothing time-bound reaches a bundle: one log always imports to the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sandbox_replay.atomic import dump_json
from sandbox_replay.checks.harness import NOT_RECORDED, TEARDOWN
from sandbox_replay.checks.sandbox_policy import AUTHORITY_FLAGS
from sandbox_replay.importers.inspect_events import Effects, ToolCall
from sandbox_replay.importers.tool_map import ToolMap, packaged_map
from sandbox_replay.load import run as files
from sandbox_replay.model.policy import VERDICTS
from sandbox_replay.model.rows import ActionRequest, PolicyVerdict, SideEffect

POLICY_ID = "policy:inspect_ai_approval"
POLICY_VERSION = "inspect_ai_approval/1"
NO_OUTPUT_REF = "tool_output:none_before_first_call"
# An exec ran, and the log cannot tell what it changed: the diff count counts it, once.
CHANGE_UNKNOWN = "executed_change_unknown"
EXPORTER_REF = "exporter:sandbox-replay/import-{}"  # a bundle's made here, by harness prefix
MAP_MODULE_PATH = "source_modules/map/tool_map.json"  # a user's map
DECISION_VERDICTS = {
    "approve": "allow",
    "modify": "allow",
    "reject": "block",
    "terminate": "block",
    "escalate": "review",
}
# The files of rows a bundle holds, each a JSON object of one list named as the file.
ROW_KINDS = ("action_requests", "policy_verdicts", "side_effect_receipts", "rollback_receipts")
# What the projection protocol says the import left out of the bundle.
OMITTED = (
    "tool call arguments",
    "tool outputs and errors",
    "sandbox commands, file bodies and outputs",
    "approval explanations",
    "model messages",
    "timestamps and run ids",
)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
Episodes = Sequence[tuple[str, list[ToolCall]]]


@dataclass(frozen=True)
class Harness:
    """Whose logs a bundle is made from: the names its refs are built of, and its map."""

    prefix: str  # of refs and module ids: ``inspect``
    label: str  # of the harness ref and runtime: ``inspect_ai``
    policy_id: str
    policy_version: str
    packaged_map: Callable[[], ToolMap]

    @property
    def packaged_module_path(self) -> str:
        return f"source_modules/map/{self.prefix}_standard_tools.json"


INSPECT = Harness("inspect", "inspect_ai", POLICY_ID, POLICY_VERSION, packaged_map)
PACKAGED_MODULE_PATH = INSPECT.packaged_module_path


@dataclass(frozen=True)
class Bundle:
    """One bundle folder to write: its name and every file's bytes by relative path."""

    name: str
    files: Mapping[str, bytes]
    secret_matches: Mapping[str, int]


@dataclass(frozen=True)
class _Sample:
    """What every row of one bundle is named by."""

    task: str
    tool_map: ToolMap
    teardown: bool
    prefixed: bool
    harness: Harness


def build_bundle(
    name: str,
    task: str,
    harness_version: str,
    episodes: Episodes,
    tool_map: ToolMap,
    *,
    teardown: bool,
    prefixed: bool,
    harness: Harness = INSPECT,
    benchmark: Mapping[str, Any] | None = None,
) -> Bundle:
    """Return the bundle of ``episodes``; ``prefixed`` puts the episode in each request id.

    ``benchmark`` is what the harness's benchmark said of the run, kept in the manifest.
    """
    sample = _Sample(task, tool_map, teardown, prefixed, harness)
    rows: dict[str, list[dict[str, Any]]] = {kind: [] for kind in ROW_KINDS}
    secret_matches: dict[str, int] = {}
    for episode, calls in episodes:
        for call in calls:
            for class_id, count in call.matches.items():
                secret_matches[class_id] = secret_matches.get(class_id, 0) + count
            _add_rows(rows, sample, episode, call)
    bundle_files = {
        f"{kind}.json": dump_json({kind: kind_rows}) for kind, kind_rows in rows.items()
    }
    bundle_files |= {
        files.COLD_REPLAY: dump_json({"cold_replay": []}),
        files.PROJECTION_PROTOCOL: dump_json(_projection(sample, episodes, harness_version)),
        files.SANDBOX_POLICY: dump_json(_sandbox_policy(harness)),
        files.BUNDLE_MANIFEST: dump_json(_manifest(name, sample, harness_version, benchmark)),
        files.SOURCE_MODULE_MANIFEST: dump_json(_module_manifest(tool_map, harness)),
        **{path: in_force.body for path, in_force in _maps(tool_map, harness)},
    }
    return Bundle(safe_name(name), bundle_files, secret_matches)


def safe_name(text: str) -> str:
    """Return ``text`` as a folder name, each run of other characters than ``A-Za-z0-9_.-`` a ``-``."""
    return _UNSAFE.sub("-", text).strip("-.") or "x"


def _add_rows(
    rows: dict[str, list[dict[str, Any]]], sample: _Sample, episode: str, call: ToolCall
) -> None:
    request_id = f"{episode}/{call.call_id}" if sample.prefixed else call.call_id
    ref = f"{sample.harness.prefix}/{sample.task}/{episode}/{call.call_id}"
    rows["action_requests"].append(_request(sample, episode, call, request_id, ref))
    if call.decision is not None:
        rows["policy_verdicts"].append(
            {
                "request_id": request_id,
                "policy_version": POLICY_VERSION,
                "verdict": DECISION_VERDICTS.get(call.decision, call.decision),
                "rule_refs": [f"approver:{call.approver}"],
                "pre_execution": call.pre_execution,
                "decision_reason_ref": f"reason:inspect_approval/{call.decision}",
                "approval_ref": f"approval:{ref}",
                "body_redacted": True,
            }
        )
    effects = call.effects
    executed = effects.writes + effects.unknown + effects.reads > 0
    rollback_ref = "rollback:not_required_not_executed"
    if executed and sample.teardown:
        rollback_ref = f"{TEARDOWN}:{request_id}"
        rows["rollback_receipts"].append(
            {
                "rollback_id": rollback_ref,
                "request_id": request_id,
                "rollback_required": True,
                "rollback_verified": True,
                "rollback_command_ref": f"rollback_command:{sample.harness.prefix}/{sample.task}/{episode}/{TEARDOWN}",
                "body_redacted": True,
            }
        )
    elif executed:
        rollback_ref = f"rollback:{NOT_RECORDED}"
    rows["side_effect_receipts"].append(
        {
            "request_id": request_id,
            "execution_attempted": executed,
            "filesystem_diff_ref": _diff_ref(effects, ref),
            "network_diff_ref": f"diff:{NOT_RECORDED}",
            "database_diff_ref": f"diff:{NOT_RECORDED}",
            "side_effect_diff_count": effects.writes + effects.unknown,
            "rollback_receipt_ref": rollback_ref,
            "body_redacted": True,
        }
    )


def _diff_ref(effects: Effects, ref: str) -> str:
    """Name what the log tells of a call's change: unknown after an exec, else its writes."""
    if effects.unknown:
        return f"diff:{CHANGE_UNKNOWN}/{ref}/sandbox"
    if effects.writes:
        return f"diff:{ref}/sandbox"
    return "diff:none_read_only" if effects.reads else "diff:none"


def _request(
    sample: _Sample, episode: str, call: ToolCall, request_id: str, ref: str
) -> dict[str, Any]:
    shape = sample.tool_map.classify(call.function, call.arguments, call.previous_function)
    if call.trust_label is not None:
        shape = replace(shape, source_trust_label=call.trust_label)
    output_ref = (
        f"{sample.harness.prefix}/{sample.task}/{episode}/{call.previous_output_ref}/output"
        if call.previous_output_ref is not None
        else NO_OUTPUT_REF
    )
    request: dict[str, Any] = {
        "request_id": request_id,
        "episode_id": episode,
        "action_kind": shape.action_kind,
        "normalized_action_ref": ref,
        "source_trust_label": shape.source_trust_label,
        "untrusted_tool_output_ref": output_ref,
        "requested_capability": shape.requested_capability,
        "risk_class": shape.risk_class,
        "intended_side_effect_ref": f"effect:{ref}",
        "body_redacted": True,
        "secret_like_data_synthetic": not call.matches,
        "raw_payload_exported": False,
        "live_network_target": False,
        "tool_function": call.function,
        "map_rule_ref": shape.rule_ref or "map_rule:none_matched",
        "arguments_sha256": call.arguments_sha256,
        "output_sha256": call.output_sha256,
    }
    if call.kept_as_recorded:
        request["arguments_not_normalised"] = ", ".join(call.kept_as_recorded)
    if call.matches:
        request["body_forbidden_matches"] = ", ".join(
            f"{class_id}: {count}" for class_id, count in sorted(call.matches.items())
        )
    return request


def _manifest(
    name: str, sample: _Sample, harness_version: str, benchmark: Mapping[str, Any] | None
) -> dict[str, Any]:
    harness, task = sample.harness, sample.task
    manifest = {
        "bundle_id": f"bundle:{harness.prefix}/{task}/{name}",
        "bundle_format_ref": "format:exported_sandbox_policy_escape_bundle",
        "export_format_version": "1",
        "exporter_ref": EXPORTER_REF.format(harness.prefix),
        "source_protocol_ref": f"projection:{harness.prefix}/{task}",
        "policy_ref": f"{harness.policy_id}@{harness.policy_version}",
        "source_module_manifest_ref": files.SOURCE_MODULE_MANIFEST,
        "body_in_receipt": False,
        "harness_ref": f"harness:{harness.label}@{harness_version}",
        "rollback_evidence": TEARDOWN if sample.teardown else NOT_RECORDED,
        "cold_replay_evidence": NOT_RECORDED,
    }
    return manifest if benchmark is None else {**manifest, "benchmark": dict(benchmark)}


def _projection(sample: _Sample, episodes: Episodes, harness_version: str) -> dict[str, Any]:
    prefix, task = sample.harness.prefix, sample.task
    return {
        "protocol_id": f"projection:{prefix}/{task}",
        "source_refs": [f"source:{prefix}_log/{task}/{episode}" for episode, _ in episodes],
        "source_pattern_ids": [f"pattern:{prefix}_tool_call"],
        "projection_receipt_refs": [f"receipt:projection/sandbox-replay_import_{prefix}"],
        "target_refs": ["target:sandbox_replay/bundle"],
        "target_symbols": [*ROW_KINDS, "cold_replay"],
        "public_runtime_refs": [f"runtime:{sample.harness.label}/{harness_version}"],
        "omitted_secret_or_live_access_material": list(OMITTED),
        "body_import_status": "metadata_only",
        "body_import_verification": {
            "verification_status": "verified",
            "method": "refs_and_sha256_digests_only",
            "verified": True,
            "body_in_receipt": False,
        },
        "body_in_receipt": False,
        "copied_credential_or_account_bound_source": False,
        "exports_secret_or_live_access_material": False,
        "exports_executable_payloads": False,
        "authorizes_live_network": False,
        "authorizes_sandbox_escape": False,
    }


def _sandbox_policy(harness: Harness) -> dict[str, Any]:
    """Return the sandbox policy the contract asks for, claiming no authority."""
    return {
        "policy_id": harness.policy_id,
        "policy_version": harness.policy_version,
        "allowed_verdicts": list(VERDICTS),
        # Every required field, then the flags a request states.
        "required_action_fields": list(
            dict.fromkeys([*ActionRequest.REQUIRED, *ActionRequest.FLAGS])
        ),
        "required_verdict_fields": list(PolicyVerdict.REQUIRED),
        "required_effect_fields": list(SideEffect.REQUIRED),
        **AUTHORITY_FLAGS,
    }


def _maps(tool_map: ToolMap, harness: Harness) -> list[tuple[str, ToolMap]]:
    """Return where a bundle copies each map in force: a user's, then the one it extends."""
    packaged_path = harness.packaged_module_path
    if tool_map.extends is not None:
        return [(MAP_MODULE_PATH, tool_map), (packaged_path, tool_map.extends)]
    packaged = tool_map.body == harness.packaged_map().body
    return [(packaged_path if packaged else MAP_MODULE_PATH, tool_map)]


def _module_manifest(tool_map: ToolMap, harness: Harness) -> dict[str, Any]:
    copied = "copied_non_secret_macro_body"
    modules = [
        {
            "module_id": f"module:{harness.prefix}_tool_map"
            if path == MAP_MODULE_PATH
            else f"module:{harness.prefix}_standard_tools",
            "path": path,
            "material_class": "public_macro_control_plane_body",
            "source_import_class": copied,
            "body_copied": True,
            "body_in_receipt": False,
            "body_text_in_receipt": False,
            **dict.fromkeys(("sha256", "source_sha256", "target_sha256"), in_force.sha256),
            "required_anchors": [in_force.map_id],
        }
        for path, in_force in _maps(tool_map, harness)
    ]
    return {
        "manifest_id": f"source_modules:{harness.prefix}_tool_map",
        "source_import_class": copied,
        "body_in_receipt": False,
        "body_text_in_receipt": False,
        "module_count": len(modules),
        "modules": modules,
    }
