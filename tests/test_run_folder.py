"""``report.run_folder``: the library side of ``run`` and ``run-sandbox-bundle``."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import EXPORTED_BUNDLE, FIRST_WAVE, SCENARIOS
from sandbox_replay import InputMode, ReplayConfig
from sandbox_replay.exports import ExportTargets
from sandbox_replay.report.run_folder import (
    RunFolderConfig,
    RunFolderError,
    check_out_file,
    finding_lines,
    replay_folder,
    summary_lines,
)


def _config(folder: Path, out: Path, **more: object) -> RunFolderConfig:
    return RunFolderConfig(ReplayConfig(folder, InputMode.FIXTURE), out, **more)  # type: ignore[arg-type]


def test_the_config_refuses_what_cannot_be_replayed_or_written(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    a_file = tmp_path / "file"
    a_file.write_text("x", "utf-8")
    with pytest.raises(RunFolderError, match=r"input folder .* does not exist"):
        _config(tmp_path / "nope", tmp_path / "out")
    with pytest.raises(RunFolderError, match="is not a folder"):
        _config(a_file, tmp_path / "out")
    with pytest.raises(RunFolderError, match="holds none of the seven core files"):
        _config(empty, tmp_path / "out")
    with pytest.raises(RunFolderError, match="exists and is not a folder"):
        _config(FIRST_WAVE, a_file)
    with pytest.raises(RunFolderError, match=r"lies under .*, which is a file"):
        _config(FIRST_WAVE, a_file / "out")
    with pytest.raises(RunFolderError, match=r"acceptance path .* is a folder, not a file"):
        _config(FIRST_WAVE, tmp_path / "out", acceptance_out=empty)
    with pytest.raises(RunFolderError, match=r"--markdown .* lies under"):
        check_out_file(a_file / "changes.md", "--markdown")


def test_a_replay_writes_its_records_and_exports(tmp_path: Path) -> None:
    said: list[str] = []
    replayed = ReplayConfig(EXPORTED_BUNDLE, InputMode.BUNDLE, progress=said.append)
    sarif = tmp_path / "run.sarif"
    done = replay_folder(RunFolderConfig(replayed, tmp_path / "out", targets=ExportTargets(sarif)))
    assert done.outcome.passed
    assert sarif in done.written and sarif.is_file()
    assert all(path.is_file() for path in done.written)
    assert said[0] == f"replaying {EXPORTED_BUNDLE} (bundle mode)"
    assert summary_lines(done.records, lambda text, limit: str(text))[0].startswith("status: pass")


def test_a_path_that_cannot_be_written_is_a_run_folder_error(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("x", "utf-8")
    config = _config(FIRST_WAVE, tmp_path / "out", targets=ExportTargets(blocker / "run.sarif"))
    with pytest.raises(RunFolderError, match="cannot write"):
        replay_folder(config)


def test_findings_past_the_limit_are_counted_not_listed(tmp_path: Path) -> None:
    done = replay_folder(_config(SCENARIOS / "missing_verdict_row", tmp_path / "out"))
    every = finding_lines(done.records.result, "in", lambda text, limit: str(text), None)
    assert len(every) >= 2
    capped = finding_lines(done.records.result, "in", lambda text, limit: str(text), 1)
    assert capped == [
        every[0],
        f"... and {len(every) - 1} more in the result record (-v lists all)",
    ]
