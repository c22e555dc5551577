"""Inspect AI logs of three releases (tests/data/inspect_versions) import alike.

The logs were written by Inspect 0.3.95, 0.3.135 and 0.3.285 themselves (the folder's
README.md says how); they are read here with the Inspect of the project's venv.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURES, read_json
from sandbox_replay.importers.inspect_events import normalise
from sandbox_replay.importers.inspect_logs import ImportOptions, import_logs, write_bundles
from sandbox_replay.importers.tool_map import read_tool_map

pytest.importorskip("inspect_ai")

LOGS = Path(__file__).parent / "data" / "inspect_versions"
VERSIONS = ("0.3.95", "0.3.135", "0.3.285")
TOOL_MAP = FIXTURES / "inspect" / "tool_map.json"


def test_a_renamed_parameter_reads_under_its_current_name() -> None:
    assert normalise("bash", {"cmd": "ls"}, "0.3.135") == ({"command": "ls"}, ())
    assert normalise("bash", {"command": "ls"}, "0.3.285") == ({"command": "ls"}, ())
    # A version that cannot be read leaves the arguments to decide.
    assert normalise("bash", {"cmd": "ls"}, "unknown") == ({"command": "ls"}, ())


def test_a_former_name_is_renamed_only_where_the_call_means_it() -> None:
    insert = {"command": "insert", "path": "f", "insert_line": 1, "new_str": "c"}
    assert normalise("text_editor", insert, "0.3.95")[0] == {
        "command": "insert",
        "path": "f",
        "insert_line": 1,
        "insert_text": "c",
    }
    replace = {"command": "str_replace", "path": "f", "old_str": "a", "new_str": "b"}
    assert normalise("text_editor", replace, "0.3.95") == (replace, ())


def test_an_argument_it_cannot_normalise_is_kept_and_named() -> None:
    # A release that declares `command` for bash has no `cmd`: kept, never dropped.
    assert normalise("bash", {"cmd": "ls"}, "0.3.290") == ({"cmd": "ls"}, ("cmd",))
    assert normalise("bash", {"command": "ls", "cmd": "rm"}, "0.3.95") == (
        {"command": "ls", "cmd": "rm"},
        ("cmd",),
    )
    assert normalise("python", {"code": "1", "extra": 2}, "0.3.285") == (
        {"code": "1", "extra": 2},
        ("extra",),
    )
    # A tool that is not one of Inspect's is left as recorded, with nothing to name.
    assert normalise("save_note", {"name": "n"}, "0.3.95") == ({"name": "n"}, ())


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("inspect_versions")
    options = ImportOptions(read_tool_map(TOOL_MAP))
    folders = {}
    for version in VERSIONS:
        (folder,) = write_bundles(import_logs([LOGS / f"{version}.eval"], options), out)
        folders[version] = folder
    return folders


def requests(folder: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = read_json(folder / "action_requests.json")["action_requests"]
    return rows


@pytest.mark.parametrize("version", VERSIONS)
def test_bash_calls_are_classified_alike_in_every_release(
    bundles: dict[str, Path], version: str
) -> None:
    bash = [r for r in requests(bundles[version]) if r["tool_function"] == "bash"]
    assert [r["map_rule_ref"] for r in bash] == [
        "map_rule:none_matched",
        "map:inspect_builtin_tools#bash_network_after_tool_output",
        "map_rule:none_matched",
    ]
    assert all("arguments_not_normalised" not in r for r in requests(bundles[version]))


@pytest.mark.parametrize("version", VERSIONS)
def test_text_editor_writes_are_classified_in_every_release(
    bundles: dict[str, Path], version: str
) -> None:
    editor = [r for r in requests(bundles[version]) if r["tool_function"] == "text_editor"]
    assert [str(r["map_rule_ref"]).rsplit("#", 1)[-1] for r in editor] == [
        "map_rule:none_matched",
        *["text_editor_write"] * 3,
    ]
