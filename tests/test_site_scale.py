"""A large run's listings live on linked sub-pages; every row and link still resolves."""

from __future__ import annotations

import copy
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markupsafe import escape

from conftest import REPO
from sandbox_replay.exports.text import visible
from sandbox_replay.pipeline import ReplayConfig, replay
from sandbox_replay.records import build_records
from sandbox_replay.report import parallel, views
from sandbox_replay.report.build import BuildConfig, BuildError, BuildResult, build_site
from sandbox_replay.report.discover import discover_runs
from sandbox_replay.report.render import Renderer, _wbr
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
    assert not any(i.startswith("request-") for i in main.ids)
    assert "join/page-0003.html#join-list" in main.links


def test_every_request_is_on_exactly_one_join_page(large: tuple[Path, BuildResult]) -> None:
    run, _ = large
    anchors = [
        i for page in sorted((run / "join").iterdir()) for i in parse(page).ids if "request-" in i
    ]
    assert anchors == [f"request-{n}" for n in range(1, REQUESTS + 1)]


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
    assert re.search(r'href="\.\./join/page-000\d\.html#request-\d+"', findings)
    joins = "".join(p.read_text("utf-8") for p in sorted((run / "join").iterdir()))
    assert re.search(r'href="\.\./findings/page-000\d\.html#finding-\d+"', joins)


def test_a_large_input_is_listed_but_not_highlighted(large: tuple[Path, BuildResult]) -> None:
    run, _ = large
    page = (run / "index.html").read_text("utf-8")
    assert 'id="file-action-requests"' in page
    assert "Not shown: larger than" in page
    assert 'id="action-requests-L1"' not in page


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


# Values a table of a real run carries: each prints as it is (``_print_as_is``).
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
def test_printed_tables_equal_their_templates(texts: tuple[str, ...]) -> None:
    """The join table and trace printed in Python are the bytes their partials render."""
    renderer = Renderer()
    joins, spans = _join_rows(texts), _span_rows(texts)
    env = renderer.env
    assert renderer.printers["join"](_listing("join", join_rows=joins)) == env.get_template(
        "_joins.html"
    ).render(rows=joins)
    assert renderer.printers["trace"](_listing("trace", spans=spans)) == env.get_template(
        "_spans.html"
    ).render(spans=spans)
    for row in joins:
        for cell in row[5:11]:
            assert env.filters["cell"](cell) == env.get_template("_cell.html").render(cell=cell)


def test_wbr_breaks_where_breakable_splits() -> None:
    for value in (*ODD_TEXTS, "a..b", "·", "x_", "_x", "plain"):
        parts = breakable(str(escape(visible(value))))
        assert str(_wbr(value)) == "<wbr>".join(parts), value


def test_an_overridden_partial_is_rendered_by_its_template(tmp_path: Path) -> None:
    (tmp_path / "_joins.html").write_text("{% for row in rows %}[{{ row.anchor }}]{% endfor %}")
    (tmp_path / "_cell.html").write_text("<td>{{ cell.text }}!</td>")
    renderer = Renderer(tmp_path)
    assert "join" not in renderer.printers
    assert "trace" in renderer.printers
    page = renderer.render_listing(_listing("join", join_rows=_join_rows(ODD_TEXTS)[:2])).decode()
    assert "[req-0001][risk_class:network/egress.v1·x]" in page
    assert str(renderer.env.filters["cell"](Cell("a", "b", "c"))) == "<td>a!</td>"


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


# Values a record row may carry where a join-table cell reads it: booleans and the numbers
# equal to them, strings, null, lists (not hashable), and a missing field.
ODD_VALUES = (True, False, 1, 0, 1.0, 0.0, -1, 2, None, "block", "allow", "0", "", ["a", "b"])
MISSING = object()
PERTURBED = (
    ("derived", "derived_verdict"),
    ("derived", "derived_rule_ref"),
    ("derived", "policy_derivation_passed"),
    ("derived", "fail_closed"),
    ("verdict", "verdict"),
    ("verdict", "rule_refs"),
    ("verdict", "pre_execution"),
    ("verdict", "line"),
    ("effect", "execution_attempted"),
    ("effect", "side_effect_diff_count"),
    ("effect", "rollback_receipt_ref"),
    ("replay", "replay_id"),
    ("replay", "verdict_reproduced"),
    ("replay", "side_effect_state_reproduced"),
    ("replay", "pass_label"),
    ("span", "outcome"),
    ("request", "risk_class"),
    ("request", "action_kind"),
    ("request", "source_trust_label"),
)
JOINED = ("derived", "verdict", "effect", "rollback", "replay", "span")


@pytest.fixture(scope="module")
def builder(tmp_path_factory: pytest.TempPathFactory) -> views._RunBuilder:
    folder = tmp_path_factory.mktemp("rows") / "bundle"
    generate(folder, 40, seed=11, failing_fraction=0.3)
    run = discover_runs([folder], folder.parent)[0]
    outcome = replay(ReplayConfig(run.path, run.mode))
    return views._RunBuilder(run, outcome, build_records(outcome), "now", "0")


@settings(max_examples=150, deadline=None)
@given(
    changes=st.lists(
        st.tuples(
            st.integers(0, 39),
            st.sampled_from(PERTURBED),
            st.sampled_from((*ODD_VALUES, MISSING)),
        ),
        max_size=40,
    ),
    dropped=st.lists(st.tuples(st.integers(0, 39), st.sampled_from(JOINED)), max_size=6),
    page=st.sampled_from(("index.html", "join/page-0002.html", "trace/page-0001.html")),
)
def test_join_rows_built_by_columns_equal_row_by_row(
    builder: views._RunBuilder,
    changes: list[tuple[int, tuple[str, str], object]],
    dropped: list[tuple[int, str]],
    page: str,
) -> None:
    """``join_rows`` (plain rows by columns) gives what ``_join_row`` gives row by row."""
    requests = [dict(row) for row in builder.result["request_rows"]]
    # Each joined list as ``{key: row}`` (its rows by the index's positions), changed below.
    indexes = [
        {key: dict(rows[at]) for key, at in index.items()}
        for rows, index in zip(builder.joined_lists, builder.join_index, strict=True)
    ]
    tables = dict(zip(JOINED, indexes, strict=True))

    def joined(table: str, n: int) -> tuple[dict[str, object], str] | None:
        rid = requests[n]["request_id"]
        key = {"span": f"span:{rid}", "rollback": None}.get(table, rid)
        if table == "rollback":
            effect = tables["effect"].get(rid)
            key = effect and effect.get("rollback_receipt_ref")
        if not isinstance(key, str) or key not in tables[table]:
            return None
        return tables[table], key

    for n, (table, field), value in changes:
        if field == "line" and isinstance(value, list):
            continue  # a row's line is its position in its file: never a list
        if table == "request":
            target: dict[str, object] | None = requests[n]
        else:
            found = joined(table, n)
            target = None
            if found is not None:
                index, key = found
                target = index[key] = dict(index[key])
        # A derived row always holds its verdict and rule (``records.DerivedRows``).
        if target is not None and (value is not MISSING or table != "derived"):
            target.pop(field, None)
            if value is not MISSING:
                target[field] = value
    for n, table in dropped:
        found = joined(table, n)
        if found is not None:
            del found[0][found[1]]
    odd = copy.copy(builder)
    odd.result = {**builder.result, "request_rows": requests}
    odd.joined_lists = tuple(list(tables[name].values()) for name in JOINED)
    odd.join_index = tuple({key: n for n, key in enumerate(tables[name])} for name in JOINED)
    file_href = odd._request_file_href(page)
    expected = tuple(
        odd._join_row(n, request, page, file_href) for n, request in enumerate(requests)
    )
    assert odd.join_rows(0, len(requests), page) == expected
    assert odd.join_rows(7, 23, page) == expected[7:23]


def test_no_hidden_character_is_printable_ascii() -> None:
    """``render._print_as_is`` skips ``visible`` on printable ASCII: it must change none.

    Some hidden characters are printable to ``str.isprintable`` (variation selectors,
    Hangul fillers), so only printable ASCII is skipped.
    """
    hidden = [chr(c) for c in range(0x110000) if visible(chr(c)) != chr(c)]
    assert hidden and not any(c.isascii() and c.isprintable() for c in hidden)
    assert any(c.isprintable() for c in hidden)
