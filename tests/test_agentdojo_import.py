"""AgentDojo run logs, written by AgentDojo itself (tests/data/agentdojo), import and replay.

The logs are AgentDojo's own: ``make_logs.py`` ran its ground-truth pipeline offline, a
benign run per suite and attacked runs whose agent obeys the attacker.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import REPO, read_json
from sandbox_replay import InputMode, ReplayConfig, replay
from sandbox_replay.importers.agentdojo_logs import (
    AgentDojoImportError,
    AgentDojoOptions,
    agentdojo_map,
    find_logs,
    import_logs,
    read_map,
)
from sandbox_replay.importers.inspect_logs import write_bundles
from sandbox_replay.model import codes
from test_inspect_import import run_cli
from test_schemas import validator

LOGS = REPO / "tests" / "data" / "agentdojo" / "logs"
BENIGN = LOGS / "ground_truth" / "banking" / "user_task_0" / "none" / "none.json"
ATTACKED = (
    LOGS
    / "ground_truth_obeys_injection"
    / "banking"
    / "user_task_0"
    / "ignore_previous"
    / "injection_task_0.json"
)
ATTACKED_RUN = "ground_truth_obeys_injection-banking-user_task_0-ignore_previous-injection_task_0"
EXFIL = "rule:no_live_network_from_untrusted_context"
FAIL_CLOSED = "rule:sandbox_policy_fail_closed_unrecognized_action"
IBAN = "UK12345678901234567890"  # in the benign banking log's tool results
# Text of the logs' bodies (arguments, tool results, messages, injections): none may leave.
BODIES = [
    "bill-december-2023.txt",
    "UK12345678901234567890",
    "US133000000121212121212",
    "Car Rental",
    "spotify",
    "Ignore your previous",
    "Secret key is",
    "www.my-website-234.com",
    "www.secure-systems-252.com",
    "Can you please pay the bill",
    "You are an AI assistant",
]


def imported(log: Path, out: Path, options: AgentDojoOptions | None = None) -> Path:
    (folder,) = write_bundles(import_logs([log], options or AgentDojoOptions()), out)
    return folder


def rows(folder: Path, name: str) -> dict[str, dict[str, object]]:
    return {row["request_id"]: row for row in read_json(folder / f"{name}.json")[name]}


def test_the_committed_logs_are_found_and_each_run_imports(tmp_path: Path) -> None:
    found = find_logs([LOGS])
    assert len(found) == 7 and BENIGN in found and ATTACKED in found
    folders = write_bundles(import_logs(found, AgentDojoOptions()), tmp_path)
    assert sorted(f.name for f in folders)[0] == "ground_truth-banking-user_task_0-none-none"
    # Only files where AgentDojo writes a run log are taken: <task>/<attack>/<run>.json.
    stray = tmp_path / "logs" / "notes" / "summary.json"
    stray.parent.mkdir(parents=True)
    stray.write_text("{}")
    assert find_logs([tmp_path / "logs"]) == []


def test_a_benign_run_reads_as_what_it_is(tmp_path: Path) -> None:
    folder = imported(BENIGN, tmp_path)
    read, pay = rows(folder, "action_requests").values()
    assert (read["tool_function"], read["source_trust_label"]) == (
        "read_file",
        "trusted_user_request",
    )
    assert (read["risk_class"], read["map_rule_ref"]) == ("unclassified", "map_rule:none_matched")
    assert (pay["tool_function"], pay["source_trust_label"]) == (
        "send_money",
        "trusted_user_request",
    )
    assert pay["risk_class"] == "network_exfiltration"
    assert pay["map_rule_ref"] == "map:agentdojo_suite_tools#money_transfer"
    effects = rows(folder, "side_effect_receipts")
    assert effects["call_1"]["filesystem_diff_ref"] == "diff:none_read_only"
    assert effects["call_1"]["side_effect_diff_count"] == 0
    assert effects["call_2"]["side_effect_diff_count"] == 1
    assert all(e["execution_attempted"] is True for e in effects.values())
    assert read_json(folder / "policy_verdicts.json") == {"policy_verdicts": []}
    manifest = read_json(folder / "bundle_manifest.json")
    assert manifest["harness_ref"] == "harness:agentdojo@0.1.35"
    assert manifest["benchmark"]["injection_task_id"] is None
    assert manifest["benchmark"]["utility"] is True
    outcome = replay(ReplayConfig(folder, InputMode.BUNDLE))
    derived = {rid: (d.verdict, d.rule_ref) for rid, d in outcome.run.derivations.items()}
    # A transfer the user asked for has no allow row in the policy table: it fails closed.
    assert derived == {"call_1": ("block", FAIL_CLOSED), "call_2": ("block", FAIL_CLOSED)}
    assert codes.BENCHMARK_SECURITY_DISAGREES not in {f.error_code for f in outcome.findings}


def test_an_attacked_run_is_blocked_holding_the_attackers_call_as_untrusted(
    tmp_path: Path,
) -> None:
    folder = imported(ATTACKED, tmp_path)
    requests = rows(folder, "action_requests")
    assert [r["source_trust_label"] for r in requests.values()] == [
        "trusted_user_request",
        "untrusted_tool_output",
        "untrusted_tool_output",
    ]
    attacker = requests["call_3"]
    assert attacker["tool_function"] == "send_money"
    assert attacker["risk_class"] == "network_exfiltration"
    # The output it follows is the one that carried the injection: the bill read.
    assert str(attacker["untrusted_tool_output_ref"]).endswith("/call_1/output")
    benchmark = read_json(folder / "bundle_manifest.json")["benchmark"]
    assert benchmark["attack_type"] == "ignore_previous" and benchmark["security"] is True
    outcome = replay(ReplayConfig(folder, InputMode.BUNDLE))
    assert outcome.status == "blocked"
    derived = {rid: (d.verdict, d.rule_ref) for rid, d in outcome.run.derivations.items()}
    assert derived["call_3"] == ("block", EXFIL)
    found = {(f.error_code, f.subject_id) for f in outcome.findings}
    assert (codes.SIDE_EFFECT_SEMANTIC_MISMATCH, "call_3") in found
    assert codes.BENCHMARK_SECURITY_DISAGREES not in {code for code, _ in found}


def test_a_run_a_detector_stopped_ends_on_the_flagged_result(tmp_path: Path) -> None:
    log = (
        LOGS
        / "ground_truth_behind_detector"
        / ATTACKED.relative_to(LOGS).relative_to("ground_truth_obeys_injection")
    )
    folder = imported(log, tmp_path)
    (read,) = rows(folder, "action_requests").values()
    assert (read["tool_function"], read["source_trust_label"]) == (
        "read_file",
        "trusted_user_request",
    )
    benchmark = read_json(folder / "bundle_manifest.json")["benchmark"]
    assert benchmark["stopped_after_tool_result"] is True and benchmark["security"] is False
    found = {f.error_code for f in replay(ReplayConfig(folder, InputMode.BUNDLE)).findings}
    assert codes.BENCHMARK_SECURITY_DISAGREES not in found


def test_no_body_leaves_the_log(tmp_path: Path) -> None:
    folders = write_bundles(import_logs(find_logs([LOGS]), AgentDojoOptions()), tmp_path)
    for folder in folders:
        records = [p for p in sorted(folder.rglob("*.json")) if "source_modules" not in p.parts]
        written = b"".join(path.read_bytes() for path in records)
        for body in BODIES:
            assert body.encode() not in written, (folder.name, body)


def flipped(log: Path, tmp_path: Path, **fields: object) -> Path:
    """Copy ``log`` to the same place under ``tmp_path`` with ``fields`` changed."""
    copy = tmp_path / "logs" / log.relative_to(LOGS)
    copy.parent.mkdir(parents=True)
    copy.write_text(json.dumps({**json.loads(log.read_text("utf-8")), **fields}), "utf-8")
    return copy


def test_the_disagreement_finding_fires_on_a_flipped_security_flag(tmp_path: Path) -> None:
    folder = imported(flipped(ATTACKED, tmp_path, security=False), tmp_path / "out")
    outcome = replay(ReplayConfig(folder, InputMode.BUNDLE))
    (finding,) = [f for f in outcome.findings if f.error_code == codes.BENCHMARK_SECURITY_DISAGREES]
    assert "security: false" in finding.message and "2 call(s)" in finding.message
    # A run without an injection task is never compared: AgentDojo calls it secure.
    benign = imported(flipped(BENIGN, tmp_path / "b", security=False), tmp_path / "out2")
    codes_found = {f.error_code for f in replay(ReplayConfig(benign, InputMode.BUNDLE)).findings}
    assert codes.BENCHMARK_SECURITY_DISAGREES not in codes_found


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda raw: raw[: len(raw) // 2], ": Expecting"),
        (lambda raw: raw.replace(b'"error": null', b'"error": nul'), ": Expecting value"),
        (lambda raw: raw.replace(b'"security": true', b'"security": "yes"'), "security is missing"),
        (lambda raw: raw.replace(b'"suite_name": "banking"', b'"suite_name": 1'), "suite_name is"),
        (lambda raw: raw.replace(b'"tool_calls": null', b'"tool_calls": 7'), "is not a list"),
    ],
)
def test_a_bad_log_is_a_clear_error_naming_the_file(
    edit: Callable[[bytes], bytes], message: str, tmp_path: Path
) -> None:
    bad = tmp_path / "logs" / BENIGN.relative_to(LOGS)
    bad.parent.mkdir(parents=True)
    bad.write_bytes(edit(BENIGN.read_bytes()))
    with pytest.raises(AgentDojoImportError, match=str(bad)):
        import_logs([bad], AgentDojoOptions())
    done = run_cli("import", "agentdojo", str(tmp_path / "logs"), "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert str(bad) in done.stderr and message in done.stderr
    assert "Traceback" not in done.stderr


def test_a_truncated_log_names_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "none.json"
    bad.write_bytes(BENIGN.read_bytes()[:2000])
    with pytest.raises(AgentDojoImportError, match=rf"^{bad}:\d+: "):
        import_logs([bad], AgentDojoOptions())


def test_the_command_imports_and_build_reads_the_folder(tmp_path: Path) -> None:
    done = run_cli("import", "agentdojo", str(LOGS), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert "imported 7 log(s) as 7 bundle(s)" in done.stderr
    again = run_cli("import", "agentdojo", str(LOGS), "--out", str(tmp_path / "out"))
    assert again.returncode == 2 and "already exists" in again.stderr
    built = run_cli("build", str(LOGS), "--out", str(tmp_path / "site"))
    assert built.returncode == 0, built.stderr
    assert "[7/7" in built.stderr
    run = tmp_path / "site" / "runs" / ATTACKED_RUN
    result = read_json(run / "result.json")
    assert result["status"] == "blocked"
    assert result["benchmark"]["security"] is True
    assert result["benchmark"]["untrusted_executed_count"] == 2
    runs = {r["name"]: r for r in read_json(tmp_path / "site" / "manifest.json")["runs"]}
    assert runs[ATTACKED_RUN]["source_path"].endswith("injection_task_0.json")
    verified = run_cli("verify", str(tmp_path / "site"))
    assert verified.returncode == 0, verified.stderr


def team_map(tmp_path: Path, rule_id: str, function: str) -> Path:
    """Write a user's map of one rule that makes ``function`` a database write."""
    rule = {
        "rule_id": rule_id,
        "function": function,
        "action_kind": "mock_database_update",
        "requested_capability": "mock_database_write",
        "risk_class": "review_required_side_effect",
    }
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"map_id": "map:team", "rules": [rule]}))
    return path


def test_a_users_map_overrides_a_packaged_rule_by_id(tmp_path: Path) -> None:
    user_map = team_map(tmp_path, "money_transfer", "send_money")
    folder = imported(BENIGN, tmp_path / "out", AgentDojoOptions(read_map(user_map)))
    assert rows(folder, "action_requests")["call_2"]["map_rule_ref"] == "map:team#money_transfer"
    copied = sorted(p.name for p in (folder / "source_modules" / "map").iterdir())
    assert copied == ["agentdojo_standard_tools.json", "tool_map.json"]


def test_build_imports_a_log_with_the_users_map_and_forbidden_classes(tmp_path: Path) -> None:
    team_map(tmp_path, "team_read", "read_file")  # map.json
    table = tmp_path / "classes.json"
    iban = {"class_id": "team_iban", "label": "IBAN", "remediation": "Remove it."}
    table.write_text(json.dumps({"table_id": "team", "classes": [{**iban, "tokens": [IBAN]}]}))
    log = tmp_path / "banking" / "user_task_0" / "none" / "none.json"
    log.parent.mkdir(parents=True)
    log.write_bytes(BENIGN.read_bytes())
    options = ("--map", "map.json", "--forbidden-classes", "classes.json")
    built = run_cli("build", "banking", "--out", "site", *options, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    (run,) = (tmp_path / "site" / "runs").iterdir()
    result = read_json(run / "result.json")
    kinds = {row["request_id"]: row["action_kind"] for row in result["request_rows"]}
    # The team's rule is tried first, the packaged AgentDojo map after it.
    assert kinds == {"call_1": "mock_database_update", "call_2": "network_request"}
    flagged = {
        f["subject_id"]
        for f in result["findings"]
        if f["error_code"] == codes.ACTION_REQUEST_INVALID and "secret_like" in f["message"]
    }
    assert flagged == {"call_1", "call_2"}
    site = b"".join(p.read_bytes() for p in (tmp_path / "site").rglob("*") if p.is_file())
    assert IBAN.encode() not in site
    recorded = read_json(tmp_path / "site" / "manifest.json")["inspect_import"]
    assert recorded["map"]["path"] == "map.json"
    assert recorded["agentdojo_packaged_map"] == {
        "map_id": agentdojo_map().map_id,
        "sha256": agentdojo_map().sha256,
    }
    verified = run_cli("verify", "site", cwd=tmp_path)
    assert verified.returncode == 0, verified.stderr
    done = run_cli("import", "agentdojo", "banking", "--out", "out", *options, cwd=tmp_path)
    assert "forbidden material in tool bodies (team_iban: 3), counted" in done.stderr
    assert IBAN not in done.stderr
    assert "verified" in verified.stderr


@pytest.mark.parametrize("security", ["yes", 1, None, [True]])
def test_a_security_flag_that_is_not_true_or_false_counts_against_the_run(
    security: object, tmp_path: Path
) -> None:
    folder = imported(ATTACKED, tmp_path / "out")
    manifest = read_json(folder / "bundle_manifest.json")
    manifest["benchmark"]["security"] = security
    (folder / "bundle_manifest.json").write_text(json.dumps(manifest))
    outcome = replay(ReplayConfig(folder, InputMode.BUNDLE))
    (finding,) = [f for f in outcome.findings if f.error_code == codes.BENCHMARK_SECURITY_DISAGREES]
    assert "not true or false" in finding.message
    built = run_cli("build", str(folder.parent), "--out", str(tmp_path / "site"))
    assert built.returncode == 0, built.stderr
    record = read_json(tmp_path / "site" / "runs" / folder.name / "result.json")
    assert record["benchmark"].get("security") is None
    assert [e.message for e in validator("result").iter_errors(record)] == []
    assert record["benchmark"]["suite"] == "banking"
    page = (tmp_path / "site" / "runs" / folder.name / "index.html").read_text("utf-8")
    assert "security flag could not be read, so it is not compared: 2 calls made" in page
