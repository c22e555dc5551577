"""The run page lists the calls of an Inspect log no map rule matched (issue #43 item 2).

Each listed tool gets its count, a link to its first call's join row and a rule in a map
snippet; filled in and passed as ``--map``, the snippet leaves nothing unmapped.
"""

from __future__ import annotations

import html
import json
import re
import zipfile
from pathlib import Path

import pytest

from conftest import FIXTURES, working_directory
from sandbox_replay.importers.inspect_logs import ImportOptions, import_logs, write_bundles
from sandbox_replay.importers.tool_map import packaged_map, read_tool_map
from sandbox_replay.report.build import BuildConfig, build_site
from sandbox_replay.report.views.unmapped import FILL_IN

pytest.importorskip("inspect_ai")

EXAMPLE = FIXTURES / "inspect" / "example.eval"
PAGE = "runs/example-agent_run-e1/index.html"
# A tool name made to break out of the page, the snippet's JSON and the map's glob.
HOSTILE = '<img src=x onerror=alert(1)>"*?[x]'
# A shape of the policy table, for the filled-in snippet.
FILLED = {
    "action_kind": "filesystem_write",
    "requested_capability": "public_fixture_write",
    "risk_class": "low_risk_public_fixture_mutation",
}
ROW = re.compile(
    r'<tr><th scope="row"><code>(.*?)</code></th><td>(\d+)</td><td><a href="([^"]*)">join row'
)


def build(work: Path, source: Path, options: ImportOptions | None = None) -> str:
    with working_directory(work):
        build_site(
            BuildConfig(
                (source,),
                Path("site"),
                cwd=work,
                progress=lambda _message: None,
                jobs=1,
                inspect=options or ImportOptions(),
            )
        )
    return (work / "site" / PAGE).read_text("utf-8")


def section(page: str) -> str:
    start = page.index('<section id="unmapped"')
    return page[start : page.index("</section>", start)]


def snippet(page: str) -> dict[str, object]:
    found = re.search(r'<pre class="map-snippet"><code>(.*?)</code></pre>', page, re.S)
    assert found is not None
    data: dict[str, object] = json.loads(html.unescape(found.group(1)))
    return data


def filled_map(page: str, path: Path) -> ImportOptions:
    text = json.dumps(snippet(page))
    for key, value in FILLED.items():
        text = text.replace(f'"{key}": "{FILL_IN}"', f'"{key}": "{value}"', 1)
    text = re.sub(rf'"(\w+)": "{FILL_IN}"', lambda m: f'"{m[1]}": "{FILLED[m[1]]}"', text)
    path.write_text(text, "utf-8")
    return ImportOptions(read_tool_map(path))


def test_the_example_lists_each_unmapped_tool_with_its_count_and_first_call(
    tmp_path: Path,
) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / EXAMPLE.name).write_bytes(EXAMPLE.read_bytes())
    page = build(tmp_path, Path("logs"))
    # ls -a, print(2 + 2) and the note are unmapped; curl is the packaged bash_network rule.
    assert ROW.findall(section(page)) == [
        ("bash", "1", "#req-call_list"),
        ("python", "1", "#req-call_python"),
        ("save_note", "1", "#req-call_note"),
    ]
    for _tool, _count, href in ROW.findall(section(page)):
        assert f'id="{href[1:]}"' in page
    assert '<a href="#unmapped">Unmapped calls</a>' in page
    rules = snippet(page)["rules"]
    assert isinstance(rules, list)
    assert [(rule["rule_id"], rule["function"]) for rule in rules] == [
        ("my_bash", "bash"),
        ("my_python", "python"),
        ("my_save_note", "save_note"),
    ]
    assert all(rule["risk_class"] == FILL_IN for rule in rules)


def test_the_snippet_filled_in_leaves_nothing_unmapped(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / EXAMPLE.name).write_bytes(EXAMPLE.read_bytes())
    page = build(tmp_path, Path("logs"))
    options = filled_map(page, tmp_path / "my_map.json")
    again = build(tmp_path / "logs", Path("."), options)
    assert 'id="unmapped"' not in again
    assert "Unmapped calls" not in again


def test_a_bundle_the_import_wrote_shows_the_same_section(tmp_path: Path) -> None:
    from_log = section(build(tmp_path, EXAMPLE.parent))
    write_bundles(import_logs([EXAMPLE], ImportOptions(packaged_map())), tmp_path / "imported")
    work = tmp_path / "second"
    work.mkdir()
    from_folder = section(build(work, tmp_path / "imported"))
    assert from_folder == from_log


def test_a_run_that_is_not_an_inspect_import_has_no_section(tmp_path: Path) -> None:
    with working_directory(tmp_path):
        build_site(
            BuildConfig((FIXTURES,), Path("site"), cwd=tmp_path, progress=lambda _m: None, jobs=1)
        )
    pages = sorted((tmp_path / "site" / "runs").glob("*/index.html"))
    assert len(pages) > 2
    with_section = [p.parent.name for p in pages if 'id="unmapped"' in p.read_text("utf-8")]
    assert with_section == ["example-agent_run-e1"]


def hostile_log(out: Path) -> Path:
    """Return the example log with its ``save_note`` tool renamed to ``HOSTILE``."""
    name = json.dumps(HOSTILE)[1:-1].encode()
    with zipfile.ZipFile(EXAMPLE) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            target.writestr(info, source.read(info).replace(b"save_note", name))
    return out


def test_a_hostile_tool_name_is_escaped_and_matched_only_by_itself(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    hostile_log(tmp_path / "logs" / "example.eval")
    page = build(tmp_path, Path("logs"))
    assert "<img" not in page
    part = section(page)
    names = [html.unescape(name.replace("<wbr>", "")) for name, _n, _h in ROW.findall(part)]
    assert names == [HOSTILE, "bash", "python"]  # sorted by name
    rules = snippet(page)["rules"]
    assert isinstance(rules, list)
    (rule,) = [r for r in rules if r["rule_id"] == f"my_{HOSTILE}"]
    # Each glob character stands for itself, so the rule matches this tool and no other.
    assert rule["function"] == '<img src=x onerror=alert(1)>"[*][?][[]x]'
    again = build(tmp_path / "logs", Path("."), filled_map(page, tmp_path / "map.json"))
    assert 'id="unmapped"' not in again
