"""``build`` discovery under attack (issue #28, items 4 and 13).

A folder that may hold a run and is not replayed (hidden, a symbolic link, unreadable,
too deep) must be named on stderr and in the summary line, and must fail
``--fail-on blocked`` unless ``--exclude`` names it; a very deep tree must not crash the
walk.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import FIRST_WAVE, SCENARIOS, working_directory
from sandbox_replay.cli import app
from sandbox_replay.report.discover import MAX_DEPTH

BLOCKED = SCENARIOS / "missing_verdict_row"
DEEP = 1_100


def build(*options: str) -> Any:
    return CliRunner().invoke(app, ["build", "runs", "--out", "site", "--jobs", "1", *options])


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Path]:
    """A ``runs`` folder holding one passing run, with the test's cwd at its parent."""
    shutil.copytree(FIRST_WAVE, tmp_path / "runs" / "first_wave")
    with working_directory(tmp_path):
        yield tmp_path / "runs"


def assert_gate(shown: str, reason: str, built_runs: int = 1) -> None:
    """The folder is named, counted as skipped, fails the gate, and --exclude accepts it."""
    runs = f"{built_runs} run" + ("" if built_runs == 1 else "s")
    gated = build("--fail-on", "blocked")
    assert gated.exit_code == 1, gated.output
    assert f"skipped {shown} ({reason})" in gated.output
    assert f"({runs}, 0 blocked, 1 skipped," in gated.output
    # Without the gate the site is still built, and still says so.
    plain = build()
    assert plain.exit_code == 0, plain.output
    assert f"skipped {shown} ({reason})" in plain.output
    accepted = build("--fail-on", "blocked", "--exclude", shown)
    assert accepted.exit_code == 0, accepted.output
    assert f"excluded {shown} ({reason}): not replayed, as --exclude {shown} asks" in (
        accepted.output
    )
    assert f"({runs}, 0 blocked, 0 skipped, 1 excluded," in accepted.output


def test_a_blocked_run_in_a_dot_folder_fails_the_gate(runs: Path) -> None:
    shutil.copytree(BLOCKED, runs / ".episode_17")
    (runs / ".git" / "objects").mkdir(parents=True)  # hidden, but holds no run: not reported
    assert_gate("runs/.episode_17", "a run in a hidden folder")
    assert ".git" not in build().output
    assert not (runs.parent / "site" / "runs" / "episode_17").exists()
    assert (runs.parent / "site" / "runs" / "first_wave" / "index.html").is_file()


def test_a_build_finding_only_hidden_runs_names_them(tmp_path: Path) -> None:
    shutil.copytree(BLOCKED, tmp_path / "runs" / ".episode_17")
    with working_directory(tmp_path):
        refused = build("--fail-on", "blocked")
    assert refused.exit_code == 2, refused.output
    assert "not replayed: runs/.episode_17 (a run in a hidden folder)" in refused.output


def test_a_run_below_a_dot_folder_is_found_and_a_glob_excludes_it(runs: Path) -> None:
    shutil.copytree(BLOCKED, runs / ".archive" / "2024" / "episode_17")
    gated = build("--fail-on", "blocked")
    assert gated.exit_code == 1, gated.output
    assert "skipped runs/.archive/2024/episode_17 (a run in a hidden folder)" in gated.output
    # A pattern naming a folder above it accepts it, as does a glob.
    for pattern in ("runs/.archive", "runs/.*", "./runs/.archive/"):
        accepted = build("--fail-on", "blocked", "--exclude", pattern)
        assert accepted.exit_code == 0, (pattern, accepted.output)
        assert "excluded runs/.archive/2024/episode_17" in accepted.output
    # A pattern naming something else does not.
    other = build("--fail-on", "blocked", "--exclude", "runs/.arch")
    assert other.exit_code == 1, other.output


def test_a_symlinked_run_folder_is_not_followed_and_fails_the_gate(
    runs: Path, tmp_path: Path
) -> None:
    shutil.copytree(BLOCKED, tmp_path / "elsewhere" / "episode_17")
    (runs / "episode_17").symlink_to(tmp_path / "elsewhere" / "episode_17")
    assert_gate("runs/episode_17", "a symbolic link, not followed")
    assert not (tmp_path / "site" / "runs" / "episode_17").exists()


def test_a_symlink_to_a_folder_of_runs_fails_the_gate(runs: Path, tmp_path: Path) -> None:
    shutil.copytree(BLOCKED, tmp_path / "elsewhere" / "episode_17")
    (runs / "more").symlink_to(tmp_path / "elsewhere")
    assert_gate("runs/more", "a symbolic link, not followed")


def test_an_unreadable_folder_fails_the_gate(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Simulated, so the test also holds as root, for whom chmod 000 blocks nothing.
    shutil.copytree(BLOCKED, runs / "locked")
    real_scandir = os.scandir
    locked = os.path.abspath(runs / "locked")

    def scandir(path: Any = ".") -> Any:
        if isinstance(path, (str, os.PathLike)) and os.path.abspath(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert_gate("runs/locked", "cannot be read: Permission denied")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 folder anyway")
def test_a_chmod_000_folder_fails_the_gate(runs: Path) -> None:
    shutil.copytree(BLOCKED, runs / "locked")
    (runs / "locked").chmod(0)
    try:
        assert_gate("runs/locked", "cannot be read: Permission denied")
    finally:
        (runs / "locked").chmod(0o755)


def test_a_skipped_folder_name_is_made_visible_on_one_line(runs: Path) -> None:
    shutil.copytree(BLOCKED, runs / ".ep\x1b[2J\u202e17")
    gated = build("--fail-on", "blocked")
    assert gated.exit_code == 1, gated.output
    line = next(line for line in gated.output.splitlines() if "skipped runs/" in line)
    assert "runs/.ep<U+001B>[2J<U+202E>17 (a run in a hidden folder)" in line
    assert "\x1b" not in gated.output
    assert "\u202e" not in gated.output


@contextmanager
def deep_tree(root: Path, levels: int) -> Iterator[None]:
    """Make ``levels`` nested folders ``d`` under ``root`` (by folder handle, so no path
    grows past PATH_MAX), and remove them afterwards without recursion."""
    root.mkdir()
    handles = [os.open(root, os.O_RDONLY)]
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=handles[-1])
            handles.append(os.open("d", os.O_RDONLY, dir_fd=handles[-1]))
        yield
    finally:
        while len(handles) > 1:
            os.close(handles.pop())
            os.rmdir("d", dir_fd=handles[-1])
        os.close(handles.pop())


def test_a_tree_1100_levels_deep_does_not_crash_discovery(runs: Path) -> None:
    with deep_tree(runs / "deep", DEEP):
        shown = "runs/deep" + "/d" * MAX_DEPTH
        assert_gate(shown, f"more than {MAX_DEPTH} levels deep")
        site = runs.parent / "site"
        assert (site / "runs" / "first_wave" / "index.html").is_file()
        # Excluding the top of the tree accepts what lies below it.
        accepted = build("--fail-on", "blocked", "--exclude", "runs/deep")
        assert accepted.exit_code == 0, accepted.output


def test_a_run_within_the_depth_limit_is_built(runs: Path) -> None:
    folder = runs.joinpath(*["d"] * (MAX_DEPTH - 1), "episode_17")
    shutil.copytree(BLOCKED, folder)
    built = build("--fail-on", "blocked")
    assert built.exit_code == 1, built.output
    assert "(2 runs, 1 blocked, 0 skipped," in built.output
    assert (runs.parent / "site" / "runs" / "episode_17" / "index.html").is_file()
