"""JSON Schemas: committed copies are fresh, accept every passing input and result record,
and reject mutated ones."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from conftest import EXPORTED_BUNDLE, FIRST_WAVE, REPO, replay_dir
from sandbox_replay import InputMode
from sandbox_replay.checks.negative_cases import NEGATIVE_CASES
from sandbox_replay.cli import app
from sandbox_replay.records.schemas import (
    SCHEMA_MODELS,
    json_schema,
    schema_bytes,
    schema_file_name,
)

SCHEMAS = REPO / "schemas"
REFRESH = "sandbox-replay schema --write schemas"
NEGATIVE_FILES = {case.file_name for case in NEGATIVE_CASES}


def validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json_schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def schema_for(path: Path) -> str:
    return "negative_case" if path.name in NEGATIVE_FILES else path.stem


def passing_files() -> list[Path]:
    return sorted(FIRST_WAVE.glob("*.json")) + sorted(EXPORTED_BUNDLE.glob("*.json"))


@pytest.mark.parametrize("name", sorted(SCHEMA_MODELS))
def test_committed_schema_is_fresh(name: str) -> None:
    committed = SCHEMAS / schema_file_name(name)
    assert committed.is_file(), f"{committed} is missing; run `{REFRESH}`"
    assert committed.read_bytes() == schema_bytes(name), (
        f"{committed.relative_to(REPO)} is out of date with src/sandbox_replay/schemas.py; "
        f"run `{REFRESH}` and commit the result"
    )


def test_no_stray_schema_files() -> None:
    expected = {schema_file_name(name) for name in SCHEMA_MODELS}
    assert {p.name for p in SCHEMAS.glob("*.json")} == expected


@pytest.mark.parametrize("path", passing_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_passing_input_file_is_accepted(path: Path) -> None:
    data = json.loads(path.read_text("utf-8"))
    errors = [e.message for e in validator(schema_for(path)).iter_errors(data)]
    assert errors == []


def test_every_input_file_has_a_schema() -> None:
    for path in passing_files():
        assert schema_for(path) in SCHEMA_MODELS, path


@pytest.mark.parametrize(
    ("folder", "mode"), [(FIRST_WAVE, InputMode.FIXTURE), (EXPORTED_BUNDLE, InputMode.BUNDLE)]
)
def test_result_records_of_passing_runs_are_accepted(folder: Path, mode: InputMode) -> None:
    outcome, records = replay_dir(folder, mode)
    assert outcome.passed
    assert list(validator("result").iter_errors(json.loads(records.result_bytes))) == []


def test_result_records_of_every_scenario_are_accepted() -> None:
    # Blocked runs too: the result record is a contract whatever the status.
    scenarios = REPO / "fixtures" / "scenarios"
    folders = sorted(p for p in scenarios.iterdir() if p.is_dir()) if scenarios.is_dir() else []
    for folder in folders:
        _, records = replay_dir(folder, InputMode.BUNDLE)
        # The record as written: its row lists are built when read, not held as lists.
        result = json.loads(records.result_bytes)
        errors = [e.message for e in validator("result").iter_errors(result)]
        assert errors == [], folder.name


def _load(path: Path) -> Any:
    return json.loads(path.read_text("utf-8"))


def _first_row(data: dict[str, Any], key: str) -> dict[str, Any]:
    row: dict[str, Any] = data[key][0]
    return row


MUTATIONS = [
    ("action_requests", lambda d: _first_row(d, "action_requests").update(body_redacted=False)),
    ("action_requests", lambda d: _first_row(d, "action_requests").pop("request_id")),
    ("action_requests", lambda d: _first_row(d, "action_requests").update(request_id="  ")),
    (
        "action_requests",
        lambda d: _first_row(d, "action_requests").update(live_network_target=True),
    ),
    ("policy_verdicts", lambda d: _first_row(d, "policy_verdicts").update(pre_execution=False)),
    ("policy_verdicts", lambda d: _first_row(d, "policy_verdicts").update(rule_refs=[])),
    (
        "side_effect_receipts",
        lambda d: _first_row(d, "side_effect_receipts").update(side_effect_diff_count="0"),
    ),
    (
        "side_effect_receipts",
        lambda d: _first_row(d, "side_effect_receipts").update(execution_attempted="no"),
    ),
    ("rollback_receipts", lambda d: d["rollback_receipts"].pop()),
    ("cold_replay", lambda d: _first_row(d, "cold_replay").update(pass_label="true")),
    ("sandbox_policy", lambda d: d.update(release_authorized=True)),
    ("sandbox_policy", lambda d: d["allowed_verdicts"].remove("review")),
    ("projection_protocol", lambda d: d.pop("authorizes_sandbox_escape")),
    ("projection_protocol", lambda d: d.update(source_refs=[])),
    ("real_secret_material", lambda d: d.update(real_secret_material_included=False)),
    ("real_secret_material", lambda d: d.update(case_id="made_up_case")),
]


@pytest.mark.parametrize(
    ("stem", "mutate"), MUTATIONS, ids=lambda m: m if isinstance(m, str) else ""
)
def test_mutated_fixture_files_are_rejected(stem: str, mutate: Any) -> None:
    path = FIRST_WAVE / f"{stem}.json"
    data = copy.deepcopy(_load(path))
    mutate(data)
    assert list(validator(schema_for(path)).iter_errors(data)), f"{stem} mutation accepted"


BUNDLE_MUTATIONS = [
    ("bundle_manifest", lambda d: d.pop("bundle_id")),
    ("source_module_manifest", lambda d: d["modules"][0].update(body_in_receipt=True)),
    ("source_module_manifest", lambda d: d["modules"][0].update(sha256="sha256:XYZ")),
    ("source_module_manifest", lambda d: d["modules"][0].update(path="../outside.md")),
    ("source_module_manifest", lambda d: d["modules"][0].update(material_class="secret_body")),
]


@pytest.mark.parametrize(
    ("stem", "mutate"), BUNDLE_MUTATIONS, ids=lambda m: m if isinstance(m, str) else ""
)
def test_mutated_bundle_files_are_rejected(stem: str, mutate: Any) -> None:
    data = copy.deepcopy(_load(EXPORTED_BUNDLE / f"{stem}.json"))
    mutate(data)
    assert list(validator(stem).iter_errors(data))


RESULT_MUTATIONS = [
    lambda r: r.update(body_in_receipt=True),
    lambda r: r.pop("status"),
    lambda r: r.update(status="maybe"),
    lambda r: r.update(action_request_count="6"),
    lambda r: r["findings"][0].update(body_redacted=False),
    lambda r: r["authority_ceiling"].update(release_authorized=True),
    lambda r: r["secret_exclusion_scan"].update(body_redacted=False),
    lambda r: r["input_files"][0].update(sha256="not a digest"),
]


@pytest.mark.parametrize("mutate", RESULT_MUTATIONS)
def test_mutated_result_records_are_rejected(mutate: Any) -> None:
    _, records = replay_dir(FIRST_WAVE)
    result = json.loads(records.result_bytes)
    mutate(result)
    assert list(validator("result").iter_errors(result))


def test_schema_command_prints_and_lists() -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["schema"])
    assert listed.exit_code == 0
    assert [line.split()[0] for line in listed.output.splitlines()] == list(SCHEMA_MODELS)
    printed = runner.invoke(app, ["schema", "result"])
    assert printed.exit_code == 0
    assert printed.output.encode("ascii") == schema_bytes("result")
    assert runner.invoke(app, ["schema", "nope"]).exit_code == 2


def test_schema_command_writes_every_schema(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["schema", "--write", str(tmp_path)])
    assert result.exit_code == 0
    for name in SCHEMA_MODELS:
        assert (tmp_path / schema_file_name(name)).read_bytes() == schema_bytes(name)
