"""Ids a reader could take for another carry a visible mark wherever printed (issue #46).

One bundle holds ``req_secret_env_read`` and four requests beside it: its twins with a
zero-width space, a Cyrillic ``е`` and a right-to-left override inside, and an id in
mixed scripts that looks like no other. Each is marked, with its code points, in the join
table, the findings, the gaps page, the search index, the single file, the Markdown
summary, the SARIF log and the JUnit report; the plain id says it has look-alikes.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from conftest import FIRST_WAVE, twin_rows
from sandbox_replay.cli import app
from sandbox_replay.exports.markdown import md_text
from sandbox_replay.exports.text import escaped, id_mark, look_alike_ids, subject_look_alikes
from sandbox_replay.model import codes
from sandbox_replay.model.findings import Finding
from sandbox_replay.records.headline import gap_headline
from sandbox_replay.report.views.run import _join_range

PLAIN = "req_secret_env_read"
ZERO_WIDTH = "req_secret\u200b_env_read"
CYRILLIC = "req_s\u0435cret_env_read"
BIDI = "req_secret_\u202eenv_read"
MIXED = "req_secret_env_\u043a\u043b\u044e\u0447"  # Latin, then Cyrillic "ключ"
TWINS = (ZERO_WIDTH, CYRILLIC, BIDI)
POINTS = {ZERO_WIDTH: "U+200B", CYRILLIC: "U+0435", BIDI: "U+202E", MIXED: "U+043A"}
LOOK_ALIKE = "⚠ look-alike id: "
NON_ASCII = "⚠ non-ASCII id: "
HAS_LOOK_ALIKES = "⚠ has look-alike ids"


def test_id_mark_decides_from_the_run_s_collisions() -> None:
    collisions = look_alike_ids([PLAIN, *TWINS, MIXED, "req_other"])
    assert collisions == {PLAIN, *TWINS}
    assert id_mark("req_other", collisions) == ""
    assert id_mark(PLAIN, collisions) == HAS_LOOK_ALIKES
    assert id_mark(CYRILLIC, collisions) == LOOK_ALIKE + "req_s<U+0435>cret_env_read"
    assert id_mark(BIDI, collisions) == LOOK_ALIKE + "req_secret_<U+202E>env_read"
    assert (
        id_mark(MIXED, collisions) == NON_ASCII + "req_secret_env_<U+043A><U+043B><U+044E><U+0447>"
    )
    # Ids collide within their kind only: the two lists are compared apart.
    assert look_alike_ids([PLAIN], [CYRILLIC]) == frozenset()
    assert escaped("a\U0001f600b") == "a<U+1F600>b"


def test_an_export_marks_the_subjects_the_check_named() -> None:
    def finding(code: str, subject: str) -> Finding:
        return Finding(code, "message", "", subject, "action_request", None, None)

    findings = [
        finding(codes.ACTION_ID_CONFUSABLE, CYRILLIC),
        finding(codes.ACTION_ID_CONFUSABLE, "req_0"),  # an ASCII look-alike of another
        finding(codes.COLD_REPLAY_INVALID, "req_plain"),
        finding(codes.COLD_REPLAY_INVALID, "span:" + PLAIN),  # the span of CYRILLIC's twin
    ]
    assert subject_look_alikes(findings) == {CYRILLIC, "req_0", PLAIN}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the bundle with its twins, with every export and the single file."""
    tmp = tmp_path_factory.mktemp("marks")
    folder = tmp / "twins"
    shutil.copytree(FIRST_WAVE, folder)
    for twin in (*TWINS, MIXED):
        twin_rows(folder, PLAIN, twin)
    out = tmp / "out"
    args = ["build", str(folder), "--out", str(out / "site"), "--jobs", "1", "--single-file"]
    args += ["--sarif", str(out / "log.sarif"), "--junit", str(out / "junit.xml")]
    args += ["--markdown", str(out / "summary.md")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return out


def _html_marks(page: str) -> list[str]:
    return [html.unescape(m) for m in re.findall(r'<span class="id-mark">([^<]*)</span>', page)]


def _expected_marks() -> dict[str, str]:
    marks = {twin: LOOK_ALIKE + escaped(twin) for twin in TWINS}
    return {PLAIN: HAS_LOOK_ALIKES, MIXED: NON_ASCII + escaped(MIXED), **marks}


def _join_row_marks(page: str) -> dict[str, list[str]]:
    """Return the marks in each join-table row, by the row's anchor."""
    rows = re.findall(r'<tr id="(req-[^"]*)"[^>]*>(.*?)</tr>', page, re.S)
    return {anchor: _html_marks(body) for anchor, body in rows}


def test_the_join_table_and_the_gaps_page_mark_every_look_alike(built: Path) -> None:
    run = built / "site" / "runs" / "twins"
    rows = _join_row_marks((run / "index.html").read_text())
    for rid, mark in _expected_marks().items():
        anchor = next(a for a in rows if a.startswith("req-") and mark in rows[a])
        assert rows[anchor] == [mark], rid
    # A plain id that looks like no other prints as before: no mark in its row.
    assert sum(1 for marks in rows.values() if marks) == len(_expected_marks())
    gaps = "".join(page.read_text() for page in (run / "gaps").glob("*.html"))
    gap_marks = [m for ms in _join_row_marks(gaps).values() for m in ms]
    for twin in TWINS:  # each a finding's subject, so a gap
        assert LOOK_ALIKE + escaped(twin) in gap_marks
        assert f"&lt;{POINTS[twin]}&gt;" in gaps


def test_the_trace_marks_each_span_s_request(built: Path) -> None:
    page = (built / "site" / "runs" / "twins" / "index.html").read_text()
    spans = re.findall(r'<table class="spans">(.*?)</table>', page, re.S)
    assert spans
    marks = _html_marks("".join(spans))
    assert sorted(marks) == sorted(_expected_marks().values())


def test_the_findings_mark_their_subjects(built: Path) -> None:
    page = (built / "site" / "runs" / "twins" / "index.html").read_text()
    findings = re.findall(r'<table class="findings">(.*?)</table>', page, re.S)
    assert findings
    marks = _html_marks("".join(findings))
    for twin in TWINS:
        assert LOOK_ALIKE + escaped(twin) in marks


def _search_entries(run: Path) -> list[list[str]]:
    entries = []
    for part in sorted((run / "search").glob("part-*.js")):
        body = part.read_text().split(", [\n", 1)[1].rsplit("\n]);", 1)[0]
        entries += json.loads("[" + body + "]")
    return entries


def test_the_search_finds_a_look_alike_by_its_code_points(built: Path) -> None:
    entries = _search_entries(built / "site" / "runs" / "twins")
    by_key: dict[str, list[list[str]]] = {}
    for entry in entries:
        by_key.setdefault(entry[0], []).append(entry)
    for twin, point in POINTS.items():
        notes = [e[3] for e in by_key[point] if e[1] == "request"]
        assert any(escaped(twin) in note for note in notes), (point, notes)
        request = next(e for e in by_key[escaped(twin)] if e[1] == "request")
        assert request[3].startswith(_expected_marks()[twin])
    plain = next(e for e in by_key[PLAIN] if e[1] == "request")
    assert plain[3].startswith(HAS_LOOK_ALIKES)
    # A plain id that looks like no other is found as before: no note.
    assert [e[1:] for e in by_key["req_safe_fixture_edit"]] == [["request", "index.html"]]


def test_the_single_file_marks_every_look_alike(built: Path) -> None:
    page = (built / "site" / "single" / "twins.html").read_text()
    marks = _html_marks(page)
    for mark in _expected_marks().values():
        assert mark in marks
    assert 'class="run-search"' not in page  # marked without the search or any script


def test_the_markdown_marks_the_subjects(built: Path) -> None:
    rows = [
        line for line in (built / "summary.md").read_text().splitlines() if "CONFUSABLE`" in line
    ]
    assert len(rows) == len(TWINS)
    for twin in TWINS:
        subject = f"| {md_text(twin)} {md_text(LOOK_ALIKE + escaped(twin))} |"
        assert any(subject in row for row in rows), twin
        assert f"&lt;U\\+{POINTS[twin][2:]}&gt;" in md_text(escaped(twin))


def test_the_sarif_messages_mark_the_subjects(built: Path) -> None:
    log = json.loads((built / "log.sarif").read_text())
    messages = [r["message"]["text"] for r in log["runs"][0]["results"]]
    confusable = [
        r["message"]["text"]
        for r in log["runs"][0]["results"]
        if r["ruleId"] == codes.ACTION_ID_CONFUSABLE
    ]
    assert confusable
    for twin in TWINS:
        assert any(m.endswith(LOOK_ALIKE + escaped(twin)) for m in messages), twin
    for message in messages:
        assert "\u202e" not in message and "\u200b" not in message


def test_the_junit_lines_mark_the_subjects(built: Path) -> None:
    text = (built / "junit.xml").read_text()
    for twin in TWINS:
        assert html.escape(f"({LOOK_ALIKE}{escaped(twin)})", quote=False) in text, twin


def test_the_headline_marks_the_ids_it_names(built: Path) -> None:
    """The gap headline names the look-alike twins with their marks, in brackets."""
    record = json.loads((built / "site" / "runs" / "twins" / "result.json").read_text())
    headline = gap_headline(record).text
    for twin in TWINS:
        assert f"[{LOOK_ALIKE}{escaped(twin)}]" in headline
    # Each twin is named once, with its mark right after it.
    assert headline.count(LOOK_ALIKE) == len(TWINS)


def test_a_join_page_label_marks_its_first_and_last_ids() -> None:
    """The pager's "first – last" label of a join-table page marks a look-alike id."""
    ix = SimpleNamespace(
        join_pager=SimpleNamespace(bounds=lambda page: (0, 2)),
        requests=[{"request_id": CYRILLIC}, {"request_id": "req_other"}],
        look_alikes=look_alike_ids([PLAIN, CYRILLIC]),
    )
    label = _join_range(ix)(1)  # type: ignore[arg-type]
    assert label == f"{CYRILLIC} [{LOOK_ALIKE}{escaped(CYRILLIC)}] – req_other"
