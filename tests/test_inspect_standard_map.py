"""The packaged map of Inspect's standard tools (issue #43): in force without ``--map``."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from conftest import FIXTURES
from sandbox_replay.importers.inspect_bundle import MAP_MODULE_PATH, PACKAGED_MODULE_PATH
from sandbox_replay.importers.inspect_logs import ImportOptions, import_logs
from sandbox_replay.importers.tool_map import packaged_map, read_tool_map

LOGS = Path(__file__).parent / "data" / "inspect_versions"
NONE = "map_rule:none_matched"
NETWORK = ("network_request", "outbound_network", "network_exfiltration")
WRITE = ("filesystem_write", "public_fixture_write", "low_risk_public_fixture_mutation")
# Each call of the three logs (tests/data/inspect_versions/README.md), in order: its tool,
# the packaged rule that classifies it (NONE: unmapped, left to fail closed), its shape.
CALLS = [
    ("bash", NONE, None),  # ls -a: the table has no read-only kind
    ("bash", "bash_network", NETWORK),  # curl
    ("bash", NONE, None),  # echo > file: a shell command, no kind for it
    ("python", NONE, None),
    ("text_editor", NONE, None),  # view
    *[("text_editor", "text_editor_write", WRITE)] * 3,
    ("think", NONE, None),
    ("web_browser_go", "web_browser_go", NETWORK),
    ("web_browser_click", "web_browser_page_load", NETWORK),
    ("web_search", "web_search", NETWORK),
    ("computer", NONE, None),
]
LATER = [
    ("bash_session", NONE, None),  # pwd
    *[
        (tool, NONE, None)
        for tool in ("code_execution", "grep", "list_files", "read_file", "memory")
    ],  # memory: a view
    *[(tool, NONE, None) for tool in ("todo_write", "update_plan", "notify_user")],
]
EXPECTED = {
    "0.3.95": [*CALLS, LATER[0]],
    "0.3.135": CALLS,
    "0.3.285": [*CALLS, *LATER],
}

pytest.importorskip("inspect_ai")


def requests(version: str, options: ImportOptions) -> list[dict[str, object]]:
    (bundle,) = import_logs([LOGS / f"{version}.eval"], options)
    rows: list[dict[str, object]] = json.loads(bundle.files["action_requests.json"])[
        "action_requests"
    ]
    return rows


def shape(row: dict[str, object]) -> tuple[object, ...] | None:
    if row["risk_class"] == "unclassified":
        return None
    return (row["action_kind"], row["requested_capability"], row["risk_class"])


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_without_a_map_each_standard_call_is_classified_as_the_table_says(version: str) -> None:
    rows = requests(version, ImportOptions())
    found = [
        (row["tool_function"], str(row["map_rule_ref"]).removeprefix(MAP_PREFIX), shape(row))
        for row in rows
    ]
    assert found == EXPECTED[version]
    for row in rows:
        if row["risk_class"] == "unclassified":
            assert (row["requested_capability"], row["source_trust_label"]) == (
                "unclassified",
                "model_generated",
            )


MAP_PREFIX = "map:inspect_standard_tools#"


def test_every_packaged_rule_is_a_shape_the_packaged_policy_table_knows() -> None:
    table = json.loads(
        (resources.files("sandbox_replay") / "data" / "policy_table.json").read_bytes()
    )
    known = {(r["action_kind"], r["requested_capability"], r["risk_class"]) for r in table["rules"]}
    rules = packaged_map().rules
    assert rules and {r.map_id for r in rules} == {"map:inspect_standard_tools"}
    for rule in rules:
        assert (rule.action_kind, rule.requested_capability, rule.risk_class) in known, rule
        # The packaged map claims no trust a log cannot show.
        assert rule.source_trust_label == "model_generated", rule.rule_id


def test_an_unknown_tool_stays_unclassified() -> None:
    for function, arguments in [
        ("my_tool", {"command": "curl https://example.com"}),
        ("bash_v2", {"command": "rm -rf /"}),
        ("bash", {"cmd": "curl x"}),  # a name the importer did not normalise
        ("web_browser_go", {"url": "file:///etc/passwd"}),
    ]:
        classified = packaged_map().classify(function, arguments, "bash")
        assert (classified.risk_class, classified.rule_ref) == ("unclassified", ""), function


def test_a_user_map_overrides_a_packaged_rule_by_id_and_adds_its_own(tmp_path: Path) -> None:
    path = tmp_path / "map.json"
    rule = {
        "function": "web_search",
        "action_kind": "network_request",
        "requested_capability": "outbound_network",
        "risk_class": "network_exfiltration",
    }
    own = {**rule, "rule_id": "my_lookup", "function": "lookup"}
    path.write_text(
        json.dumps({"map_id": "map:mine", "rules": [{**rule, "rule_id": "web_search"}, own]})
    )
    tool_map = read_tool_map(path)
    # The user's rule of the same id replaces the packaged one: no follows_output_of here.
    search = tool_map.classify("web_search", {"query": "q"}, "bash")
    assert (search.rule_ref, search.source_trust_label) == (
        "map:mine#web_search",
        "model_generated",
    )
    assert tool_map.classify("lookup", {}, None).rule_ref == "map:mine#my_lookup"
    # The packaged rules it does not name stay in force, under the packaged map's id.
    assert tool_map.classify("bash", {"command": "curl x"}, None).rule_ref == (
        MAP_PREFIX + "bash_network"
    )
    assert [r.rule_id for r in tool_map.rules].count("web_search") == 1
    assert (
        read_tool_map(path, packaged=False).classify("bash", {"command": "curl x"}, None).rule_ref
        == ""
    )


def test_the_example_map_extends_the_packaged_one() -> None:
    rows = requests("0.3.285", ImportOptions(read_tool_map(FIXTURES / "inspect" / "tool_map.json")))
    editor = [r for r in rows if r["tool_function"] == "text_editor"]
    assert [(r["map_rule_ref"], r["source_trust_label"]) for r in editor] == [
        (NONE, "model_generated"),
        *[("map:inspect_builtin_tools#text_editor_write", "trusted_user_request")] * 3,
    ]
    assert [r["map_rule_ref"] for r in rows if r["tool_function"] == "web_search"] == [
        MAP_PREFIX + "web_search"
    ]


def modules(options: ImportOptions) -> tuple[dict[str, bytes], list[dict[str, object]]]:
    (bundle,) = import_logs([LOGS / "0.3.135.eval"], options)
    manifest = json.loads(bundle.files["source_module_manifest.json"])
    return dict(bundle.files), manifest["modules"]


def test_a_bundle_records_which_maps_classified_it_with_their_digests() -> None:
    files, listed = modules(ImportOptions())
    packaged = packaged_map()
    assert [(m["path"], m["sha256"], m["required_anchors"]) for m in listed] == [
        (PACKAGED_MODULE_PATH, packaged.sha256, ["map:inspect_standard_tools"])
    ]
    assert files[PACKAGED_MODULE_PATH] == packaged.body and MAP_MODULE_PATH not in files

    user = read_tool_map(FIXTURES / "inspect" / "tool_map.json")
    files, listed = modules(ImportOptions(user))
    assert [(m["path"], m["sha256"]) for m in listed] == [
        (MAP_MODULE_PATH, user.sha256),
        (PACKAGED_MODULE_PATH, packaged.sha256),
    ]
    assert files[MAP_MODULE_PATH] == (FIXTURES / "inspect" / "tool_map.json").read_bytes()


def test_docs_list_every_packaged_rule_in_order() -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "inspect.md").read_text("utf-8")
    section = docs.split("## The packaged map", 1)[1].split("\n## ", 1)[0]
    listed = [line.split("`")[1] for line in section.splitlines() if line.startswith("| `")]
    assert listed == [rule.rule_id for rule in packaged_map().rules]


@pytest.mark.parametrize(
    ("function", "arguments", "rule"),
    [
        ("bash", {"command": "cd /tmp && curl -s https://x.test"}, "bash_network"),
        ("bash", {"command": "echo curl is a tool"}, ""),
        ("bash", {"command": "sudo rm -Rf build"}, "bash_recursive_delete"),
        ("bash", {"command": "env | grep KEY"}, "bash_env_read"),
        ("bash", {"command": "echo aGk= | base64 -d | sh"}, "shell_obfuscated_pipeline"),
        ("bash_session", {"action": "type_submit", "input": "wget x"}, "session_network"),
        ("python", {"code": "import urllib.request"}, "code_network"),
        ("code_execution", {"code": "import os; os.environ['K']"}, "code_env_read"),
        ("memory", {"command": "delete", "path": "/memories/a"}, "memory_delete"),
        ("memory", {"command": "view", "path": "/memories"}, ""),
        ("web_browser_go", {"url": "HTTP://example.com"}, "web_browser_go"),
        ("web_browser_scroll", {"direction": "down"}, ""),
    ],
)
def test_packaged_rules_match_what_their_docs_say(
    function: str, arguments: dict[str, object], rule: str
) -> None:
    found = packaged_map().classify(function, arguments, None).rule_ref
    assert found == (MAP_PREFIX + rule if rule else "")
