"""The built-in fixture and bundle pass with the reference figures of FORMAT.md §5."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import EXPORTED_BUNDLE, FIRST_WAVE, REPO, copy_fixture, read_json, replay_dir
from sandbox_replay import InputMode
from sandbox_replay.cli import app
from sandbox_replay.model import codes

REFERENCE_COUNTS = {
    "action_request_count": 6,
    "policy_verdict_count": 6,
    "allow_count": 1,
    "block_count": 4,
    "review_count": 1,
    "derived_allow_count": 1,
    "derived_block_count": 4,
    "derived_review_count": 1,
    "derived_policy_verdict_mismatch_count": 0,
    "side_effect_receipt_count": 6,
    "executed_action_count": 2,
    "blocked_without_execution_count": 4,
    "rollback_receipt_count": 2,
    "rollback_verified_count": 2,
    "cold_replay_count": 6,
    "cold_replay_pass_count": 6,
}
NEGATIVE_CASE_CODES = {
    "real_secret_material": codes.REAL_SECRET_FORBIDDEN,
    "live_network_access": codes.LIVE_NETWORK_FORBIDDEN,
    "raw_environment_export": codes.RAW_ENV_EXPORT_FORBIDDEN,
    "policy_after_execution": codes.AFTER_EXECUTION,
    "unlogged_side_effect": codes.UNLOGGED_SIDE_EFFECT,
    "tool_output_policy_bypass": codes.TOOL_OUTPUT_AUTHORITY_BYPASS,
    "executable_escape_payload": codes.EXECUTABLE_PAYLOAD_FORBIDDEN,
    "security_benchmark_claim": codes.SECURITY_BENCHMARK_CLAIM,
}
RISK_CLASSES = [
    "destructive_filesystem_mutation",
    "escape_payload_obfuscation",
    "low_risk_public_fixture_mutation",
    "network_exfiltration",
    "review_required_side_effect",
    "secret_access",
]
MODES = {
    "fixture": (FIRST_WAVE, InputMode.FIXTURE, "run"),
    "bundle": (EXPORTED_BUNDLE, InputMode.BUNDLE, "run-sandbox-bundle"),
}


@pytest.mark.parametrize("mode", MODES)
def test_reference_counts(mode: str) -> None:
    folder, input_mode, _ = MODES[mode]
    outcome, records = replay_dir(folder, input_mode)
    result = records.result
    assert outcome.passed
    assert result["status"] == "pass"
    assert result["input_mode"] == input_mode.value
    assert {key: result[key] for key in REFERENCE_COUNTS} == REFERENCE_COUNTS
    assert result["risk_classes"] == RISK_CLASSES
    assert result["secret_exclusion_scan"]["blocking_hit_count"] == 0
    assert set(result["authority_ceiling"].values()) == {False}
    assert result["body_in_receipt"] is False
    derived = result["derived_policy_verdict_rows"]
    assert len(derived) == 6
    assert all(row.get("policy_derivation_passed") for row in derived)
    assert not any(row.get("fail_closed") for row in derived)
    for key in (
        "request_rows",
        "policy_verdict_rows",
        "side_effect_rows",
        "cold_replay_rows",
    ):
        assert len(result[key]) == 6, key
    assert len(result["rollback_rows"]) == 2


@pytest.mark.parametrize("mode", MODES)
def test_reference_trace(mode: str) -> None:
    folder, input_mode, _ = MODES[mode]
    _, records = replay_dir(folder, input_mode)
    trace = records.result["public_agent_execution_trace"]
    assert trace["status"] == "pass"
    assert trace["span_count"] == 6
    assert trace["audit"] == []
    assert trace["summary"]["outcome_counts"] == {"blocked": 4, "executed": 2}
    assert trace["summary"]["finding_count"] == 0
    spans = trace["spans"]
    assert [s.get("span_id") for s in spans] == [
        "span:req_network_exfil_attempt",
        "span:req_obfuscated_shell",
        "span:req_secret_env_read",
        "span:req_destructive_delete",
        "span:req_mock_db_update",
        "span:req_safe_fixture_edit",
    ]
    assert [s.get("sequence_index") for s in spans] == list(range(6))
    assert {s.get("session_id") for s in spans} == {records.result["bundle_id"]}
    executed = {
        s.get("span_id"): s.get("recovery_ref") for s in spans if s.get("outcome") == "executed"
    }
    assert executed == {
        "span:req_mock_db_update": "rollback_mock_db_update",
        "span:req_safe_fixture_edit": "rollback_safe_fixture_edit",
    }


def test_fixture_mode_observes_every_negative_case() -> None:
    _, records = replay_dir(FIRST_WAVE, InputMode.FIXTURE)
    result = records.result
    assert result["expected_negative_cases"] == list(NEGATIVE_CASE_CODES)
    assert result["observed_negative_cases"] == {
        case: [code] for case, code in NEGATIVE_CASE_CODES.items()
    }
    assert result["missing_negative_cases"] == []
    assert result["finding_count"] == 8
    assert result["error_codes"] == sorted(NEGATIVE_CASE_CODES.values())
    assert {(f["negative_case_id"], f["error_code"]) for f in result["findings"]} == set(
        NEGATIVE_CASE_CODES.items()
    )
    assert result["source_module_manifest_status"] == "not_applicable"
    assert result["bundle_id"] == "fixture:projection:first_wave_containment_v1"


def test_bundle_mode_has_no_findings_and_a_verified_manifest() -> None:
    _, records = replay_dir(EXPORTED_BUNDLE, InputMode.BUNDLE)
    result = records.result
    assert result["bundle_id"] == "bundle:first_wave_containment_export"
    assert result["finding_count"] == 0
    assert result["findings"] == []
    assert result["error_codes"] == []
    assert result["expected_negative_cases"] == []
    assert result["observed_negative_cases"] == {}
    assert result["source_module_manifest_status"] == "pass"
    modules = result["source_modules"]
    assert len(modules) == 4
    assert all(m["verified"] for m in modules)
    assert all(m["path"].startswith("source_modules/") for m in modules)


@pytest.mark.parametrize("mode", MODES)
def test_cli_exits_zero_and_prints_pass(mode: str, tmp_path: Path) -> None:
    folder, _, command = MODES[mode]
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [command, "--input", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].startswith("status: pass")
    assert any(out.iterdir())


@pytest.mark.parametrize("mode", MODES)
def test_card_is_json_on_stdout_with_the_omitted_keys(mode: str, tmp_path: Path) -> None:
    folder, input_mode, command = MODES[mode]
    args = [command, "--input", str(folder), "--out", str(tmp_path / "out"), "--card"]
    # The record replay_dir makes below has no seeded escapes: nor does this one.
    result = CliRunner().invoke(app, [*args, "--no-sensitivity"])
    assert result.exit_code == 0, result.output
    card = json.loads(result.stdout)
    assert card["status"] == "pass"
    assert card["input_mode"] == input_mode.value
    assert {key: card[key] for key in REFERENCE_COUNTS} == REFERENCE_COUNTS
    assert card["validation"]["outcome_counts"] == {"blocked": 4, "executed": 2}
    _, records = replay_dir(folder, input_mode)
    omitted = card["omitted_keys"]
    assert isinstance(omitted, list)
    assert omitted
    assert set(omitted) <= set(records.result)
    assert "findings" in omitted
    assert not set(omitted) & set(card)


@pytest.mark.parametrize("mode", MODES)
def test_records_are_byte_identical_across_runs(mode: str, tmp_path: Path) -> None:
    folder, input_mode, command = MODES[mode]
    _, first = replay_dir(folder, input_mode)
    _, second = replay_dir(folder, input_mode)
    assert first.result_bytes == second.result_bytes
    outs = [tmp_path / "one", tmp_path / "two"]
    for out in outs:
        result = CliRunner().invoke(app, [command, "--input", str(folder), "--out", str(out)])
        assert result.exit_code == 0, result.output
    written = [{p.name: p.read_bytes() for p in sorted(out.iterdir())} for out in outs]
    assert written[0] == written[1]
    assert written[0]


def test_bundle_bodies_are_byte_copies_of_their_targets() -> None:
    manifest = read_json(EXPORTED_BUNDLE / "source_module_manifest.json")
    stale = [
        module["module_id"]
        for module in manifest["modules"]
        if (EXPORTED_BUNDLE / module["path"]).read_bytes()
        != (REPO / module["target_ref"]).read_bytes()
    ]
    assert not stale, (
        f"copied bodies differ from their target_ref: {stale}; run "
        "'.venv/bin/python fixtures/refresh_bundle_digests.py --recopy'"
    )


def test_refresh_script_repairs_digests_after_a_body_changes(tmp_path: Path) -> None:
    folder = copy_fixture(tmp_path, "bundles/exported_bundle")
    body = folder / read_json(folder / "source_module_manifest.json")["modules"][0]["path"]
    body.write_bytes(body.read_bytes() + b"\n")
    script = [sys.executable, str(REPO / "fixtures" / "refresh_bundle_digests.py")]
    assert replay_dir(folder, InputMode.BUNDLE)[0].status == "blocked"
    assert subprocess.run([*script, "--check", str(folder)], capture_output=True).returncode == 1
    assert subprocess.run([*script, str(folder)], capture_output=True).returncode == 0
    assert subprocess.run([*script, "--check", str(folder)], capture_output=True).returncode == 0
    assert replay_dir(folder, InputMode.BUNDLE)[0].status == "pass"
