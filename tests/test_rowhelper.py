"""The helper process that serialises the copied row lists (``rowhelper``).

Whatever the helper does, the record must be byte for byte the one built in-process; a
list the helper got wrong, or that this process cannot prove it got right, is built here.
Small read pieces and batches put every cut of the streaming reader to work.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import EXPORTED_BUNDLE, FIRST_WAVE, REPO, SCENARIOS, copy_fixture
from sandbox_replay import rowhelper
from sandbox_replay.atomic import dump_json, encoded_list_chunks, json_chunks, list_chunks
from sandbox_replay.cli import app
from sandbox_replay.inputs import (
    ACTION_REQUESTS,
    COLD_REPLAY,
    POLICY_VERDICTS,
    SIDE_EFFECT_RECEIPTS,
    InputMode,
)
from sandbox_replay.loader import LoadLimits
from sandbox_replay.pipeline import ReplayConfig, replay
from sandbox_replay.policy import default_table, parse_table
from sandbox_replay.records import (
    COPIED_LISTS,
    MAX_TEXT,
    RESULT_FILE,
    RunRecords,
    build_records,
)

sys.path.insert(0, str(REPO / "benchmarks"))

from generate_bundle import generate

HELPED = rowhelper.HELPED_LISTS  # the record's lists the helper can make


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Use the helper on every input, reading 5 bytes and cutting 3 rows at a time."""
    monkeypatch.setattr(rowhelper, "HELPER_MIN_BYTES", 0)
    monkeypatch.setattr(rowhelper, "_READ_SIZE", 5)
    monkeypatch.setattr(rowhelper, "_BATCH_ROWS", 3)


def _record(records: RunRecords) -> bytes:
    return b"".join(records.result_chunks())


def _with_helper(root: Path, tmp_path: Path, mode: InputMode) -> tuple[bytes, bytes, int]:
    """Replay ``root`` with a helper it has finished; return the record built here, the
    record written with the helper, and how many lists came from it."""
    helper = rowhelper.RowListHelper.start(root, LoadLimits(), tmp_path)
    assert helper is not None
    try:
        outcome = replay(ReplayConfig(root, mode))
        records = build_records(outcome)
        _wait_for_reports(helper)
        helped = helper.attach(records, outcome)
        return _record(records), _record(helped), helper.used
    finally:
        helper.close()


def _wait_for_reports(helper: rowhelper.RowListHelper, lists: int = len(HELPED)) -> None:
    """Wait until the helper reported its first ``lists`` lists (or 60 s pass)."""
    deadline = time.monotonic() + 60
    while len(HELPED_SET.intersection(helper._reported)) < lists and time.monotonic() < deadline:
        helper._read_reports()
        time.sleep(0.01)


HELPED_SET = frozenset(HELPED)


def _traces(root: Path, tmp_path: Path, mode: InputMode) -> tuple[Any, Any, bytes | None]:
    """Replay ``root`` twice, the second time taking the spans' input digests from a
    helper that has finished; return both traces and what the helper gave."""
    own = replay(ReplayConfig(root, mode)).trace
    helper = rowhelper.RowListHelper.start(root, LoadLimits(), tmp_path)
    assert helper is not None
    given: list[bytes | None] = []

    def made(run: Any) -> bytes | None:
        given.append(helper.input_digests(run))
        return given[-1]

    try:
        _wait_for_reports(helper)  # the digests are reported before the verdict rows
        helped = replay(ReplayConfig(root, mode, made_digests=made)).trace
    finally:
        helper.close()
    assert len(given) == 1
    return own, helped, given[0]


def _same_trace(own: Any, helped: Any) -> None:
    assert list(helped.spans) == list(own.spans)
    assert helped.summary == own.summary
    assert helped.audit.findings == own.audit.findings


def test_the_helpers_input_digests_are_the_traces_own_in_span_order(tmp_path: Path) -> None:
    """Rows out of span order and a repeated request id: each span takes its first row's."""
    bundle = tmp_path / "bundle"
    generate(bundle, 40, seed=5, failing_fraction=0.2)

    def shuffle(rows: list[dict[str, Any]]) -> None:
        rows.reverse()
        rows.append(dict(rows[3], normalized_action_ref="action:a_later_row_with_its_id"))

    _edit_rows(bundle / ACTION_REQUESTS, "action_requests", shuffle)
    own, helped, given = _traces(bundle, tmp_path, InputMode.BUNDLE)
    assert given is not None and len(given) == 32 * 41
    _same_trace(own, helped)
    first = [span["input_digest"] for span in own.spans]
    assert first != sorted(first)  # not in file order: the helper's were picked by index


@pytest.mark.parametrize("case", ["not_text", "changed", "scenario"])
def test_input_digests_the_helper_cannot_vouch_for_are_made_here(case: str, tmp_path: Path) -> None:
    bundle = copy_fixture(tmp_path, "bundles/exported_bundle")
    if case == "not_text":

        def unset(rows: list[dict[str, Any]]) -> None:
            rows[1]["risk_class"] = None  # the trace digests it as JSON null

        _edit_rows(bundle / ACTION_REQUESTS, "action_requests", unset)
        own, helped, given = _traces(bundle, tmp_path, InputMode.BUNDLE)
        assert given is None
        _same_trace(own, helped)
        return
    if case == "scenario":
        own, helped, given = _traces(sorted(SCENARIOS.iterdir())[0], tmp_path, InputMode.BUNDLE)
        assert given is not None
        _same_trace(own, helped)
        return
    helper = rowhelper.RowListHelper.start(bundle, LoadLimits(), tmp_path)
    assert helper is not None
    try:
        _wait_for_reports(helper)

        def change(rows: list[dict[str, Any]]) -> None:  # as many rows, other bytes
            rows[0]["risk_class"] = "changed_after_the_helper_read_it"

        _edit_rows(bundle / ACTION_REQUESTS, "action_requests", change)
        outcome = replay(ReplayConfig(bundle, InputMode.BUNDLE, made_digests=helper.input_digests))
        assert helper.input_digests(outcome.run) is None
    finally:
        helper.close()
    _same_trace(replay(ReplayConfig(bundle, InputMode.BUNDLE)).trace, outcome.trace)


@pytest.mark.parametrize(
    ("folder", "mode"),
    [
        (FIRST_WAVE, InputMode.FIXTURE),
        (EXPORTED_BUNDLE, InputMode.BUNDLE),
        *((path, InputMode.BUNDLE) for path in sorted(SCENARIOS.iterdir())),
    ],
    ids=lambda value: getattr(value, "name", str(value)),
)
def test_the_helpers_lists_are_the_records_own_bytes(
    folder: Path, mode: InputMode, tmp_path: Path
) -> None:
    built, helped, used = _with_helper(folder, tmp_path, mode)
    assert helped == built
    assert used == len(HELPED)


def test_a_generated_bundle_with_failing_rows_is_copied_whole(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    generate(bundle, 300, seed=3, failing_fraction=0.3)
    built, helped, used = _with_helper(bundle, tmp_path, InputMode.BUNDLE)
    assert helped == built
    assert used == len(HELPED)


@pytest.mark.parametrize(
    ("read_size", "batch_rows"),
    [(1 << 20, 3), (1 << 20, 64), (1 << 20, 1 << 20), (4096, 7), (333, 2)],
)
def test_batches_of_any_size_cut_from_pieces_of_any_size_give_the_same_record(
    read_size: int, batch_rows: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether a piece read holds a few rows' ends or hundreds (cut ``_BATCH_ROWS`` at a
    time, at the n-th "{"), or a batch is every row the pieces have ended so far."""
    monkeypatch.setattr(rowhelper, "_READ_SIZE", read_size)
    monkeypatch.setattr(rowhelper, "_BATCH_ROWS", batch_rows)
    bundle = tmp_path / "bundle"
    generate(bundle, 200, seed=9, failing_fraction=0.2)
    built, helped, used = _with_helper(bundle, tmp_path, InputMode.BUNDLE)
    assert helped == built
    assert used == len(HELPED)


def _restyle(path: Path, **dump: Any) -> None:
    path.write_text(json.dumps(json.loads(path.read_text("utf-8")), **dump), "utf-8")


@pytest.mark.parametrize(
    "style",
    [{}, {"indent": 1}, {"indent": "\t"}, {"indent": 2, "ensure_ascii": False}],
    ids=["one-line", "indent-1", "tabs", "indent-2-utf8"],
)
def test_any_layout_of_a_plain_file_gives_the_same_lines_and_rows(
    style: dict[str, Any], tmp_path: Path
) -> None:
    bundle = tmp_path / "bundle"
    generate(bundle, 40, seed=5, failing_fraction=0.2)
    for _, name, _ in COPIED_LISTS:
        _restyle(bundle / name, **style)
    text = (bundle / ACTION_REQUESTS).read_text("utf-8").replace("\n", "\r\n")
    (bundle / ACTION_REQUESTS).write_text(text, "utf-8", newline="")
    built, helped, used = _with_helper(bundle, tmp_path, InputMode.BUNDLE)
    assert helped == built
    assert used == len(HELPED)


def _edit_rows(path: Path, key: str, edit: Any) -> None:
    data = json.loads(path.read_text("utf-8"))
    edit(data[key])
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False), "utf-8")


def test_rows_this_process_cannot_prove_are_built_here(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    generate(bundle, 30, seed=2, failing_fraction=0.2)

    def brace_and_text(rows: list[dict[str, Any]]) -> None:
        rows[4]["agent_ref"] = "agent:{not a row}"  # a "{" in a string: more cuts than rows
        rows[5]["risk_class"] = "é" * 600  # cut at 512 characters, escaped on output

    def a_float(rows: list[dict[str, Any]]) -> None:
        rows[1]["approval_ref"] = 1e-07  # the standard library writes 1e-07, orjson 1e-7

    _edit_rows(bundle / ACTION_REQUESTS, "action_requests", brace_and_text)
    _edit_rows(bundle / POLICY_VERDICTS, "policy_verdicts", a_float)
    built, helped, used = _with_helper(bundle, tmp_path, InputMode.BUNDLE)
    assert helped == built
    assert used == len(HELPED) - 3  # the request and verdict rows, and the derived rows


@pytest.mark.parametrize(
    "edit",
    [
        ('"request_id"', '"request_id": "twice", '),  # a duplicate key: the file is refused
        ('"action_requests"', '"note": "a second key", '),  # loaded row by row
    ],
    ids=["refused", "row-by-row"],
)
def test_a_file_not_loaded_by_the_fast_path_is_built_here(
    edit: tuple[str, str], tmp_path: Path
) -> None:
    bundle = copy_fixture(tmp_path, "bundles/exported_bundle")
    path = bundle / ACTION_REQUESTS
    text = path.read_text("utf-8")
    at = text.index(edit[0])
    path.write_text(text[:at] + edit[1] + text[at:], "utf-8")
    built, helped, used = _with_helper(bundle, tmp_path, InputMode.BUNDLE)
    assert helped == built
    assert used == len(HELPED) - 2  # the request rows, and the rows derived of them


def test_a_file_changed_after_the_helper_read_it_is_built_here(tmp_path: Path) -> None:
    bundle = copy_fixture(tmp_path, "bundles/exported_bundle")
    helper = rowhelper.RowListHelper.start(bundle, LoadLimits(), tmp_path)
    assert helper is not None
    try:
        _wait_for_reports(helper)  # it has read every file

        def change(rows: list[dict[str, Any]]) -> None:  # as many rows, other bytes
            rows[0]["risk_class"] = "changed_after_the_helper_read_it"

        _edit_rows(bundle / ACTION_REQUESTS, "action_requests", change)
        outcome = replay(ReplayConfig(bundle, InputMode.BUNDLE))
        records = build_records(outcome)
        written = _record(helper.attach(records, outcome))
    finally:
        helper.close()
    assert helper.used == len(HELPED) - 2  # the request rows, and the rows derived of them
    assert written == _record(records)
    assert b"changed_after_the_helper_read_it" in written


def test_nothing_is_taken_from_the_helper_when_the_scan_matched(tmp_path: Path) -> None:
    bundle = copy_fixture(tmp_path, "bundles/exported_bundle")
    fake_key = "AK" + "IA" + "SRXFAKE" + "QWERTY789"  # matched: the record is redacted

    def plant(rows: list[dict[str, Any]]) -> None:
        rows[0]["agent_ref"] = fake_key

    _edit_rows(bundle / ACTION_REQUESTS, "action_requests", plant)
    built, helped, used = _with_helper(bundle, tmp_path, InputMode.BUNDLE)
    assert used == 0
    assert helped == built
    assert fake_key.encode() not in helped


def test_the_hostile_bundle_gives_the_same_record(tmp_path: Path) -> None:
    built, helped, _ = _with_helper(REPO / "tests/data/hostile_bundle", tmp_path, InputMode.BUNDLE)
    assert helped == built


def test_a_helper_that_died_leaves_every_list_to_this_process(tmp_path: Path) -> None:
    helper = rowhelper.RowListHelper.start(EXPORTED_BUNDLE, LoadLimits(), tmp_path)
    assert helper is not None
    try:
        assert helper._pid is not None
        os.kill(helper._pid, signal.SIGKILL)
        outcome = replay(ReplayConfig(EXPORTED_BUNDLE, InputMode.BUNDLE))
        records = build_records(outcome)
        written = _record(helper.attach(records, outcome))
    finally:
        helper.close()
    assert helper.used == 0
    assert written == _record(records)


def _hold_back(monkeypatch: pytest.MonkeyPatch, held: str, until: Path) -> None:
    """Have the helper (forked after this) wait before the list of file ``held`` until
    ``until`` exists."""
    serialise = rowhelper._serialise

    def held_back(root: Path, name: str, *rest: Any, **named: Any) -> tuple[str, int]:
        while name == held and not until.exists():
            time.sleep(0.01)
        return serialise(root, name, *rest, **named)

    monkeypatch.setattr(rowhelper, "_serialise", held_back)


def test_lists_the_helper_has_not_reported_are_built_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hold_back(monkeypatch, SIDE_EFFECT_RECEIPTS, tmp_path / "never")  # never reported
    helper = rowhelper.RowListHelper.start(EXPORTED_BUNDLE, LoadLimits(), tmp_path)
    assert helper is not None
    try:
        _wait_for_reports(helper, 3)  # request, verdict and derived rows
        outcome = replay(ReplayConfig(EXPORTED_BUNDLE, InputMode.BUNDLE))
        records = build_records(outcome)
        written = _record(helper.attach(records, outcome))
    finally:
        helper.close()
    assert written == _record(records)
    assert helper.used == 3  # the list it was late with, and the ones after, built here
    assert helper._pid is None  # closing stopped the helper


def test_lists_reported_after_a_late_one_are_still_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go_on = tmp_path / "go-on"
    _hold_back(monkeypatch, ACTION_REQUESTS, go_on)
    helper = rowhelper.RowListHelper.start(EXPORTED_BUNDLE, LoadLimits(), tmp_path)
    assert helper is not None
    try:
        outcome = replay(ReplayConfig(EXPORTED_BUNDLE, InputMode.BUNDLE))
        records = build_records(outcome)
        helped = helper.attach(records, outcome)
        first = bytes(b"".join(helped.verbatim["request_rows"].pieces()))  # late: built here
        go_on.touch()
        _wait_for_reports(helper)
        written = _record(helped)
    finally:
        helper.close()
    assert written == _record(records)
    assert first in written
    assert helper.used == len(HELPED) - 1


def _cold_replay_rows() -> int:
    return len(json.loads((EXPORTED_BUNDLE / COLD_REPLAY).read_text())["cold_replay"])


def test_a_list_the_helper_is_making_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper has begun the last list and finishes it 0.5 s after the record asks for
    it, well within the time building it here is allowed: the record waits and takes it."""
    go_on = tmp_path / "go-on"
    _hold_back(monkeypatch, COLD_REPLAY, go_on)
    monkeypatch.setattr(rowhelper, "_OWN_SECONDS_PER_ROW", 60 / _cold_replay_rows())
    helper = rowhelper.RowListHelper.start(EXPORTED_BUNDLE, LoadLimits(), tmp_path)
    assert helper is not None
    try:
        _wait_for_reports(helper, len(HELPED) - 1)  # all but the cold replay rows
        outcome = replay(ReplayConfig(EXPORTED_BUNDLE, InputMode.BUNDLE))
        records = build_records(outcome)
        helped = helper.attach(records, outcome)
        release = threading.Timer(0.5, go_on.touch)
        started = time.monotonic()
        release.start()
        written = _record(helped)
        waited = time.monotonic() - started
    finally:
        release.cancel()
        helper.close()
    assert written == _record(records)
    assert helper.used == len(HELPED)
    assert 0.4 < waited < 30


def test_a_list_the_helper_is_stuck_on_is_waited_for_no_longer_than_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hold_back(monkeypatch, COLD_REPLAY, tmp_path / "never")
    monkeypatch.setattr(rowhelper, "_OWN_SECONDS_PER_ROW", 0.4 / _cold_replay_rows())
    helper = rowhelper.RowListHelper.start(EXPORTED_BUNDLE, LoadLimits(), tmp_path)
    assert helper is not None
    try:
        _wait_for_reports(helper, len(HELPED) - 1)
        outcome = replay(ReplayConfig(EXPORTED_BUNDLE, InputMode.BUNDLE))
        records = build_records(outcome)
        started = time.monotonic()
        written = _record(helper.attach(records, outcome))
        waited = time.monotonic() - started
    finally:
        helper.close()
    assert written == _record(records)
    assert helper.used == len(HELPED) - 1  # the cold replay rows were built here
    assert 0.35 < waited < 10


def test_the_helper_shares_how_many_rows_of_each_list_it_has_made(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    generate(bundle, 40, seed=2)  # 3 rows a batch: many batches a list
    helper = rowhelper.RowListHelper.start(bundle, LoadLimits(), tmp_path)
    assert helper is not None and helper._progress is not None
    try:
        _wait_for_reports(helper)
        made = {key: helper._progress.get(key) for key in HELPED}
        reported = {key: getattr(helper._reported.get(key), "rows", None) for key in HELPED}
    finally:
        helper.close()
    assert made == reported
    assert all(rows and rows > 3 for rows in made.values())


class _FakeProgress:
    """Progress as the helper would share it: ``start`` rows (None: not begun), then
    ``step`` more at each look."""

    def __init__(self, start: int | None, step: int = 0) -> None:
        self.start = start
        self.step = step
        self.looks = 0

    def get(self, key: str) -> int | None:
        self.looks += 1
        return None if self.start is None else self.start + self.step * self.looks

    def close(self) -> None:
        pass


def _pipe_helper(progress: _FakeProgress) -> tuple[rowhelper.RowListHelper, int]:
    """Return a helper object whose reports come down a pipe this test writes, and its
    write end: the helper is this test."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    spool = os.open(os.devnull, os.O_RDONLY)
    helper = rowhelper.RowListHelper(os.getpid(), read_end, spool, progress)
    helper._pid = None  # nothing to stop
    return helper, write_end


def _time_await(
    helper: rowhelper.RowListHelper,
    key: str,
    rows: int,
    bound: float,
    monkeypatch: pytest.MonkeyPatch,
) -> float:
    """Return how long ``_await`` waits for ``key``, allowed ``bound`` seconds for its rows."""
    monkeypatch.setattr(rowhelper, "_OWN_SECONDS_PER_ROW", bound / rows)
    started = time.monotonic()
    helper._await(key, rows)
    return time.monotonic() - started


def test_a_list_the_helper_has_not_begun_is_not_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    helper, write_end = _pipe_helper(_FakeProgress(None))
    try:
        assert _time_await(helper, "cold_replay_rows", 1000, 100.0, monkeypatch) < 1
    finally:
        os.close(write_end)
        helper.close()


def test_a_helper_too_slow_to_beat_building_here_is_not_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One row per look (every 10 ms) leaves 9,999 rows: 100 s at that pace, against 2 s
    allowed. The wait ends at the first look that shows the pace."""
    progress = _FakeProgress(0, step=1)
    helper, write_end = _pipe_helper(progress)
    try:
        assert _time_await(helper, "cold_replay_rows", 10_000, 2.0, monkeypatch) < 1
    finally:
        os.close(write_end)
        helper.close()
    assert progress.looks >= 2


def _loaded(rows: int, fast: bool) -> Any:
    """A loaded file as ``_proven`` reads one: parsed by the fast path or not."""
    return SimpleNamespace(
        ok=True, rows_are_flat=fast, may_hold_floats=False, rows=[{}] * rows, sha256="x"
    )


def test_a_list_that_could_not_be_used_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file not parsed by the fast path cannot take the helper's list: the record does
    not wait for it (nor for derived rows made of such a file), begun or not."""
    helper, write_end = _pipe_helper(_FakeProgress(5))  # begun, and stuck
    monkeypatch.setattr(rowhelper, "_OWN_SECONDS_PER_ROW", 20.0 / 1000)  # 20 s allowed
    try:
        started = time.monotonic()
        assert helper._copied("cold_replay_rows", 1000, _loaded(1000, fast=False)) is None
        run = SimpleNamespace(
            files={name: _loaded(1000, fast=False) for _, name, _ in COPIED_LISTS}
        )
        assert helper._derived(1000, run) is None  # type: ignore[arg-type]
        assert time.monotonic() - started < 5
        waited = threading.Timer(0.3, os.close, (write_end,))  # the helper exits in 0.3 s
        waited.start()
        started = time.monotonic()
        assert helper._copied("cold_replay_rows", 1000, _loaded(1000, fast=True)) is None
        waited.join()
        assert 0.2 < time.monotonic() - started < 10  # a usable file's list is waited for
    finally:
        helper.close()


def test_the_wait_ends_when_the_list_is_reported_or_the_helper_exits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    helper, write_end = _pipe_helper(_FakeProgress(5))  # begun, and stuck: no pace to read
    line = json.dumps(["rollback_rows", "sha256:0", 10, 0, 0]).encode() + b"\n"
    report = threading.Timer(0.3, os.write, (write_end, line))
    exits = threading.Timer(0.3, os.close, (write_end,))
    try:
        report.start()
        waited = _time_await(helper, "rollback_rows", 1000, 100.0, monkeypatch)
        assert "rollback_rows" in helper._reported
        assert 0.2 < waited < 10
        report.join()
        exits.start()
        waited = _time_await(helper, "cold_replay_rows", 1000, 100.0, monkeypatch)
        exits.join()
        assert "cold_replay_rows" not in helper._reported
        assert 0.2 < waited < 10
    finally:
        report.cancel()
        if not exits.is_alive() and not exits.finished.is_set():
            os.close(write_end)
        helper.close()


def test_records_read_after_close_build_their_lists_here(tmp_path: Path) -> None:
    helper = rowhelper.RowListHelper.start(EXPORTED_BUNDLE, LoadLimits(), tmp_path)
    assert helper is not None
    try:
        _wait_for_reports(helper)
        outcome = replay(ReplayConfig(EXPORTED_BUNDLE, InputMode.BUNDLE))
        records = build_records(outcome)
        helped = helper.attach(records, outcome)
        first = _record(helped)
    finally:
        helper.close()
    with open(tmp_path / "reuses-a-closed-fd", "wb"):  # may take the closed fd number
        assert _record(helped) == first == _record(records)
    assert helper.used == len(HELPED)


def test_closing_twice_leaves_descriptors_now_used_by_other_files_open(tmp_path: Path) -> None:
    helper = rowhelper.RowListHelper.start(EXPORTED_BUNDLE, LoadLimits(), tmp_path)
    assert helper is not None
    helper.close()
    # Opened after the first close, these take the helper's freed descriptor numbers.
    others = [os.open(tmp_path / f"other-{n}", os.O_WRONLY | os.O_CREAT) for n in range(2)]
    try:
        helper.close()
        for fd in others:
            os.fstat(fd)  # still open
    finally:
        for fd in others:
            os.close(fd)


def test_small_runs_and_one_cpu_get_no_helper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rowhelper, "HELPER_MIN_BYTES", 10**9)
    assert rowhelper.RowListHelper.start(EXPORTED_BUNDLE, LoadLimits(), tmp_path) is None
    monkeypatch.setattr(rowhelper, "HELPER_MIN_BYTES", 0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert rowhelper.RowListHelper.start(EXPORTED_BUNDLE, LoadLimits(), tmp_path) is None
    assert list(tmp_path.iterdir()) == []  # the spool is made only for a helper


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's")
def test_the_helper_runs_only_on_idle_cpu_time() -> None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the child reports through the pipe)
        try:
            rowhelper._run_when_idle()
            os.write(write_end, str(os.sched_getscheduler(0)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    policy = os.read(read_end, 64)
    os.close(read_end)
    os.waitpid(pid, 0)
    assert int(policy) == os.SCHED_IDLE


def test_the_reader_stops_at_the_size_the_file_had_when_opened() -> None:
    text = b'{"rows": [\n  {"request_id": "a"},\n  {"request_id": "b"}\n]}\n'
    fields = ("request_id",)
    reader = rowhelper._RowReader(io.BytesIO(text), len(text), "f.json", fields)
    rows = [row for batch in reader.batches() for row in json.loads(batch)]
    assert rows == [{"request_id": "a", "line": 2}, {"request_id": "b", "line": 3}]
    assert reader.rows == 2
    grown = rowhelper._RowReader(io.BytesIO(text), len(text) - 1, "f.json", fields)
    with pytest.raises(rowhelper._Unusable):
        list(grown.batches())


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_the_cli_writes_the_same_records_with_and_without_the_helper(tmp_path: Path) -> None:
    alone = _cli("run", "-i", str(FIRST_WAVE), "-o", str(tmp_path / "alone"), "--jobs", "1")
    helped = _cli("run", "-i", str(FIRST_WAVE), "-o", str(tmp_path / "helped"))
    assert alone.exit_code == helped.exit_code == 0
    assert "came from the helper process" not in alone.output
    # How many lists the helper had ready in time varies; the records do not.
    assert re.search(r"[0-6] of 6 row lists came from the helper process", helped.output)
    for name in (RESULT_FILE,):
        assert (tmp_path / "alone" / name).read_bytes() == (tmp_path / "helped" / name).read_bytes()
    # Only the records: the helper's temporary file is gone with it.
    assert sorted(p.name for p in (tmp_path / "helped").iterdir()) == sorted(
        p.name for p in (tmp_path / "alone").iterdir()
    )


def test_the_cli_refuses_jobs_below_one(tmp_path: Path) -> None:
    result = _cli("run-sandbox-bundle", "-i", str(EXPORTED_BUNDLE), "-o", str(tmp_path), "-j", "0")
    assert result.exit_code == 2
    assert "--jobs must be at least 1" in result.output
    assert "replaying" not in result.output  # refused before any work


def _batched(items: list[Any], cuts: list[int]) -> Iterator[list[Any]]:
    edges = [0, *sorted(c % (len(items) + 1) for c in cuts), len(items)]
    return (items[a:b] for a, b in pairwise(edges))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.sampled_from("abc"), st.integers() | st.text(max_size=3), max_size=3),
        max_size=12,
    ),
    st.lists(st.integers(min_value=0, max_value=20), max_size=5),
    st.integers(min_value=0, max_value=3),
)
def test_a_list_in_batches_reads_as_the_whole_list(
    items: list[Any], cuts: list[int], depth: int
) -> None:
    whole = dump_json(_nest({"rows": items}, depth), may_hold_floats=False)
    head, tail = dump_json(_nest({"rows": "@@"}, depth)).split(b'"@@"')
    pieces = list_chunks(_batched(items, cuts), depth + 1, may_hold_floats=False)
    assert head + b"".join(pieces) + tail == whole


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from("abc"),
            st.integers()
            | st.booleans()
            | st.none()
            | st.text(st.characters(max_codepoint=126))
            | st.lists(st.text(st.characters(max_codepoint=126), max_size=3), max_size=3),
            max_size=3,
        ),
        max_size=12,
    ),
    st.lists(st.integers(min_value=0, max_value=20), max_size=5),
    st.integers(min_value=0, max_value=3),
)
def test_a_list_in_serialised_batches_reads_as_the_whole_list(
    items: list[Any], cuts: list[int], depth: int
) -> None:
    """The helper's layout of compact batches gives the record's dump (ASCII but DEL)."""
    whole = dump_json(_nest({"rows": items}, depth), may_hold_floats=False)
    head, tail = dump_json(_nest({"rows": "@@"}, depth)).split(b'"@@"')
    batches = (msgspec.json.encode(batch) for batch in _batched(items, cuts))
    pieces = encoded_list_chunks(batches, depth + 1)
    assert head + b"".join(pieces) + tail == whole


def test_a_serialised_batch_with_text_the_record_escapes_is_refused() -> None:
    for text in ("caf\u00e9", "\x7f"):
        with pytest.raises(ValueError, match="escapes"):
            list(encoded_list_chunks([msgspec.json.encode([{"a": text}])], 1))


def _read_rows(text: bytes, fields: tuple[str, ...]) -> list[Any]:
    reader = rowhelper._RowReader(io.BytesIO(text), len(text), "f.json", fields)
    return [row for batch in reader.batches() for row in json.loads(batch)]


@pytest.mark.parametrize(
    ("value", "copied"),
    [
        ("x" * MAX_TEXT, True),
        ("x" * (MAX_TEXT + 1), False),  # the record truncates it
        ("\n" * MAX_TEXT, True),  # escaped, longer than the limit in bytes only
        (["x"] * 64, True),
        (["x"] * 65, False),  # the record shows "<list>"
        (["x" * (MAX_TEXT + 1)], False),
        ([1], False),
        (1.5, False),  # a float: the record's own dump writes it
        (2**70, True),
        (-0, True),
        ([], True),
        (None, True),
        (False, True),
        ("caf\u00e9", False),  # the record escapes non-ASCII
        ("\x7f", False),
    ],
    ids=lambda value: repr(value)[:24],
)
def test_the_reader_copies_a_value_only_as_the_record_keeps_it(value: Any, copied: bool) -> None:
    """A value ``records._scalar`` changes, or the record writes escaped, is left to the record."""
    row = {"request_id": "a", "extra": [1, [True, "x" * 600]], "line": "own"}  # both skipped
    text = json.dumps({"rows": [{**row, "v": value}]}, indent=2).encode()
    fields = ("v", "request_id", "absent")
    if copied:
        assert _read_rows(text, fields) == [{"v": value, "request_id": "a", "line": 3}]
    else:
        with pytest.raises(rowhelper._Unusable):
            _read_rows(text, fields)


def _nest(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = {"in": value}
    return value


_RULES = list(default_table().rules.values())[:2]
_MISSING = object()  # a field the row leaves out


def _pool(*values: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from([*values, _MISSING, None, True, 1, ["x", "y"]])


_REQUEST_ROWS = st.lists(
    st.fixed_dictionaries(
        {
            "request_id": _pool("r1", "r2", "r3"),
            "risk_class": _pool(*(rule.risk_class for rule in _RULES), "unknown"),
            "action_kind": _pool(*(rule.action_kind for rule in _RULES)),
            "requested_capability": _pool(*(rule.requested_capability for rule in _RULES)),
            "source_trust_label": _pool(*(rule.source_trust_label for rule in _RULES)),
        }
    ),
    min_size=1,
    max_size=8,
)
_VERDICT_ROWS = st.lists(
    st.fixed_dictionaries(
        {
            "request_id": _pool("r1", "r2", "r3", "r4"),
            "verdict": _pool("allow", "block", "review"),
            "rule_refs": _pool(*([rule.rule_ref] for rule in _RULES), []),
        }
    ),
    max_size=8,
)


def _write_rows(path: Path, key: str, rows: list[dict[str, Any]]) -> None:
    present = [{k: v for k, v in row.items() if v is not _MISSING} for row in rows]
    path.write_text(json.dumps({key: present}, indent=2), "utf-8")


def _request(request_id: Any, rule: Any, **changed: Any) -> dict[str, Any]:
    fields = ("risk_class", "action_kind", "requested_capability", "source_trust_label")
    return {"request_id": request_id, **{f: getattr(rule, f) for f in fields}, **changed}


@settings(max_examples=60, deadline=None)
@given(requests=_REQUEST_ROWS, verdicts=_VERDICT_ROWS)
@example(  # the cases that matter, whatever the search draws
    requests=[
        _request("r1", _RULES[0]),
        _request("r1", _RULES[1]),  # a later row of the same id: not derived
        _request("r2", _RULES[0], action_kind=True),
        _request("r3", _RULES[0], action_kind=1),  # equal to True as a key, not as a row
        _request(7, _RULES[0]),
        _request("r4", _RULES[1], risk_class=["x"], source_trust_label=_MISSING),
    ],
    verdicts=[
        {"request_id": "r1", "verdict": "block", "rule_refs": []},
        {"request_id": "r1", "verdict": "allow", "rule_refs": [_RULES[0].rule_ref]},  # later
        {"request_id": "r2", "verdict": "block", "rule_refs": [_RULES[0].rule_ref]},
        {"request_id": "r3", "verdict": _MISSING, "rule_refs": None},
        {"request_id": "r9", "verdict": "allow", "rule_refs": []},  # no such request
    ],
)
def test_the_helpers_derived_rows_are_the_records_own(
    requests: list[dict[str, Any]], verdicts: list[dict[str, Any]], tmp_path_factory: Any
) -> None:
    """Duplicate, missing and non-string ids, missing fields, True against 1, lists: the
    derived rows the helper makes of the two files are the bytes the record builds."""
    bundle = tmp_path_factory.mktemp("bundle")
    generate(bundle, 6, seed=1)
    _write_rows(bundle / ACTION_REQUESTS, "action_requests", requests)
    _write_rows(bundle / POLICY_VERDICTS, "policy_verdicts", verdicts)
    derived = rowhelper._DerivedRows(default_table())
    with open(os.devnull, "wb") as sink:
        spool = rowhelper._Spool(sink.fileno())
        for key, name, fields in COPIED_LISTS[:2]:
            seen = derived.take_requests if key == "request_rows" else derived.take_verdicts
            rowhelper._serialise(bundle, name, fields, LoadLimits(), spool, seen=seen)
    pieces = encoded_list_chunks(derived._batches(), 1)
    records = build_records(replay(ReplayConfig(bundle, InputMode.BUNDLE)))
    listed = records.result["derived_policy_verdict_rows"]
    assert b"".join(pieces) == b"".join(json_chunks(listed, 1, may_hold_floats=False))


def test_derived_rows_under_another_table_are_built_here(tmp_path: Path) -> None:
    table = parse_table(
        json.loads((REPO / "src/sandbox_replay/data/policy_table.json").read_text())
    )
    helper = rowhelper.RowListHelper.start(EXPORTED_BUNDLE, LoadLimits(), tmp_path)
    assert helper is not None
    try:
        _wait_for_reports(helper)
        outcome = replay(ReplayConfig(EXPORTED_BUNDLE, InputMode.BUNDLE, table=table))
        records = build_records(outcome)
        written = _record(helper.attach(records, outcome))
    finally:
        helper.close()
    assert written == _record(records)
    assert helper.used == len(HELPED) - 1
