"""The command line: usage errors, help, the codes command, stdout/stderr, atomic records.

Usage errors run the installed console script in a child process, since the one-line
error and the absence of a traceback are properties of the real entry point.
"""

from __future__ import annotations

import gc
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from conftest import main_exit_code
from sandbox_replay import atomic, runtime
from sandbox_replay import cli as cli_module
from sandbox_replay.checks.pipeline import ReplayConfig, replay
from sandbox_replay.cli import app
from sandbox_replay.load.run import InputMode
from sandbox_replay.model.codes import REGISTRY
from sandbox_replay.records.build import RESULT_FILE, RunRecords, build_records, write_records

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "first_wave"
BUNDLE = ROOT / "fixtures" / "bundles" / "exported_bundle"
SCRIPT = Path(sys.executable).with_name("sandbox-replay")


def cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def usage_cases(tmp: Path) -> dict[str, list[str | Path]]:
    """Arguments for each usage error; ``tmp / "afile"`` is a plain file."""
    afile = tmp / "afile"
    return {
        "input missing": ["run", "-i", tmp / "nope", "-o", tmp / "out"],
        "input is a file": ["run", "-i", afile, "-o", tmp / "out"],
        "out is a file": ["run", "-i", FIXTURE, "-o", afile],
        "out under a file": ["run", "-i", FIXTURE, "-o", afile / "sub"],
        "acceptance-out is a folder": ["run", "-i", FIXTURE, "-o", tmp / "o", "--acceptance-out", tmp],
        "acceptance-out under a file": [
            "run", "-i", FIXTURE, "-o", tmp / "o", "--acceptance-out", afile / "a.json",
        ],
        "bundle out is a file": ["run-sandbox-bundle", "-i", FIXTURE, "-o", afile],
        "unknown option": ["run", "-i", FIXTURE, "-o", tmp / "o", "--bogus"],
        "missing option": ["run", "-i", FIXTURE],
        "bad limit": ["run", "-i", FIXTURE, "-o", tmp / "o", "--max-rows", "zero"],
        "unknown command": ["replay-everything"],
        "unknown code": ["codes", "SANDBOX_POLICY_NO_SUCH_CODE"],
        "unwritable out": ["run", "-i", FIXTURE, "-o", "/proc/sandbox-replay-test"],
    }  # fmt: skip


USAGE_NAMES = list(usage_cases(Path("tmp")))


@pytest.mark.parametrize("case", USAGE_NAMES)
def test_usage_error_is_one_line_exit_2(tmp_path: Path, case: str) -> None:
    (tmp_path / "afile").write_text("not a folder")
    args = usage_cases(tmp_path)[case]
    proc = cli(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("sandbox-replay: error: "), proc.stderr
    assert not (tmp_path / "out").exists()
    assert proc.stdout == ""


def test_usage_error_names_the_problem(tmp_path: Path) -> None:
    proc = cli("run", "-i", tmp_path / "nope", "-o", tmp_path / "out")
    assert (
        proc.stderr.strip()
        == f"sandbox-replay: error: input folder {tmp_path / 'nope'} does not exist"
    )


COMMANDS = sorted(get_command(app).commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert f"Usage: sandbox-replay {command}" in result.output
    summary = result.output.split("\n\n")[1].strip()
    assert len(summary) > 30, result.output


@pytest.mark.parametrize(
    ("command", "writes"),
    [
        ("run", ["result record", "board", "validation receipt", "acceptance record"]),
        ("run-sandbox-bundle", ["bundle validation result"]),
        ("codes", ["stdout"]),
    ],
)
def test_run_and_codes_help_says_exit_codes_and_what_it_writes(
    command: str, writes: list[str]
) -> None:
    text = " ".join(CliRunner().invoke(app, [command, "--help"]).output.split())
    assert "Exit 0" in text
    assert "2" in text.split("Exit 0", 1)[1]
    for what in writes:
        assert what in text, what


def test_top_level_help_gives_exit_codes() -> None:
    text = " ".join(CliRunner().invoke(app, ["--help"]).output.split())
    assert "0 pass, 1 blocked, 2 usage error" in text


def test_codes_lists_every_registered_code() -> None:
    result = CliRunner().invoke(app, ["codes"])
    assert result.exit_code == 0
    listed = {line.split()[0] for line in result.output.splitlines() if line.startswith("  ")}
    assert listed == {entry.code for entry in REGISTRY}


@pytest.mark.parametrize("code", [entry.code for entry in REGISTRY])
def test_codes_prints_each_doc(code: str) -> None:
    result = CliRunner().invoke(app, ["codes", code.lower()])
    assert result.exit_code == 0
    assert result.output.startswith(code + "\n")
    assert REGISTRY[code].doc.strip() in result.output


def test_a_replay_from_the_command_line_imports_no_pydantic(tmp_path: Path) -> None:
    """Start-up is part of every replay's time: typer 0.29 imported pydantic to coerce
    each option, about 0.1 s of a 60,000-request run (docs/performance-history.md, tenth
    round)."""
    script = (  # said as the command exits
        "import atexit, sys\n"
        "from sandbox_replay import cli\n"
        "def said():\n"
        "    loaded = any(name.split('.')[0] == 'pydantic' for name in sys.modules)\n"
        "    sys.stderr.write(f'pydantic loaded: {loaded}')\n"
        "atexit.register(said)\n"
        "cli.main()\n"
    )
    command = [sys.executable, "-c", script, "run-sandbox-bundle"]
    command += ["-i", str(BUNDLE), "-o", str(tmp_path / "out")]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stderr
    assert "pydantic loaded: False" in done.stderr


def test_progress_on_stderr_and_card_stdout_is_pure_json(tmp_path: Path) -> None:
    proc = cli("run", "-i", FIXTURE, "-o", tmp_path / "out", "--card")
    assert proc.returncode == 0
    card = json.loads(proc.stdout)
    assert card["status"] == "pass"
    assert "replaying" in proc.stderr and "wrote" in proc.stderr
    assert "status: pass" in proc.stderr
    # One line per phase, so a long run shows where it is and what each phase took.
    phases = [line for line in proc.stderr.splitlines() if re.search(r" in \d+\.\ds$", line)]
    assert re.search(r"loaded and scanned 15 files \(0\.0 MB, 26 rows\) in \d+\.\ds$", phases[0])
    assert len(phases) == 5
    assert [p.split(" in ")[0] for p in phases[1:]] == [
        "sandbox-replay: checked the rows against every layer",
        "sandbox-replay: built the trace (6 spans)",
        # pyproject.toml of this folder turns them on.
        "sandbox-replay: replayed 10 seeded escapes on 27 rows (10 caught)",
        "sandbox-replay: wrote the records",
    ]


def test_without_card_stdout_is_the_summary_only(tmp_path: Path) -> None:
    proc = cli("run", "-i", FIXTURE, "-o", tmp_path / "out")
    assert proc.returncode == 0
    assert proc.stdout.startswith("status: pass")
    assert "wrote" not in proc.stdout and "replaying" not in proc.stdout


@pytest.mark.skipif(not BUNDLE.is_dir(), reason="the built-in bundle is not there yet")
def test_bundle_card_is_pure_json(tmp_path: Path) -> None:
    proc = cli("run-sandbox-bundle", "-i", BUNDLE, "-o", tmp_path / "out", "--card")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["status"] == "pass"


def test_terminal_output_escapes_control_characters(tmp_path: Path) -> None:
    if not BUNDLE.is_dir():
        pytest.skip("the built-in bundle is not there yet")
    folder = tmp_path / "bundle"
    shutil.copytree(BUNDLE, folder)
    manifest = json.loads((folder / "bundle_manifest.json").read_text())
    manifest["bundle_id"] = "evil\x1b[2J\u202eid"
    (folder / "bundle_manifest.json").write_text(json.dumps(manifest))
    proc = cli("run-sandbox-bundle", "-i", folder, "-o", tmp_path / "out")
    assert "\x1b" not in proc.stdout + proc.stderr
    assert "\u202e" not in proc.stdout + proc.stderr


# Atomic records: an interrupted write leaves the previous record whole and no temp file.


def _spoiled(tmp_path: Path) -> Path:
    folder = tmp_path / "spoiled"
    shutil.copytree(FIXTURE, folder)
    (folder / "cold_replay.json").write_text("{")
    return folder


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_failed_rename_keeps_previous_record_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    assert CliRunner().invoke(app, ["run", "-i", str(FIXTURE), "-o", str(out)]).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def refuse(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device", str(dst))

    monkeypatch.setattr(atomic.os, "replace", refuse)
    result = CliRunner().invoke(app, ["run", "-i", str(_spoiled(tmp_path)), "-o", str(out)])
    assert result.exit_code == 2
    assert "No space left on device" in result.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert _leftovers(out) == []


@pytest.mark.parametrize("interrupt_at", ["write", "fsync", "replace"])
def test_interrupted_write_never_leaves_half_a_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interrupt_at: str
) -> None:
    out = tmp_path / "out"
    write_records(
        build_records(replay(ReplayConfig(FIXTURE, InputMode.FIXTURE))),
        InputMode.FIXTURE,
        out,
        None,
    )
    previous = (out / RESULT_FILE).read_bytes()
    blocked = build_records(replay(ReplayConfig(_spoiled(tmp_path), InputMode.FIXTURE)))

    real_chunks = RunRecords.result_chunks

    def half_written(records: RunRecords) -> Iterator[bytes | memoryview]:
        """Give half the record's pieces, then be interrupted."""
        pieces = list(real_chunks(records))
        yield from pieces[: len(pieces) // 2]
        raise KeyboardInterrupt

    def interrupt(*args: object) -> None:
        raise KeyboardInterrupt

    if interrupt_at == "write":
        monkeypatch.setattr(RunRecords, "result_chunks", half_written)
    elif interrupt_at == "fsync":
        monkeypatch.setattr(atomic.os, "fsync", interrupt)
    else:
        monkeypatch.setattr(atomic.os, "replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_records(blocked, InputMode.FIXTURE, out, None)
    assert (out / RESULT_FILE).read_bytes() == previous
    assert json.loads(previous)["status"] == "pass"
    assert _leftovers(out) == []


def test_rerun_after_interruption_replaces_whole_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    spoiled = _spoiled(tmp_path)

    def interrupt(*args: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(atomic.os, "replace", interrupt)
        with pytest.raises(KeyboardInterrupt):
            write_records(
                build_records(replay(ReplayConfig(spoiled, InputMode.FIXTURE))),
                InputMode.FIXTURE,
                out,
                None,
            )
    assert not (out / RESULT_FILE).exists() and _leftovers(out) == []
    assert CliRunner().invoke(app, ["run", "-i", str(spoiled), "-o", str(out)]).exit_code == 1
    assert json.loads((out / RESULT_FILE).read_text())["status"] == "blocked"


def test_internal_error_prints_no_traceback_and_never_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug deep in the run is reported by type and place only: its text may quote input."""

    def broken(config: object) -> None:
        raise ValueError("PLANTED_INPUT_TEXT in an exception message")

    code = main_exit_code(monkeypatch, broken, "run", "-i", str(FIXTURE), "-o", str(tmp_path))
    assert code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "PLANTED_INPUT_TEXT" not in err
    assert "sandbox-replay: internal error: ValueError at" in err


def test_an_in_process_command_leaves_the_collector_on(tmp_path: Path) -> None:
    # Only ``main`` owns its process's collector; a caller in process (this runner, a
    # library user) keeps its own settings.
    import gc

    assert gc.isenabled()
    result = CliRunner().invoke(app, ["run", "-i", str(FIXTURE), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0
    assert gc.isenabled()


def test_large_buffers_are_mapped_apart_where_glibc_is_and_nothing_breaks_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[int, int]] = []

    class Libc:
        def mallopt(self, parameter: int, value: int) -> int:
            calls.append((parameter, value))
            return 1

    monkeypatch.setattr(runtime.ctypes, "CDLL", lambda name: Libc())
    runtime._large_buffers_apart()
    # M_MMAP_THRESHOLD at 1 MiB, M_TRIM_THRESHOLD at 8 MiB
    assert calls == [(-3, 1 << 20), (-1, 8 << 20)]

    class NoMallopt:  # a C library without mallopt (musl, macOS)
        pass

    monkeypatch.setattr(runtime.ctypes, "CDLL", lambda name: NoMallopt())
    runtime._large_buffers_apart()  # no error


def test_the_command_line_sets_the_allocator_before_any_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    called: list[bool] = []
    monkeypatch.setattr(runtime, "_large_buffers_apart", lambda: called.append(True))
    monkeypatch.setattr(sys, "argv", ["sandbox-replay", "--version"])
    # main() owns its process: put back what it sets for this one (pytest's).
    threshold = gc.get_threshold()
    try:
        with pytest.raises(SystemExit):
            cli_module.main()
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
    assert called == [True]


@pytest.mark.parametrize(
    ("command", "off"),
    [("run", True), ("run-sandbox-bundle", True), ("build", False), (None, False)],
)
def test_only_a_replay_command_turns_the_collector_off(
    monkeypatch: pytest.MonkeyPatch, command: str | None, off: bool
) -> None:
    turned_off: list[bool] = []
    monkeypatch.setattr(runtime, "_large_buffers_apart", lambda: None)
    for name in ("freeze", "set_threshold"):
        monkeypatch.setattr(runtime.gc, name, lambda *args: None)
    monkeypatch.setattr(runtime.gc, "disable", lambda: turned_off.append(True))
    runtime.tune_process(command)
    assert turned_off == ([True] if off else [])
