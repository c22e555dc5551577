"""Shared helpers for tests: locate the built-in fixtures, copy them, replay a folder.

Import them directly (``from conftest import copy_fixture, replay_dir``); pytest puts
this folder on ``sys.path``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sandbox_replay import InputMode, Replay, ReplayConfig, RunRecords, build_records, replay
from sandbox_replay.model.policy import PolicyChoice, choose_policies, project_defaults

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
FIRST_WAVE = FIXTURES / "first_wave"
EXPORTED_BUNDLE = FIXTURES / "bundles" / "exported_bundle"
SCENARIOS = FIXTURES / "scenarios"


def copy_fixture(tmp_path: Path, name: str = "first_wave") -> Path:
    """Copy ``fixtures/<name>`` into ``tmp_path`` and return the copy's folder."""
    target = tmp_path / Path(name).name
    shutil.copytree(FIXTURES / name, target)
    return target


@functools.cache
def project_policies() -> PolicyChoice:
    """The policies ``make run`` replays the fixtures with (``[tool.sandbox-replay]``)."""
    return choose_policies(None, None, REPO)


@functools.cache
def project_sensitivity() -> bool:
    """Whether ``make run`` replays the seeded escapes (``[tool.sandbox-replay]``)."""
    return bool(project_defaults(REPO)["build"].get("sensitivity", False))


def replay_dir(path: Path, mode: InputMode = InputMode.FIXTURE) -> tuple[Replay, RunRecords]:
    """Replay ``path`` in ``mode`` and build its records, with the project's policy for it."""
    outcome = replay(ReplayConfig(path, mode, policy=project_policies().for_run(path)))
    return outcome, build_records(outcome)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text("utf-8"))


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", "utf-8")


def main_exit_code(monkeypatch: pytest.MonkeyPatch, replay: Any, *args: str) -> Any:
    """Run ``cli.main`` in this process with ``args`` and a stand-in for ``replay``; return
    its exit code. ``main`` tunes its process's collector: not this test process's."""
    import sys

    from sandbox_replay import cli as cli_module
    from sandbox_replay import runtime
    from sandbox_replay.report import run_folder

    monkeypatch.setattr(run_folder, "replay", replay)
    monkeypatch.setattr(sys, "argv", ["sandbox-replay", *args])
    monkeypatch.setattr(runtime, "tune_process", lambda *_: None)
    with pytest.raises(SystemExit) as exit_info:
        cli_module.main()
    return exit_info.value.code


@contextmanager
def working_directory(path: Path) -> Iterator[None]:
    """Run the block with ``path`` as the working directory, as a user in that folder would."""
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


@contextmanager
def edit_json(path: Path) -> Iterator[Any]:
    """Yield a JSON file's data for in-place edits, and write it back afterwards."""
    data = read_json(path)
    yield data
    write_json(path, data)


def twin_rows(folder: Path, original: str, twin: str) -> None:
    """Give ``original``'s request a twin: a copy of each of its rows under ``twin``'s name."""
    stem = original.removeprefix("req_")
    twin_stem = twin.removeprefix("req_")

    def renamed(value: Any) -> Any:
        return value.replace(stem, twin_stem) if isinstance(value, str) else value

    for name in (
        "action_requests",
        "policy_verdicts",
        "side_effect_receipts",
        "rollback_receipts",
        "cold_replay",
    ):
        with edit_json(folder / f"{name}.json") as data:
            rows = data[name]
            rows += [
                {key: renamed(value) for key, value in row.items()}
                for row in list(rows)
                if row.get("request_id") == original
            ]


def find_row(rows: list[dict[str, Any]], value: str, key: str = "request_id") -> dict[str, Any]:
    """Return the first row whose ``key`` is ``value``."""
    return next(row for row in rows if row.get(key) == value)


def codes_of(outcome: Replay) -> list[str]:
    """Return the sorted, unique finding codes of a replay."""
    return sorted({f.error_code for f in outcome.findings})


@pytest.fixture
def no_hang() -> Iterator[None]:
    """Turn a read that would block (a FIFO opened without O_NONBLOCK) into a failure."""
    previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("a read blocked"))
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
