"""JUnit export: parses with the standard library and junitparser, counts agree, inert."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import junitparser
import pytest
from typer.testing import CliRunner

from conftest import FIRST_WAVE, REPO, project_sensitivity
from exports_support import BUILTIN_IDS, HOSTILE, all_builtin_runs, builtin_run, hostile_run
from sandbox_replay import InputMode, ReplayConfig, replay
from sandbox_replay.checks.negative_cases import NEGATIVE_CASES
from sandbox_replay.cli import app
from sandbox_replay.exports import ExportRun, export_run
from sandbox_replay.exports.junit import junit_bytes
from sandbox_replay.model.codes import NEGATIVE_CASE_MISSING, REGISTRY


def parse(data: bytes) -> ET.Element:
    root = ET.fromstring(data)
    assert root.tag == "testsuites"
    return root


def check_counts(root: ET.Element) -> None:
    """Assert every count attribute agrees with the elements it counts."""
    total_tests = total_failures = 0
    for suite in root.findall("testsuite"):
        cases = suite.findall("testcase")
        failed = [c for c in cases if c.find("failure") is not None]
        assert int(suite.get("tests", "-1")) == len(cases)
        assert int(suite.get("failures", "-1")) == len(failed)
        assert suite.get("errors") == "0" and suite.get("skipped") == "0"
        total_tests += len(cases)
        total_failures += len(failed)
    assert int(root.get("tests", "-1")) == total_tests
    assert int(root.get("failures", "-1")) == total_failures


def check_junitparser(path: Path, runs: list[ExportRun]) -> None:
    xml = junitparser.JUnitXml.fromfile(str(path))
    suites = list(xml)
    assert [s.name for s in suites] == [run.name for run in runs]
    for suite, run in zip(suites, runs, strict=True):
        cases = list(suite)
        assert suite.tests == len(cases)
        assert suite.failures == sum(1 for c in cases if not c.is_passed)
        failure_types = {r.type for c in cases for r in c.result}
        assert failure_types <= set(REGISTRY_CODES) | {"not_run"}
        if not run.facts.passed:
            assert failure_types


REGISTRY_CODES = [entry.code for entry in REGISTRY]


@pytest.mark.parametrize("name", BUILTIN_IDS)
def test_every_builtin_run_parses(name: str, tmp_path: Path) -> None:
    run = builtin_run(name)
    data = junit_bytes([run])
    root = parse(data)
    check_counts(root)
    path = tmp_path / "junit.xml"
    path.write_bytes(data)
    check_junitparser(path, [run])
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == name
    failures = suite.findall("testcase/failure")
    assert bool(failures) == (not run.facts.passed)
    # Every code the run raised is named in some failure (planted cases aside).
    text = " ".join((f.get("message") or "") + (f.text or "") for f in failures)
    unexpected = {f.error_code for f in run.facts.findings if f.layer.value != "negative_cases"}
    for code in unexpected:
        assert code in text


def test_all_runs_in_one_report(tmp_path: Path) -> None:
    runs = all_builtin_runs()
    data = junit_bytes(runs)
    check_counts(parse(data))
    path = tmp_path / "all.xml"
    path.write_bytes(data)
    check_junitparser(path, runs)


def test_fixture_has_a_testcase_per_layer_and_per_negative_case() -> None:
    run = builtin_run("first_wave")
    suite = parse(junit_bytes([run])).find("testsuite")
    assert suite is not None
    classnames = [c.get("classname") for c in suite.findall("testcase")]
    layers = [
        layer.layer.value for layer in run.facts.layers if layer.layer.value != "negative_cases"
    ]
    assert [c for c in classnames if c != "negative_cases"] == layers
    negative = [c.get("name") for c in suite.findall("testcase[@classname='negative_cases']")]
    assert negative == [case.case_id for case in NEGATIVE_CASES]
    assert suite.find("testcase/failure") is None


def test_missing_negative_case_fails_its_testcase(tmp_path: Path) -> None:
    folder = tmp_path / "fixture"
    shutil.copytree(FIRST_WAVE, folder)
    (folder / "live_network_access.json").unlink()
    run = export_run("fixture", replay(ReplayConfig(folder, InputMode.FIXTURE)), tmp_path)
    suite = parse(junit_bytes([run])).find("testsuite")
    assert suite is not None
    case = suite.find("testcase[@name='live_network_access']")
    assert case is not None
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == NEGATIVE_CASE_MISSING
    assert "live_network_access" in (failure.get("message") or "")
    others = suite.findall("testcase[@classname='negative_cases']/failure")
    assert len(others) == 1


def test_output_is_byte_reproducible() -> None:
    assert junit_bytes(all_builtin_runs()) == junit_bytes(all_builtin_runs())


def test_hostile_values_stay_inert(tmp_path: Path) -> None:
    run = hostile_run(tmp_path)
    data = junit_bytes([run])
    root = parse(data)  # well-formed despite control characters and markup
    check_counts(root)
    path = tmp_path / "hostile.xml"
    path.write_bytes(data)
    xml = junitparser.JUnitXml.fromfile(str(path))
    assert [s.name for s in xml] == [ET.fromstring(data).find("testsuite").get("name")]  # type: ignore[union-attr]
    text = data.decode("utf-8")
    for bad in ("\x01", "\x0b", "\x1b", "\u202e", "<script>", "]]>", "</failure>]"):
        assert bad not in text
    # The hostile id survives as text, made visible, not as structure.
    failures = root.findall(".//failure")
    assert any(
        "&lt;/failure&gt;" not in (f.text or "") and "</failure>" in (f.text or "")
        for f in failures
    )
    assert any("<U+202E>" in (f.get("message") or "") for f in failures)
    assert HOSTILE not in text


def test_cli_writes_junit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "junit.xml"
    result = CliRunner().invoke(
        app,
        [
            "run-sandbox-bundle",
            "--input",
            "fixtures/bundles/exported_bundle",
            "--out",
            str(tmp_path / "o"),
            "--junit",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    # As the command in this folder replays it (pyproject.toml).
    run = builtin_run("exported_bundle", sensitivity=project_sensitivity())
    assert out.read_bytes() == junit_bytes([run])
