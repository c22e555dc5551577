"""Seeded escapes (issue #44): each is caught by its own codes on the built-in runs, a
weakened check shows up as missed, and nothing but the record's section changes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import (
    EXPORTED_BUNDLE,
    FIRST_WAVE,
    FIXTURES,
    copy_fixture,
    project_policies,
    read_json,
    working_directory,
)
from sandbox_replay import InputMode, ReplayConfig, build_records, replay
from sandbox_replay.checks import cold_replay, pipeline, side_effects, trace
from sandbox_replay.checks.base import LayerResult
from sandbox_replay.checks.escapes import ESCAPES
from sandbox_replay.checks.sensitivity import CAUGHT, MISSED, NOT_APPLICABLE, Sensitivity
from sandbox_replay.cli import app
from sandbox_replay.model import codes

RUNS = sorted(p.parent for p in FIXTURES.rglob("action_requests.json"))
PASSING = [FIRST_WAVE, EXPORTED_BUNDLE]


def mode_of(folder: Path) -> InputMode:
    return InputMode.BUNDLE if (folder / "bundle_manifest.json").exists() else InputMode.FIXTURE


def seeded(folder: Path, required: bool = False) -> pipeline.Replay:
    policy = project_policies().for_run(folder)
    config = ReplayConfig(
        folder, mode_of(folder), policy=policy, sensitivity=True, require_sensitivity=required
    )
    return replay(config)


def scores(outcome: pipeline.Replay) -> Sensitivity:
    assert outcome.sensitivity is not None
    return outcome.sensitivity


def score(outcome: pipeline.Replay, escape_id: str) -> Any:
    return next(s for s in scores(outcome).scores if s.escape.escape_id == escape_id)


@pytest.fixture(scope="module")
def built_in() -> dict[Path, pipeline.Replay]:
    return {folder: seeded(folder) for folder in RUNS}


@pytest.mark.parametrize("escape", ESCAPES, ids=lambda e: e.escape_id)
def test_each_escape_is_caught_by_the_codes_it_declares(
    escape: Any, built_in: dict[Path, pipeline.Replay]
) -> None:
    tried = 0
    for folder in PASSING:
        found = score(built_in[folder], escape.escape_id)
        for mutant in found.mutants:
            tried += 1
            assert mutant.outcome == CAUGHT, (folder.name, mutant)
            # Every code it declares fires, on each row it was planted in.
            assert set(escape.codes) <= set(mutant.codes), (folder.name, mutant)
    assert tried >= 2, f"{escape.escape_id} applies to no passing built-in run"


def test_every_built_in_run_catches_every_escape_that_applies(
    built_in: dict[Path, pipeline.Replay],
) -> None:
    for folder, outcome in built_in.items():
        seen = scores(outcome)
        assert seen.caught == seen.applicable, folder.name
        assert seen.applicable >= len(ESCAPES) - 1, folder.name


def test_an_escape_that_cannot_apply_says_why(built_in: dict[Path, pipeline.Replay]) -> None:
    found = score(built_in[FIRST_WAVE], "copied_body_edited")
    assert (found.outcome, found.mutants) == (NOT_APPLICABLE, ())
    record = found.to_record()
    assert (
        record["not_applicable_reason"]
        == "the run has no verified copied source-module body (a fixture has none)"
    )
    assert score(built_in[EXPORTED_BUNDLE], "copied_body_edited").outcome == CAUGHT


def test_the_rows_tried_are_spread_over_request_kinds(
    built_in: dict[Path, pipeline.Replay],
) -> None:
    outcome = built_in[FIRST_WAVE]
    kinds = {r.request_id: r.action_kind for r in outcome.run.requests}
    targets = [m.target for m in score(outcome, "block_declared_allow").mutants]
    assert len(targets) == 3
    assert len({kinds[t] for t in targets}) == 3
    # The same choice every time.
    assert [m.target for m in score(seeded(FIRST_WAVE), "block_declared_allow").mutants] == targets


def folder_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def test_nothing_but_the_record_s_section_changes(built_in: dict[Path, pipeline.Replay]) -> None:
    for folder in (FIRST_WAVE, EXPORTED_BUNDLE, FIXTURES / "scenarios" / "missing_verdict_row"):
        before = folder_digest(folder)
        policy = project_policies().for_run(folder)
        plain = build_records(replay(ReplayConfig(folder, mode_of(folder), policy=policy)))
        with_section = build_records(seeded(folder)).result
        section = with_section.pop("sensitivity")
        assert section["escape_count"] == len(ESCAPES)
        assert with_section == plain.result
        assert folder_digest(folder) == before  # planted in memory only


def drop(check: Any, *dropped: str) -> Any:
    """Return ``check`` weakened: the findings of ``dropped`` codes are never reported."""

    def weakened(*args: Any) -> Any:
        answer = check(*args)
        result = answer[0] if isinstance(answer, tuple) else answer
        assert isinstance(result, LayerResult)
        result.findings = [f for f in result.findings if f.error_code not in dropped]
        return answer

    return weakened


def test_a_weakened_check_shows_as_missed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        pipeline.cold_replay, "check", drop(cold_replay.check, codes.COLD_REPLAY_INVALID)
    )
    outcome = seeded(FIRST_WAVE)
    found = score(outcome, "cold_replay_state_changed")
    assert found.outcome == MISSED
    assert [m.outcome for m in found.mutants] == [MISSED] * 3
    assert outcome.passed  # seen, not required: the record says so, the pass rule does not
    assert scores(outcome).caught == scores(outcome).applicable - 1
    record = build_records(outcome).result
    assert record["sensitivity"]["missed_count"] == 1
    assert record["status"] == "pass"
    required = seeded(FIRST_WAVE, required=True)
    assert not required.passed
    (finding,) = [f for f in required.findings if f.error_code == codes.SEEDED_ESCAPE_MISSED]
    assert finding.subject_id == "cold_replay_state_changed"
    assert "missed on 3 of 3 rows tried" in finding.message


def test_a_check_weakened_in_one_layer_is_still_caught_by_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The side-effect layer ignoring execution: the trace still sees the blocked action run."""
    executed = (codes.BLOCKED_ACTION_EXECUTED, codes.SIDE_EFFECT_SEMANTIC_MISMATCH)
    monkeypatch.setattr(pipeline.side_effects, "check", drop(side_effects.check, *executed))
    assert score(seeded(FIRST_WAVE), "blocked_executed").outcome == CAUGHT
    monkeypatch.setattr(
        pipeline, "build_trace", _without(trace.build_trace, codes.TRACE_BLOCKED_ACTION_EXECUTED)
    )
    mutants = score(seeded(FIRST_WAVE), "blocked_executed").mutants
    # What still fires is no code of the escape's own: the rollback the run lacks.
    assert {m.outcome for m in mutants} == {"caught_otherwise"}


def _without(build: Any, code: str) -> Any:
    def weakened(*args: Any) -> Any:
        built = build(*args)
        built.audit.findings = [f for f in built.audit.findings if f.error_code != code]
        return built

    return weakened


@pytest.mark.parametrize(
    ("name", "key", "value"),
    [
        ("rollback_receipts", "request_id", ["req"]),
        ("side_effect_receipts", "rollback_receipt_ref", {"ref": 1}),
    ],
)
def test_an_id_that_is_not_a_text_is_judged_not_a_crash(
    name: str, key: str, value: object, tmp_path: Path
) -> None:
    folder = copy_fixture(tmp_path, "bundles/exported_bundle")
    path = folder / f"{name}.json"
    document = read_json(path)
    document[name][0][key] = value
    path.write_text(json.dumps(document))
    outcome = seeded(folder)
    assert outcome.status == "blocked"
    assert scores(outcome).scores  # the escapes were still planted and judged


def test_the_command_line_requires_it_and_the_project_file_turns_it_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(
        pipeline.cold_replay, "check", drop(cold_replay.check, codes.COLD_REPLAY_INVALID)
    )
    runner = CliRunner()
    args = ["run", "--input", str(FIRST_WAVE), "--out", str(tmp_path / "a")]
    blocked = runner.invoke(app, [*args, "--require-sensitivity"])
    assert blocked.exit_code == 1, blocked.output
    assert "9 of 10 seeded escapes caught  missed: cold_replay_state_changed" in blocked.output
    assert codes.SEEDED_ESCAPE_MISSED in blocked.output
    monkeypatch.undo()
    (tmp_path / "pyproject.toml").write_text("[tool.sandbox-replay]\nsensitivity = true\n")
    with working_directory(tmp_path):
        seen = runner.invoke(app, ["run", "--input", str(FIRST_WAVE), "--out", "b"])
        plain = runner.invoke(
            app, ["run", "--input", str(FIRST_WAVE), "--out", "c", "--no-sensitivity"]
        )
    assert seen.exit_code == 0, seen.output
    assert "10 of 10 seeded escapes caught" in seen.output
    assert "seeded escapes" not in plain.output


def test_a_site_built_with_it_verifies(tmp_path: Path) -> None:
    copy_fixture(tmp_path)
    runner = CliRunner()
    with working_directory(tmp_path):
        built = runner.invoke(
            app, ["build", "first_wave", "--out", "site", "--sensitivity", "-j", "1", "-q"]
        )
        assert built.exit_code == 0, built.output
        assert read_json(tmp_path / "site" / "manifest.json")["sensitivity"] == {"required": False}
        result = read_json(tmp_path / "site" / "runs" / "first_wave" / "result.json")
        assert result["sensitivity"]["caught_count"] == 10
        checked = runner.invoke(app, ["verify", "site"])
    assert checked.exit_code == 0, checked.output


def test_the_docs_table_is_the_registry() -> None:
    text = (FIXTURES.parent / "docs" / "sensitivity.md").read_text("utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == len(ESCAPES)
    for escape, row in zip(ESCAPES, rows, strict=True):
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[0] == f"`{escape.escape_id}`"
        assert cells[1] == escape.fakes
        assert cells[2] == ", ".join(f"`{code}`" for code in escape.codes)
        assert cells[3].startswith(escape.applies_to)
