"""Red-team attacks on the replay itself (issue #28, items 1 to 3 and 5 to 8), each reproduced.

Every case starts from the passing exported bundle (or fixture), plants one attack and
shows the run now fails closed with the finding that names it, or that the work it
forced is bounded. Before the fixes each of these passed silently, reused a stale
verdict, or took time or memory out of proportion to the input.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import EXPORTED_BUNDLE, FIRST_WAVE, codes_of, edit_json, find_row, replay_dir
from sandbox_replay import InputMode
from sandbox_replay.checks import source_modules
from sandbox_replay.cli import app
from sandbox_replay.load.decode import LoadedFile, parse_input
from sandbox_replay.load.files import LoadLimits
from sandbox_replay.model import codes
from sandbox_replay.report import incremental

EXFIL = "req_network_exfil_attempt"


def _bundle(tmp_path: Path) -> Path:
    folder = tmp_path / "bundle"
    shutil.copytree(EXPORTED_BUNDLE, folder)
    return folder


def _blocked_with(folder: Path, *expected: str, mode: InputMode = InputMode.BUNDLE) -> Any:
    outcome, _ = replay_dir(folder, mode)
    assert outcome.status == "blocked"
    for code in expected:
        assert code in codes_of(outcome), codes_of(outcome)
    return outcome


# --- 1. smuggled rows ------------------------------------------------------------------


def test_rows_under_a_second_top_level_key_are_a_finding(tmp_path: Path) -> None:
    folder = _bundle(tmp_path)
    with edit_json(folder / "side_effect_receipts.json") as data:
        smuggled = copy.deepcopy(find_row(data["side_effect_receipts"], EXFIL))
        smuggled.update(execution_attempted=True, side_effect_diff_count=1)
        data["side_effect_receipts_2"] = [smuggled]
    with edit_json(folder / "policy_verdicts.json") as data:
        override = copy.deepcopy(find_row(data["policy_verdicts"], EXFIL))
        override["verdict"] = "allow"
        data["policy_verdicts_override"] = [override]
    outcome = _blocked_with(folder, codes.INPUT_UNEXPECTED_KEY)
    named = [f for f in outcome.findings if f.error_code == codes.INPUT_UNEXPECTED_KEY]
    assert sorted(f.path for f in named) == ["policy_verdicts.json", "side_effect_receipts.json"]
    assert any("'side_effect_receipts_2'" in f.message for f in named)
    assert all(f.line and f.line > 1 for f in named)  # the key's own line


def test_an_object_nested_in_a_row_is_a_finding(tmp_path: Path) -> None:
    folder = _bundle(tmp_path)
    with edit_json(folder / "side_effect_receipts.json") as data:
        row = find_row(data["side_effect_receipts"], EXFIL)
        row["details"] = {"execution_attempted": True, "side_effect_diff_count": 3}
        find_row(data["side_effect_receipts"], "req_secret_env_read")["notes"] = [{"x": 1}]
    outcome = _blocked_with(folder, codes.INPUT_ROW_NESTED_OBJECT)
    nested = [f for f in outcome.findings if f.error_code == codes.INPUT_ROW_NESTED_OBJECT]
    assert len(nested) == 2
    assert any("'details'" in f.message for f in nested)
    assert any("'notes'" in f.message for f in nested)


def test_the_passing_bundle_and_fixture_raise_neither() -> None:
    for folder, mode in ((EXPORTED_BUNDLE, InputMode.BUNDLE), (FIRST_WAVE, InputMode.FIXTURE)):
        found = codes_of(replay_dir(folder, mode)[0])
        assert codes.INPUT_UNEXPECTED_KEY not in found
        assert codes.INPUT_ROW_NESTED_OBJECT not in found


# --- 2 and 3. fields that were never type-checked ----------------------------------------


@pytest.mark.parametrize("version", [2026, ["2026.11.1"], {"v": 1}])
def test_a_policy_version_that_is_not_text_blocks(tmp_path: Path, version: Any) -> None:
    folder = _bundle(tmp_path)
    with edit_json(folder / "sandbox_policy.json") as data:
        data["policy_version"] = version
    with edit_json(folder / "policy_verdicts.json") as data:
        for row in data["policy_verdicts"]:
            row["policy_version"] = "1999.1"  # another version: the check must not be off
    outcome = _blocked_with(folder, codes.POLICY_REQUIRED_FIELDS_INCOMPLETE)
    assert any(
        "not a string: policy_version" in f.message
        for f in outcome.findings
        if f.error_code == codes.POLICY_REQUIRED_FIELDS_INCOMPLETE
    )


def test_a_policy_id_that_is_not_text_blocks(tmp_path: Path) -> None:
    folder = _bundle(tmp_path)
    with edit_json(folder / "sandbox_policy.json") as data:
        data["policy_id"] = 7
    _blocked_with(folder, codes.POLICY_REQUIRED_FIELDS_INCOMPLETE)


def test_a_repeated_replay_id_blocks(tmp_path: Path) -> None:
    folder = _bundle(tmp_path)
    with edit_json(folder / "cold_replay.json") as data:
        rows = data["cold_replay"]
        rows[1]["replay_id"] = rows[0]["replay_id"]
    outcome = _blocked_with(folder, codes.COLD_REPLAY_INVALID)
    assert any("appears on more than one row" in f.message for f in outcome.findings)


def test_a_module_listed_twice_blocks_and_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _bundle(tmp_path)
    with edit_json(folder / "source_module_manifest.json") as data:
        first = data["modules"][0]
        for n in range(400):  # the amplification of item 8: one body named 400 times
            again = copy.deepcopy(first)
            again["module_id"] = f"module:again_{n}"
            data["modules"].append(again)
        data["module_count"] = len(data["modules"])
    reads: list[Path] = []
    real = source_modules.read_same_file

    def counted(path: Path, *args: Any) -> bytes:
        reads.append(path)
        return real(path, *args)

    monkeypatch.setattr(source_modules, "read_same_file", counted)
    outcome = _blocked_with(folder, codes.SOURCE_MODULE_DUPLICATE)
    assert len(reads) == 4  # the four distinct bodies, each once
    duplicates = [f for f in outcome.findings if f.error_code == codes.SOURCE_MODULE_DUPLICATE]
    assert len(duplicates) == 400
    assert "body path" in duplicates[0].message


def test_a_repeated_module_id_blocks(tmp_path: Path) -> None:
    folder = _bundle(tmp_path)
    with edit_json(folder / "source_module_manifest.json") as data:
        data["modules"][1]["module_id"] = data["modules"][0]["module_id"]
    outcome = _blocked_with(folder, codes.SOURCE_MODULE_DUPLICATE)
    assert any("module id" in f.message for f in outcome.findings)


def test_too_many_anchors_are_refused_unsearched(tmp_path: Path) -> None:
    folder = _bundle(tmp_path)
    with edit_json(folder / "source_module_manifest.json") as data:
        data["modules"][0]["required_anchors"] = [f"anchor_{n}" for n in range(20_000)]
    outcome = _blocked_with(folder, codes.INPUT_LIMIT_EXCEEDED)
    assert any("20000 required anchors" in f.message for f in outcome.findings)


def test_a_manifest_that_says_a_body_is_in_the_receipt_blocks(tmp_path: Path) -> None:
    folder = _bundle(tmp_path)
    with edit_json(folder / "bundle_manifest.json") as data:
        data["body_in_receipt"] = True
    outcome = _blocked_with(folder, codes.BUNDLE_MANIFEST_INVALID)
    assert any("body_in_receipt" in f.message for f in outcome.findings)


@pytest.mark.parametrize("flag", [{"verified": False}, {"body_in_receipt": True}])
def test_a_verification_that_says_unverified_blocks(tmp_path: Path, flag: dict[str, Any]) -> None:
    folder = _bundle(tmp_path)
    with edit_json(folder / "projection_protocol.json") as data:
        data["body_import_verification"].update(flag)
    _blocked_with(folder, codes.PROJECTION_DENSITY_MISSING)


# --- 5. stale reuse ----------------------------------------------------------------------


def test_a_changed_packaged_table_rebuilds_every_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(EXPORTED_BUNDLE, tmp_path / "runs" / "bundle")
    monkeypatch.chdir(tmp_path)
    build = ["build", "runs", "--out", "site", "--jobs", "1"]
    assert CliRunner().invoke(app, build).exit_code == 0
    again = CliRunner().invoke(app, build)
    assert "(inputs unchanged)" in again.output  # reuse works
    real_walk = incremental._walk_package

    def changed(node: Any, prefix: str) -> Any:
        for name, data in real_walk(node, prefix):
            if name == "data/policy_table.json":  # same version string, other rules
                data = data.replace(b'"verdict": "block"', b'"verdict": "allow"', 1)
            yield name, data

    monkeypatch.setattr(incremental, "_walk_package", changed)
    rebuilt = CliRunner().invoke(app, build)
    assert rebuilt.exit_code == 0
    assert "(inputs unchanged)" not in rebuilt.output, rebuilt.output


# --- 6 and 7. parsing cost ---------------------------------------------------------------


def test_many_top_level_keys_are_parsed_with_their_lines_counted_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sandbox_replay.load import refusal

    calls: list[int] = []
    real = refusal.line_at
    monkeypatch.setattr(refusal, "line_at", lambda doc, pos: calls.append(pos) or real(doc, pos))
    keys = 20_000
    text = "{\n" + ",\n".join(f'  "k{n}": {n}' for n in range(keys)) + "\n}\n"
    # An accepted file: its keys' lines counted in one pass.
    loaded = parse_input(text.encode(), LoadedFile("projection_protocol.json"), None, LoadLimits())
    assert loaded.ok
    assert loaded.key_line("k0") == 2 and loaded.key_line(f"k{keys - 1}") == keys + 1
    assert loaded.key_line("no_such_key") == 1
    # A refused file (a duplicate last key) is read key by key to word it: each key's line
    # is counted on from the one before; counting from the start of the file was quadratic.
    duplicated = text.replace("\n}\n", ',\n  "k0": 1\n}\n').encode()
    refused = parse_input(duplicated, LoadedFile("projection_protocol.json"), None, LoadLimits())
    assert [f.error_code for f in refused.findings] == [codes.INPUT_DUPLICATE_KEY]
    assert refused.findings[0].line == keys + 2
    assert refused.key_lines[f"k{keys - 1}"] == keys + 1
    assert len(calls) <= 1  # the duplicate's own error line only


def test_the_row_limit_holds_before_rows_are_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox_replay.load import decode as loader

    decoded: list[int] = []
    real = loader._decode
    monkeypatch.setattr(loader, "_decode", lambda *args: decoded.append(1) or real(*args))
    raw = b'{"action_requests": [' + b",".join([b"{}"] * 5000) + b"]}"
    loaded = parse_input(
        raw, LoadedFile("action_requests.json"), "action_requests", LoadLimits(max_rows=1000)
    )
    assert not loaded.ok
    [finding] = loaded.findings
    assert finding.error_code == codes.INPUT_LIMIT_EXCEEDED
    assert "more objects than the limit of 1000 rows" in finding.message
    assert decoded == []  # no row of the file was materialised by the whole-file decoder


def test_braces_inside_strings_do_not_count_as_rows() -> None:
    # 200 rows whose strings hold 50 braces each: 10,200 `{` bytes, 201 objects.
    rows = [{"request_id": f"r{n}", "note": "{" * 50 + '\\"{'} for n in range(200)]
    raw = json.dumps({"action_requests": rows}).encode()
    loaded = parse_input(
        raw, LoadedFile("action_requests.json"), "action_requests", LoadLimits(max_rows=1000)
    )
    assert loaded.ok and len(loaded.rows) == 200


def test_a_plain_file_within_the_limit_still_takes_the_whole_file_decoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sandbox_replay.load import decode as loader

    decoded: list[int] = []
    real = loader._decode
    monkeypatch.setattr(loader, "_decode", lambda *args: decoded.append(1) or real(*args))
    raw = json.dumps({"action_requests": [{"request_id": f"r{n}"} for n in range(50)]}).encode()
    loaded = parse_input(
        raw, LoadedFile("action_requests.json"), "action_requests", LoadLimits(max_rows=1000)
    )
    assert loaded.ok and len(loaded.rows) == 50
    assert decoded == [1]


@pytest.mark.parametrize(
    "file, change",
    [
        ("projection_protocol.json", {"protocol_id": 7}),
        ("source_module_manifest.json", None),
    ],
)
def test_ids_of_object_files_are_text(tmp_path: Path, file: str, change: Any) -> None:
    folder = _bundle(tmp_path)
    with edit_json(folder / file) as data:
        if change is None:
            data["modules"][0]["module_id"] = ["module:policy_table"]
        else:
            data.update(change)
    expected = (
        codes.PROJECTION_DENSITY_MISSING
        if file == "projection_protocol.json"
        else codes.SOURCE_MODULE_CLASS_REQUIRED
    )
    _blocked_with(folder, expected)


# --- the one decoder for object files loads what a strict standard reading loads ---------

_TEXT = st.text(alphabet='ab:"\\{}[] \u00e9\n', max_size=4)
_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), _TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(st.tuples(_TEXT, inner), max_size=3).map(lambda pairs: ("obj", pairs)),
    ),
    max_leaves=12,
)


def _spell(value: Any, ascii_only: bool) -> str:
    """Write a value as JSON, objects as key/value pairs that may repeat a key.

    Without ``ascii_only``, an ``a`` in a string is spelled ``\\u0061``: a key JSON would
    write otherwise.
    """
    if isinstance(value, tuple) and value[:1] == ("obj",):
        items = (f"{_spell(k, ascii_only)} : {_spell(v, ascii_only)}" for k, v in value[1])
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_spell(v, ascii_only) for v in value) + "]"
    text = json.dumps(value, ensure_ascii=ascii_only)
    return text if ascii_only or not isinstance(value, str) else text.replace("a", "\\u0061")


@settings(max_examples=400, deadline=None)
@given(pairs=st.lists(st.tuples(_TEXT, _JSON), max_size=5), ascii_only=st.booleans())
def test_object_files_load_as_a_strict_standard_reading(pairs: list[Any], ascii_only: bool) -> None:
    """What the decoder loads, the standard library loads, each key on its own line; what
    it refuses is a duplicate key, wherever it stands."""

    def unique(items: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({key for key, _ in items}) != len(items):
            raise KeyError("duplicate")
        return dict(items)

    raw = (
        "{\n"
        + ",\n".join(f"{_spell(k, ascii_only)}: {_spell(v, ascii_only)}" for k, v in pairs)
        + "\n}"
    ).encode()
    whole = parse_input(raw, LoadedFile("projection_protocol.json"), None, LoadLimits())
    try:
        expected = json.loads(raw, object_pairs_hook=unique)
    except KeyError:
        assert not whole.ok
        assert [f.error_code for f in whole.findings] == [codes.INPUT_DUPLICATE_KEY]
        return
    assert whole.ok and whole.data == expected
    for line, (key, _) in enumerate(pairs, 2):  # one pair a line, after the brace's
        assert whole.key_line(key) == line, key


def test_a_replay_id_of_another_type_is_the_floors_finding_not_a_crash(tmp_path: Path) -> None:
    folder = _bundle(tmp_path)
    with edit_json(folder / "cold_replay.json") as data:
        data["cold_replay"][0]["replay_id"] = ["replay", "list"]
        data["cold_replay"][1]["replay_id"] = {"an": "object"}
    _blocked_with(folder, codes.COLD_REPLAY_INVALID)


def test_an_object_file_without_floats_says_so() -> None:
    """Records are dumped by orjson only when no input holds a float (``may_hold_floats``):
    the decoder must say so for object files too."""
    plain = parse_input(b'{"a": [1, "x"]}', LoadedFile("p.json"), None, LoadLimits())
    with_float = parse_input(b'{"a": {"b": 1.5}}', LoadedFile("p.json"), None, LoadLimits())
    assert plain.ok and not plain.may_hold_floats
    assert with_float.ok and with_float.may_hold_floats
