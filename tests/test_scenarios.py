"""Each failing scenario bundle is blocked with exactly the codes its escape should raise.

The expected codes live here, not in the fixtures: a scenario folder without an entry
below fails the suite, so every new scenario has to state what a reviewer should see.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import SCENARIOS, replay_dir
from sandbox_replay import InputMode
from sandbox_replay.cli import app
from sandbox_replay.model import codes


@dataclass(frozen=True)
class Expected:
    """What a scenario must raise, and where its key finding must point.

    ``locator`` is a text that occurs once in ``path``; the key finding's line is the
    start of the row holding it (``row=True``) or the locator's own line.
    """

    codes: frozenset[str]
    key_code: str
    subject_id: str
    path: str
    locator: str
    row: bool = True


EXPECTED = {
    "allow_network_exfil_executed": Expected(
        frozenset(
            {
                codes.VERDICT_SEMANTIC_MISMATCH,
                codes.SIDE_EFFECT_SEMANTIC_MISMATCH,
                # Its replay row claims the allow reproduced; that claim does not re-derive.
                codes.COLD_REPLAY_INVALID,
            }
        ),
        codes.VERDICT_SEMANTIC_MISMATCH,
        "req_network_exfil_attempt",
        "policy_verdicts.json",
        '"request_id": "req_network_exfil_attempt"',
    ),
    "blocked_action_left_diff": Expected(
        frozenset(
            {
                codes.BLOCKED_ACTION_EXECUTED,
                codes.SIDE_EFFECT_SEMANTIC_MISMATCH,
                codes.TRACE_BLOCKED_ACTION_EXECUTED,
                codes.COLD_REPLAY_INVALID,
            }
        ),
        codes.BLOCKED_ACTION_EXECUTED,
        "req_destructive_delete",
        "side_effect_receipts.json",
        '"request_id": "req_destructive_delete"',
    ),
    "allowed_action_no_rollback": Expected(
        frozenset(
            {
                codes.ROLLBACK_RECEIPT_MISSING,
                codes.TRACE_ROLLBACK_REF_MISSING,
                # The fixture had exactly two rollbacks; one left is below the floor.
                codes.ROLLBACK_RECEIPTS_INSUFFICIENT,
            }
        ),
        codes.ROLLBACK_RECEIPT_MISSING,
        "req_safe_fixture_edit",
        "side_effect_receipts.json",
        '"request_id": "req_safe_fixture_edit"',
    ),
    "verdict_after_execution": Expected(
        frozenset({codes.VERDICT_INVALID, codes.TRACE_VERDICT_NOT_PRE_EXECUTION}),
        codes.VERDICT_INVALID,
        "req_mock_db_update",
        "policy_verdicts.json",
        '"request_id": "req_mock_db_update"',
    ),
    "unknown_risk_class_allowed": Expected(
        frozenset(
            {
                # The unknown risk class derives to block, no finding of its own
                # (FORMAT 7.6): the declared allow and its execution contradict that.
                codes.VERDICT_SEMANTIC_MISMATCH,
                codes.SIDE_EFFECT_SEMANTIC_MISMATCH,
                codes.COLD_REPLAY_INVALID,
            }
        ),
        codes.VERDICT_SEMANTIC_MISMATCH,
        "req_credential_helper_install",
        "policy_verdicts.json",
        '"request_id": "req_credential_helper_install"',
    ),
    "tampered_copied_body": Expected(
        frozenset({codes.SOURCE_MODULE_DIGEST_MISMATCH}),
        codes.SOURCE_MODULE_DIGEST_MISMATCH,
        "module:policy_table",
        "source_module_manifest.json",
        # The manifest's modules are not rows with their own lines: the finding points
        # at the modules list.
        '"modules": [',
        row=False,
    ),
    "cedar_team_fixture_freeze": Expected(
        frozenset(
            {
                # Replayed with fixtures/policies/team_sandbox.cedar (pyproject.toml): its
                # release-freeze forbid contradicts the recorded allow of the fixture edit,
                # which executed.
                codes.VERDICT_SEMANTIC_MISMATCH,
                codes.SIDE_EFFECT_SEMANTIC_MISMATCH,
                codes.COLD_REPLAY_INVALID,
            }
        ),
        codes.VERDICT_SEMANTIC_MISMATCH,
        "req_safe_fixture_edit",
        "policy_verdicts.json",
        '"request_id": "req_safe_fixture_edit"',
    ),
    "missing_verdict_row": Expected(
        frozenset(
            {
                codes.VERDICT_MISSING,
                codes.TRACE_VERDICT_REF_MISSING,
                codes.COLD_REPLAY_INVALID,
            }
        ),
        codes.VERDICT_MISSING,
        "req_obfuscated_shell",
        "action_requests.json",
        '"request_id": "req_obfuscated_shell"',
    ),
}
SCENARIO_NAMES = sorted(p.name for p in SCENARIOS.iterdir() if p.is_dir())


def expected_line(path: Path, locator: str, row: bool) -> int:
    """Return the 1-based line of ``locator`` in ``path``, or of the row that holds it."""
    lines = path.read_text("utf-8").splitlines()
    hits = [i for i, text in enumerate(lines) if locator in text]
    assert len(hits) == 1, f"{locator!r} occurs {len(hits)} times in {path.name}"
    index = hits[0]
    if row:
        while lines[index].strip() != "{":
            index -= 1
    return index + 1


def test_every_scenario_folder_has_an_expectation() -> None:
    assert sorted(EXPECTED) == SCENARIO_NAMES


def test_scenario_bundle_ids_are_distinct() -> None:
    ids = [replay_dir(SCENARIOS / name, InputMode.BUNDLE)[0].bundle_id for name in SCENARIO_NAMES]
    assert len(set(ids)) == len(ids)
    assert "bundle:first_wave_containment_export" not in ids


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_scenario_is_blocked_with_exactly_its_codes(name: str) -> None:
    expected = EXPECTED[name]
    outcome, records = replay_dir(SCENARIOS / name, InputMode.BUNDLE)
    assert outcome.status == "blocked"
    assert records.result["status"] == "blocked"
    assert set(records.result["error_codes"]) == expected.codes


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_scenario_key_finding_names_its_subject_and_line(name: str) -> None:
    expected = EXPECTED[name]
    folder = SCENARIOS / name
    outcome, _ = replay_dir(folder, InputMode.BUNDLE)
    [finding] = [f for f in outcome.findings if f.error_code == expected.key_code]
    assert finding.subject_id == expected.subject_id
    assert finding.path == expected.path
    assert finding.line == expected_line(folder / expected.path, expected.locator, expected.row)


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_scenario_cli_exits_one_and_prints_its_codes(name: str, tmp_path: Path) -> None:
    args = ["run-sandbox-bundle", "--input", str(SCENARIOS / name), "--out", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("status: blocked")
    printed = {line.strip() for line in lines if line.startswith("  ")}
    assert printed == EXPECTED[name].codes
