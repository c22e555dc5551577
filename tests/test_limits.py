"""Resource limits: hostile sizes are refused by the limit they hit, in bounded time and memory.

The big cases (a 1 GiB file, nesting 100,000 deep, a 50 MB string, 10 million rows) run
the CLI in a child process that reports its own wall time and peak RSS, so the bounds
are measured on the real program. Their files are written to tmp_path and deleted.
``benchmarks/limits_bench.py`` prints the same figures.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sandbox_replay.checks.pipeline import ReplayConfig, replay
from sandbox_replay.cli import app
from sandbox_replay.load.files import LoadLimits
from sandbox_replay.load.run import InputMode
from sandbox_replay.model import codes
from sandbox_replay.records.build import RESULT_FILE

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "first_wave"
BUNDLE = ROOT / "fixtures" / "bundles" / "exported_bundle"
TARGET = "action_requests.json"

# Runs the CLI in this child process and appends {exit, seconds, peak_rss_mb} to stderr.
_MEASURE = """
import json, resource, sys, time
from sandbox_replay.cli import app
start = time.perf_counter()
try:
    app(sys.argv[1:], prog_name="sandbox-replay")
    code = 0
except SystemExit as exc:
    code = exc.code
seconds = time.perf_counter() - start
# VmHWM is this program's own high-water mark; ru_maxrss would also count the test
# process's memory at the fork that started this one (Linux keeps it across exec).
try:
    status = open("/proc/self/status").read()
    peak = int(status.split("VmHWM:")[1].split()[0]) / 1024
except (OSError, IndexError, ValueError):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("MEASURE " + json.dumps({"exit": code, "seconds": seconds, "peak_rss_mb": peak}),
      file=sys.stderr)
"""


def measure(args: list[str]) -> dict[str, Any]:
    """Run the CLI with ``args`` in a child process; return its exit, time and peak RSS."""
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, *args], capture_output=True, text=True, timeout=300
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("MEASURE "), proc.stderr
    figures: dict[str, Any] = json.loads(last.removeprefix("MEASURE "))
    return figures


def fixture_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    shutil.copytree(FIXTURE, folder)
    return folder


def limit_finding(out: Path, name: str = TARGET) -> dict[str, Any]:
    result = json.loads((out / RESULT_FILE).read_text())
    assert result["status"] == "blocked"
    found = [
        f
        for f in result["findings"]
        if f["error_code"] == codes.INPUT_LIMIT_EXCEEDED and f["path"] == name
    ]
    assert len(found) == 1, result["findings"]
    finding: dict[str, Any] = found[0]
    return finding


def run_cli(folder: Path, out: Path, *options: str) -> int:
    result = CliRunner().invoke(app, ["run", "-i", str(folder), "-o", str(out), *options])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result.exit_code


# Every limit is configurable: small settings on the passing fixture trip each one.


def test_defaults_pass_the_fixture(tmp_path: Path) -> None:
    assert run_cli(FIXTURE, tmp_path / "out") == 0


def test_max_rows_option(tmp_path: Path) -> None:
    assert run_cli(FIXTURE, tmp_path / "out", "--max-rows", "3") == 1
    finding = limit_finding(tmp_path / "out")
    assert "max_rows" in finding["message"] and "3 rows" in finding["message"]
    rows = json.loads((FIXTURE / TARGET).read_text())["action_requests"]
    assert len(rows) > 3
    assert finding["line"] is not None
    assert finding["message"].startswith(f"{TARGET}:{finding['line']}:")


def test_max_depth_option(tmp_path: Path) -> None:
    assert run_cli(FIXTURE, tmp_path / "out", "--max-depth", "2") == 1
    result = json.loads((tmp_path / "out" / RESULT_FILE).read_text())
    deep = [f for f in result["findings"] if f["error_code"] == codes.INPUT_LIMIT_EXCEEDED]
    assert {f["path"] for f in deep} >= {TARGET}
    assert all("max_depth" in f["message"] for f in deep)
    # action_requests.json opens its list on line 2, so line 3 holds the third level.
    assert limit_finding(tmp_path / "out")["line"] == 3


def test_max_string_chars_option(tmp_path: Path) -> None:
    folder = fixture_copy(tmp_path)
    data = json.loads((folder / TARGET).read_text())
    data["action_requests"][1]["note"] = "x" * 101
    (folder / TARGET).write_text(json.dumps(data, indent=2))
    assert run_cli(folder, tmp_path / "out", "--max-string-chars", "100") == 1
    finding = limit_finding(tmp_path / "out")
    assert "max_string_chars" in finding["message"]
    second_row_line = (folder / TARGET).read_text().splitlines().index("    {", 4) + 1
    assert finding["line"] == second_row_line
    assert "x" * 101 not in (tmp_path / "out" / RESULT_FILE).read_text()


def test_long_key_is_refused(tmp_path: Path) -> None:
    folder = fixture_copy(tmp_path)
    (folder / TARGET).write_text('{\n  "' + "k" * 200 + '": 1,\n  "action_requests": []\n}')
    assert run_cli(folder, tmp_path / "out", "--max-string-chars", "100") == 1
    finding = limit_finding(tmp_path / "out")
    assert finding["line"] == 2 and "max_string_chars" in finding["message"]


def test_max_file_mb_option(tmp_path: Path) -> None:
    folder = fixture_copy(tmp_path)
    data = json.loads((folder / TARGET).read_text())
    data["padding"] = ["p" * 1000] * 1200  # about 1.2 MB
    (folder / TARGET).write_text(json.dumps(data))
    assert run_cli(folder, tmp_path / "out", "--max-file-mb", "1") == 1
    finding = limit_finding(tmp_path / "out")
    assert "max_file_bytes" in finding["message"] and "not read" in finding["message"]


def test_limits_are_library_config(tmp_path: Path) -> None:
    outcome = replay(ReplayConfig(FIXTURE, InputMode.FIXTURE, LoadLimits(max_rows=2)))
    assert outcome.status == "blocked"
    assert codes.INPUT_LIMIT_EXCEEDED in {f.error_code for f in outcome.findings}


def test_oversized_copied_body_is_not_read(tmp_path: Path) -> None:
    if not BUNDLE.is_dir():
        pytest.skip("the built-in exported bundle is not there yet")
    folder = tmp_path / "bundle"
    shutil.copytree(BUNDLE, folder)
    manifest = json.loads((folder / "source_module_manifest.json").read_text())
    body = folder / manifest["modules"][0]["path"]
    with body.open("r+b") as handle:
        handle.truncate(2 * 1024 * 1024)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["run-sandbox-bundle", "-i", str(folder), "-o", str(out), "--max-file-mb", "1"]
    )
    assert result.exit_code == 1
    record = json.loads(next(out.glob("*.json")).read_text())
    limited = [f for f in record["findings"] if f["error_code"] == codes.INPUT_LIMIT_EXCEEDED]
    assert len(limited) == 1 and "not read" in limited[0]["message"]


# The hostile sizes of issue 5, measured on the real program.


@pytest.mark.slow
def test_one_gib_file_refused_by_size_unread(tmp_path: Path) -> None:
    folder = fixture_copy(tmp_path)
    with (folder / TARGET).open("r+b") as handle:
        handle.truncate(1 << 30)  # sparse: no disk, and reading it would show in RSS
    out = tmp_path / "out"
    figures = measure(["run", "-i", str(folder), "-o", str(out)])
    (folder / TARGET).unlink()
    assert figures["exit"] == 1
    assert figures["seconds"] < 30
    assert figures["peak_rss_mb"] < 400, figures  # far below the 1024 MiB a read would need
    assert "max_file_bytes" in limit_finding(out)["message"]


@pytest.mark.slow
def test_nesting_100k_deep_refused_before_parsing(tmp_path: Path) -> None:
    folder = fixture_copy(tmp_path)
    depth = 100_000
    (folder / TARGET).write_text(
        '{\n  "action_requests": [\n' + "[" * depth + "]" * depth + "\n  ]\n}\n"
    )
    out = tmp_path / "out"
    figures = measure(["run", "-i", str(folder), "-o", str(out)])
    assert figures["exit"] == 1
    assert figures["seconds"] < 30 and figures["peak_rss_mb"] < 1024, figures
    finding = limit_finding(out)
    assert "max_depth" in finding["message"] and finding["line"] == 3


@pytest.mark.slow
def test_fifty_mb_string_refused_in_bounded_memory(tmp_path: Path) -> None:
    folder = fixture_copy(tmp_path)
    with (folder / TARGET).open("w") as handle:
        handle.write('{\n  "action_requests": [\n    {"request_id": "r1", "note": "')
        handle.write("s" * (50 * 1000 * 1000))
        handle.write('"}\n  ]\n}\n')
    out = tmp_path / "out"
    figures = measure(["run", "-i", str(folder), "-o", str(out)])
    (folder / TARGET).unlink()
    assert figures["exit"] == 1
    assert figures["seconds"] < 60 and figures["peak_rss_mb"] < 1024, figures
    finding = limit_finding(out)
    assert "max_string_chars" in finding["message"] and finding["line"] == 3
    assert (out / RESULT_FILE).stat().st_size < 1_000_000


@pytest.mark.slow
def test_ten_million_rows_refused_by_row_limit(tmp_path: Path) -> None:
    folder = fixture_copy(tmp_path)
    rows = 10_000_000
    with (folder / TARGET).open("wb") as handle:
        handle.write(b'{"action_requests": [\n')
        handle.write(b"{},\n" * (rows - 1))
        handle.write(b"{}\n]}\n")
    out = tmp_path / "out"
    figures = measure(["run", "-i", str(folder), "-o", str(out)])
    (folder / TARGET).unlink()
    assert figures["exit"] == 1
    assert figures["seconds"] < 60 and figures["peak_rss_mb"] < 4096, figures
    finding = limit_finding(out)
    limit = LoadLimits().max_rows
    assert "max_rows" in finding["message"]
    assert finding["line"] == limit + 2  # row index `limit` sits on that line


def test_child_measure_reports_figures(tmp_path: Path) -> None:
    figures = measure(["run", "-i", str(FIXTURE), "-o", str(tmp_path / "out")])
    assert figures["exit"] == 0 and figures["peak_rss_mb"] > 0
    assert os.path.getsize(tmp_path / "out" / RESULT_FILE) > 0
