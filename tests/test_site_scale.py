"""A large run's listings live on linked sub-pages; every row and link still resolves."""

from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markupsafe import Markup, escape

from conftest import REPO
from sandbox_replay.exports.text import visible
from sandbox_replay.report import parallel
from sandbox_replay.report.build import BuildConfig, BuildError, BuildResult, build_site
from sandbox_replay.report.render import Renderer, _printed, _wbr, print_join_rows, print_span_rows
from sandbox_replay.report.views import (
    PAGE_ROWS,
    Cell,
    FindingLink,
    JoinRow,
    ListingPageView,
    PageNav,
    SpanRow,
    badge,
    breakable,
    chrome,
)
from sandbox_replay.report.views.common import (
    EXCERPT_BEFORE,
    EXCERPT_LINES,
    MAX_EXCERPTS,
    request_anchor,
)

sys.path.insert(0, str(REPO / "benchmarks"))

from generate_bundle import generate

REQUESTS = 2 * PAGE_ROWS + 37  # three join pages, the last one short
MAX_PAGE = 2_000_000


def quiet(message: str) -> None:
    """Swallow progress lines in tests."""


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: list[str] = []
        self.links: list[str] = []
        self.sections: list[str] = []
        self.depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if "id" in values:
            self.ids.append(values["id"])
        if "href" in values:
            self.links.append(values["href"])
        if tag == "section":
            self.depth += 1
            if self.depth == 1 and "id" in values:
                self.sections.append(values["id"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.depth -= 1


def parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text("utf-8"))
    page.close()
    return page


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BuildResult]:
    root = tmp_path_factory.mktemp("scale")
    generate(root / "inputs" / "large_bundle", REQUESTS, seed=3, failing_fraction=0.2)
    out = root / "site"
    result = build_site(BuildConfig((root / "inputs",), out, cwd=root, progress=quiet, jobs=1))
    return out / "runs" / "large_bundle", result


def test_listings_are_split_into_numbered_pages(large: tuple[Path, BuildResult]) -> None:
    run, _ = large
    assert sorted(p.name for p in (run / "join").iterdir()) == [
        "page-0001.html",
        "page-0002.html",
        "page-0003.html",
    ]
    assert sorted(p.name for p in (run / "trace").iterdir())[-1] == "page-0003.html"
    main = parse(run / "index.html")
    assert main.sections == [
        "headline",
        "flowchart",
        "joins",
        "findings",
        "calibration",
        "layers",
        "trace",
        "inputs",
        "provenance",
    ]
    # The run page keeps no row of the split listings, only links to their pages.
    assert not any(i.startswith("req-") for i in main.ids)
    assert "join/page-0003.html#join-list" in main.links


def test_every_request_is_on_exactly_one_join_page(large: tuple[Path, BuildResult]) -> None:
    run, _ = large
    anchors = [
        i for page in sorted((run / "join").iterdir()) for i in parse(page).ids if "req-" in i
    ]
    # Each row is named by its request id (a permalink), in the request file's order.
    rows = json.loads((run / "result.json").read_bytes())["request_rows"]
    assert len(rows) == REQUESTS
    assert anchors == [request_anchor(row["request_id"]) for row in rows]


def test_every_link_of_every_page_resolves(large: tuple[Path, BuildResult]) -> None:
    run, _ = large
    site = run.parent.parent
    parsed = {p.resolve(): parse(p) for p in sorted(site.rglob("*.html"))}
    followed = 0
    for path, page in parsed.items():
        for link in page.links:
            parts = urlsplit(link)
            assert not parts.scheme, f"{path}: {link}"
            target = path if not parts.path else (path.parent / unquote(parts.path)).resolve()
            assert target.is_file(), f"{path}: {link}"
            if parts.fragment:
                assert parts.fragment in parsed[target].ids, f"{path}: {link}"
            followed += 1
    assert followed > 4 * REQUESTS


def test_pages_link_previous_next_and_stay_small(large: tuple[Path, BuildResult]) -> None:
    run, _ = large
    middle = parse(run / "join" / "page-0002.html")
    assert "page-0001.html#join-list" in middle.links
    assert "page-0003.html#join-list" in middle.links
    assert "../index.html#joins" in middle.links
    for page in run.rglob("*.html"):
        assert page.stat().st_size < MAX_PAGE, page


def test_findings_link_rows_across_pages(large: tuple[Path, BuildResult]) -> None:
    run, _ = large
    findings = (run / "findings" / "page-0001.html").read_text("utf-8")
    assert re.search(r'href="\.\./join/page-000\d\.html#req-[A-Za-z0-9_.~-]+"', findings)
    joins = "".join(p.read_text("utf-8") for p in sorted((run / "join").iterdir()))
    assert re.search(r'href="\.\./findings/page-000\d\.html#f-[0-9a-f]{16}(-\d+)?"', joins)


def test_a_large_input_shows_only_the_rows_findings_cite(large: tuple[Path, BuildResult]) -> None:
    run, _ = large
    page = (run / "index.html").read_text("utf-8")
    assert 'id="file-action-requests"' in page
    assert "Larger than 256 KB: shown as the" in page
    shown = {int(n) for n in re.findall(r'id="action-requests-L(\d+)"', page)}
    record = json.loads((run / "result.json").read_bytes())
    cited = sorted({f["line"] for f in record["findings"] if f["path"] == "action_requests.json"})[
        :MAX_EXCERPTS
    ]
    assert cited and set(cited) <= shown
    # Each excerpt runs from two lines before a cited row to its closing bracket, no further.
    assert len(shown) < (EXCERPT_BEFORE + EXCERPT_LINES) * len(cited)
    assert min(shown) == max(1, cited[0] - EXCERPT_BEFORE)
    # The first excerpt ends on the line that closes the cited row.
    first_block = page.split('id="file-action-requests"', 1)[1].split("</pre>", 1)[0]
    last_line = re.findall(r'<span class="line" id="[^"]*">(.*?)</span>\n?', first_block)[-1]
    assert re.sub(r"<[^>]+>", "", last_line).strip() in ("}", "},")


# Values a row may carry: plain, repeated break characters, markup characters, hidden
# (control and bidi) characters, non-ASCII, line breaks, empty.
ODD_TEXTS = (
    "req-0001",
    "risk_class:network/egress.v1·x",
    "ends_with_break_",
    "_:/.·",
    "<script>alert('x')</script> & \"quoted\"",
    "nul\x00esc\x1b[31mbidi\u202eend\u2066",
    "é — ≠ …",
    "line\nbreak\ttab\r\n",
    "lone\ud800surrogate",
    "",
)


# Values a table of a real run carries: each prints as it is.
PLAIN_TEXTS = (
    "request-12",
    "network_egress",
    "rule:a/b.c·d",
    "row-gap",
    "../join/page-0001.html#request-1",
    "— missing",
    "≠",
)


def _join_rows(texts: tuple[str, ...]) -> tuple[JoinRow, ...]:
    def t(n: int) -> str:
        return texts[n % len(texts)]

    rows = []
    for n in range(3 * len(texts)):
        cells = [Cell(t(n + k), t(n + 2 * k), t(n + 3 * k)) for k in range(6)]
        links = tuple(FindingLink(t(n + k), t(n + k + 1)) for k in range(n % 3))
        rows.append(JoinRow(*(t(n + k) for k in range(5)), *cells, links, t(n + 5)))
    return tuple(rows)


def _span_rows(texts: tuple[str, ...]) -> tuple[SpanRow, ...]:
    def t(n: int) -> str:
        return texts[n % len(texts)]

    return tuple(
        SpanRow(
            *(t(n + k) for k in range(5)),
            Cell(t(n), t(n + 1), t(n + 2)),
            *(t(n + k) for k in range(5, 10)),
        )
        for n in range(3 * len(texts))
    )


def _listing(kind: str, **rows: object) -> ListingPageView:
    return ListingPageView(
        chrome=chrome("t", "../../../", "run", "now", "0"),
        name="run",
        status_badge=badge("blocked"),
        kind=kind,
        title="Listing",
        nav=PageNav("summary", "", "", ()),
        run_href="../index.html#joins",
        **rows,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("texts", [ODD_TEXTS, PLAIN_TEXTS], ids=["odd", "plain"])
def test_printed_rows_show_every_value_escaped(texts: tuple[str, ...]) -> None:
    """The join table and trace rows print one ``<tr>`` per row, no value raw."""
    joins, spans = _join_rows(texts), _span_rows(texts)
    printed = str(print_join_rows(joins)) + str(print_span_rows(spans))
    assert printed.count("<tr id=") == len(joins)
    assert printed.count("<tr>") == len(spans)
    for raw in ("<script>", "\x00", "\x1b", "\u202e", "\u2066", "\ud800"):
        assert raw not in printed
    for value in texts:
        assert _printed(value).replace("_", "") in printed.replace("<wbr>", "").replace("_", "")


def test_wbr_breaks_where_breakable_splits() -> None:
    for value in (*ODD_TEXTS, "a..b", "·", "x_", "_x", "plain"):
        parts = breakable(str(escape(visible(value))))
        assert str(_wbr(value)) == "<wbr>".join(parts), value


def test_an_overridden_partial_frames_the_printed_rows(tmp_path: Path) -> None:
    (tmp_path / "_joins.html").write_text("<table class=mine>{{ rows|join_rows }}</table>")
    renderer = Renderer(tmp_path)
    page = renderer.render_listing(_listing("join", join_rows=_join_rows(PLAIN_TEXTS)[:2])).decode()
    assert '<table class=mine><tr id="request-12"' in page


@pytest.mark.parametrize("texts", [ODD_TEXTS, PLAIN_TEXTS], ids=["odd", "plain"])
@pytest.mark.parametrize("kind", ["join", "gaps", "trace"])
def test_a_listing_page_is_the_page_its_templates_render(kind: str, texts: tuple[str, ...]) -> None:
    """``render_listing`` prints the rows itself and puts them where the partial's filter
    would have: the bytes are those of the templates rendered with the rows."""
    renderer = Renderer()
    view = (
        _listing(kind, spans=_span_rows(texts))
        if kind == "trace"
        else _listing(kind, join_rows=_join_rows(texts))
    )
    partial = renderer.env.get_template("_spans.html" if kind == "trace" else "_joins.html")
    table = partial.render(
        rows=view.join_rows, first_position=view.first_position, spans=view.spans
    )
    expected = renderer.render("listing.html", view=view, table=Markup(table))
    assert renderer.render_listing(view) == expected
    assert expected.count(b"<tr") == len(view.spans or view.join_rows) + 1  # and the head


def test_an_overridden_partial_sees_the_rows_and_prints_them_where_it_asks(
    tmp_path: Path,
) -> None:
    frame = "<p>{{ rows|length }}</p>{% for row in rows %}<i>{{ row.anchor }}</i>{% endfor %}"
    rows = _join_rows(PLAIN_TEXTS)[:2]
    for body, printed in (("", 0), ("{{ rows|join_rows }}", 1), ("{{ rows|join_rows }}" * 2, 2)):
        (tmp_path / "_joins.html").write_text(frame + body)
        page = Renderer(tmp_path).render_listing(_listing("join", join_rows=rows)).decode()
        assert "<p>2</p><i>request-12</i><i>" in page
        assert page.count('<tr id="request-12"') == printed
        assert "\x00" not in page


def test_a_result_record_written_beside_a_page_helper_is_still_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Matched text in the record stops a build whose pages a forked helper renders meanwhile."""
    bundle = generate(tmp_path / "in" / "run", 1100, seed=5, failing_fraction=0.1)
    monkeypatch.setattr(parallel, "needles_of", lambda matched: frozenset({b'"request_rows"'}))
    with pytest.raises(BuildError, match=r"result\.json would contain"):
        build_site(
            BuildConfig((bundle.parent,), tmp_path / "site", cwd=tmp_path, progress=quiet, jobs=2)
        )
    assert not (tmp_path / "site").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["in"]


def test_no_hidden_character_is_printable_ascii() -> None:
    """``visible`` returns printable ASCII as it is: it must change none.

    Some hidden characters are printable to ``str.isprintable`` (variation selectors,
    Hangul fillers), so only printable ASCII may be skipped.
    """
    hidden = [chr(c) for c in range(0x110000) if visible(chr(c)) != chr(c)]
    assert hidden and not any(c.isascii() and c.isprintable() for c in hidden)
    assert any(c.isprintable() for c in hidden)
    # Nor the dash of the pages' placeholders ("— missing").
    assert "\u2014" not in hidden
