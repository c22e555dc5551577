"""Attacks on ``verify`` through the paths a site's manifest records (issue #46, part 2).

A hostile site names paths on the reviewer's machine: absolute, climbing with ``..``,
through a symbolic link inside the inputs root that leads out, into /proc, or at a FIFO.
Each is refused before anything is opened (exit 2, one ``refused:`` line a path), and
the answer is the same whether the file outside exists, has the recorded digest or not.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import FIRST_WAVE
from sandbox_replay.cli import app
from sandbox_replay.report.build import MANIFEST, BuildConfig, build_site
from sandbox_replay.report.confine import refusal, resolve_inside
from sandbox_replay.report.verify import VerifyConfig, VerifyReport, verify_site

RUN = "first_wave"
OUTSIDE = "the root's sibling 'outside', holding a copy of the run's inputs"
ZERO = "sha256:" + "0" * 64


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the inputs root (inputs/, with runs/ and the site) and outside/."""
    top = tmp_path_factory.mktemp("confine")
    root = top / "inputs"
    shutil.copytree(FIRST_WAVE, root / "runs" / RUN)
    build_site(
        BuildConfig((root / "runs",), root / "site", cwd=root, progress=lambda _: None, jobs=1)
    )
    return top


@pytest.fixture
def top(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "top"
    shutil.copytree(built, copy, symlinks=True)
    return copy


def _manifest(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / "site" / MANIFEST).read_bytes())
    return data


def _write(root: Path, manifest: dict[str, Any]) -> None:
    (root / "site" / MANIFEST).write_text(json.dumps(manifest))


def _point_run_at(root: Path, source: str) -> None:
    manifest = _manifest(root)
    manifest["runs"][0]["source_path"] = source
    _write(root, manifest)


def _check(root: Path) -> VerifyReport:
    return verify_site(VerifyConfig(root / "site", root, progress=lambda _: None, jobs=1))


@pytest.fixture
def looked_at(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """Record every path verify stats, opens, lists or reads a link of, as the call sees it.

    ``lstat`` and ``readlink`` look at a link itself, so its folder is what they reach.
    """
    seen: list[Path] = []
    for name in ("stat", "lstat", "open", "readlink", "scandir", "listdir"):
        real = getattr(os, name)
        own = name in ("lstat", "readlink")

        def spy(
            path: Any, *args: Any, _real: Callable[..., Any] = real, _own: bool = own, **kw: Any
        ) -> Any:
            if isinstance(path, str | os.PathLike):
                where = Path(os.path.abspath(os.fspath(path)))
                seen.append(where.parent if _own else where)
            return _real(path, *args, **kw)

        monkeypatch.setattr(os, name, spy)
    real_open = io.open

    def spy_open(path: Any, *args: Any, **kw: Any) -> Any:
        if isinstance(path, str | os.PathLike):
            seen.append(Path(os.path.abspath(os.fspath(path))))
        return real_open(path, *args, **kw)

    monkeypatch.setattr(io, "open", spy_open)
    monkeypatch.setattr(builtins, "open", spy_open)
    yield seen


def _assert_nothing_outside_looked_at(top: Path, looked_at: list[Path]) -> None:
    seen = list(looked_at)  # resolving below is looked at too
    outside = (top / "outside").resolve()
    assert [p for p in seen if p.resolve().is_relative_to(outside)] == []


# ---------------------------------------------------------------------------------------
# the run's source path


def _absolute(top: Path) -> str:
    return str(top / "outside")


def _climbing(top: Path) -> str:
    return "../outside"


def _climbing_through_runs(top: Path) -> str:
    return "runs/../../outside"


def _backslash(top: Path) -> str:
    return "runs\\first_wave"


def _link_out_absolute(top: Path) -> str:
    (top / "inputs" / "runs" / "escape").symlink_to(top / "outside", target_is_directory=True)
    return "runs/escape"


def _link_out_relative(top: Path) -> str:
    (top / "inputs" / "runs" / "escape").symlink_to("../../outside", target_is_directory=True)
    return "runs/escape"


def _link_out_and_back(top: Path) -> str:
    # inputs/runs/hop -> outside/back -> inputs/runs/first_wave: the kernel's answer
    # would depend on a link outside the root, so the first hop out is refused.
    (top / "inputs" / "runs" / "hop").symlink_to(top / "outside" / "back")
    return "runs/hop"


def _link_climbing_past_a_missing_folder(top: Path) -> str:
    (top / "inputs" / "runs" / "up").symlink_to("../../outside/x/..")
    return "runs/up"


SOURCES: dict[str, Callable[[Path], str]] = {
    "absolute": _absolute,
    "climbing": _climbing,
    "climbing through runs/": _climbing_through_runs,
    "backslash": _backslash,
    "symlink out (absolute target)": _link_out_absolute,
    "symlink out (relative target)": _link_out_relative,
    "symlink out and back in": _link_out_and_back,
    "symlink climbing out": _link_climbing_past_a_missing_folder,
}


def _outside_missing(top: Path) -> None:
    pass


def _outside_same(top: Path) -> None:
    shutil.copytree(FIRST_WAVE, top / "outside")
    (top / "outside" / "back").symlink_to(top / "inputs" / "runs" / RUN)
    (top / "outside" / "x").mkdir()


def _outside_changed(top: Path) -> None:
    _outside_same(top)
    (top / "outside" / "cold_replay.json").write_text("{}\n")


OUTSIDE_STATES = {"missing": _outside_missing, "same": _outside_same, "changed": _outside_changed}


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_a_source_path_leaving_the_root_is_refused_unread(
    top: Path, kind: str, looked_at: list[Path]
) -> None:
    _outside_same(top)
    root = top / "inputs"
    source = SOURCES[kind](top)
    _point_run_at(root, source)
    looked_at.clear()
    report = _check(root)
    assert report.differences == report.refused
    assert report.refused == (
        f"manifest names a path outside the inputs root: {source} (run {RUN})",
    )
    assert report.files_checked == 0
    _assert_nothing_outside_looked_at(top, looked_at)


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_the_answer_is_the_same_whatever_lies_outside(
    built: Path, tmp_path: Path, kind: str
) -> None:
    answers = {}
    for state, make in OUTSIDE_STATES.items():
        top = tmp_path / state
        shutil.copytree(built, top, symlinks=True)
        make(top)
        root = top / "inputs"
        source = SOURCES[kind](top)
        _point_run_at(root, source)
        report = _check(root)
        shown = [line.replace(str(top), "TOP") for line in report.differences]
        answers[state] = (shown, report.files_checked, report.ok)
    assert answers["missing"] == answers["same"] == answers["changed"], answers


def test_without_confinement_the_copy_outside_would_have_verified(top: Path) -> None:
    # The leak the refusal closes: the same site, its inputs moved out, verifies from there.
    _outside_same(top)
    (top / "outside" / "back").unlink()
    shutil.rmtree(top / "outside" / "x")
    shutil.rmtree(top / "inputs" / "runs" / RUN)
    (top / "outside").rename(top / "inputs" / "runs" / RUN)
    assert _check(top / "inputs").ok


# ---------------------------------------------------------------------------------------
# the other recorded paths: input names, policy, map file, forbidden-classes table


def _input_named(name: str) -> Callable[[dict[str, Any], Path], str]:
    def doctor(manifest: dict[str, Any], top: Path) -> str:
        manifest["runs"][0]["input_digests"][name.format(top=top)] = ZERO
        return f"runs/{RUN}/{name.format(top=top)}"

    return doctor


def _input_linked_out(manifest: dict[str, Any], top: Path) -> str:
    link = top / "inputs" / "runs" / RUN / "cold_replay.json"
    link.unlink()
    link.symlink_to(top / "outside" / "cold_replay.json")
    return f"runs/{RUN}/cold_replay.json"


def _policy_at(path: str) -> Callable[[dict[str, Any], Path], str]:
    def doctor(manifest: dict[str, Any], top: Path) -> str:
        manifest["runs"][0]["policy"] = {"path": path.format(top=top), "sha256": ZERO}
        return path.format(top=top)

    return doctor


def _table_at(path: str) -> Callable[[dict[str, Any], Path], str]:
    def doctor(manifest: dict[str, Any], top: Path) -> str:
        manifest["forbidden_classes"] = {"path": path.format(top=top), "sha256": ZERO}
        return path.format(top=top)

    return doctor


def _map_at(path: str) -> Callable[[dict[str, Any], Path], str]:
    def doctor(manifest: dict[str, Any], top: Path) -> str:
        manifest["inspect_import"] = {"map": {"path": path.format(top=top), "sha256": ZERO}}
        return path.format(top=top)

    return doctor


RECORDED: dict[str, tuple[Callable[[dict[str, Any], Path], str], str]] = {
    "input, absolute": (_input_named("{top}/outside/secret"), f"run {RUN}"),
    "input linked out": (_input_linked_out, f"run {RUN}"),
    "policy, absolute": (_policy_at("{top}/outside/policy.json"), f"policy of run {RUN}"),
    "policy, climbing": (_policy_at("../outside/policy.json"), f"policy of run {RUN}"),
    "policy in /proc": (_policy_at("/proc/self/environ"), f"policy of run {RUN}"),
    "table, climbing": (_table_at("../outside/table.json"), "forbidden-classes table"),
    "table, backslash": (_table_at("..\\outside\\table.json"), "forbidden-classes table"),
    "map, absolute": (_map_at("{top}/outside/map.json"), "Inspect AI map file"),
}


@pytest.mark.parametrize("kind", sorted(RECORDED))
def test_every_recorded_path_is_confined(top: Path, kind: str, looked_at: list[Path]) -> None:
    _outside_same(top)
    for name in ("secret", "policy.json", "table.json", "map.json"):
        (top / "outside" / name).write_text("{}\n")
    root = top / "inputs"
    doctor, owner = RECORDED[kind]
    manifest = _manifest(root)
    shown = doctor(manifest, top)
    _write(root, manifest)
    looked_at.clear()
    report = _check(root)
    expected = f"manifest names an input outside its run folder: {shown} ({owner})"
    if not kind.startswith("input, "):
        expected = f"manifest names a path outside the inputs root: {shown} ({owner})"
    assert report.refused == (expected,)
    _assert_nothing_outside_looked_at(top, looked_at)


def test_a_proc_path_is_refused_whatever_the_root(top: Path) -> None:
    root = top / "inputs"
    (root / "self").symlink_to("/proc/self")
    _point_run_at(root, "self")
    assert _check(root).refused == (
        f"manifest names a path outside the inputs root: self (run {RUN})",
    )
    # With / as the root, /proc lies inside it, and is refused as no regular file.
    for path in ("proc/self/environ", "proc/self", "dev/zero", "sys/kernel"):
        assert refusal(Path("/"), path) == "a path that is neither a regular file nor a folder"
    assert refusal(Path("/"), "/proc/self/environ") == "a path outside the inputs root"


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def test_fifos_are_refused_without_blocking(top: Path, no_hang: None) -> None:
    root = top / "inputs"
    _fifo(root / "runs" / RUN / "cold_replay.json")
    _fifo(root / "table.json")
    _fifo(root / "map.json")
    manifest = _manifest(root)
    manifest["forbidden_classes"] = {"path": "table.json", "sha256": ZERO}
    manifest["inspect_import"] = {"map": {"path": "map.json", "sha256": ZERO}}
    _write(root, manifest)
    why = "a path that is neither a regular file nor a folder"
    assert _check(root).refused == (
        f"manifest names {why}: runs/{RUN}/cold_replay.json (run {RUN})",
        f"manifest names {why}: table.json (forbidden-classes table)",
        f"manifest names {why}: map.json (Inspect AI map file)",
    )


def test_a_link_loop_is_refused_without_hanging(top: Path) -> None:
    root = top / "inputs"
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    _point_run_at(root, "a/x")
    assert _check(root).refused == (
        f"manifest names a path that is neither a regular file nor a folder: a/x (run {RUN})",
    )


# ---------------------------------------------------------------------------------------
# what stays allowed, and the command line


def test_links_that_stay_inside_the_root_are_followed(tmp_path: Path) -> None:
    root = (tmp_path / "root").resolve()
    (root / "real" / "deep").mkdir(parents=True)
    (root / "real" / "deep" / "f").write_text("x")
    (root / "rel").symlink_to("real/deep")
    (root / "abs").symlink_to(root / "real")
    (root / "real" / "up").symlink_to("../real/deep/f")
    assert resolve_inside(root, "rel/f") == root / "real" / "deep" / "f"
    assert resolve_inside(root, "abs/deep/f") == root / "real" / "deep" / "f"
    assert resolve_inside(root, "real/up") == root / "real" / "deep" / "f"
    assert resolve_inside(root, "missing/f") == root / "missing" / "f"
    assert refusal(root, "rel/f") is None and refusal(root, "missing/f") is None


def test_an_inputs_root_given_through_a_link_verifies(top: Path) -> None:
    (top / "link").symlink_to(top / "inputs", target_is_directory=True)
    report = verify_site(
        VerifyConfig(top / "inputs" / "site", top / "link", progress=lambda _: None, jobs=1)
    )
    assert report.ok, report.differences


def test_the_command_line_refuses_with_exit_2_and_an_escaped_path(
    top: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = top / "inputs"
    _point_run_at(root, "/etc/\x1b[31mred\nline")
    monkeypatch.chdir(root)
    done = CliRunner().invoke(app, ["verify", "site"])
    assert done.exit_code == 2, done.output
    assert done.stdout == (
        "refused: manifest names a path outside the inputs root: "
        f"/etc/<U+001B>[31mred line (run {RUN})\n"
    )
    assert "nothing was checked" in done.stderr


def test_a_digest_that_only_matches_outside_tells_nothing(top: Path) -> None:
    # The author records the digest of a file they guess is on the reviewer's machine.
    root = top / "inputs"
    secret = top / "outside" / "id_ed25519"
    secret.parent.mkdir()
    secret.write_bytes(b"PRIVATE KEY\n")
    digest = "sha256:" + hashlib.sha256(secret.read_bytes()).hexdigest()
    manifest = _manifest(root)
    manifest["runs"][0]["input_digests"] = {"id_ed25519": digest}
    manifest["runs"][0]["source_path"] = str(secret.parent)
    _write(root, manifest)
    guessed = _check(root)
    secret.write_bytes(b"ANOTHER KEY\n")
    wrong = _check(root)
    secret.unlink()
    gone = _check(root)
    assert guessed == wrong == gone
    assert guessed.refused and guessed.files_checked == 0
