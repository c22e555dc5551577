"""Inspect AI logs of three releases (tests/data/inspect_versions) import alike.

The logs were written by Inspect 0.3.95, 0.3.135 and 0.3.285 themselves (the folder's
README.md says how); they are read here with the Inspect of the project's venv.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import FIXTURES, read_json
from sandbox_replay import InputMode, ReplayConfig, replay
from sandbox_replay.importers.inspect_events import Effects, effects_of, normalise
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
        "map:inspect_standard_tools#bash_network",
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


def effects(folder: Path) -> list[tuple[object, ...]]:
    """Each call's tool, map rule, and side effect: executed, diff count, what the ref says."""
    rows = read_json(folder / "side_effect_receipts.json")["side_effect_receipts"]
    return [
        (
            request["tool_function"],
            str(request["map_rule_ref"]).rsplit("#", 1)[-1],
            row["execution_attempted"],
            row["side_effect_diff_count"],
            str(row["filesystem_diff_ref"]).split("/", 1)[0].removeprefix("diff:"),
        )
        for request, row in zip(requests(folder), rows, strict=True)
    ]


NONE = "map_rule:none_matched"
COMMANDS = [
    ("bash", NONE, True, 1, "executed_change_unknown"),
    ("bash", "bash_network", True, 1, "executed_change_unknown"),
    ("bash", NONE, True, 1, "executed_change_unknown"),
    ("python", NONE, True, 1, "executed_change_unknown"),
]
# text_editor through tool support: a view reads, each edit is one diff.
EDITS = [
    ("text_editor", NONE, True, 0, "none_read_only"),
    *[("text_editor", "text_editor_write", True, 1, "inspect")] * 3,
]
# Calls that never reach the sandbox, or fail at Inspect's set-up: no effect.
UNEXECUTED = [
    (function, rule, False, 0, "none")
    for function, rule in (
        ("think", NONE),
        ("web_browser_go", "web_browser_go"),
        ("web_browser_click", "web_browser_page_load"),
        ("web_search", "web_search"),
        ("computer", NONE),
    )
]


def test_each_release_counts_the_calls_own_work_once(bundles: dict[str, Path]) -> None:
    assert effects(bundles["0.3.95"]) == [
        *COMMANDS,
        # No tool support in 0.3.95's sandbox: the editor fails after only set-up.
        *[("text_editor", r, False, 0, "none") for r in [NONE, *["text_editor_write"] * 3]],
        *UNEXECUTED,
        ("bash_session", NONE, False, 0, "none"),
    ]
    assert effects(bundles["0.3.135"]) == [*COMMANDS, *EDITS, *UNEXECUTED]
    assert effects(bundles["0.3.285"]) == [
        *COMMANDS,
        *EDITS,
        *UNEXECUTED,
        ("bash_session", NONE, True, 1, "executed_change_unknown"),
        *[
            (function, NONE, True, 1, "executed_change_unknown")
            for function in ("code_execution", "grep", "list_files", "read_file")
        ],
        *[
            (function, NONE, False, 0, "none")
            for function in ("memory", "todo_write", "update_plan", "notify_user")
        ],
    ]


def findings_by_call(folder: Path) -> list[tuple[str, list[str]]]:
    """Each call's tool and the codes of the findings about it, in call order."""
    outcome = replay(ReplayConfig(folder, InputMode.BUNDLE))
    ids = [str(r["request_id"]) for r in requests(folder)]
    codes_of = {
        rid: sorted(f.error_code for f in outcome.findings if f.subject_id in (rid, f"span:{rid}"))
        for rid in ids
    }
    return [(str(r["tool_function"]), codes_of[str(r["request_id"])]) for r in requests(folder)]


def test_the_same_calls_are_reported_the_same_way(bundles: dict[str, Path]) -> None:
    reported = {version: findings_by_call(bundles[version]) for version in VERSIONS}
    # The shell calls and the calls that never ran, in every release.
    for version in VERSIONS:
        assert reported[version][:4] == reported["0.3.95"][:4], version
        assert reported[version][8:13] == reported["0.3.95"][8:13], version
    # The editor, wherever tool support ran it.
    assert reported["0.3.135"][4:8] == reported["0.3.285"][4:8]


def sandbox(action: str, target: str, input: str | None = None) -> SimpleNamespace:
    file = None if action == "exec" else target
    return SimpleNamespace(
        action=action, cmd=target if action == "exec" else None, file=file, input=input
    )


def test_set_up_and_transport_are_not_counts_of_change() -> None:
    rpc = '{"jsonrpc": "2.0", "method": "%s", "params": {"command": "%s"}, "id": 1}'
    activity = [
        sandbox("exec", "which inspect-tool-support"),
        sandbox("write_file", "/opt/inspect-sandbox-tools"),
        sandbox("exec", "/opt/inspect-sandbox-tools exec", rpc % ("bash_session_new_session", "")),
        sandbox("exec", "/opt/inspect-sandbox-tools exec", rpc % ("text_editor", "insert")),
        sandbox("exec", "/opt/inspect-sandbox-tools exec", rpc % ("text_editor", "view")),
        sandbox("exec", "/opt/inspect-sandbox-tools exec", rpc % ("bash_session", "None")),
        sandbox("write_file", "note.txt"),
        sandbox("read_file", "note.txt"),
        sandbox("exec", "bash --login -c 'ls'"),
    ]
    assert effects_of(activity, "{}") == Effects(writes=2, unknown=2, reads=2)


def test_a_set_up_mark_the_call_itself_sent_is_its_work() -> None:
    hidden = sandbox("exec", "bash --login -c 'rm -rf x # inspect-tool-support'")
    arguments = '{"command": "rm -rf x # inspect-tool-support"}'
    assert effects_of([hidden], arguments) == Effects(unknown=1)
    assert effects_of([hidden], "{}") == Effects()


def test_the_run_page_says_an_exec_s_change_is_unknown() -> None:
    """A call that ran a command whose change the log cannot tell is not shown as a plain
    diff: the join cell says the change is unknown and what the count holds."""
    page = (
        Path(__file__).resolve().parent.parent / "site/runs/example-agent_run-e1/index.html"
    ).read_text("utf-8")
    assert page.count("change unknown, counted as 1 diff") == 2  # call_list, call_fetch
    assert "change unknown, counted as 1 diff · fs diff:executed_change_unknown/" in page.replace(
        "<wbr>", ""
    )
