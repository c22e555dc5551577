"""Records in the original implementation's conventions, and how each must replay here.

The two folders beside this file are written by us in the conventions of the
implementation our format comes from (FORMAT section 7): side effects name their rollback
as ``rollback/<rollback_id>`` and ``rollback/not_required_blocked``, diff refs read
``diff/none_blocked`` and ``diff/<name>``, every row's keys are in alphabetical order, and
the projection protocol says its body import was ``verified``. ``expected.json`` in each
holds its status, codes and the counters of FORMAT 7.5.

Each case below is one edit of a copy of those folders, with what the original does with
it (or, where this tool is deliberately stricter, what docs/checks.md's "Where we differ on
purpose" says we do).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_replay import InputMode
from sandbox_replay.model import codes

HERE = Path(__file__).resolve().parent
ORIGINAL_FIXTURE = HERE / "original_fixture"
ORIGINAL_BUNDLE = HERE / "original_bundle"
ORIGINAL_FORBIDDEN_CLASSES = HERE / "original_forbidden_classes.json"
FAIL_CLOSED_RULE = "rule:sandbox_policy_fail_closed_unrecognized_action"
EXFIL = "req_network_exfil_attempt"
SAFE_EDIT = "req_safe_fixture_edit"
MOCK_DB = "req_mock_db_update"
# The original's six sentinels by class (FORMAT 7.2); each blocks wherever it appears.
SENTINELS = {
    "SYNTHETIC_RAW_SEED_BODY_SENTINEL": "forbidden_content_body",
    "SYNTHETIC_PROVIDER_PAYLOAD_BODY_SENTINEL": "forbidden_content_body",
    "SYNTHETIC_RELEASE_PACKET_BODY_SENTINEL": "forbidden_content_body",
    "SYNTHETIC_OPERATOR_THREAD_BODY_SENTINEL": "live_operator_state",
    "SYNTHETIC_HUD_BROWSER_COCKPIT_STATE_SENTINEL": "live_operator_state",
    "SYNTHETIC_NON_PUBLIC_SOURCE_BODY_SENTINEL": "non_public_evidence_body",
}
NEGATIVE_CASE_CODES = frozenset(
    {
        codes.REAL_SECRET_FORBIDDEN,
        codes.LIVE_NETWORK_FORBIDDEN,
        codes.RAW_ENV_EXPORT_FORBIDDEN,
        codes.AFTER_EXECUTION,
        codes.UNLOGGED_SIDE_EFFECT,
        codes.TOOL_OUTPUT_AUTHORITY_BYPASS,
        codes.EXECUTABLE_PAYLOAD_FORBIDDEN,
        codes.SECURITY_BENCHMARK_CLAIM,
    }
)
LIST_KEYS = {
    "action_requests.json": "action_requests",
    "policy_verdicts.json": "policy_verdicts",
    "side_effect_receipts.json": "side_effect_receipts",
    "rollback_receipts.json": "rollback_receipts",
    "cold_replay.json": "cold_replay",
}


def read(path: Path) -> Any:
    return json.loads(path.read_text("utf-8"))


def write(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", "utf-8")


def rows(folder: Path, name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = read(folder / name)[LIST_KEYS[name]]
    return rows


def edit_rows(folder: Path, name: str, change: Callable[[list[dict[str, Any]]], None]) -> None:
    data = read(folder / name)
    change(data[LIST_KEYS[name]])
    write(folder / name, data)


def edit_row(folder: Path, name: str, request_id: str, **changes: Any) -> None:
    def change(found: list[dict[str, Any]]) -> None:
        next(row for row in found if row.get("request_id") == request_id).update(changes)

    edit_rows(folder, name, change)


def edit_object(folder: Path, name: str, **changes: Any) -> None:
    data = read(folder / name)
    data.update(changes)
    write(folder / name, data)


def refresh_module(folder: Path, index: int, data: bytes) -> None:
    """Write module ``index``'s body as ``data`` and record its digest in the manifest."""
    manifest = read(folder / "source_module_manifest.json")
    module = manifest["modules"][index]
    (folder / module["path"]).write_bytes(data)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    module.update(sha256=digest, source_sha256=digest, target_sha256=digest)
    write(folder / "source_module_manifest.json", manifest)


def first_body(folder: Path) -> bytes:
    manifest = read(folder / "source_module_manifest.json")
    return (folder / manifest["modules"][0]["path"]).read_bytes()


def add_request(
    folder: Path, request_id: str, risk_class: str, verdict: str, rule: str, executed: bool
) -> None:
    """Add one request in the original's conventions, with its verdict, receipt and replay."""
    request = dict(rows(folder, "action_requests.json")[0])
    request.update(
        request_id=request_id,
        risk_class=risk_class,
        action_kind="credential_helper_install",
        requested_capability="credential_store_write",
        normalized_action_ref=f"action:credential_helper/{request_id}",
        intended_side_effect_ref="effect:credential_helper_installed",
    )
    edit_rows(folder, "action_requests.json", lambda found: found.append(request))
    verdict_row = dict(rows(folder, "policy_verdicts.json")[0])
    verdict_row.update(request_id=request_id, verdict=verdict, rule_refs=[rule])
    edit_rows(folder, "policy_verdicts.json", lambda found: found.append(verdict_row))
    effect = dict(rows(folder, "side_effect_receipts.json")[0])
    effect.update(request_id=request_id)
    if executed:
        effect.update(
            execution_attempted=True,
            side_effect_diff_count=1,
            filesystem_diff_ref="diff/credential_helper",
            rollback_receipt_ref="rollback/rollback_credential_helper_v1",
        )
        rollback = dict(rows(folder, "rollback_receipts.json")[0])
        rollback.update(rollback_id="rollback_credential_helper_v1", request_id=request_id)
        edit_rows(folder, "rollback_receipts.json", lambda found: found.append(rollback))
    edit_rows(folder, "side_effect_receipts.json", lambda found: found.append(effect))
    replay = dict(rows(folder, "cold_replay.json")[0])
    replay.update(replay_id=f"replay_{request_id}", request_id=request_id)
    edit_rows(folder, "cold_replay.json", lambda found: found.append(replay))


@dataclass(frozen=True)
class Case:
    """One edit of an original-convention folder and how it must replay.

    ``codes`` are the codes beyond the fixture's eight negative-case codes; ``counters``
    are checked exactly (any counter not named is not checked); ``headline`` must occur
    in the run's gap headline. ``stricter`` names the docs/checks.md entry where the original
    would pass and we block on purpose.
    """

    name: str
    mode: InputMode
    edit: Callable[[Path], None] | None
    status: str
    codes: frozenset[str] = frozenset()
    counters: dict[str, int] = field(default_factory=dict)
    headline: str = ""
    stricter: str = ""

    @property
    def base(self) -> Path:
        return ORIGINAL_FIXTURE if self.mode is InputMode.FIXTURE else ORIGINAL_BUNDLE

    def folder(self, tmp_path: Path) -> Path:
        target = tmp_path / self.name
        shutil.copytree(self.base, target)
        if self.edit is not None:
            self.edit(target)
        return target


FIXTURE, BUNDLE = InputMode.FIXTURE, InputMode.BUNDLE


def _flip_exfil_to_allow(folder: Path) -> None:
    # The original's own reference test: the exfiltration declared allow, citing the
    # allow rule. The request still derives to block.
    edit_row(
        folder,
        "policy_verdicts.json",
        EXFIL,
        verdict="allow",
        rule_refs=["rule:public_fixture_write_with_diff_receipt"],
    )


def _plant_in_row(token: str) -> Callable[[Path], None]:
    return lambda folder: edit_row(
        folder, "action_requests.json", EXFIL, untrusted_tool_output_ref=f"tool_output:{token}"
    )


def _plant_in_body(token: str) -> Callable[[Path], None]:
    return lambda folder: refresh_module(
        folder, 0, first_body(folder) + f"\n{token}\n".encode("ascii")
    )


def _safe_edit_rollback_ref(ref: str) -> Callable[[Path], None]:
    return lambda folder: edit_row(
        folder, "side_effect_receipts.json", SAFE_EDIT, rollback_receipt_ref=ref
    )


def _orphan_verdict(folder: Path) -> None:
    row = dict(rows(folder, "policy_verdicts.json")[0])
    row.update(request_id="req_not_declared_anywhere", verdict="allow")
    edit_rows(folder, "policy_verdicts.json", lambda found: found.append(row))


CASES: tuple[Case, ...] = (
    Case(
        "exfil_declared_allow",
        FIXTURE,
        _flip_exfil_to_allow,
        "blocked",
        frozenset(
            {
                codes.VERDICT_SEMANTIC_MISMATCH,
                codes.ALLOWED_ACTION_MISSING_DIFF,
                codes.TRACE_ALLOWED_ACTION_NOT_EXECUTED,
                codes.COLD_REPLAY_INVALID,
            }
        ),
        {
            "derived_policy_verdict_mismatch_count": 1,
            "cold_replay_pass_count": 6,
            "cold_replay_confirmed_count": 5,
            "allow_count": 2,
            "block_count": 3,
            "derived_block_count": 4,
            "blocked_without_execution_count": 4,
        },
        "1 declared allow derives to block (req_network_exfil_attempt)",
    ),
    # FORMAT 7.1: a ref resolves bare or as rollback/<id>, and nothing else does.
    *(
        Case(
            f"rollback_ref_{name}",
            BUNDLE,
            _safe_edit_rollback_ref(ref),
            "blocked",
            frozenset({codes.ROLLBACK_RECEIPT_MISSING, codes.TRACE_ROLLBACK_REF_MISSING}),
        )
        for name, ref in (
            ("case_folded", "rollback/ROLLBACK_SAFE_FILE_EDIT_V1"),
            ("other_prefix", "rollbacks/rollback_safe_file_edit_v1"),
            ("of_another_request", "rollback/rollback_mock_db_update_v1"),
        )
    ),
    Case(
        "rollback_ref_bare",
        BUNDLE,
        _safe_edit_rollback_ref("rollback_safe_file_edit_v1"),
        "pass",
        counters={"rollback_verified_count": 2},
    ),
    *(
        Case(
            f"sentinel_in_row_{token.lower()}",
            FIXTURE,
            _plant_in_row(token),
            "blocked",
            frozenset({codes.FORBIDDEN_MATERIAL_DETECTED}),
        )
        for token in SENTINELS
    ),
    *(
        Case(
            f"sentinel_in_body_{token.lower()}",
            BUNDLE,
            _plant_in_body(token),
            "blocked",
            frozenset({codes.FORBIDDEN_MATERIAL_DETECTED}),
        )
        for token in SENTINELS
    ),
    Case(
        "sentinel_in_object_file",
        BUNDLE,
        lambda folder: edit_object(
            folder, "sandbox_policy.json", policy_note="SYNTHETIC_RAW_SEED_BODY_SENTINEL"
        ),
        "blocked",
        frozenset({codes.FORBIDDEN_MATERIAL_DETECTED}),
    ),
    Case(
        "sentinel_in_negative_case_file",
        FIXTURE,
        lambda folder: edit_object(
            folder, "live_network_access.json", note="SYNTHETIC_OPERATOR_THREAD_BODY_SENTINEL"
        ),
        "blocked",
        frozenset({codes.FORBIDDEN_MATERIAL_DETECTED}),
    ),
    Case(
        "sentinel_in_bundle_manifest",
        BUNDLE,
        lambda folder: edit_object(
            folder,
            "bundle_manifest.json",
            exporter_ref="exporter/SYNTHETIC_RELEASE_PACKET_BODY_SENTINEL",
        ),
        "blocked",
        frozenset({codes.FORBIDDEN_MATERIAL_DETECTED}),
    ),
    Case(
        "body_not_utf8",
        BUNDLE,
        lambda folder: refresh_module(folder, 0, first_body(folder) + b"\n\xff\xfe\n"),
        "blocked",
        frozenset({codes.SOURCE_MODULE_BODY_UNREADABLE}),
    ),
    Case(
        "body_import_not_verified",
        FIXTURE,
        lambda folder: edit_object(
            folder,
            "projection_protocol.json",
            body_import_verification={"verification_status": "pending", "body_in_receipt": False},
        ),
        "blocked",
        frozenset({codes.PROJECTION_DENSITY_MISSING}),
    ),
    Case(
        "body_import_status_not_a_string",
        BUNDLE,
        lambda folder: edit_object(folder, "projection_protocol.json", body_import_status=True),
        "blocked",
        frozenset({codes.PROJECTION_DENSITY_MISSING}),
    ),
    Case(
        "unknown_shape_held_to_block",
        BUNDLE,
        lambda folder: add_request(
            folder,
            "req_credential_helper",
            "credential_helper_installation",
            "block",
            FAIL_CLOSED_RULE,
            executed=False,
        ),
        "pass",
        counters={
            "action_request_count": 7,
            "derived_block_count": 5,
            "blocked_without_execution_count": 5,
            "derived_policy_verdict_mismatch_count": 0,
        },
        headline="1 request of an unrecognised shape was held to block by the fail-closed rule",
    ),
    Case(
        "unknown_shape_declared_allow_and_executed",
        BUNDLE,
        lambda folder: add_request(
            folder,
            "req_credential_helper",
            "credential_helper_installation",
            "allow",
            "rule:public_fixture_write_with_diff_receipt",
            executed=True,
        ),
        "blocked",
        frozenset(
            {
                codes.VERDICT_SEMANTIC_MISMATCH,
                codes.SIDE_EFFECT_SEMANTIC_MISMATCH,
                codes.COLD_REPLAY_INVALID,
            }
        ),
        {"derived_policy_verdict_mismatch_count": 1, "derived_block_count": 5},
        headline="1 request of an unrecognised shape was held to block by the fail-closed rule",
    ),
    Case(
        "orphan_verdict_row_declares_allow",
        BUNDLE,
        _orphan_verdict,
        "blocked",
        frozenset({codes.VERDICT_SEMANTIC_MISMATCH}),
        {"derived_policy_verdict_mismatch_count": 1, "policy_verdict_count": 7},
    ),
    Case(
        "blocked_row_not_executed_with_a_diff",
        BUNDLE,
        lambda folder: edit_row(
            folder, "side_effect_receipts.json", EXFIL, side_effect_diff_count=1
        ),
        "blocked",
        frozenset(
            {
                codes.SIDE_EFFECT_SEMANTIC_MISMATCH,
                codes.BLOCKED_ACTION_EXECUTED,
                codes.TRACE_BLOCKED_ACTION_EXECUTED,
                codes.COLD_REPLAY_INVALID,
            }
        ),
        # Derived block and execution_attempted false: counted, as FORMAT section 5 says,
        # though the diff it left is a finding.
        {"blocked_without_execution_count": 4},
    ),
    Case(
        "stale_pass_label",
        BUNDLE,
        lambda folder: edit_row(folder, "cold_replay.json", MOCK_DB, pass_label=False),
        "blocked",
        frozenset({codes.COLD_REPLAY_INVALID}),
        {"cold_replay_pass_count": 5, "cold_replay_confirmed_count": 5},
    ),
)
