"""Text that looks like something else (issue #28, item 11), each attack reproduced.

Invisible and format characters in an id must be shown as ``<U+XXXX>`` on the run page,
in the SARIF, JUnit and Markdown exports and on the terminal; ids of one run that look
alike (equal Unicode confusable skeletons) are a finding; a run folder's name never
reaches the terminal raw; a SARIF message stays on one line; and no ``@mention`` of an
input value is live in the Markdown summary.
"""

from __future__ import annotations

import html
import json
import random
import re
import shutil
import sys
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from conftest import EXPORTED_BUNDLE, FIRST_WAVE, codes_of, edit_json, replay_dir, twin_rows
from sandbox_replay.checks.confusables import _HIDDEN, skeleton, skeletons, standard_skeleton
from sandbox_replay.cli import app
from sandbox_replay.exports import ExportFacts, ExportRun
from sandbox_replay.exports.markdown import build_markdown
from sandbox_replay.exports.sarif import build_sarif
from sandbox_replay.exports.text import one_line, visible
from sandbox_replay.model import codes

ZERO_WIDTH_SPACE, BYTE_ORDER_MARK, TAG_A = "\u200b", "\ufeff", "\U000e0041"
INVISIBLE = (ZERO_WIDTH_SPACE, BYTE_ORDER_MARK, TAG_A)
# A request id that renders as plain ``req_invisible_id`` wherever these go unmarked.
SNEAKY_ID = f"req_{ZERO_WIDTH_SPACE}invisible{BYTE_ORDER_MARK}_id{TAG_A}"
MARKS = ("<U+200B>", "<U+FEFF>", "<U+E0041>")
# Every character no output may hold raw: controls but line breaks and tab, then the
# format characters (Cf: zero-width, bidi, tags, the byte-order mark), the line and
# paragraph separators and the variation selectors.
RAW = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u206f\ufe00-\ufe0f\ufeff\U000e0000-\U000e0fff]"
)
SECRET_READ = "req_secret_env_read"
CYRILLIC_IE = "\u0435"  # е, drawn as the Latin e


def _fixture_with_request_id(tmp_path: Path, request_id: str) -> Path:
    """Copy the fixture and give its first request ``request_id`` (its joins then fail)."""
    folder = tmp_path / "fixture"
    shutil.copytree(FIRST_WAVE, folder)
    with edit_json(folder / "action_requests.json") as data:
        data["action_requests"][0]["request_id"] = request_id
    return folder


def _build(tmp_path: Path, *folders: Path) -> tuple[Path, str]:
    """Build ``folders`` with every export, in this process; return the out folder and output."""
    out = tmp_path / "out"
    args = ["build", *map(str, folders), "--out", str(out / "site"), "--jobs", "1"]
    args += ["--sarif", str(out / "log.sarif"), "--junit", str(out / "junit.xml")]
    args += ["--markdown", str(out / "summary.md")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return out, result.output


def _render_markdown(text: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(text)


def _text_outside_code(rendered: str) -> str:
    """Return the rendered Markdown's text, less what sits in code spans and blocks."""
    outside = re.sub(r"<code>.*?</code>", "", rendered, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", outside))


# ---------------------------------------------------------------------------------------
# Invisible characters are shown, everywhere


def test_visible_marks_every_invisible_and_format_character() -> None:
    for char in (*INVISIBLE, "\u00ad", "\u2060", "\u2028", "\ufe0f", "\U000e0100", "\u3164"):
        assert visible(f"a{char}b") == f"a<U+{ord(char):04X}>b"
    assert one_line("a\r\nb\u2028c") == "a b c"  # line breaks fold before marking
    assert visible("plain ASCII, tab\tand\nbreak; café ✓ 日本") == (
        "plain ASCII, tab\tand\nbreak; café ✓ 日本"
    )


def test_every_control_format_and_separator_character_is_marked() -> None:
    kept = {"\t", "\n", "\r"}
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if unicodedata.category(char) in {"Cc", "Cf", "Zl", "Zp"} and char not in kept:
            assert visible(char) == f"<U+{code:04X}>"
        elif char.isascii() and char.isprintable():
            assert visible(char) == char
    # ``visible`` returns printable ASCII without running its pattern: the pattern would
    # mark none of it.
    printable_ascii = "".join(map(chr, range(0x20, 0x7F)))
    assert _HIDDEN.search(printable_ascii) is None


def test_the_ascii_skeletons_are_the_standard_ones() -> None:
    """A printable ASCII id is mapped by table; the table must give the UTS #39 skeleton.

    That skeleton is ICU's on these ids and the whole table: tests/test_confusables_golden.py.
    """
    alphabet = "".join(map(chr, range(0x20, 0x7F)))
    picked = random.Random(11)
    ids = ["".join(picked.choices(alphabet, k=picked.randint(1, 24))) for _ in range(2000)]
    ids += [alphabet, "req_rn_m_0O_1lI|"]
    assert skeletons(ids) == list(map(standard_skeleton, ids))
    assert skeletons(ids) == list(map(skeleton, ids))
    assert skeleton("req_rn_m_0O_1lI|") == "req_rn_rn_OO_llll"
    assert skeletons([]) == []
    # An id that is not all printable ASCII is mapped code point by code point, less what
    # draws nothing.
    assert skeletons(["req_a", f"req_{CYRILLIC_IE}{ZERO_WIDTH_SPACE}"]) == ["req_a", "req_e"]


def test_invisible_characters_in_an_id_are_marked_on_the_page_and_in_every_export(
    tmp_path: Path,
) -> None:
    out, output = _build(tmp_path, _fixture_with_request_id(tmp_path, SNEAKY_ID))
    page = (out / "site" / "runs" / "fixture" / "index.html").read_text("utf-8")
    sarif = (out / "log.sarif").read_text("utf-8")
    junit = (out / "junit.xml").read_text("utf-8")
    markdown = (out / "summary.md").read_text("utf-8")
    for mark in MARKS:
        assert html.escape(mark, quote=False) in page
        assert mark in json.dumps(json.loads(sarif), ensure_ascii=False)
        assert mark in "".join(ET.fromstring(junit).itertext()) + junit
        assert mark in html.unescape(_render_markdown(markdown))
    for path in [*(out / "site").rglob("*.html"), out / "log.sarif", out / "junit.xml"]:
        found = RAW.search(path.read_text("utf-8"))
        assert found is None, f"{path.name} holds U+{ord(found.group()):04X} raw"
    assert RAW.search(markdown) is None
    assert RAW.search(output) is None


def test_invisible_characters_in_an_escaped_sarif_are_marked_not_encoded(tmp_path: Path) -> None:
    """The SARIF is ASCII-escaped JSON: a raw U+200B would be written as ``\\u200b``."""
    out, _ = _build(tmp_path, _fixture_with_request_id(tmp_path, SNEAKY_ID))
    sarif = (out / "log.sarif").read_text("utf-8").lower()
    for char in INVISIBLE:
        escaped = json.dumps(char).strip('"').lower()
        assert escaped not in sarif, f"{escaped} in the SARIF"


def test_invisible_characters_in_the_console_summary_are_marked(tmp_path: Path) -> None:
    folder = tmp_path / "bundle"
    shutil.copytree(EXPORTED_BUNDLE, folder)
    with edit_json(folder / "bundle_manifest.json") as manifest:
        manifest["bundle_id"] = SNEAKY_ID
    result = CliRunner().invoke(
        app, ["run-sandbox-bundle", "-i", str(folder), "-o", str(tmp_path / "out")]
    )
    assert result.exit_code in (0, 1), result.output
    assert "bundle req_<U+200B>invisible<U+FEFF>_id<U+E0041>" in result.output
    assert RAW.search(result.output) is None


# ---------------------------------------------------------------------------------------
# Ids that look alike


def test_ids_that_render_alike_are_a_finding(tmp_path: Path) -> None:
    folder = tmp_path / "fixture"
    shutil.copytree(FIRST_WAVE, folder)
    cyrillic = SECRET_READ.replace("read", f"r{CYRILLIC_IE}ad")
    hidden = SECRET_READ + ZERO_WIDTH_SPACE
    twin_rows(folder, SECRET_READ, cyrillic)
    twin_rows(folder, SECRET_READ, hidden)
    outcome, _ = replay_dir(folder)
    assert codes.ACTION_ID_CONFUSABLE in codes_of(outcome)
    assert outcome.status == "blocked"
    found = [f for f in outcome.findings if f.error_code == codes.ACTION_ID_CONFUSABLE]
    request_findings = [f for f in found if f.subject_kind == "action_request"]
    assert sorted(f.subject_id for f in request_findings) == sorted([cyrillic, hidden])
    for finding in found:
        assert RAW.search(finding.message) is None
    cyrillic_finding = next(f for f in request_findings if f.subject_id == cyrillic)
    assert "U+0435 CYRILLIC SMALL LETTER IE" in cyrillic_finding.message
    hidden_finding = next(f for f in request_findings if f.subject_id == hidden)
    assert f"{SECRET_READ}<U+200B>" in hidden_finding.message
    assert SECRET_READ in hidden_finding.message
    # Only the look-alike codes are new: the twins are otherwise whole requests.
    clean = replay_dir(FIRST_WAVE)[0]
    assert set(codes_of(outcome)) - set(codes_of(clean)) == {codes.ACTION_ID_CONFUSABLE}


def test_distinct_ids_that_do_not_look_alike_raise_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "fixture"
    shutil.copytree(FIRST_WAVE, folder)
    twin_rows(folder, SECRET_READ, "req_secret_env_read_again")
    outcome, _ = replay_dir(folder)
    assert codes.ACTION_ID_CONFUSABLE not in codes_of(outcome)


# ---------------------------------------------------------------------------------------
# Names and ids on the terminal and in the exports

HOSTILE_FOLDER = "run\x1b[31m\rforged\nsandbox-replay: all clear \u202eevil"


@pytest.mark.parametrize("hidden", [False, True], ids=["replayed", "skipped"])
def test_a_run_folder_name_never_reaches_the_terminal_raw(tmp_path: Path, hidden: bool) -> None:
    parent = tmp_path / "runs"
    parent.mkdir()
    shutil.copytree(FIRST_WAVE, parent / (("." if hidden else "") + HOSTILE_FOLDER))
    shutil.copytree(FIRST_WAVE, parent / "plain")  # a run to build besides a skipped one
    _, output = _build(tmp_path, parent)
    assert RAW.search(output) is None
    assert "\r" not in output
    lines = output.splitlines()
    assert all(line.startswith("sandbox-replay: ") for line in lines), lines
    assert not any("all clear" in line and not line.count("<U+") for line in lines)
    assert "<U+001B>[31m" in output and "<U+202E>evil" in output


def test_a_line_break_in_an_id_stays_out_of_the_sarif_message(tmp_path: Path) -> None:
    request_id = "req_x\r\nerror: forged second line\u2028third\x85fourth"
    outcome, _ = replay_dir(_fixture_with_request_id(tmp_path, request_id))
    sarif = build_sarif([ExportRun("fixture", ExportFacts.of(outcome), "")])
    messages = [r["message"]["text"] for r in sarif["runs"][0]["results"]]
    assert any("forged second line" in m for m in messages)
    for message in messages:
        assert not re.search("[\r\n\u2028\u2029\x85]", message), message


def test_a_mention_in_an_id_is_not_live_in_the_markdown(tmp_path: Path) -> None:
    request_id = "req_@octocat and @github/security-team"
    outcome, _ = replay_dir(_fixture_with_request_id(tmp_path, request_id))
    text = build_markdown([ExportRun("fixture", ExportFacts.of(outcome), "")])
    rendered = _render_markdown(text)
    assert "@octocat" in html.unescape(rendered)  # still shown
    outside = _text_outside_code(rendered)
    assert not re.search(r"@[A-Za-z0-9]", outside), outside
