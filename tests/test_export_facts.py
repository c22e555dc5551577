"""What the exports keep of a run (``ExportFacts``) gives the exports of the replay itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import EXPORTED_BUNDLE
from exports_support import BUILTIN_IDS, builtin_run, hostile_run
from sandbox_replay import InputMode
from sandbox_replay.checks.pipeline import ReplayConfig, replay
from sandbox_replay.cli import app
from sandbox_replay.exports import (
    ExportFacts,
    ExportRun,
    ExportTargets,
    export_run,
    render_exports,
)
from sandbox_replay.records.build import build_records

TARGETS = ExportTargets(Path("a.sarif"), Path("a.xml"), Path("a.md"), "https://example.org/r/")


def _read_back(run: ExportRun) -> ExportRun:
    """Return ``run`` with its facts written as JSON text and read back."""
    text = json.dumps(run.facts.to_json())
    return ExportRun(run.name, ExportFacts.from_json(json.loads(text)), run.source_root)


@pytest.mark.parametrize("name", BUILTIN_IDS)
def test_facts_read_back_from_json_export_the_same_bytes(name: str) -> None:
    run = builtin_run(name)
    again = _read_back(run)
    assert again.facts == run.facts
    assert render_exports(TARGETS, [again]) == render_exports(TARGETS, [run])


def test_a_hostile_runs_facts_read_back_the_same(tmp_path: Path) -> None:
    run = hostile_run(tmp_path)
    again = _read_back(run)
    assert again.facts == run.facts
    assert render_exports(TARGETS, [again]) == render_exports(TARGETS, [run])


def test_the_record_and_headline_given_are_those_the_facts_would_make() -> None:
    outcome = replay(ReplayConfig(EXPORTED_BUNDLE, InputMode.BUNDLE))
    record = build_records(outcome).result
    made = ExportFacts.of(outcome)
    assert ExportFacts.of(outcome, record) == made
    # A headline handed in is taken as it is: the build hands in its run page's own.
    assert ExportFacts.of(outcome, record, "the run page's headline").headline == (
        "the run page's headline"
    )


def test_facts_made_without_the_summary_cannot_write_markdown() -> None:
    outcome = replay(ReplayConfig(EXPORTED_BUNDLE, InputMode.BUNDLE))
    run = export_run("bundle", outcome, summary=False)
    assert run.facts.headline is None
    only_sarif = ExportTargets(sarif=Path("a.sarif"))
    assert render_exports(only_sarif, [run])  # SARIF needs neither
    with pytest.raises(ValueError, match="without the summary"):
        render_exports(ExportTargets(markdown=Path("a.md")), [run])


def test_a_run_exporting_sarif_alone_makes_no_headline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandbox_replay.records import headline

    def refuse(result: Any) -> Any:
        raise AssertionError("the headline was made for an export that does not show it")

    monkeypatch.setattr(headline, "gap_headline", refuse)
    sarif = tmp_path / "run.sarif"
    arguments = ["run-sandbox-bundle", "-i", str(EXPORTED_BUNDLE), "-o", str(tmp_path / "out")]
    result = CliRunner().invoke(app, [*arguments, "--sarif", str(sarif)])
    assert result.exit_code in (0, 1), result.output
    assert json.loads(sarif.read_bytes())["runs"]


def test_text_read_back_from_an_edited_status_file_is_escaped_in_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The status file lies in the output folder, which anyone may edit: a reused run's
    # headline and finding texts come from it, and go through the exporters' escaping.
    monkeypatch.chdir(tmp_path)
    site, summary = tmp_path / "site", tmp_path / "summary.md"
    arguments = ["build", str(EXPORTED_BUNDLE), "--out", str(site), "--markdown", str(summary)]
    assert CliRunner().invoke(app, arguments).exit_code == 0
    status = site / "build-status.json"
    data = json.loads(status.read_bytes())
    planted = "```\n[click](https://example.org/x) <img src=x>"
    data["runs"][0]["exports"]["headline"] = planted
    status.write_text(json.dumps(data))
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    assert "1 reused" in result.output
    text = summary.read_text("utf-8")
    assert "click" in text  # the planted headline was read back
    assert "[click](" not in text and "<img" not in text and "\n```\n[" not in text


def _edited(facts: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(facts))
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("status",), "passed"),
        (("input_mode",), "folder"),
        (("bundle_id",), 3),
        (("counts", "span_count"), True),
        (("counts", "span_count"), -1),
        (("counts", "span_count"), 1.0),
        (("counts",), {"span_count": 1}),
        (("layers", 0, "ran"), 1),
        (("layers", 0, "layer"), "no_such_layer"),
        (("layers", 0, "findings"), [["UNREGISTERED", "m", "", "s", "k", None, None]]),
        (("layers", 0, "findings"), [[1, "m", "", "s", "k", None, None]]),
        (("layers", 0, "findings"), [["m", "", "s", "k", None, None]]),
        (("negative",), {"observed": {"case": [1]}, "missing": []}),
        (("headline",), 7),
    ],
)
def test_facts_edited_in_a_status_file_are_refused(path: tuple[Any, ...], value: Any) -> None:
    facts = builtin_run("first_wave").facts.to_json()
    with pytest.raises((ValueError, KeyError, TypeError)):
        ExportFacts.from_json(_edited(facts, path, value))


def test_facts_missing_a_field_are_refused() -> None:
    facts = builtin_run("first_wave").facts.to_json()
    for key in list(facts):
        data = dict(facts)
        del data[key]
        with pytest.raises((ValueError, KeyError, TypeError)):
            ExportFacts.from_json(data)


def test_facts_json_keeps_the_status_file_shape() -> None:
    data = builtin_run("first_wave").facts.to_json()
    assert list(data) == [
        "status",
        "input_mode",
        "bundle_id",
        "layers",
        "negative",
        "counts",
        "policy",
        "headline",
    ]
    assert all(list(layer) == ["layer", "ran", "findings"] for layer in data["layers"])
    assert all(len(f) == 7 for r in data["layers"] for f in r["findings"])
