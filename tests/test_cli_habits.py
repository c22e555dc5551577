"""The terminal says where a problem is, and the command line has the habits CI users expect.

Issue #26, items 3 and 7: findings printed as ``path:line: CODE message`` lines (capped),
a folder that is no run is a usage error (exit 2, not "blocked"), the expected
negative-case alarms counted as such, ``-h``, ``-q``/``-v``, colour only where asked
(``NO_COLOR``/``FORCE_COLOR``/a terminal), ``SANDBOX_REPLAY_*`` defaults, a ``[k/N]``
counter on builds, and one clear line on Ctrl-C.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import FIRST_WAVE, REPO, SCENARIOS, main_exit_code, working_directory
from sandbox_replay import cli as cli_module
from sandbox_replay.cli import app

sys.path.insert(0, str(REPO / "benchmarks"))
from generate_bundle import generate

MISSING_VERDICT = SCENARIOS / "missing_verdict_row"
FINDING_LINE = re.compile(r"^(?P<path>\S+\.json):(?P<line>\d+): (?P<code>[A-Z_]+) \S")


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    """Run the command in process; its ``stdout`` and ``stderr`` are kept apart."""
    return CliRunner().invoke(app, list(args), env=env)


def test_findings_are_printed_as_path_line_code_message(tmp_path: Path) -> None:
    result = invoke("run-sandbox-bundle", "-i", str(MISSING_VERDICT), "-o", str(tmp_path))
    assert result.exit_code == 1
    lines = [m for m in map(FINDING_LINE.match, result.stdout.splitlines()) if m]
    assert len(lines) == 3
    first = lines[0]
    path = Path(first["path"])
    assert path.is_file() and path.parent == MISSING_VERDICT
    text = path.read_text("utf-8").splitlines()
    assert "{" in text[int(first["line"]) - 1]  # the line of the row it names
    assert {m["code"] for m in lines} == {
        "SANDBOX_POLICY_COLD_REPLAY_INVALID",
        "SANDBOX_POLICY_VERDICT_MISSING",
        "PUBLIC_TRACE_SANDBOX_POLICY_VERDICT_REF_MISSING",
    }


def test_many_findings_are_capped_and_verbose_lists_them_all(tmp_path: Path) -> None:
    bundle = generate(tmp_path / "bundle", 60, seed=3, failing_fraction=0.5)
    capped = invoke("run-sandbox-bundle", "-i", str(bundle), "-o", str(tmp_path / "a"))
    shown = [line for line in capped.stdout.splitlines() if FINDING_LINE.match(line)]
    assert len(shown) == cli_module.SHOWN_FINDINGS
    more = re.search(r"\.\.\. and (\d+) more in the result record", capped.stdout)
    assert more is not None
    every = invoke("run-sandbox-bundle", "-i", str(bundle), "-o", str(tmp_path / "b"), "-v")
    listed = [line for line in every.stdout.splitlines() if FINDING_LINE.match(line)]
    assert len(listed) == cli_module.SHOWN_FINDINGS + int(more.group(1))
    assert "  Policy verdicts: " in every.stderr  # per-layer time


@pytest.mark.parametrize("kind", ["empty", "unrelated"])
def test_a_folder_that_is_no_run_is_a_usage_error(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    if kind == "unrelated":
        (folder / "package.json").write_text("{}", "utf-8")
    result = invoke("run", "-i", str(folder), "-o", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "holds none of the seven core files" in result.stderr
    assert not (tmp_path / "out").exists()


def test_the_expected_alarms_of_a_passing_fixture_are_said_as_such(tmp_path: Path) -> None:
    result = invoke("run", "-i", str(FIRST_WAVE), "-o", str(tmp_path))
    assert result.exit_code == 0
    out = result.stdout
    assert "findings: 8 (8 of them the expected negative-case alarms)  error codes: 0" in out
    assert not [line for line in out.splitlines() if line.startswith("  ")]
    assert not [line for line in out.splitlines() if FINDING_LINE.match(line)]


def test_quiet_says_the_status_line_only(tmp_path: Path) -> None:
    result = invoke("run", "-i", str(FIRST_WAVE), "-o", str(tmp_path), "-q")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "status: pass  (fixture, bundle fixture:projection:first_wave_containment_v1)"
    ]
    assert result.stderr == ""
    both = invoke("run", "-i", str(FIRST_WAVE), "-o", str(tmp_path), "-q", "-v")
    assert both.exit_code == 2


def test_help_answers_to_h() -> None:
    result = invoke("-h")
    assert result.exit_code == 0
    assert "build exits 0 once the site is built" in result.stdout
    assert invoke("run", "-h").exit_code == 0


def test_colour_only_where_asked(tmp_path: Path) -> None:
    args = ("run-sandbox-bundle", "-i", str(MISSING_VERDICT), "-o", str(tmp_path))
    forced = invoke(*args, env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert "status: \033[1;31mblocked\033[0m" in forced.stdout
    plain = invoke(*args, env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert "\033[" not in plain.stdout
    piped = invoke(*args, env={"FORCE_COLOR": "", "NO_COLOR": ""})  # not a terminal
    assert "\033[" not in piped.stdout


def test_defaults_come_from_the_environment(tmp_path: Path) -> None:
    result = invoke(
        "run", "-i", str(FIRST_WAVE), "-o", str(tmp_path), env={"SANDBOX_REPLAY_MAX_ROWS": "3"}
    )
    assert result.exit_code == 1
    assert "SANDBOX_POLICY_INPUT_LIMIT_EXCEEDED" in result.stdout


def test_a_build_counts_its_runs_as_it_goes(tmp_path: Path) -> None:
    shutil.copytree(FIRST_WAVE, tmp_path / "runs" / "first_wave")
    with working_directory(tmp_path):
        one = invoke("build", "runs", "--out", "site", "--jobs", "1")
        assert re.search(r"\[1/1 [\d.]+s\] replayed runs/first_wave", one.stderr)
        assert "(1 run, 0 blocked" in one.stderr
        shutil.copytree(MISSING_VERDICT, tmp_path / "runs" / "missing")
        two = invoke("build", "runs", "--out", "site", "--jobs", "1", "-q")
        assert two.stderr == ""


def test_ctrl_c_says_interrupted_and_exits_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(config: object) -> None:
        raise KeyboardInterrupt

    args = ("run", "-i", str(FIRST_WAVE), "-o", str(tmp_path))
    assert main_exit_code(monkeypatch, interrupted, *args) == 130
    err = capsys.readouterr().err
    assert "interrupted; no record or site was left half-written" in err
    assert "Traceback" not in err


# --- export paths from the repository root (issue #26, item 4) ----------------------------


def _sarif_uris(path: Path) -> set[str]:
    import json

    log = json.loads(path.read_text("utf-8"))
    return {
        loc["physicalLocation"]["artifactLocation"]["uri"]
        for run in log["runs"]
        for result in run["results"]
        for loc in result.get("locations", [])
    }


def test_export_paths_are_named_from_the_repository_root(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    shutil.copytree(MISSING_VERDICT, repo / "exports" / "b1")
    (repo / "sub").mkdir()
    with working_directory(repo / "sub"):
        result = invoke(
            "run-sandbox-bundle", "-i", "../exports/b1", "-o", "out", "--sarif", "out.sarif"
        )
    assert result.exit_code == 1
    uris = _sarif_uris(repo / "sub" / "out.sarif")
    assert uris and all(uri.startswith("exports/b1/") for uri in uris), uris
    assert all((repo / uri).is_file() for uri in uris)
    assert "warning" not in result.stderr


def test_an_input_outside_the_root_is_warned_about(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    shutil.copytree(MISSING_VERDICT, tmp_path / "elsewhere" / "b1")
    with working_directory(repo):
        result = invoke(
            "run-sandbox-bundle", "-i", "../elsewhere/b1", "-o", "out", "--sarif", "o.sarif"
        )
        assert "lies outside repo, the root export paths are relative to" in result.stderr
        assert "pass --root" in result.stderr
        rooted = invoke(
            "run-sandbox-bundle",
            "-i",
            "../elsewhere/b1",
            "-o",
            "out2",
            "--sarif",
            "r.sarif",
            "--root",
            str(tmp_path),
        )
    assert "warning" not in rooted.stderr
    assert all(uri.startswith("elsewhere/b1/") for uri in _sarif_uris(repo / "r.sarif"))


def test_option_defaults_come_from_the_project_file(tmp_path: Path) -> None:
    shutil.copytree(FIRST_WAVE, tmp_path / "runs" / "first_wave")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.sandbox-replay]\nmax-rows = 3\nquiet = true\njobs = 1\nfail-on = "blocked"\n',
        "utf-8",
    )
    with working_directory(tmp_path):
        limited = invoke("run", "-i", "runs/first_wave", "-o", "out")
        assert limited.exit_code == 1  # three rows at most: the fixture is over the limit
        assert limited.stderr == ""  # quiet
        assert limited.stdout.startswith("status: blocked")
        # The command line and the environment win over the file.
        assert (
            invoke("run", "-i", "runs/first_wave", "-o", "out", "--max-rows", "100").exit_code == 0
        )
        env = {"SANDBOX_REPLAY_MAX_ROWS": "100"}
        assert invoke("run", "-i", "runs/first_wave", "-o", "out", env=env).exit_code == 0
        built = invoke("build", "runs", "--out", "site")
        assert built.exit_code == 0 and built.stderr == ""
        (tmp_path / "pyproject.toml").write_text("[tool.sandbox-replay]\nmax-rowz = 3\n", "utf-8")
        typo = invoke("run", "-i", "runs/first_wave", "-o", "out")
        assert typo.exit_code == 2 and "unknown key(s) max-rowz" in typo.stderr


def test_a_large_run_says_how_far_its_pages_got(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandbox_replay.report import parallel
    from sandbox_replay.report.build import BuildConfig, build_site

    bundle = generate(tmp_path / "in" / "big", 1100, seed=5, failing_fraction=0.1)
    monkeypatch.setattr(parallel, "HEARTBEAT_SECONDS", 0.0)
    said: list[str] = []
    build_site(BuildConfig((bundle.parent,), tmp_path / "site", progress=said.append, jobs=1))
    beats = [s for s in said if "rendering listing pages:" in s]
    assert beats and re.search(r"runs/big: rendering listing pages: 1 of \d+ done", beats[0])


def test_quiet_ends_with_its_command(tmp_path: Path) -> None:
    assert invoke("run", "-i", str(FIRST_WAVE), "-o", str(tmp_path / "a"), "-q").stderr == ""
    # The next command in this process, one without -q of its own, is not quiet.
    after = invoke("schema", "--write", str(tmp_path / "schemas"))
    assert after.exit_code == 0 and "wrote " in after.stderr
