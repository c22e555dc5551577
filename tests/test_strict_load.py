"""Strict load: every way an input file can be unusable blocks the run, never crashes it.

Each case replaces one core file of the passing fixture with a bad version and checks,
through the library and through the CLI, that the run is ``blocked`` with the expected
code, that the finding names the file and the exact line where the parser knows it,
that the records are still written, that nothing reaches stderr as a traceback, and
that a distinctive string planted in the bad body never reaches a record.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sandbox_replay.checks.pipeline import ReplayConfig, replay
from sandbox_replay.cli import app
from sandbox_replay.load.run import CORE_FILES, InputMode
from sandbox_replay.model import codes
from sandbox_replay.records.build import RESULT_FILE, build_records, write_records

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "first_wave"
PLANT = "PLANTED_BODY_TEXT_q7Zx"
LIST_FILES = [name for name, key in CORE_FILES.items() if key is not None]


@dataclass(frozen=True)
class BadFile:
    """One way to spoil a core file: how to write it, the code it must raise, the line."""

    case: str
    code: str
    line: int | None
    write: Callable[[Path, str | None], None]
    lists_only: bool = False
    # In an object file the parser knows only where the bad top-level value starts.
    object_line: int | None = None


def _text(body: str) -> Callable[[Path, str | None], None]:
    """Write ``body`` (with ``{key}`` standing for the file's row key) as the file."""

    def write(path: Path, key: str | None) -> None:
        path.write_text(body.replace("{key}", key or "items"), encoding="utf-8")

    return write


def _bytes(body: bytes) -> Callable[[Path, str | None], None]:
    def write(path: Path, key: str | None) -> None:
        path.write_bytes(body.replace(b"{key}", (key or "items").encode()))

    return write


def _missing(path: Path, key: str | None) -> None:
    path.unlink()


def _directory(path: Path, key: str | None) -> None:
    path.unlink()
    path.mkdir()
    (path / "inner.json").write_text(f'{{"x": "{PLANT}"}}')


def _truncated(path: Path, key: str | None) -> None:
    text = path.read_text(encoding="utf-8")
    cut = text.index('": ', len(text) // 2) + 3
    path.write_text(text[:cut], encoding="utf-8")


def _row(body: str) -> str:
    """A document whose bad row (or, for object files, bad value) sits on line 3."""
    return '{\n  "{key}": [\n    ' + body + "\n  ]\n}\n"


BAD_FILES = [
    BadFile("missing", codes.INPUT_FILE_MISSING, None, _missing),
    BadFile("directory_in_place", codes.INPUT_FILE_UNREADABLE, None, _directory),
    BadFile("invalid_utf8", codes.INPUT_NOT_UTF8, 3, _bytes(b'{\n  "a": 1,\n  "b": "\xff"\n}')),
    BadFile("bom", codes.INPUT_NOT_UTF8, 1, _bytes(b'\xef\xbb\xbf{"{key}": []}')),
    BadFile("empty", codes.INPUT_JSON_INVALID, 1, _text("")),
    BadFile("truncated", codes.INPUT_JSON_INVALID, -1, _truncated),
    BadFile("trailing_data", codes.INPUT_JSON_INVALID, 3, _text('{"{key}": []}\n\n{}')),
    BadFile("dup_top_key", codes.INPUT_DUPLICATE_KEY, 3, _text('{\n  "a": 1,\n  "a": 2\n}')),
    BadFile(
        "dup_key_in_row",
        codes.INPUT_DUPLICATE_KEY,
        3,
        _text(_row(f'{{"request_id": "r1", "note": "{PLANT}", "note": "{PLANT}"}}')),
        object_line=2,
    ),
    BadFile(
        "nan",
        codes.INPUT_NON_FINITE_NUMBER,
        3,
        _text(_row(f'{{"n": NaN, "x": "{PLANT}"}}')),
        object_line=2,
    ),
    BadFile("infinity", codes.INPUT_NON_FINITE_NUMBER, 3, _text(_row('{"n": Infinity}')), False, 2),
    BadFile(
        "neg_infinity", codes.INPUT_NON_FINITE_NUMBER, 3, _text(_row('{"n": -Infinity}')), False, 2
    ),
    BadFile("overflow", codes.INPUT_NON_FINITE_NUMBER, 3, _text(_row('{"n": 1e999}')), False, 2),
    BadFile("nan_top_level", codes.INPUT_NON_FINITE_NUMBER, 2, _text('{\n  "n": NaN\n}')),
    BadFile(
        "lone_surrogate",
        codes.INPUT_NOT_UTF8,
        3,
        _text(_row(f'{{"n": "a\\ud800b", "x": "{PLANT}"}}')),
    ),
    BadFile("top_level_list", codes.INPUT_TOP_LEVEL_NOT_OBJECT, 1, _text(f'["{PLANT}"]')),
    BadFile("top_level_string", codes.INPUT_TOP_LEVEL_NOT_OBJECT, 1, _text(f'"{PLANT}"')),
    BadFile("top_level_number", codes.INPUT_TOP_LEVEL_NOT_OBJECT, 1, _text("42")),
    BadFile("top_level_null", codes.INPUT_TOP_LEVEL_NOT_OBJECT, 1, _text("null")),
    BadFile(
        "rows_key_missing",
        codes.INPUT_ROWS_NOT_LIST,
        1,
        _text(f'{{\n  "other": ["{PLANT}"]\n}}'),
        lists_only=True,
    ),
    BadFile(
        "rows_not_list",
        codes.INPUT_ROWS_NOT_LIST,
        3,
        _text(f'{{\n  "a": 1,\n  "{{key}}": {{"x": "{PLANT}"}}\n}}'),
        lists_only=True,
    ),
    BadFile(
        "row_not_object",
        codes.INPUT_ROW_NOT_OBJECT,
        4,
        _text('{\n  "{key}": [\n    {},\n    "' + PLANT + '"\n  ]\n}'),
        lists_only=True,
    ),
]

CASES = [
    pytest.param(name, bad, id=f"{name}-{bad.case}")
    for name in CORE_FILES
    for bad in BAD_FILES
    if not (bad.lists_only and CORE_FILES[name] is None)
]


def _spoil(tmp_path: Path, name: str, bad: BadFile) -> tuple[Path, int | None]:
    """Copy the passing fixture with ``name`` spoiled; return the folder and expected line."""
    folder = tmp_path / "in"
    shutil.copytree(FIXTURE, folder)
    bad.write(folder / name, CORE_FILES[name])
    line = bad.line
    if CORE_FILES[name] is None and bad.object_line is not None:
        line = bad.object_line
    if line == -1:  # truncated: the parser stops at the very end of what is left
        line = (folder / name).read_text(encoding="utf-8").count("\n") + 1
    return folder, line


def _strict_findings(result: dict[str, object], name: str) -> list[dict[str, object]]:
    findings = result["findings"]
    assert isinstance(findings, list)
    return [f for f in findings if f["layer"] == "strict_load" and f["path"] == name]


def _assert_names_file_and_line(finding: dict[str, object], name: str, line: int | None) -> None:
    message = str(finding["message"])
    assert finding["line"] == line
    assert message.startswith(f"{name}:{line}:" if line else name), message


@pytest.mark.parametrize(("name", "bad"), CASES)
def test_bad_core_file_blocks_with_its_code_file_and_line(
    tmp_path: Path, name: str, bad: BadFile
) -> None:
    folder, line = _spoil(tmp_path, name, bad)
    outcome = replay(ReplayConfig(folder, InputMode.FIXTURE))
    assert outcome.status == "blocked"
    records = build_records(outcome)
    found = _strict_findings(records.result, name)
    assert [f["error_code"] for f in found] == [bad.code]
    _assert_names_file_and_line(found[0], name, line)

    out = tmp_path / "out"
    runner = CliRunner()
    cli = runner.invoke(app, ["run", "--input", str(folder), "--out", str(out)])
    assert cli.exit_code == 1, cli.output
    assert cli.exception is None or isinstance(cli.exception, SystemExit)
    assert "Traceback" not in cli.stderr
    written = {p.name: p.read_bytes() for p in out.iterdir()}
    assert RESULT_FILE in written
    result = json.loads(written[RESULT_FILE])
    assert result["status"] == "blocked"
    assert [f["error_code"] for f in _strict_findings(result, name)] == [bad.code]
    for data in written.values():
        assert PLANT.encode() not in data


def test_unreadable_file_blocks(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root: chmod 000 does not stop root reading the file")
    folder = tmp_path / "in"
    shutil.copytree(FIXTURE, folder)
    (folder / "action_requests.json").chmod(0)
    try:
        outcome = replay(ReplayConfig(folder, InputMode.FIXTURE))
    finally:
        (folder / "action_requests.json").chmod(0o644)
    assert outcome.status == "blocked"
    assert [f.error_code for f in outcome.findings if f.path == "action_requests.json"] == [
        codes.INPUT_FILE_UNREADABLE
    ]


def test_dangling_symlink_blocks(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    shutil.copytree(FIXTURE, folder)
    (folder / "cold_replay.json").unlink()
    (folder / "cold_replay.json").symlink_to(folder / "nowhere.json")
    outcome = replay(ReplayConfig(folder, InputMode.FIXTURE))
    assert outcome.status == "blocked"
    assert codes.INPUT_FILE_UNREADABLE in {f.error_code for f in outcome.findings}


# Wrong types inside otherwise well-formed rows are the layers' business: each list file's
# first row gets every known field replaced by a value of the wrong JSON type.
WRONG_TYPE_CODES = {
    "action_requests.json": codes.ACTION_REQUEST_INVALID,
    "policy_verdicts.json": codes.VERDICT_INVALID,
    "side_effect_receipts.json": codes.SIDE_EFFECT_RECEIPT_INVALID,
    "rollback_receipts.json": codes.ROLLBACK_RECEIPT_INVALID,
    "cold_replay.json": codes.COLD_REPLAY_INVALID,
}


def _confuse(value: object) -> object:
    if isinstance(value, bool):
        return "true"
    if isinstance(value, str):
        return 12345
    if isinstance(value, int | float):
        return {"n": PLANT}
    return 7


@pytest.mark.parametrize("name", LIST_FILES)
def test_wrong_types_in_rows_block_and_name_the_row(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "in"
    shutil.copytree(FIXTURE, folder)
    key = CORE_FILES[name]
    assert key is not None
    data = json.loads((folder / name).read_text(encoding="utf-8"))
    data[key][0] = {field: _confuse(value) for field, value in data[key][0].items()}
    data[key][0]["free_text"] = PLANT
    (folder / name).write_text(json.dumps(data, indent=2), encoding="utf-8")

    outcome = replay(ReplayConfig(folder, InputMode.FIXTURE))
    assert outcome.status == "blocked"
    mine = [
        f for f in outcome.findings if f.path == name and f.error_code == WRONG_TYPE_CODES[name]
    ]
    assert mine, [f.error_code for f in outcome.findings]
    assert mine[0].line == 3
    records = build_records(outcome)
    written = write_records(records, InputMode.FIXTURE, tmp_path / "out", None)
    for path in written:
        assert PLANT.encode() not in path.read_bytes()


@pytest.mark.parametrize("name", [n for n, k in CORE_FILES.items() if k is None])
def test_wrong_types_in_object_files_block(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "in"
    shutil.copytree(FIXTURE, folder)
    data = json.loads((folder / name).read_text(encoding="utf-8"))
    data = {field: _confuse(value) for field, value in data.items()}
    (folder / name).write_text(json.dumps(data, indent=2), encoding="utf-8")
    outcome = replay(ReplayConfig(folder, InputMode.FIXTURE))
    assert outcome.status == "blocked"
    assert any(f.path == name for f in outcome.findings)
    written = write_records(build_records(outcome), InputMode.FIXTURE, tmp_path / "out", None)
    for path in written:
        assert PLANT.encode() not in path.read_bytes()


def test_bundle_mode_blocks_on_bad_manifest(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    shutil.copytree(FIXTURE, folder)
    (folder / "bundle_manifest.json").write_text('{"a": 1, "a": 2}')
    outcome = replay(ReplayConfig(folder, InputMode.BUNDLE))
    assert outcome.status == "blocked"
    by_path = {(f.path, f.error_code) for f in outcome.findings}
    assert ("bundle_manifest.json", codes.INPUT_DUPLICATE_KEY) in by_path
    assert ("source_module_manifest.json", codes.INPUT_FILE_MISSING) in by_path


def test_real_process_prints_no_traceback(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    shutil.copytree(FIXTURE, folder)
    (folder / "policy_verdicts.json").write_bytes(b'{"policy_verdicts": [{"a": NaN}]')
    proc = subprocess.run(
        [Path(sys.executable).with_name("sandbox-replay"), "run", "-i", folder, "-o", tmp_path],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert (tmp_path / RESULT_FILE).is_file()


def test_findings_never_quote_a_field_value(tmp_path: Path) -> None:
    """A hostile verdict or diff count is reported by its field, not by its text."""
    folder = tmp_path / "in"
    shutil.copytree(FIXTURE, folder)
    verdicts = json.loads((folder / "policy_verdicts.json").read_text())
    verdicts["policy_verdicts"][0]["verdict"] = PLANT
    (folder / "policy_verdicts.json").write_text(json.dumps(verdicts, indent=2))
    effects = json.loads((folder / "side_effect_receipts.json").read_text())
    for row in effects["side_effect_receipts"]:
        row["side_effect_diff_count"] = PLANT
    (folder / "side_effect_receipts.json").write_text(json.dumps(effects, indent=2))
    outcome = replay(ReplayConfig(folder, InputMode.FIXTURE))
    assert outcome.status == "blocked"
    codes_found = {f.error_code for f in outcome.findings}
    assert codes.VERDICT_SEMANTIC_MISMATCH in codes_found
    assert codes.SIDE_EFFECT_RECEIPT_INVALID in codes_found
    assert not [f.message for f in outcome.findings if PLANT in f.message]


def test_paired_surrogate_escape_is_valid_unicode(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    shutil.copytree(FIXTURE, folder)
    target = folder / "action_requests.json"
    text = target.read_text(encoding="utf-8")
    target.write_text(
        text.replace("synthetic_collector", "synthetic\\ud83d\\ude00collector"), encoding="utf-8"
    )
    outcome = replay(ReplayConfig(folder, InputMode.FIXTURE))
    assert outcome.status == "pass"
