"""A rebuild recomputes only the runs whose inputs changed, and gives a clean build's bytes."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import EXPORTED_BUNDLE, FIRST_WAVE, edit_json
from sandbox_replay.checks.pipeline import Replay, ReplayConfig
from sandbox_replay.report import incremental, parallel
from sandbox_replay.report.build import BuildConfig, BuildResult, build_site


def quiet(message: str) -> None:
    """Swallow progress lines in tests."""


def tree(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    root = tmp_path / "inputs"
    shutil.copytree(FIRST_WAVE, root / "first_wave")
    shutil.copytree(EXPORTED_BUNDLE, root / "exported_bundle")
    return root


@pytest.fixture
def replayed(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Record the folder of every run that is replayed."""
    calls: list[Path] = []
    real = parallel.replay

    def counting(config: ReplayConfig) -> Replay:
        calls.append(config.input_dir)
        return real(config)

    monkeypatch.setattr(parallel, "replay", counting)
    return calls


def build(inputs: Path, out: Path, **extra: Any) -> BuildResult:
    config = BuildConfig((inputs,), out, cwd=inputs.parent, progress=quiet, jobs=1, **extra)
    return build_site(config)


def test_an_unchanged_rebuild_recomputes_nothing(
    inputs: Path, tmp_path: Path, replayed: list[Path]
) -> None:
    out = tmp_path / "site"
    build(inputs, out)
    assert len(replayed) == 2
    before = tree(out)
    result = build(inputs, out)
    assert len(replayed) == 2, "an unchanged run was replayed again"
    assert result.reused == 2
    assert result.unchanged
    assert tree(out) == before


def test_rebuild_replays_every_run_and_gives_the_same_bytes(
    inputs: Path, tmp_path: Path, replayed: list[Path]
) -> None:
    out = tmp_path / "site"
    build(inputs, out)
    before = tree(out)
    replayed.clear()
    result = build(inputs, out, rebuild=True)
    assert len(replayed) == 2, "--rebuild reused a run"
    assert result.reused == 0
    assert tree(out) == before


def test_only_the_changed_run_is_recomputed(
    inputs: Path, tmp_path: Path, replayed: list[Path]
) -> None:
    out = tmp_path / "site"
    build(inputs, out)
    with edit_json(inputs / "first_wave" / "policy_verdicts.json") as data:
        data["policy_verdicts"][0]["decision_reason_ref"] = "reason:changed"
    replayed.clear()
    result = build(inputs, out)
    assert [p.name for p in replayed] == ["first_wave"]
    assert result.reused == 1
    clean = tmp_path / "clean"
    build(inputs, clean)
    assert tree(out) == tree(clean)


def test_a_template_change_rebuilds_every_run(
    inputs: Path, tmp_path: Path, replayed: list[Path]
) -> None:
    out = tmp_path / "site"
    build(inputs, out)
    overrides = tmp_path / "templates" / "assets"
    overrides.mkdir(parents=True)
    (overrides / "site.css").write_text("body { color: black; }\n")
    replayed.clear()
    result = build(inputs, out, templates=overrides.parent)
    assert len(replayed) == 2
    assert result.reused == 0


def test_a_new_build_time_rebuilds_every_run(
    inputs: Path, tmp_path: Path, replayed: list[Path]
) -> None:
    out = tmp_path / "site"
    build(inputs, out)
    replayed.clear()
    build(inputs, out, source_date_epoch=1_700_000_000)
    assert len(replayed) == 2


def test_a_damaged_status_file_means_a_full_build(
    inputs: Path, tmp_path: Path, replayed: list[Path]
) -> None:
    out = tmp_path / "site"
    build(inputs, out)
    status = out / incremental.STATUS_FILE
    data = json.loads(status.read_text("utf-8"))
    data["format"] = 999
    status.write_text(json.dumps(data))
    replayed.clear()
    build(inputs, out)
    assert len(replayed) == 2
    status.write_text("{not json")
    replayed.clear()
    build(inputs, out)
    assert len(replayed) == 2


@pytest.mark.parametrize(
    "damage",
    [
        lambda facts, layer: facts.pop("layers"),
        lambda facts, layer: facts.update(input_mode="neither"),
        lambda facts, layer: layer.update(ran="yes"),
        lambda facts, layer: layer["findings"][0].__setitem__(0, "NOT_A_CODE"),
        lambda facts, layer: layer["findings"][0].__setitem__(6, "12"),
        lambda facts, layer: facts.update(status="passed, honestly"),
        lambda facts, layer: facts["counts"].pop("span_count"),
        lambda facts, layer: facts["counts"].update(cold_replay_count=-1),
    ],
    ids=[
        "no-layers",
        "unknown-mode",
        "ran-not-a-flag",
        "unknown-code",
        "line-not-a-number",
        "unknown-status",
        "a-count-missing",
        "a-negative-count",
    ],
)
def test_damaged_export_facts_in_the_status_file_mean_a_full_build(
    inputs: Path, tmp_path: Path, replayed: list[Path], damage: Any
) -> None:
    out = tmp_path / "site"
    build(inputs, out)
    status = out / incremental.STATUS_FILE
    data = json.loads(status.read_text("utf-8"))
    # A run and one of its layers with findings (the fixture's planted cases have some).
    facts, layer = next(
        (run["exports"], layer)
        for run in data["runs"]
        for layer in run["exports"]["layers"]
        if layer["findings"]
    )
    damage(facts, layer)
    status.write_text(json.dumps(data))
    replayed.clear()
    build(inputs, out)
    assert len(replayed) == 2


def test_export_facts_read_back_from_the_status_file_are_those_made(
    inputs: Path, tmp_path: Path
) -> None:
    first = build(inputs, tmp_path / "site")
    again = build(inputs, tmp_path / "site")  # every run reused: its facts read back
    assert again.reused == 2
    assert again.exports == first.exports
    assert {facts.headline for facts in again.exports.values()} == {
        run.headline for run in first.runs
    }


def test_a_missing_page_of_a_reused_run_means_it_is_rebuilt(
    inputs: Path, tmp_path: Path, replayed: list[Path]
) -> None:
    out = tmp_path / "site"
    build(inputs, out)
    before = tree(out)
    (out / "runs" / "exported_bundle" / "result.json").unlink()
    replayed.clear()
    build(inputs, out)
    assert [p.name for p in replayed] == ["exported_bundle"]
    assert tree(out) == before


def test_a_status_file_naming_files_outside_the_run_is_not_trusted(
    inputs: Path, tmp_path: Path, replayed: list[Path]
) -> None:
    out = tmp_path / "site"
    build(inputs, out)
    before = tree(out)
    outside = tmp_path / "secret.txt"
    outside.write_text("not part of any site\n")
    status = out / incremental.STATUS_FILE
    data = json.loads(status.read_text("utf-8"))
    for entry in data["runs"]:
        entry["files"].append("runs/" + entry["name"] + "/../../../secret.txt")
    status.write_text(json.dumps(data))
    replayed.clear()
    build(inputs, out)
    assert len(replayed) == 2
    assert tree(out) == before


def test_a_run_whose_files_change_while_it_is_built_is_replayed_next_time(
    inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hash read a file before an edit and the replay after it: never reuse that run.

    Otherwise the status file would file the new pages under the old bytes, and a later
    build would reuse pages the inputs it hashed never gave.
    """
    real_keys = incremental.hash_runs

    def hash_then_edit(runs: Any) -> Any:
        hashed = real_keys(runs)
        with edit_json(inputs / "first_wave" / "policy_verdicts.json") as data:
            data["policy_verdicts"][0]["decision_reason_ref"] = "reason:changed"
        return hashed

    monkeypatch.setattr(incremental, "hash_runs", hash_then_edit)
    said: list[str] = []
    out = tmp_path / "site"
    build_site(BuildConfig((inputs,), out, cwd=inputs.parent, progress=said.append, jobs=1))
    assert [line for line in said if "changed while this build read them" in line] == [
        "runs/first_wave: 1 input file changed while this build read them; its pages show "
        "what was replayed, and the next build replays it again"
    ]
    status = json.loads((out / incremental.STATUS_FILE).read_bytes())
    keys = {run["name"]: run["inputs_sha256"] for run in status["runs"]}
    assert keys["first_wave"] == incremental.UNSETTLED
    assert keys["exported_bundle"] == incremental.inputs_digests(inputs / "exported_bundle")[0]

    monkeypatch.undo()
    result = build(inputs, out)
    assert result.reused == 1  # the bundle; first_wave is replayed from its edited bytes
    clean = tmp_path / "clean"
    build(inputs, clean)
    assert tree(out) == tree(clean)


def test_each_files_digest_comes_with_the_folders_hash(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.json").write_bytes(b"alpha")
    (folder / "sub" / "b.json").write_bytes(b"beta")
    (folder / "link.json").symlink_to(folder / "a.json")
    (folder / "out.json").symlink_to(tmp_path)
    _, files = incremental.inputs_digests(folder)

    def sha(data: bytes) -> str:
        return "sha256:" + hashlib.sha256(data).hexdigest()

    assert files == {
        "a.json": sha(b"alpha"),
        "sub/b.json": sha(b"beta"),
        "link.json": sha(b"alpha"),  # a symlink to a file of the folder reads as that file
    }
    assert incremental.changed_while_built(files, {"a.json": sha(b"alpha")}) == 0
    assert incremental.changed_while_built(files, {"a.json": sha(b"other")}) == 1
    assert incremental.changed_while_built(files, {"gone.json": sha(b"alpha")}) == 1
