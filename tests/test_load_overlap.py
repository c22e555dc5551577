"""Each file is digested and scanned on a thread while it is parsed; that changes nothing.

The reference is the serial order the loader kept before the overlap: read and digest,
show the bytes to the hook, then parse. Both must give the same digests, rows, findings
and scan report, the hook must see the files in the same order, and whatever the hook or
the parse raises must reach the caller as it did.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO
from sandbox_replay import inputs, scan
from sandbox_replay.inputs import BytesHook, InputMode, LoadedFile, load_run
from sandbox_replay.loader import LoadLimits, parse_input, read_input
from sandbox_replay.pipeline import ReplayConfig, replay
from sandbox_replay.policy import default_table
from sandbox_replay.scan import ForbiddenClassesError, ForbiddenScanner, load_forbidden_classes

HOSTILE = REPO / "tests" / "data" / "hostile_bundle"


def _serial_load(
    root: Path, name: str, key: str | None, limits: LoadLimits, on_bytes: BytesHook
) -> LoadedFile:
    """Load one file the way the loader did before the overlap."""
    raw, loaded = read_input(root, name, limits)
    if raw is None:
        return loaded
    on_bytes(name, raw)
    return parse_input(raw, loaded, key, limits)


def _token(index: int) -> str:
    return load_forbidden_classes()[index].tokens[0]


@pytest.fixture
def tainted(tmp_path: Path) -> Path:
    """The hostile bundle (escapes everywhere) with a token raw, one escaped, one file gone."""
    bundle = tmp_path / "bundle"
    shutil.copytree(HOSTILE, bundle)
    plain = _token(0)
    escaped = _token(1).replace("_", "\\u005f", 1)
    for name, anchor, planted in (
        ("action_requests.json", b'"episode_id": "ep_001', plain),
        ("policy_verdicts.json", b'"request_id": "req_secret_env_read', escaped),
    ):
        path = bundle / name
        raw = path.read_bytes()
        assert anchor in raw
        path.write_bytes(raw.replace(anchor, anchor + b" " + planted.encode(), 1))
    (bundle / "rollback_receipts.json").unlink()
    truncated = bundle / "cold_replay.json"
    truncated.write_bytes(truncated.read_bytes()[:-40])
    return bundle


def _outcome(bundle: Path) -> tuple[Any, ...]:
    result = replay(ReplayConfig(bundle, InputMode.BUNDLE))
    files = [
        (f.name, f.size, f.sha256, f.data, f.rows, f.row_lines, f.key_lines, f.findings)
        for f in result.run.all_files()
    ]
    scan = (result.scan, result.scan.matched_texts, result.scan.to_record())
    return files, scan, result.findings, result.inputs, result.passed


def test_overlapped_load_equals_the_serial_one(
    tainted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overlapped = _outcome(tainted)
    with monkeypatch.context() as patch:
        patch.setattr(inputs, "_load", _serial_load)
        serial = _outcome(tainted)
    assert overlapped == serial
    files, (scan, matched, _), *_ = overlapped
    raw_hit, escaped_hit = (c.class_id for c in load_forbidden_classes()[:2])
    assert {hit.class_id: hit.count for hit in scan.hits} == {raw_hit: 1, escaped_hit: 1}
    assert len(matched) == 2
    assert {name for name, _, sha256, *_ in files if not sha256} == {"rollback_receipts.json"}


def test_the_hook_sees_every_file_in_the_same_order(tainted: Path) -> None:
    def order(load: Any) -> list[tuple[str, int, str]]:
        seen: list[tuple[str, int, str]] = []

        def hook(name: str, raw: bytes) -> None:
            seen.append((name, len(raw), threading.current_thread().name))

        saved, inputs._load = inputs._load, load
        try:
            load_run(tainted, InputMode.BUNDLE, default_table(), LoadLimits(), None, hook)
        finally:
            inputs._load = saved
        return seen

    overlapped, serial = order(inputs._load), order(_serial_load)
    assert [entry[:2] for entry in overlapped] == [entry[:2] for entry in serial]
    assert len(overlapped) == len(list(tainted.glob("*.json")))
    assert {entry[2] for entry in overlapped} == {"sandbox-replay-scan"}


def test_a_files_threads_end_before_the_next_file_is_read(
    tainted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No two files' bytes are held at once: memory stays as it was serially."""
    reads: list[bool] = []
    names = {"sandbox-replay-scan", "sandbox-replay-digest"}

    def read(*args: Any, **kwargs: Any) -> Any:
        reads.append(any(t.name in names for t in threading.enumerate()))
        return read_input(*args, **kwargs)

    monkeypatch.setattr(inputs, "read_input", read)
    load_run(tainted, InputMode.BUNDLE, default_table(), LoadLimits())
    assert reads and not any(reads)


def test_an_error_in_the_hook_is_raised_as_it_was(tainted: Path) -> None:
    error = ValueError("hook failed")
    seen: list[str] = []

    def hook(name: str, raw: bytes) -> None:
        seen.append(name)
        if name == "policy_verdicts.json":
            raise error

    threads = threading.active_count()
    with pytest.raises(ValueError) as raised:
        load_run(tainted, InputMode.BUNDLE, default_table(), LoadLimits(), None, hook)
    assert raised.value is error
    assert seen[-1] == "policy_verdicts.json"
    assert threading.active_count() == threads


@pytest.mark.parametrize("hook_fails", [True, False])
def test_an_error_in_the_parse_waits_for_the_thread_and_loses_to_the_hooks(
    tainted: Path, monkeypatch: pytest.MonkeyPatch, hook_fails: bool
) -> None:
    """Serially the hook ran first, so its error is the one raised when both fail."""
    finished: list[str] = []

    def hook(name: str, raw: bytes) -> None:
        finished.append(name)
        if hook_fails:
            raise KeyError(name)

    def parse(*args: Any) -> LoadedFile:
        raise RuntimeError("parse failed")

    monkeypatch.setattr(inputs, "parse_input", parse)
    threads = threading.active_count()
    with pytest.raises(KeyError if hook_fails else RuntimeError):
        load_run(tainted, InputMode.BUNDLE, default_table(), LoadLimits(), None, hook)
    assert finished == ["action_requests.json"]
    assert threading.active_count() == threads


def test_the_packaged_scanner_compiles_on_a_thread_of_its_own(
    tainted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay starts loading while RE2 compiles; what it finds does not change."""
    compiled_on: list[str] = []
    real = scan._default_scanner

    def compile_default() -> ForbiddenScanner:
        compiled_on.append(threading.current_thread().name)
        return real()

    reference = replay(ReplayConfig(tainted, InputMode.BUNDLE, scanner=real()))
    monkeypatch.setattr(scan, "_default_scanner", compile_default)
    outcome = replay(ReplayConfig(tainted, InputMode.BUNDLE))
    assert compiled_on == ["sandbox-replay-compile"]
    assert outcome.scan == reference.scan and outcome.scan.hits
    assert outcome.findings == reference.findings
    assert not [t for t in threading.enumerate() if t.name == "sandbox-replay-compile"]


@pytest.mark.parametrize("folder", ["tainted", "empty"])
def test_an_error_compiling_the_scanner_reaches_the_caller(
    tainted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str
) -> None:
    """Raised where the scanner is first used: a file's scan, or the report if none loads."""
    error = ForbiddenClassesError("the packaged table is broken")

    def broken() -> ForbiddenScanner:
        raise error

    root = tainted if folder == "tainted" else tmp_path / "empty"
    root.mkdir(exist_ok=True)
    monkeypatch.setattr(scan, "_default_scanner", broken)
    with pytest.raises(ForbiddenClassesError) as raised:
        replay(ReplayConfig(root, InputMode.BUNDLE))
    assert raised.value is error
    assert not [t for t in threading.enumerate() if t.name.startswith("sandbox-replay-")]


def test_a_replay_that_fails_before_any_scan_waits_for_the_compile_thread(
    tainted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No thread outlives the replay (a fork after it must find none compiling)."""
    real = scan._default_scanner
    ended: list[bool] = []

    def slow_compile() -> ForbiddenScanner:
        time.sleep(0.3)
        ended.append(True)
        return real()

    def read(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(scan, "_default_scanner", slow_compile)
    monkeypatch.setattr(inputs, "read_input", read)
    with pytest.raises(RuntimeError, match="the disk went away"):
        replay(ReplayConfig(tainted, InputMode.BUNDLE))
    assert ended == [True]
    assert not [t for t in threading.enumerate() if t.name == "sandbox-replay-compile"]


def test_a_given_scanner_is_used_and_nothing_is_compiled(
    tainted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scanner = scan._default_scanner()

    def compile_default() -> ForbiddenScanner:
        raise AssertionError("the packaged scanner was compiled")

    monkeypatch.setattr(scan, "_default_scanner", compile_default)
    outcome = replay(ReplayConfig(tainted, InputMode.BUNDLE, scanner=scanner))
    assert outcome.scan.hits
