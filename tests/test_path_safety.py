"""Path safety: the bundle cannot make the validator open, or write, anything outside it.

A source-module ``path`` (or informational ``target_ref``) that is absolute, climbs with
``..`` or resolves through a symlink outside the bundle's ``source_modules/`` is refused
with SANDBOX_POLICY_SOURCE_MODULE_PATH_UNSAFE. "Never opened" is proven by recording
every file opening during the replay (builtins, io, os and pathlib). An input file that
is a symlink out of the input folder is refused with SANDBOX_POLICY_INPUT_PATH_OUTSIDE_ROOT.
Records land only under --out, and a planted symlink there is replaced, not followed.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sandbox_replay.checks.pipeline import Replay, ReplayConfig, replay
from sandbox_replay.cli import app
from sandbox_replay.load.run import CORE_FILES, InputMode
from sandbox_replay.model import codes

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "fixtures" / "bundles" / "exported_bundle"
FIXTURE = ROOT / "fixtures" / "first_wave"
MANIFEST = "source_module_manifest.json"
SECRET = "OUTSIDE_FILE_CONTENT_must_never_be_read_4471"


def make_bundle(folder: Path) -> Path:
    """Copy the built-in bundle, or build a minimal one from the fixture's core files."""
    if BUNDLE.is_dir():
        shutil.copytree(BUNDLE, folder)
        return folder
    folder.mkdir()
    for name in CORE_FILES:
        shutil.copy(FIXTURE / name, folder / name)
    body = folder / "source_modules" / "docs" / "note.md"
    body.parent.mkdir(parents=True)
    body.write_text("## What it checks\nA copied public body.\n")
    digest = "sha256:" + __import__("hashlib").sha256(body.read_bytes()).hexdigest()
    module = {
        "module_id": "module:note",
        "path": "source_modules/docs/note.md",
        "target_ref": "docs/note.md",
        "material_class": "public_macro_standard_body",
        "source_import_class": "copied_non_secret_macro_body",
        "body_copied": True,
        "body_in_receipt": False,
        "body_text_in_receipt": False,
        "sha256": digest,
        "source_sha256": digest,
        "target_sha256": digest,
        "required_anchors": ["## What it checks"],
    }
    (folder / MANIFEST).write_text(
        json.dumps(
            {
                "manifest_id": "source_modules:minimal",
                "source_import_class": "copied_non_secret_macro_body",
                "body_in_receipt": False,
                "body_text_in_receipt": False,
                "module_count": 1,
                "modules": [module],
            },
            indent=2,
        )
    )
    (folder / "bundle_manifest.json").write_text('{"bundle_id": "bundle:minimal"}')
    return folder


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    folder = make_bundle(tmp_path / "bundle")
    assert replay(ReplayConfig(folder, InputMode.BUNDLE)).status == "pass"
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the bundle whose opening the tests watch for."""
    target = tmp_path / "elsewhere" / "secret.md"
    target.parent.mkdir()
    target.write_text(f"## What it checks\n{SECRET}\n")
    return target


@contextmanager
def recorded_opens(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Record the resolved path of every file opened through the usual routes."""
    seen: list[str] = []

    def note(target: Any) -> None:
        if isinstance(target, str | bytes | os.PathLike):
            seen.append(os.path.realpath(os.fsdecode(target)))

    def wrap(func: Callable[..., Any]) -> Callable[..., Any]:
        def opener(file: Any, *args: Any, **kwargs: Any) -> Any:
            note(file)
            return func(file, *args, **kwargs)

        return opener

    def wrap_method(func: Callable[..., Any]) -> Callable[..., Any]:
        def method(self: Path, *args: Any, **kwargs: Any) -> Any:
            note(self)
            return func(self, *args, **kwargs)

        return method

    with monkeypatch.context() as patch:
        patch.setattr(builtins, "open", wrap(builtins.open))
        patch.setattr(io, "open", wrap(io.open))
        patch.setattr(os, "open", wrap(os.open))
        for name in ("open", "read_bytes", "read_text"):
            patch.setattr(Path, name, wrap_method(getattr(Path, name)))
        yield seen


def set_module(bundle: Path, **fields: Any) -> None:
    manifest = json.loads((bundle / MANIFEST).read_text())
    manifest["modules"][0].update(fields)
    (bundle / MANIFEST).write_text(json.dumps(manifest, indent=2))


def unsafe(outcome: Replay) -> list[str]:
    return [f.message for f in outcome.findings if f.error_code == codes.SOURCE_MODULE_PATH_UNSAFE]


def replay_watched(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Replay, list[str]]:
    with recorded_opens(monkeypatch) as seen:
        outcome = replay(ReplayConfig(bundle, InputMode.BUNDLE))
    return outcome, seen


def test_watcher_sees_a_module_being_read(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watcher is not blind: the declared body of a safe module shows up as opened."""
    manifest = json.loads((bundle / MANIFEST).read_text())
    body = os.path.realpath(bundle / manifest["modules"][0]["path"])
    outcome, seen = replay_watched(bundle, monkeypatch)
    assert outcome.status == "pass"
    assert body in seen


@pytest.mark.parametrize("how", ["absolute", "dotdot", "dotdot_inside", "not_under_modules"])
def test_unsafe_module_path_refused_and_not_opened(
    bundle: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    climb = os.path.relpath(outside, bundle / "source_modules")
    declared = {
        "absolute": str(outside),
        "dotdot": f"source_modules/{climb}",
        "dotdot_inside": "source_modules/../bundle_manifest.json",
        "not_under_modules": "bundle_manifest.json",
    }[how]
    set_module(bundle, path=declared)
    outcome, seen = replay_watched(bundle, monkeypatch)
    assert outcome.status == "blocked"
    assert len(unsafe(outcome)) == 1
    assert str(outside) not in seen
    if how == "dotdot_inside":  # the manifest is read as an input, but never as a module
        as_input = seen.count(os.path.realpath(bundle / "sandbox_policy.json"))
        assert seen.count(os.path.realpath(bundle / "bundle_manifest.json")) == as_input


def test_module_symlink_out_of_bundle_refused_and_not_opened(
    bundle: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    link = bundle / "source_modules" / "docs" / "linked.md"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside)
    set_module(bundle, path="source_modules/docs/linked.md")
    outcome, seen = replay_watched(bundle, monkeypatch)
    assert outcome.status == "blocked" and len(unsafe(outcome)) == 1
    assert str(outside) not in seen


def test_symlinked_folder_inside_modules_refused(
    bundle: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (bundle / "source_modules" / "away").symlink_to(outside.parent, target_is_directory=True)
    set_module(bundle, path="source_modules/away/secret.md")
    outcome, seen = replay_watched(bundle, monkeypatch)
    assert outcome.status == "blocked" and len(unsafe(outcome)) == 1
    assert str(outside) not in seen


def test_source_modules_folder_itself_linked_out_refused(
    bundle: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = json.loads((bundle / MANIFEST).read_text())
    shutil.rmtree(bundle / "source_modules")
    (bundle / "source_modules").symlink_to(outside.parent, target_is_directory=True)
    manifest["modules"] = manifest["modules"][:1]
    manifest["module_count"] = 1
    manifest["modules"][0]["path"] = "source_modules/secret.md"
    (bundle / MANIFEST).write_text(json.dumps(manifest))
    outcome, seen = replay_watched(bundle, monkeypatch)
    assert outcome.status == "blocked" and len(unsafe(outcome)) == 1
    assert str(outside) not in seen


@pytest.mark.parametrize("how", ["absolute", "dotdot", "empty"])
def test_unsafe_target_ref_refused_and_never_opened(
    bundle: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    declared = {
        "absolute": str(outside),
        "dotdot": f"../{os.path.relpath(outside, bundle.parent)}",
        "empty": "",
    }[how]
    set_module(bundle, target_ref=declared)
    outcome, seen = replay_watched(bundle, monkeypatch)
    assert outcome.status == "blocked" and len(unsafe(outcome)) == 1
    assert "target_ref" in unsafe(outcome)[0]
    assert str(outside) not in seen


def test_safe_target_ref_is_never_opened(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plausible target_ref that exists on disk relative to the bundle is still not read."""
    decoy = bundle / "docs" / "decoy.md"
    decoy.parent.mkdir()
    decoy.write_text(SECRET)
    set_module(bundle, target_ref="docs/decoy.md")
    outcome, seen = replay_watched(bundle, monkeypatch)
    assert outcome.status == "pass"
    assert os.path.realpath(decoy) not in seen


def test_unsafe_paths_never_reach_records(bundle: Path, outside: Path, tmp_path: Path) -> None:
    set_module(bundle, path=str(outside))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run-sandbox-bundle", "-i", str(bundle), "-o", str(out)])
    assert result.exit_code == 1
    for record in out.iterdir():
        assert SECRET not in record.read_text()


@pytest.mark.parametrize("name", ["action_requests.json", MANIFEST, "sandbox_policy.json"])
def test_input_symlink_out_of_folder_refused_and_not_opened(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    target = tmp_path / "elsewhere.json"
    shutil.copy(bundle / name, target)
    (bundle / name).unlink()
    (bundle / name).symlink_to(target)
    outcome, seen = replay_watched(bundle, monkeypatch)
    assert outcome.status == "blocked"
    outside_findings = [
        f for f in outcome.findings if f.error_code == codes.INPUT_PATH_OUTSIDE_ROOT
    ]
    assert [f.path for f in outside_findings] == [name]
    assert str(target) not in seen


def test_input_symlink_inside_folder_is_followed(bundle: Path) -> None:
    (bundle / "copies").mkdir()
    (bundle / "sandbox_policy.json").rename(bundle / "copies" / "sandbox_policy.json")
    (bundle / "sandbox_policy.json").symlink_to(bundle / "copies" / "sandbox_policy.json")
    assert replay(ReplayConfig(bundle, InputMode.BUNDLE)).status == "pass"


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.mark.parametrize("command", ["run", "run-sandbox-bundle"])
def test_records_are_written_only_under_out(
    tmp_path: Path, bundle: Path, outside: Path, command: str
) -> None:
    source = FIXTURE if command == "run" else bundle
    before = _snapshot(tmp_path)
    out = tmp_path / "results" / "out"
    result = CliRunner().invoke(app, [command, "-i", str(source), "-o", str(out)])
    assert result.exit_code == 0
    after = _snapshot(tmp_path)
    changed = {k for k in after if after[k] != before.get(k)} | (before.keys() - after.keys())
    assert changed and all(Path(tmp_path / k).is_relative_to(out) for k in changed)


def test_planted_symlink_in_out_is_replaced_not_followed(tmp_path: Path, outside: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    original = outside.read_bytes()
    result_name = "agent_sandbox_policy_escape_replay_result.json"
    (out / result_name).symlink_to(outside)
    result = CliRunner().invoke(app, ["run", "-i", str(FIXTURE), "-o", str(out)])
    assert result.exit_code == 0
    assert outside.read_bytes() == original
    assert not (out / result_name).is_symlink()
    assert json.loads((out / result_name).read_text())["status"] == "pass"
