"""Write a synthetic exported bundle of N requests, deterministic by seed.

Run: .venv/bin/python benchmarks/generate_bundle.py --requests 60000 --seed 7 --out DIR
     [--failing-fraction 0.01]

The bundle has the seven core files, ``bundle_manifest.json``,
``source_module_manifest.json`` and two small public bodies copied from the package's
own data under ``source_modules/`` (their digests computed here). Requests come in
episodes of 1 to 40 steps; risk classes follow the proportions of ``RISK_MIX`` (all six
classes of the policy table, each present from the first six requests on). Refs are as
long as an exporter's would be (fleet, episode, step and a content digest), so that
60,000 requests make about 120 MB of JSON, the size the original implementation was
measured on.

A failing request (``--failing-fraction``) is given one of ``BLOCK_FAILURES`` or
``EXECUTING_FAILURES``: a block class declared allow, a blocked action that left a diff,
an executed action whose rollback is missing, a request whose shape does not match its
risk class, a verdict recorded after execution, or no verdict row at all. Same arguments, same bytes. Rows are written as they are made, one
request at a time into all five list files, so memory stays flat whatever N is.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import IO, Any

POLICY_VERSION = "2026.11.1"
FAIL_CLOSED_RULE = "rule:sandbox_policy_fail_closed_unrecognized_action"


@dataclass(frozen=True)
class RiskShape:
    """One policy-table row, as an exporter records a request of that class."""

    risk_class: str
    action_kind: str
    capability: str
    trust_label: str
    verdict: str
    rule_ref: str
    weight: int
    targets: tuple[str, ...]


RISK_MIX = (
    RiskShape(
        "low_risk_public_fixture_mutation",
        "filesystem_write",
        "public_fixture_write",
        "trusted_user_request",
        "allow",
        "rule:public_fixture_write_with_diff_receipt",
        34,
        ("tests/fixtures/golden_output", "docs/examples/sample_config", "fixtures/public/seed"),
    ),
    RiskShape(
        "review_required_side_effect",
        "mock_database_update",
        "mock_database_write",
        "trusted_operator_approval_ref",
        "review",
        "rule:side_effect_requires_approval_and_rollback",
        16,
        ("mock_database/orders_row", "mock_database/customer_flags", "mock_database/inventory"),
    ),
    RiskShape(
        "secret_access",
        "environment_secret_read",
        "environment_read",
        "untrusted_tool_output",
        "block",
        "rule:no_secret_or_env_read_from_untrusted_context",
        13,
        ("environment/synthetic_credential_name", "environment/synthetic_service_token_name"),
    ),
    RiskShape(
        "network_exfiltration",
        "network_request",
        "outbound_network",
        "untrusted_tool_output",
        "block",
        "rule:no_live_network_from_untrusted_context",
        13,
        ("outbound_post/synthetic_collector", "outbound_dns/synthetic_tunnel_endpoint"),
    ),
    RiskShape(
        "destructive_filesystem_mutation",
        "filesystem_delete",
        "filesystem_write",
        "untrusted_repo_file",
        "block",
        "rule:no_destructive_filesystem_mutation",
        12,
        ("filesystem_delete/workspace_tree", "filesystem_delete/git_object_store"),
    ),
    RiskShape(
        "escape_payload_obfuscation",
        "shell_command",
        "shell_exec",
        "untrusted_tool_output",
        "block",
        "rule:no_executable_escape_payload_or_obfuscation",
        12,
        ("shell/base64_decoded_pipeline", "shell/hex_escaped_heredoc", "shell/eval_of_fetch"),
    ),
)
# What can go wrong with a request, by whether its class derives to block.
BLOCK_FAILURES = (
    "block_declared_allow",
    "blocked_action_left_diff",
    "shape_mismatch",
    "verdict_after_execution",
    "verdict_missing",
)
EXECUTING_FAILURES = (
    "rollback_missing",
    "shape_mismatch",
    "verdict_after_execution",
    "verdict_missing",
)
FLEETS = ("fleet-eu-west-2", "fleet-us-east-1", "fleet-ap-south-1", "fleet-sa-east-1")
AGENTS = ("agent:code_assistant/v3.2", "agent:data_pipeline/v1.9", "agent:ops_runbook/v2.4")
LIST_FILES = {
    "action_requests.json": "action_requests",
    "policy_verdicts.json": "policy_verdicts",
    "side_effect_receipts.json": "side_effect_receipts",
    "rollback_receipts.json": "rollback_receipts",
    "cold_replay.json": "cold_replay",
}
# Public bodies copied into the bundle: package data path, material class, anchors.
COPIED_BODIES = (
    (
        "data/policy_table.json",
        "public_macro_control_plane_body",
        ("sandbox_policy_fail_closed_table", FAIL_CLOSED_RULE),
    ),
    (
        "data/codes/SANDBOX_POLICY_BLOCKED_ACTION_EXECUTED.md",
        "public_macro_standard_body",
        ("## What it checks",),
    ),
)


@dataclass(frozen=True)
class Request:
    """One planned request: its ids, its class, and the failure it carries (if any)."""

    index: int
    request_id: str
    episode_id: str
    step: int
    fleet: str
    agent: str
    shape: RiskShape
    failure: str | None
    digest: str


def plan_requests(count: int, seed: int, failing_fraction: float) -> Iterator[Request]:
    """Yield ``count`` requests in episodes; the first six cover every risk class."""
    rng = random.Random(seed)
    weights = [shape.weight for shape in RISK_MIX]
    index = 0
    episode = 0
    while index < count:
        episode += 1
        fleet = rng.choice(FLEETS)
        agent = rng.choice(AGENTS)
        episode_id = f"ep_{seed:04d}_{episode:07d}"
        for step in range(1, rng.randint(1, 40) + 1):
            if index >= count:
                return
            # The first requests cover every class once; the rest follow the weights.
            shape = RISK_MIX[index] if index < len(RISK_MIX) else rng.choices(RISK_MIX, weights)[0]
            failure = None
            if index >= len(RISK_MIX) and rng.random() < failing_fraction:
                choices = BLOCK_FAILURES if shape.verdict == "block" else EXECUTING_FAILURES
                failure = rng.choice(choices)
            digest = hashlib.sha256(f"{seed}:{index}".encode()).hexdigest()
            yield Request(
                index,
                f"req_{episode_id}_step_{step:03d}",
                episode_id,
                step,
                fleet,
                agent,
                shape,
                failure,
                digest,
            )
            index += 1


def _refs(req: Request) -> dict[str, str]:
    short = req.digest[:16]
    where = f"{req.fleet}/{req.episode_id}/step_{req.step:03d}"
    target = req.shape.targets[req.index % len(req.shape.targets)]
    return {
        "action": f"action:{target}/{short}",
        "tool_output": f"tool_output:{where}/observation",
        "effect": f"effect:{target}/{short}",
        "reason": f"reason:{req.shape.rule_ref.removeprefix('rule:')}/{where}",
        "rollback": f"rollback_{req.episode_id}_step_{req.step:03d}",
        "replay": f"replay_{req.episode_id}_step_{req.step:03d}",
        "where": where,
        "target": target,
    }


def request_row(req: Request, refs: dict[str, str]) -> dict[str, Any]:
    trust = req.shape.trust_label
    if req.failure == "shape_mismatch":
        trust = "untrusted_web_content"
    return {
        "request_id": req.request_id,
        "episode_id": req.episode_id,
        "action_kind": req.shape.action_kind,
        "normalized_action_ref": refs["action"],
        "source_trust_label": trust,
        "untrusted_tool_output_ref": refs["tool_output"],
        "requested_capability": req.shape.capability,
        "risk_class": req.shape.risk_class,
        "intended_side_effect_ref": refs["effect"],
        "agent_ref": req.agent,
        "body_redacted": True,
        "secret_like_data_synthetic": True,
        "raw_payload_exported": False,
        "live_network_target": False,
    }


def declared_verdict(req: Request) -> tuple[str, str]:
    """Return the verdict and rule the exporter recorded (wrong for some failures)."""
    if req.failure == "block_declared_allow":
        return "allow", "rule:public_fixture_write_with_diff_receipt"
    return req.shape.verdict, req.shape.rule_ref


def executes(req: Request) -> bool:
    verdict = declared_verdict(req)[0]
    return verdict != "block" or req.failure == "blocked_action_left_diff"


def verdict_row(req: Request, refs: dict[str, str]) -> dict[str, Any]:
    verdict, rule = declared_verdict(req)
    approval = None
    if verdict == "review":
        approval = f"approval:operator_ticket/{req.fleet}/{req.digest[:12]}"
    return {
        "request_id": req.request_id,
        "policy_version": POLICY_VERSION,
        "verdict": verdict,
        "rule_refs": [rule],
        "pre_execution": req.failure != "verdict_after_execution",
        "decision_reason_ref": refs["reason"],
        "approval_ref": approval,
        "body_redacted": True,
    }


def effect_row(req: Request, refs: dict[str, str]) -> dict[str, Any]:
    executed = executes(req)
    kind = req.shape.action_kind
    fs = db = net = "diff:none"
    if executed:
        diff = f"diff:{refs['target']}/{req.digest[16:32]}"
        if kind == "mock_database_update":
            db = diff
        elif kind == "network_request":
            net = diff
        else:
            fs = diff
    rollback = refs["rollback"] if executed else "rollback:not_required"
    if req.failure == "rollback_missing" and executed:
        rollback = f"rollback_unrecorded_{req.digest[:12]}"
    return {
        "request_id": req.request_id,
        "execution_attempted": executed,
        "filesystem_diff_ref": fs,
        "network_diff_ref": net,
        "database_diff_ref": db,
        "side_effect_diff_count": 1 if executed else 0,
        "rollback_receipt_ref": rollback,
        "body_redacted": True,
    }


def rollback_row(req: Request, refs: dict[str, str]) -> dict[str, Any] | None:
    if not executes(req) or req.failure == "rollback_missing":
        return None
    return {
        "rollback_id": refs["rollback"],
        "request_id": req.request_id,
        "rollback_required": True,
        "rollback_verified": True,
        "rollback_command_ref": f"rollback_command:restore/{refs['target']}/{req.digest[:16]}",
        "body_redacted": True,
    }


def replay_row(req: Request, refs: dict[str, str]) -> dict[str, Any]:
    return {
        "replay_id": refs["replay"],
        "request_id": req.request_id,
        "replay_command": f"replay:mock_sandbox/{refs['where']}",
        "receipt_ref": f"receipt:side_effect/{refs['where']}",
        "verdict_reproduced": True,
        "side_effect_state_reproduced": True,
        "pass_label": True,
        "body_redacted": True,
    }


class RowListWriter:
    """Write ``{"<key>": [rows...]}`` one row at a time, laid out like an exporter's output."""

    def __init__(self, handle: IO[str], key: str) -> None:
        self.handle = handle
        self.count = 0
        handle.write(f'{{\n  "{key}": [')

    def add(self, row: dict[str, Any]) -> None:
        text = json.dumps(row, indent=2).replace("\n", "\n    ")
        self.handle.write(("\n    " if self.count == 0 else ",\n    ") + text)
        self.count += 1

    def close(self) -> None:
        self.handle.write("\n  ]\n}\n" if self.count else "]\n}\n")


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def _policy() -> dict[str, Any]:
    return {
        "policy_id": "policy:agent_sandbox_escape_containment",
        "policy_version": POLICY_VERSION,
        "allowed_verdicts": ["allow", "warn", "block", "review"],
        "required_action_fields": [
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
            "secret_like_data_synthetic",
            "raw_payload_exported",
            "live_network_target",
        ],
        "required_verdict_fields": [
            "request_id",
            "policy_version",
            "verdict",
            "rule_refs",
            "pre_execution",
            "decision_reason_ref",
            "body_redacted",
        ],
        "required_effect_fields": [
            "request_id",
            "execution_attempted",
            "filesystem_diff_ref",
            "network_diff_ref",
            "database_diff_ref",
            "side_effect_diff_count",
            "rollback_receipt_ref",
            "body_redacted",
        ],
        **{
            flag: False
            for flag in (
                "live_secret_handling_authorized",
                "live_network_access_authorized",
                "host_filesystem_mutation_authorized",
                "tool_output_expands_authority",
                "executable_payload_export_authorized",
                "security_benchmark_claim_authorized",
                "provider_calls_authorized",
                "release_authorized",
            )
        },
    }


def _protocol(seed: int) -> dict[str, Any]:
    return {
        "protocol_id": f"projection:generated_fleet_export_{seed}",
        "source_refs": [f"source:agent_episode_log/{fleet}" for fleet in FLEETS],
        "source_pattern_ids": [f"pattern:{shape.risk_class}" for shape in RISK_MIX],
        "projection_receipt_refs": [f"receipt:projection/generated_fleet_export_{seed}"],
        "target_refs": ["target:sandbox_replay/generated_bundle"],
        "target_symbols": list(LIST_FILES.values()),
        "public_runtime_refs": ["runtime:mock_sandbox/v1"],
        "omitted_secret_or_live_access_material": [
            "environment variable values",
            "network endpoint addresses",
            "tool output bodies",
            "shell payload bodies",
            "database row contents",
        ],
        "body_import_status": "metadata_only",
        "body_import_verification": {
            "verification_status": "verified",
            "method": "refs_and_counts_only",
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


def _copy_bodies(out: Path) -> list[dict[str, Any]]:
    modules = []
    package = resources.files("sandbox_replay")
    for source, material_class, anchors in COPIED_BODIES:
        body = (package / source).read_bytes()
        rel = f"source_modules/{source.removeprefix('data/')}"
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(body)
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        modules.append(
            {
                "module_id": f"module:{Path(source).stem.lower()}",
                "path": rel,
                "target_ref": f"src/sandbox_replay/{source}",
                "material_class": material_class,
                "source_import_class": "copied_non_secret_macro_body",
                "body_copied": True,
                "body_in_receipt": False,
                "body_text_in_receipt": False,
                "sha256": digest,
                "source_sha256": digest,
                "target_sha256": digest,
                "required_anchors": list(anchors),
            }
        )
    return modules


def generate(out: Path, requests: int, seed: int, failing_fraction: float = 0.0) -> Path:
    """Write a bundle of ``requests`` requests into ``out`` (replacing it) and return it."""
    if requests < 6:
        raise ValueError("a bundle needs at least 6 requests to cover every risk class")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with ExitStack() as stack:
        writers = {
            name: RowListWriter(
                stack.enter_context((out / name).open("w", encoding="utf-8", newline="\n")), key
            )
            for name, key in LIST_FILES.items()
        }
        for req in plan_requests(requests, seed, failing_fraction):
            refs = _refs(req)
            writers["action_requests.json"].add(request_row(req, refs))
            if req.failure != "verdict_missing":
                writers["policy_verdicts.json"].add(verdict_row(req, refs))
            writers["side_effect_receipts.json"].add(effect_row(req, refs))
            rollback = rollback_row(req, refs)
            if rollback is not None:
                writers["rollback_receipts.json"].add(rollback)
            writers["cold_replay.json"].add(replay_row(req, refs))
        for writer in writers.values():
            writer.close()
    _write_json(out / "sandbox_policy.json", _policy())
    _write_json(out / "projection_protocol.json", _protocol(seed))
    modules = _copy_bodies(out)
    _write_json(
        out / "source_module_manifest.json",
        {
            "manifest_id": f"source_modules:generated_fleet_export_{seed}",
            "source_import_class": "copied_non_secret_macro_body",
            "body_in_receipt": False,
            "body_text_in_receipt": False,
            "module_count": len(modules),
            "modules": modules,
        },
    )
    _write_json(
        out / "bundle_manifest.json",
        {
            "bundle_id": f"bundle:generated_fleet_export_{seed}_{requests}",
            "bundle_format_ref": "format:exported_sandbox_policy_escape_bundle",
            "export_format_version": "1",
            "exporter_ref": "exporter:benchmarks/generate_bundle",
            "source_protocol_ref": f"projection:generated_fleet_export_{seed}",
            "policy_ref": f"policy:agent_sandbox_escape_containment@{POLICY_VERSION}",
            "source_module_manifest_ref": "source_module_manifest.json",
            "request_count": requests,
            "body_in_receipt": False,
        },
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--failing-fraction", type=float, default=0.0)
    args = parser.parse_args()
    out = generate(args.out, args.requests, args.seed, args.failing_fraction)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"wrote {out}: {args.requests} requests, {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
