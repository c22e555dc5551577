"""A file swapped or grown between its checks and its reading is refused, not read.

The checks on an input path (where it resolves, what kind of file, how large) hold for
the file that was there when they ran. These tests swap the file at the last moment, just
before ``os.open``: for a symlink out of the bundle, another file, a FIFO (which would
block a plain read forever), and a file that grows while it is read.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sandbox_replay.checks import source_modules
from sandbox_replay.checks.pipeline import Replay, ReplayConfig, replay
from sandbox_replay.load import files as loader
from sandbox_replay.load.files import FileChangedError, read_same_file
from sandbox_replay.load.run import InputMode
from sandbox_replay.model import codes
from sandbox_replay.records.build import build_records
from sandbox_replay.report import incremental, views
from sandbox_replay.report.discover import discover
from sandbox_replay.report.incremental import inputs_digests
from sandbox_replay.report.views.input_files import highlighted

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "fixtures" / "bundles" / "exported_bundle"
SECRET = "OUTSIDE_FILE_CONTENT_swapped_in_7731"


pytestmark = pytest.mark.usefixtures("no_hang")  # conftest: a blocked read fails the test


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return Path(shutil.copytree(BUNDLE, tmp_path / "bundle"))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside.json"
    target.write_text(json.dumps({"action_requests": [{"request_id": SECRET}]}))
    return target


def swap_before_open(
    monkeypatch: pytest.MonkeyPatch, victim: Path, swap: Callable[[Path], None]
) -> list[Path]:
    """Run ``swap(victim)`` once, right before ``victim`` is opened; return what was swapped."""
    real_open = os.open
    swapped: list[Path] = []

    def opening(path: object, flags: int, *args: object) -> int:
        if Path(str(path)) == victim.resolve() and not swapped:
            swap(victim)
            swapped.append(victim)
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(loader.os, "open", opening)
    return swapped


def to_symlink(target: Path) -> Callable[[Path], None]:
    def swap(victim: Path) -> None:
        victim.unlink()
        victim.symlink_to(target)

    return swap


def to_other_file(victim: Path) -> None:
    other = victim.with_name(victim.name + ".other")
    other.write_bytes(victim.read_bytes())
    os.replace(other, victim)


def to_fifo(victim: Path) -> None:
    victim.unlink()
    os.mkfifo(victim)


def findings(outcome: Replay, code: str) -> list[str]:
    return [f.message for f in outcome.findings if f.error_code == code]


@pytest.mark.parametrize(
    ("swap", "said"),
    [
        ("symlink", "was replaced by a symlink before it was opened"),
        ("other", "was replaced by another file before it was opened"),
        ("fifo", "is no longer a regular file"),
    ],
)
def test_an_input_file_swapped_before_it_is_opened_is_refused(
    bundle: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, swap: str, said: str
) -> None:
    victim = bundle / "action_requests.json"
    swaps = {"symlink": to_symlink(outside), "other": to_other_file, "fifo": to_fifo}
    swapped = swap_before_open(monkeypatch, victim, swaps[swap])
    outcome = replay(ReplayConfig(bundle, InputMode.BUNDLE))
    assert swapped == [victim]
    assert outcome.status == "blocked"
    assert findings(outcome, codes.INPUT_FILE_UNREADABLE) == [
        f"action_requests.json {said}; it was not used"
    ]
    assert SECRET.encode() not in build_records(outcome).result_bytes


def test_a_source_module_body_swapped_for_a_symlink_is_not_read(
    bundle: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = bundle / "source_modules" / "policy" / "policy_table.json"
    swapped = swap_before_open(monkeypatch, victim, to_symlink(outside))
    outcome = replay(ReplayConfig(bundle, InputMode.BUNDLE))
    assert swapped == [victim]
    messages = findings(outcome, codes.SOURCE_MODULE_TARGET_MISSING)
    assert len(messages) == 1
    assert messages[0].endswith(
        "body was replaced by a symlink before it was opened; it was not used"
    )
    assert outcome.modules is not None and outcome.modules.status == "blocked"
    assert SECRET.encode() not in build_records(outcome).result_bytes


def test_a_module_body_is_read_once_for_its_digest_and_its_scan(
    bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan sees the very bytes whose digest was checked: no second read to swap."""
    read: list[Path] = []

    def read_once(path: Path, *args: Any) -> bytes:
        read.append(path)
        return read_same_file(path, *args)

    monkeypatch.setattr(source_modules, "read_same_file", read_once)
    outcome = replay(ReplayConfig(bundle, InputMode.BUNDLE))
    assert outcome.modules is not None and outcome.modules.bodies
    assert len(read) == len(set(read)) == len(outcome.modules.bodies)
    assert outcome.scan.files_scanned == 9 + len(outcome.modules.bodies)


def test_read_same_file_reads_the_file_it_was_given(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    assert read_same_file(path, path.stat(), 100) == b"0123456789"


def test_a_file_grown_past_the_limit_after_its_check_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    inspected = path.stat()
    with path.open("ab") as more:
        more.write(b"x" * 100)
    with pytest.raises(FileChangedError, match="grew past the limit of 50 bytes"):
        read_same_file(path, inspected, 50)


def test_a_file_that_grows_while_it_is_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    inspected = path.stat()
    real_fstat = os.fstat

    def fstat_then_grow(fd: int) -> os.stat_result:
        seen = real_fstat(fd)
        with path.open("ab") as more:  # the writer wins the race after the fstat
            more.write(b"y" * 5)
        return seen

    monkeypatch.setattr(loader.os, "fstat", fstat_then_grow)
    with pytest.raises(FileChangedError, match="changed size while it was read"):
        read_same_file(path, inspected, 100)


@pytest.fixture
def shown(bundle: Path) -> Callable[[str], tuple[object, str]]:
    """Replay the bundle, then return what its run page would show of an input file."""
    run = discover([bundle], bundle.parent).runs[0]
    outcome = replay(ReplayConfig(run.path, run.mode))
    records = build_records(outcome)
    slugs = views.index_run(run, outcome, records, "now", "0").slugs
    infos = {info.path: info for info in outcome.inputs}
    return lambda path: highlighted(run.path, infos[path], slugs[path], set())


def test_the_run_page_shows_an_input_file_unchanged_since_its_replay(
    bundle: Path, shown: Callable[[str], tuple[object, str]]
) -> None:
    html, notice = shown("bundle_manifest.json")
    assert html is not None and notice == ""


@pytest.mark.parametrize(
    ("swap", "notice"),
    [
        ("fifo", "Not shown: the file changed after it was replayed."),
        ("symlink", "Not shown: the file changed after it was replayed."),
        ("edited", "Not shown: the file changed after it was replayed."),
        ("huge", "Not shown: the file changed after it was replayed."),
        ("gone", "Not shown: the file could not be read again."),
    ],
)
def test_the_run_page_withholds_an_input_file_swapped_after_its_replay(
    bundle: Path,
    outside: Path,
    shown: Callable[[str], tuple[object, str]],
    swap: str,
    notice: str,
) -> None:
    victim = bundle / "bundle_manifest.json"
    if swap == "fifo":
        to_fifo(victim)
    elif swap == "symlink":
        to_symlink(outside)(victim)
    elif swap == "edited":
        victim.write_bytes(victim.read_bytes().replace(b"{", b"{ ", 1))
    elif swap == "huge":
        victim.write_bytes(b" " * (views.MAX_SHOWN_BYTES + 1))
    else:
        victim.unlink()
    assert shown("bundle_manifest.json") == (None, notice)


def test_a_run_folders_hash_follows_no_symlink_and_waits_on_no_fifo(bundle: Path) -> None:
    plain = inputs_digests(bundle)[0]
    (bundle / "zeros").symlink_to("/dev/zero")
    os.mkfifo(bundle / "pipe")
    (bundle / "pipe-link").symlink_to(bundle / "pipe")
    linked = inputs_digests(bundle)[0]  # returns: nothing endless was read
    assert linked != plain
    (bundle / "zeros").unlink()
    (bundle / "zeros").symlink_to("/dev/null")
    assert inputs_digests(bundle)[0] != linked  # a retargeted symlink is a change


def test_a_run_folders_hash_of_plain_files_is_their_paths_and_bytes(bundle: Path) -> None:
    """The same digest as before symlinks were hashed apart: earlier status files still match."""
    digest = hashlib.sha256()
    for path in sorted(bundle.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(bundle).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    assert inputs_digests(bundle)[0] == digest.hexdigest()


def test_a_file_swapped_for_a_fifo_while_hashed_counts_as_unreadable(
    bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = bundle / "bundle_manifest.json"
    before = inputs_digests(bundle)[0]
    real_open = os.open

    def opening(path: object, flags: int, *args: object) -> int:
        if Path(str(path)) == victim and victim.is_file():
            to_fifo(victim)
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(incremental.os, "open", opening)
    assert inputs_digests(bundle)[0] != before
