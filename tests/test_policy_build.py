"""``build --policy`` and the project's ``[tool.sandbox-replay]``: the policy in force is
part of the evidence.

A run built with a policy records it in the manifest (path, sha256, kind, id), a changed
policy rebuilds every run (never reuses a verdict derived by another policy), and
``verify`` re-derives with the recorded file and names one that changed since the build.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from conftest import EXPORTED_BUNDLE, FIXTURES, REPO, working_directory
from sandbox_replay.cli import app
from sandbox_replay.report.verify import VerifyConfig, verify_site

TEAM_CEDAR = FIXTURES / "policies" / "team_sandbox.cedar"


def build(*options: str) -> Any:
    return CliRunner().invoke(app, ["build", "runs", "--out", "site", "--jobs", "1", *options])


def verify() -> list[str]:
    report = verify_site(VerifyConfig(Path("site"), None, progress=lambda _: None, jobs=1))
    return list(report.differences)


def _setup(root: Path) -> None:
    shutil.copytree(EXPORTED_BUNDLE, root / "runs" / "plain")
    shutil.copytree(EXPORTED_BUNDLE, root / "runs" / "frozen")
    (root / "policies").mkdir()
    shutil.copy(TEAM_CEDAR, root / "policies" / "team.cedar")


def test_a_run_policy_from_the_project_file_is_recorded_reused_and_verified(
    tmp_path: Path,
) -> None:
    _setup(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.sandbox-replay.run-policies]\n"runs/frozen" = "policies/team.cedar"\n', "utf-8"
    )
    with working_directory(tmp_path):
        built = build("--fail-on", "blocked")
        assert built.exit_code == 1, built.output
        assert "policy: cedar team from policies/team.cedar (12 rules" in built.output
        manifest = json.loads((tmp_path / "site" / "manifest.json").read_text("utf-8"))
        runs = {run["name"]: run for run in manifest["runs"]}
        assert runs["plain"]["status"] == "pass" and "policy" not in runs["plain"]
        assert runs["frozen"]["status"] == "blocked"
        recorded = runs["frozen"]["policy"]
        assert recorded["path"] == "policies/team.cedar"
        assert recorded["kind"] == "cedar" and recorded["id"] == "team"
        assert recorded["sha256"].startswith("sha256:") and recorded["rule_count"] == 12
        result = json.loads((tmp_path / "site" / "runs" / "frozen" / "result.json").read_bytes())
        assert result["policy_source"] == {
            k: recorded[k] for k in ("kind", "id", "sha256", "rule_count")
        }
        assert verify() == []

        # Unchanged: both runs reused. The policy edited: nothing is reused.
        again = build()
        assert again.output.count("(inputs unchanged)") == 2, again.output
        policy = tmp_path / "policies" / "team.cedar"
        policy.write_text(policy.read_text("utf-8") + "\n// edited\n", "utf-8")
        assert verify() == [
            "policy changed since the site was built: policies/team.cedar (run frozen)",
            "page no longer follows from its inputs: runs/frozen/index.html",
            "result record differs from the replay: runs/frozen/result.json",
        ] or any("policy changed since the site was built" in d for d in verify())
        rebuilt = build()
        assert "(inputs unchanged)" not in rebuilt.output, rebuilt.output
        assert verify() == []


def test_a_policy_given_to_build_applies_to_every_run(tmp_path: Path) -> None:
    _setup(tmp_path)
    with working_directory(tmp_path):
        built = build("--policy", "policies/team.cedar", "--fail-on", "blocked")
        assert built.exit_code == 1, built.output
        assert "2 runs, 2 blocked" in built.output
        manifest = json.loads((tmp_path / "site" / "manifest.json").read_text("utf-8"))
        assert all(run["policy"]["id"] == "team" for run in manifest["runs"])
        bad = build("--policy", "policies/missing.cedar")
        assert bad.exit_code == 2 and "policies/missing.cedar" in bad.output


def test_the_repository_replays_its_cedar_scenario_with_its_own_policy() -> None:
    """``make run`` builds from the repository, whose pyproject.toml names the policy."""
    text = (REPO / "pyproject.toml").read_text("utf-8")
    assert (
        '"fixtures/scenarios/cedar_team_fixture_freeze" = "fixtures/policies/team_sandbox.cedar"'
        in text
    )
    manifest = json.loads((REPO / "site" / "manifest.json").read_text("utf-8"))
    runs = {run["name"]: run for run in manifest["runs"]}
    frozen = runs["cedar_team_fixture_freeze"]
    assert frozen["status"] == "blocked"
    assert frozen["policy"]["path"] == "fixtures/policies/team_sandbox.cedar"
    assert all("policy" not in run for name, run in runs.items() if name != frozen["name"])
