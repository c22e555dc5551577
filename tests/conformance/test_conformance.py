"""Records in the original implementation's conventions replay as the original replays them.

The base folders must pass with the figures in their ``expected.json``; every case of
``cases.py`` must give its status, exactly its codes, and its counters. The counters of
FORMAT 7.5 are checked against their definitions, computed here from the input rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import codes_of, replay_dir
from sandbox_replay import InputMode
from sandbox_replay.cli import app
from sandbox_replay.model import codes
from sandbox_replay.records.headline import gap_headline

from .cases import (
    CASES,
    FAIL_CLOSED_RULE,
    NEGATIVE_CASE_CODES,
    ORIGINAL_BUNDLE,
    ORIGINAL_FIXTURE,
    ORIGINAL_FORBIDDEN_CLASSES,
    SENTINELS,
    Case,
    read,
    rows,
)

BASES = {InputMode.FIXTURE: ORIGINAL_FIXTURE, InputMode.BUNDLE: ORIGINAL_BUNDLE}
# The packaged table's derivation, written out here so that the counters are checked
# against the format, not against the code that computes them.
TABLE = {
    "secret_access": "block",
    "network_exfiltration": "block",
    "destructive_filesystem_mutation": "block",
    "escape_payload_obfuscation": "block",
    "low_risk_public_fixture_mutation": "allow",
    "review_required_side_effect": "review",
}


def expected_counters(folder: Path, result: dict[str, Any]) -> dict[str, int]:
    """Compute the counters of FORMAT 7.5 from the input rows, by their definitions.

    The derived verdict is read from the result record's derived rows (their own
    derivation is checked elsewhere); every other figure comes from the inputs.
    """
    derived = {
        row.get("request_id"): row.get("derived_verdict")
        for row in result["derived_policy_verdict_rows"]
    }
    verdicts = rows(folder, "policy_verdicts.json")
    mismatches = sum(
        1 for v in verdicts if v.get("verdict") != derived.get(v.get("request_id"), "block")
    )
    effects: dict[str, dict[str, Any]] = {}
    for effect in rows(folder, "side_effect_receipts.json"):
        effects.setdefault(effect["request_id"], effect)
    held = sum(
        1
        for request_id, verdict in derived.items()
        if verdict == "block" and effects.get(request_id, {}).get("execution_attempted") is False
    )
    replays = rows(folder, "cold_replay.json")
    labelled = sum(
        1
        for r in replays
        if r.get("verdict_reproduced") is True
        and r.get("side_effect_state_reproduced") is True
        and r.get("pass_label") is True
    )
    return {
        "derived_policy_verdict_mismatch_count": mismatches,
        "blocked_without_execution_count": held,
        "cold_replay_pass_count": labelled,
    }


@pytest.mark.parametrize("mode", list(BASES), ids=lambda mode: BASES[mode].name)
def test_the_original_convention_folders_pass_with_their_expected_figures(mode: InputMode) -> None:
    folder = BASES[mode]
    expected = read(folder / "expected.json")
    outcome, records = replay_dir(folder, mode)
    result = records.result
    assert result["status"] == expected["status"] == "pass"
    assert codes_of(outcome) == expected["error_codes"]
    for name, value in expected["counters"].items():
        assert result[name] == value, name
    assert result["public_agent_execution_trace"]["span_count"] == expected["span_count"]


def test_the_original_reference_figures_hold_on_its_conventions() -> None:
    # FORMAT 7.5: 4 block, 1 allow, 1 review; 0 mismatches; 4 blocked without execution;
    # 2 rollbacks, 2 verified; 6 replays, 6 pass; 6 spans.
    _, records = replay_dir(ORIGINAL_FIXTURE)
    r = records.result
    figures = (
        r["derived_block_count"],
        r["derived_allow_count"],
        r["derived_review_count"],
        r["derived_policy_verdict_mismatch_count"],
        r["blocked_without_execution_count"],
        r["rollback_receipt_count"],
        r["rollback_verified_count"],
        r["cold_replay_count"],
        r["cold_replay_pass_count"],
        r["public_agent_execution_trace"]["span_count"],
    )
    assert figures == (4, 1, 1, 0, 4, 2, 2, 6, 6, 6)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_case_replays_as_the_original_does(case: Case, tmp_path: Path) -> None:
    folder = case.folder(tmp_path)
    outcome, records = replay_dir(folder, case.mode)
    result = records.result
    assert result["status"] == case.status
    extra = NEGATIVE_CASE_CODES if case.mode is InputMode.FIXTURE else frozenset()
    assert set(codes_of(outcome)) == case.codes | extra
    for name, value in case.counters.items():
        assert result[name] == value, name
    for name, value in expected_counters(folder, result).items():
        assert result[name] == value, name
    if codes.VERDICT_SEMANTIC_MISMATCH in case.codes:
        assert result["derived_policy_verdict_mismatch_count"] > 0
    if case.headline:
        assert case.headline in gap_headline(result).text


@pytest.mark.parametrize("token", sorted(SENTINELS))
def test_each_sentinel_is_counted_in_its_class_and_never_echoed(token: str, tmp_path: Path) -> None:
    [case] = [c for c in CASES if c.name == f"sentinel_in_body_{token.lower()}"]
    _, records = replay_dir(case.folder(tmp_path), case.mode)
    scan = records.result["secret_exclusion_scan"]
    assert scan["hits_by_class"] == {SENTINELS[token]: 1}
    assert token.encode() not in records.result_bytes


def test_an_unknown_shape_held_to_block_is_a_notice_not_a_finding(tmp_path: Path) -> None:
    [case] = [c for c in CASES if c.name == "unknown_shape_held_to_block"]
    _, records = replay_dir(case.folder(tmp_path), case.mode)
    result = records.result
    [derived] = [
        row
        for row in result["derived_policy_verdict_rows"]
        if row.get("request_id") == "req_credential_helper"
    ]
    assert (derived.get("derived_verdict"), derived.get("derived_rule_ref")) == (
        "block",
        FAIL_CLOSED_RULE,
    )
    assert derived.get("fail_closed") is True and derived.get("policy_derivation_passed") is True
    headline = gap_headline(result)
    assert headline.passed
    assert headline.notices == (
        "1 request of an unrecognised shape was held to block by the fail-closed rule",
    )


def _run(tmp_path: Path, folder: Path, *options: str) -> Any:
    command = "run" if folder.name == "original_fixture" else "run-sandbox-bundle"
    return CliRunner().invoke(
        app, [command, "--input", str(folder), "--out", str(tmp_path / "out"), *options]
    )


def test_the_originals_forbidden_classes_table_is_read_and_changes_nothing_on_clean_input(
    tmp_path: Path,
) -> None:
    plain = _run(tmp_path, ORIGINAL_BUNDLE)
    given = _run(tmp_path, ORIGINAL_BUNDLE, "--forbidden-classes", str(ORIGINAL_FORBIDDEN_CLASSES))
    assert plain.exit_code == given.exit_code == 0


def test_a_teams_own_original_shape_table_blocks_its_token(tmp_path: Path) -> None:
    table = read(ORIGINAL_FORBIDDEN_CLASSES)
    table["classes"].append(
        {
            "class_id": "team_private_ticket",
            "label": "Private ticket body",
            "remediation": "Name the ticket by ref.",
            "terms": [{"term_id": "ticket", "token": "TEAM_TICKET_BODY_MARKER_31"}],
        }
    )
    path = tmp_path / "team_table.json"
    path.write_text(json.dumps(table), "utf-8")
    folder = tmp_path / "bundle"
    import shutil

    shutil.copytree(ORIGINAL_BUNDLE, folder)
    manifest = read(folder / "bundle_manifest.json")
    manifest["exporter_ref"] = "exporter/TEAM_TICKET_BODY_MARKER_31"
    (folder / "bundle_manifest.json").write_text(json.dumps(manifest), "utf-8")
    assert _run(tmp_path, folder).exit_code == 0
    blocked = _run(tmp_path, folder, "--forbidden-classes", str(path))
    assert blocked.exit_code == 1
    result = read(tmp_path / "out" / "exported_sandbox_policy_escape_bundle_validation_result.json")
    assert result["secret_exclusion_scan"]["hits_by_class"] == {"team_private_ticket": 1}
    assert "TEAM_TICKET_BODY_MARKER_31" not in blocked.output


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ('{"schema_version": "1", "classes": [{"class_id": "x"}]}', "missing key(s)"),
        (
            '{"schema_version": "1", "classes": [{"class_id": "x", "label": "l", '
            '"remediation": "r", "terms": [{"term_id": "t", "token": 5}]}]}',
            "token must be a non-empty string",
        ),
    ],
)
def test_a_bad_forbidden_classes_table_is_a_usage_error_naming_the_file(
    text: str, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad_table.json"
    path.write_text(text, "utf-8")
    outcome = _run(tmp_path, ORIGINAL_FIXTURE, "--forbidden-classes", str(path))
    assert outcome.exit_code == 2
    assert str(path) in outcome.output and message in outcome.output
    assert not (tmp_path / "out").exists()
