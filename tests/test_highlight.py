"""Input listings: each line's anchor, and the extent of each linked row, marked by the build."""

from __future__ import annotations

import hashlib
import io
import re
import shutil
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import SCENARIOS
from sandbox_replay.report.build import BuildConfig, build_site
from sandbox_replay.report.highlight import MAX_ROW_LINES, highlight_json, row_end
from sandbox_replay.report.views.input_files import read_lines

LIST = """{
  "rows": [
    {
      "id": "a",
      "note": "a } and a ] in a string, and an escaped \\" quote {"
    },
    {"id": "b"},
    {
      "id": "c",
      "nested": {
        "deep": [1, 2]
      }
    }
  ]
}
"""


def extents(html: str) -> dict[int, int]:
    return {
        int(line): int(end) for line, end in re.findall(r'id="f-L(\d+)" data-row-end="(\d+)"', html)
    }


def test_a_row_is_marked_from_its_opening_line_to_its_closing_bracket() -> None:
    html = highlight_json(LIST, "f", 1, [3, 7, 8])
    # Brackets inside strings do not count; a one-line row gets no mark; nesting does.
    assert extents(html) == {3: 6, 8: 13}
    assert html.count('class="line"') == LIST.count("\n")


def test_only_the_linked_rows_are_marked() -> None:
    assert extents(highlight_json(LIST, "f", 1, [8])) == {8: 13}
    assert extents(highlight_json(LIST, "f")) == {}


def test_an_excerpt_is_marked_by_its_file_line_numbers() -> None:
    lines = LIST.split("\n")
    excerpt = "\n".join(lines[7:13]) + "\n"  # file lines 8 to 13
    html = highlight_json(excerpt, "f", 8, [8, 2])
    assert 'id="f-L8"' in html and 'id="f-L13"' in html and 'id="f-L7"' not in html
    assert extents(html) == {8: 13}


def test_a_row_that_does_not_close_is_marked_to_the_last_line_shown() -> None:
    lines = {n: "[" for n in range(1, 10)}
    assert row_end(lines, 2, 6) == 6
    assert row_end(lines, 2, 20) == 9
    long = "[\n" + "1,\n" * (MAX_ROW_LINES + 10) + "]\n"
    assert extents(highlight_json(long, "f", 1, [1])) == {1: MAX_ROW_LINES}


def test_the_run_page_marks_each_request_row_it_links(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "allow_network_exfil_executed"
    shutil.copytree(SCENARIOS / "allow_network_exfil_executed", run)
    build_site(BuildConfig((tmp_path / "runs",), tmp_path / "site", progress=lambda _: None))
    page = (tmp_path / "site" / "runs" / run.name / "index.html").read_text("utf-8")
    source = (run / "action_requests.json").read_text("utf-8").split("\n")
    linked = sorted(set(re.findall(r'href="#action-requests-L(\d+)"', page)), key=int)
    assert linked
    for line in linked:
        mark = re.search(rf'id="action-requests-L{line}" data-row-end="(\d+)"', page)
        assert mark, line
        # The marked extent ends on the line that closes the row, as the file reads.
        assert source[int(line) - 1].strip() == "{"
        assert source[int(mark.group(1)) - 1].strip().startswith("}")


_LINE_BYTES = st.sampled_from([b"a", b"bc", b"\r", b"{", b'"x"', b"\xc3\xa9", b"z" * 9])


@settings(max_examples=300, deadline=None)
@example([b"a"], True, {2})  # the empty line after the last line end is no line
@example([b"ab", b"cd"], False, {1, 2})
@given(
    st.lists(st.lists(_LINE_BYTES, max_size=4).map(b"".join), max_size=12),
    st.booleans(),
    st.sets(st.integers(0, 14), max_size=6),
)
def test_read_lines_finds_the_wanted_lines_and_the_digest(
    lines: list[bytes], ends_with_newline: bool, wanted: set[int]
) -> None:
    """Each wanted line is found without its line end (a last line with none, if not
    empty), and the digest is the whole file's."""
    data = b"\n".join(lines) + (b"\n" if ends_with_newline and lines else b"")
    expected = {}
    for number, raw in enumerate(io.BytesIO(data), 1):
        if number in wanted:
            expected[number] = raw.rstrip(b"\n")
    found, digest = read_lines(io.BytesIO(data), wanted)
    assert found == expected
    assert digest == hashlib.sha256(data).hexdigest()
