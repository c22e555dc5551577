"""Finding anything in a run: its search, its gaps listing and its permalinks, in a browser.

On the built-in site, from disk and from a static host. The large-run journeys (a request
on a late join page, a permalink resolved across pages) are in ``test_find_large.py``.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from sandbox_replay.report.views.common import finding_anchors, request_anchor

if TYPE_CHECKING:
    from playwright.sync_api import Page

    from browser.conftest import PageOpener, Site

FAILING_RUN = "allow_network_exfil_executed"
GAP_REQUEST = "req_network_exfil_attempt"
QUIET_REQUEST = "req_safe_fixture_edit"
GAP_CODE = "SANDBOX_POLICY_VERDICT_SEMANTIC_MISMATCH"
RESULTS = "form.run-search .search-results a"


def search(page: Page, query: str) -> list[str]:
    """Type ``query`` into the run's search; return the results' link texts once they show."""
    page.fill("#run-search-q", query)
    page.wait_for_function(
        "q => document.querySelector('form.run-search .search-status').textContent.includes(q)",
        arg=query,
    )
    texts: list[str] = page.eval_on_selector_all(RESULTS, "links => links.map(a => a.textContent)")
    return texts


def test_search_is_hidden_without_scripts(opener: PageOpener, site: Site) -> None:
    page = opener.open(site, javascript=False)
    page.goto(site.url(f"runs/{FAILING_RUN}/index.html"))
    assert page.locator("form.run-search").is_hidden()
    # Everything is still listed: the join table holds every request.
    assert page.locator(f"#joins tr#req-{GAP_REQUEST}").count() == 1
    assert page.locator(f"#joins tr#req-{QUIET_REQUEST}").count() == 1


def test_search_finds_a_request_and_goes_to_its_row(opener: PageOpener, site: Site) -> None:
    page = opener.open(site)
    page.goto(site.url(f"runs/{FAILING_RUN}/index.html"))
    assert page.locator("form.run-search").is_visible()
    results = search(page, "req_network")
    assert len(results) == 1
    assert results[0].startswith(GAP_REQUEST)
    assert "critical" in results[0]
    page.press("#run-search-q", "Enter")
    page.wait_for_url(re.compile(f"#req-{GAP_REQUEST}$"))
    assert page.evaluate("location.hash") == f"#req-{GAP_REQUEST}"
    row = page.locator(f"tr#req-{GAP_REQUEST}")
    assert row.evaluate("r => r.matches(':target')")


def test_search_finds_codes_rules_and_input_lines(opener: PageOpener, site: Site) -> None:
    page = opener.open(site)
    page.goto(site.url(f"runs/{FAILING_RUN}/index.html"))
    code = search(page, GAP_CODE.lower())
    assert len(code) == 1 and "finding code" in code[0] and "1 finding" in code[0]
    rules = search(page, "rule:")
    assert rules and all("policy rule" in r for r in rules)
    lines = search(page, "policy_verdicts.json:")
    assert lines and all("input line" in r for r in lines)
    assert search(page, "no-such-thing-zz") == []
    assert "Nothing in this run starts with" in page.inner_text("form.run-search .search-status")


def test_gaps_listing_holds_exactly_the_marked_rows(opener: PageOpener, site: Site) -> None:
    page = opener.open(site)
    page.goto(site.url(f"runs/{FAILING_RUN}/index.html"))
    marked = page.eval_on_selector_all("#joins tr.row-gap", "rows => rows.map(r => r.id)")
    assert marked == [f"req-{GAP_REQUEST}"]
    # The gaps listing is the first link of the run page's contents.
    first = page.locator("nav.page-toc a").first
    assert first.inner_text() == "Gaps only"
    first.click()
    page.wait_for_url(re.compile(r"gaps/page-0001\.html#gaps-list$"))
    listed = page.eval_on_selector_all("#gaps-list tbody tr", "rows => rows.map(r => r.id)")
    assert listed == marked
    # Each row links to its findings and to its request's input line.
    links = page.eval_on_selector_all(
        "#gaps-list tbody tr .finding-links a", "links => links.map(a => a.getAttribute('href'))"
    )
    assert links and all(re.fullmatch(r"\.\./index\.html#f-[0-9a-f]{16}", h) for h in links)
    request_line = page.locator("#gaps-list tbody tr .req-id a").get_attribute("href") or ""
    assert re.fullmatch(r"\.\./index\.html#action-requests-L\d+", request_line)


def test_permalink_from_a_sub_page_resolves_to_the_row(opener: PageOpener, site: Site) -> None:
    """A link to the gaps page naming a row it does not hold lands on the row's own page."""
    page = opener.open(site)
    page.goto(site.url(f"runs/{FAILING_RUN}/gaps/page-0001.html#req-{QUIET_REQUEST}"))
    page.wait_for_url(re.compile(rf"runs/{FAILING_RUN}/index\.html#req-{QUIET_REQUEST}$"))
    assert page.locator(f"tr#req-{QUIET_REQUEST}").evaluate("r => r.matches(':target')")


def test_finding_permalinks_are_content_fingerprints(opener: PageOpener, site: Site) -> None:
    page = opener.open(site)
    page.goto(site.url(f"runs/{FAILING_RUN}/index.html"))
    ids = page.eval_on_selector_all("#findings tbody tr", "rows => rows.map(r => r.id)")
    assert ids and all(re.fullmatch(r"f-[0-9a-f]{16}(-\d+)?", i) for i in ids)
    # The visible link affordance names the row itself.
    link = page.locator(f"#findings tr#{ids[0]} a.permalink")
    assert link.is_visible()
    assert link.get_attribute("href") == f"#{ids[0]}"
    link.click()
    assert page.evaluate("location.hash") == f"#{ids[0]}"
    assert link.get_attribute("data-permalink", timeout=2000) == site.url(
        f"runs/{FAILING_RUN}/index.html#{ids[0]}"
    )


VISIBLE_RUNS = """rows => rows
    .filter(row => !row.hidden && row.getClientRects().length > 0)
    .map(row => row.querySelector("th a").textContent.trim())"""


def test_index_filter_and_sort_live_in_the_fragment(opener: PageOpener, site: Site) -> None:
    page = opener.open(site)
    page.goto(site.url("index.html"))
    page.select_option("[data-filter-status]", "pass")
    page.fill("[data-filter-text]", "wave")
    findings = page.locator("table[data-sortable] thead th", has_text="Findings")
    findings.locator("button").click()
    findings.locator("button").click()
    state = page.evaluate("location.hash")
    assert state.startswith("#status=pass&q=wave&sort=") and state.endswith("-desc")
    shown = page.eval_on_selector_all("table[data-sortable] tbody tr", VISIBLE_RUNS)
    assert shown == ["first_wave"]
    # The same address, opened afresh, shows the same view.
    again = opener.open(site)
    again.goto(page.url)
    assert again.eval_on_selector_all("table[data-sortable] tbody tr", VISIBLE_RUNS) == shown
    assert again.input_value("[data-filter-status]") == "pass"
    assert again.input_value("[data-filter-text]") == "wave"
    header = again.locator("table[data-sortable] thead th", has_text="Findings")
    assert header.get_attribute("aria-sort") == "descending"
    # Sorted by findings, most first, from the fragment alone.
    sorted_page = opener.open(site)
    column = page.evaluate(
        "() => [...document.querySelectorAll('table[data-sortable] thead th')]"
        ".findIndex(th => th.textContent.includes('Findings'))"
    )
    sorted_page.goto(site.url(f"index.html#sort={column}-desc"))
    counts = sorted_page.eval_on_selector_all(
        "table[data-sortable] tbody tr",
        f"rows => rows.map(r => +r.cells[{column}].getAttribute('data-sort'))",
    )
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1]


def test_catalog_links_land_on_the_first_finding_of_that_code(
    opener: PageOpener, site: Site
) -> None:
    page = opener.open(site)
    page.goto(site.url(f"codes/index.html#{GAP_CODE.lower().replace('_', '-')}"))
    entry = page.locator(f"#{GAP_CODE.lower().replace('_', '-')}")
    entry.locator(f"a[href^='../runs/{FAILING_RUN}/']").click()
    page.wait_for_url(re.compile(rf"runs/{FAILING_RUN}/index\.html#f-[0-9a-f]{{16}}$"))
    target = page.locator("tr:target")
    assert target.locator("a.code").inner_text() == GAP_CODE


ON_TOP = """element => {
    const box = element.getBoundingClientRect();
    const hit = document.elementFromPoint(box.left + Math.min(box.width / 2, 200), box.top + box.height / 2);
    return box.top >= 0 && box.bottom <= window.innerHeight && (element === hit || element.contains(hit));
}"""


def test_an_input_link_marks_the_whole_row_under_its_file_name(
    opener: PageOpener, site: Site
) -> None:
    page = opener.open(site)
    page.goto(site.url(f"runs/{FAILING_RUN}/index.html"))
    link = page.locator("#findings td.loc a[href*='policy-verdicts-L']").first
    target = (link.get_attribute("href") or "").split("#", 1)[1]
    link.click()
    page.wait_for_function(f"location.hash === '#{target}'")
    marked = page.eval_on_selector_all(
        "pre.code .line.row-hit", "lines => lines.map(l => l.id + ' ' + l.textContent.trim())"
    )
    # The row opens on the linked line and closes on the last marked one, the line the
    # build marked as its end: the script reads the extent, it does not work it out.
    assert len(marked) > 3
    assert marked[0].startswith(f"{target} {{")
    assert marked[-1].split(" ", 1)[1].startswith("}")
    end = page.locator(f"[id='{target}']").get_attribute("data-row-end")
    assert end and marked[-1].split(" ", 1)[0] == re.sub(r"\d+$", end, target)
    assert len(marked) == int(end) - int(target.rsplit("L", 1)[1]) + 1
    assert '"request_id"' in " ".join(marked)
    # The linked line is on screen, not under the file name, which stays in view above it.
    line = page.locator(f"[id='{target}']")
    assert line.evaluate(ON_TOP)
    summary = page.locator("details.input-file:has(.line.row-hit) > summary")
    assert summary.evaluate(ON_TOP)
    assert "policy_verdicts.json" in summary.inner_text()


def test_a_small_result_record_opens_and_says_its_size(opener: PageOpener, site: Site) -> None:
    page = opener.open(site)
    page.goto(site.url(f"runs/{FAILING_RUN}/index.html"))
    link = page.locator(".run-meta a[href='result.json']")
    assert link.get_attribute("download") is None
    size = (site.root / "runs" / FAILING_RUN / "result.json").stat().st_size
    assert f"({size / 1e3:,.1f} KB)" in page.inner_text(".run-meta")


SEVERITY_RANK = {"critical": 0, "high": 1, "medium": 2}


def test_index_lists_blocked_runs_worst_first(opener: PageOpener, site: Site) -> None:
    page = opener.open(site)
    page.goto(site.url("index.html"))
    rows = page.eval_on_selector_all(
        "table.runs tbody tr",
        """rows => rows.map(r => [r.dataset.status,
            (r.querySelector('.sev') || {textContent: ''}).textContent.trim().toLowerCase(),
            (r.querySelector('.sev + .note') || {textContent: ''}).textContent])""",
    )
    blocked = [(sev, note) for status, sev, note in rows if status == "blocked"]
    assert blocked and all(status == "pass" for status, _, _ in rows[len(blocked) :])

    def key(entry: tuple[str, str]) -> tuple[int, ...]:
        counts = dict(
            (part.split(" ")[1], -int(part.split(" ")[0].replace(",", "")))
            for part in entry[1].split(" · ")
        )
        return (SEVERITY_RANK[entry[0]], *(counts.get(s, 0) for s in SEVERITY_RANK))

    assert [key(b) for b in blocked] == sorted(key(b) for b in blocked)
    assert blocked[0][0] == "critical"
    # The chart that helps choose: findings by severity per run, worst first, named in full.
    titles = page.eval_on_selector_all(
        "#chart-severity-title, svg[aria-labelledby^='chart-severity'] title",
        "ts => ts.map(t => t.textContent)",
    )
    assert any("worst first" in t for t in titles)


def test_an_old_position_link_lands_on_its_row_or_says_why_not(
    opener: PageOpener, site: Site
) -> None:
    """Links made when permalinks were by position (#request-N, #finding-N) still land."""
    result = json.loads((site.root / "runs" / FAILING_RUN / "result.json").read_bytes())
    rows = result["request_rows"]
    anchors = finding_anchors(result["findings"])
    page = opener.open(site)
    for position in (1, len(rows)):
        page.goto(site.url(f"runs/{FAILING_RUN}/index.html#request-{position}"))
        anchor = request_anchor(rows[position - 1]["request_id"])
        page.wait_for_url(re.compile(rf"index\.html#{anchor}$"))
        assert page.locator(f"tr[id='{anchor}']").evaluate("r => r.matches(':target')")
    for position in (1, len(anchors)):
        page.goto(site.url(f"runs/{FAILING_RUN}/index.html#finding-{position}"))
        page.wait_for_url(re.compile(rf"index\.html#{anchors[position - 1]}$"))
    # From the gaps page, which holds rows out of order, to the run page that holds it.
    page.goto(site.url(f"runs/{FAILING_RUN}/gaps/page-0001.html#request-2"))
    page.wait_for_url(re.compile(rf"index\.html#{request_anchor(rows[1]['request_id'])}$"))
    # A position no page holds: a notice says so, in view, instead of a silent landing.
    page.goto(site.url(f"runs/{FAILING_RUN}/index.html#finding-{len(anchors) + 1}"))
    notice = page.locator("#old-link-notice")
    assert notice.is_visible()
    assert f"finding {len(anchors) + 1} by its position" in notice.inner_text()
    assert notice.evaluate("n => n.getBoundingClientRect().top") < 900
