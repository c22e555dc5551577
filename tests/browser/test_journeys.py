"""A reviewer's journeys through the report, from disk and from a static host.

Each step asserts what the reviewer would see: the rows left after a filter, the gap the
headline names, the catalog entry a code lands on, the input line a finding points to.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

    from browser.conftest import PageOpener, Site

FAILING_RUN = "allow_network_exfil_executed"
GAP_REQUEST = "req_network_exfil_attempt"
GAP_CODE = "SANDBOX_POLICY_VERDICT_SEMANTIC_MISMATCH"
GAP_ANCHOR = "sandbox-policy-verdict-semantic-mismatch"
# Stable hooks: ids, data-* attributes and roles, not the stylesheet's classes.
RUNS_ROWS = "table[data-sortable] tbody tr"
FINDING_ROWS = "#findings tbody tr"
CODE_LINK = 'a[href*="codes/index.html#"]'
HEADLINE = "#headline p"

VISIBLE_RUNS = """rows => rows
    .filter(row => !row.hidden && row.getClientRects().length > 0)
    .map(row => row.querySelector("th a").textContent.trim())"""

IN_VIEWPORT = """element => {
    const box = element.getBoundingClientRect();
    return box.height > 0 && box.top >= 0 && box.bottom <= window.innerHeight;
}"""

# The element drawn at the middle of the line's box: a sticky bar over it would be hit instead.
ON_TOP = """element => {
    const box = element.getBoundingClientRect();
    const hit = document.elementFromPoint(box.left + Math.min(box.width / 2, 200), box.top + box.height / 2);
    return element === hit || element.contains(hit);
}"""


def manifest_runs(site: Site) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads((site.root / "manifest.json").read_text("utf-8"))[
        "runs"
    ]
    return runs


def visible_runs(page: Page) -> list[str]:
    names: list[str] = page.eval_on_selector_all(RUNS_ROWS, VISIBLE_RUNS)
    return names


def findings_column(page: Page) -> list[int]:
    """The findings count of each visible row, top to bottom."""
    column = page.eval_on_selector_all(
        "table[data-sortable] thead th",
        "heads => heads.findIndex(th => th.textContent.trim().startsWith('Findings'))",
    )
    assert column > 0
    values: list[str] = page.eval_on_selector_all(
        RUNS_ROWS,
        f"""rows => rows.filter(row => !row.hidden)
            .map(row => row.cells[{column}].getAttribute("data-sort"))""",
    )
    return [int(value) for value in values]


def in_viewport(locator: Locator) -> bool:
    return bool(locator.evaluate(IN_VIEWPORT))


def fragment(page: Page) -> str:
    return page.url.partition("#")[2]


def test_blocked_filter_to_gap_to_catalog_and_back_to_the_input_line(
    page: Page, site: Site
) -> None:
    runs = manifest_runs(site)
    blocked = sorted(run["name"] for run in runs if run["status"] == "blocked")
    assert FAILING_RUN in blocked

    page.goto(site.url())
    assert page.locator("[data-filters]").is_visible(), "scripts on: the filter panel shows"
    assert sorted(visible_runs(page)) == sorted(run["name"] for run in runs)

    page.select_option("[data-filter-status]", "blocked")
    assert sorted(visible_runs(page)) == blocked
    assert page.locator("[data-filter-count]").inner_text() == (
        f"{len(blocked)} of {len(runs)} runs shown"
    )

    page.locator(RUNS_ROWS, has_text=FAILING_RUN).get_by_role(
        "link", name=FAILING_RUN, exact=True
    ).click()
    page.wait_for_load_state()
    assert page.url == site.url(f"runs/{FAILING_RUN}/index.html")

    headline = " ".join((page.locator(HEADLINE).first.text_content() or "").split())
    assert headline.startswith("Blocked ")
    assert f"1 declared allow derives to block ({GAP_REQUEST})" in headline, headline

    finding = page.locator(FINDING_ROWS, has=page.get_by_role("link", name=GAP_CODE, exact=True))
    assert finding.count() == 1
    run_url = page.url
    finding.get_by_role("link", name=GAP_CODE, exact=True).click()
    page.wait_for_load_state()
    assert page.url == site.url(f"codes/index.html#{GAP_ANCHOR}")
    entry = page.locator(f"#{GAP_ANCHOR}")
    title = entry.get_by_role("heading", name=GAP_CODE, exact=True)
    assert title.count() == 1
    assert in_viewport(title), "the catalog entry is scrolled into view"
    assert entry.evaluate("e => e.matches(':target')")
    other = page.locator(f"#{GAP_ANCHOR} ~ article").first
    assert entry.evaluate("e => getComputedStyle(e).outlineStyle") != other.evaluate(
        "e => getComputedStyle(e).outlineStyle"
    ), "the entry landed on is marked"
    assert entry.get_by_role("link", name=FAILING_RUN).count() == 1, "it lists the run"

    page.go_back()
    page.wait_for_load_state()
    assert page.url == run_url

    link = finding.get_by_role("link", name="policy_verdicts.json:15", exact=True)
    assert link.count() == 1
    link.click()
    assert fragment(page) == "policy-verdicts-L15"
    line = page.locator("#policy-verdicts-L15")
    assert in_viewport(line), "the input scrolls to the line"
    assert line.evaluate(ON_TOP), "the line is not hidden under the sticky contents bar"
    # The exact line: the fifteenth of the file, opening the row of the gap's request.
    assert line.evaluate("e => [...e.parentElement.children].indexOf(e)") == 14
    row_text = page.evaluate(
        """() => {
            const lines = [...document.querySelectorAll('#file-policy-verdicts .line')];
            const start = lines.findIndex(l => l.id === 'policy-verdicts-L15');
            const end = lines.findIndex((l, i) => i > start && /^\\s*}/.test(l.textContent));
            return lines.slice(start, end + 1).map(l => l.textContent).join('\\n');
        }"""
    )
    assert row_text.strip().startswith("{")
    assert f'"{GAP_REQUEST}"' in row_text
    neighbour = page.locator("#policy-verdicts-L14")
    marked = "e => [getComputedStyle(e).backgroundColor, getComputedStyle(e).boxShadow]"
    assert line.evaluate(marked) != neighbour.evaluate(marked), "the line is highlighted"


def test_sorting_by_findings_orders_the_rows(page: Page, site: Site) -> None:
    page.goto(site.url())
    header = page.locator("table[data-sortable] thead th", has_text="Findings")
    button = header.get_by_role("button")

    button.click()
    assert header.get_attribute("aria-sort") == "ascending"
    ascending = findings_column(page)
    assert ascending == sorted(ascending) and len(set(ascending)) > 1

    button.click()
    assert header.get_attribute("aria-sort") == "descending"
    descending = findings_column(page)
    assert descending == sorted(ascending, reverse=True)

    by_name = page.locator("table[data-sortable] thead th", has_text="Run")
    by_name.get_by_role("button").click()
    names = visible_runs(page)
    assert names == sorted(names)
    assert header.get_attribute("aria-sort") == "none", "one column sorts at a time"


def test_text_filter_narrows_and_restores_the_rows(page: Page, site: Site) -> None:
    runs = manifest_runs(site)
    page.goto(site.url())
    box = page.locator("[data-filter-text]")

    box.fill("exfil")
    assert visible_runs(page) == [FAILING_RUN]
    box.fill("BUNDLE")  # case does not matter; matches mode labels and names
    shown = visible_runs(page)
    rows = page.locator(f"{RUNS_ROWS}:not([hidden])")
    assert shown and all("bundle" in text.lower() for text in rows.all_inner_texts())
    box.fill("no run is called this")
    assert visible_runs(page) == []
    assert page.locator("[data-filter-count]").inner_text() == f"0 of {len(runs)} runs shown"
    box.fill("")
    assert len(visible_runs(page)) == len(runs)

    page.select_option("[data-filter-status]", "pass")
    box.fill("bundle")
    passing = {run["name"] for run in runs if run["status"] == "pass"}
    assert set(visible_runs(page)) <= passing and visible_runs(page)


@pytest.mark.parametrize("origin", ["file", "http"])
def test_without_javascript_every_run_and_finding_is_reachable(
    opener: PageOpener, origin: str, request: pytest.FixtureRequest
) -> None:
    site: Site = request.getfixturevalue(f"{origin}_site")
    page = opener.open(site, javascript=False)
    runs = manifest_runs(site)

    page.goto(site.url())
    assert not page.locator("[data-filters]").is_visible(), "no dead controls without scripts"
    assert sorted(visible_runs(page)) == sorted(run["name"] for run in runs)
    hrefs = page.eval_on_selector_all(f"{RUNS_ROWS} th a", "links => links.map(a => a.href)")
    assert sorted(hrefs) == sorted(site.url(run["page"]) for run in runs)

    for run in runs:
        page.goto(site.url(run["page"]))
        result = json.loads((site.root / run["result"]).read_text("utf-8"))
        rows = page.locator(FINDING_ROWS)
        assert rows.count() == len(result["findings"]), run["name"]
        for index in range(rows.count()):
            row = rows.nth(index)
            assert row.is_visible(), f"{run['name']}: finding row {index} is hidden"
            assert row.locator(CODE_LINK).is_visible()
        codes = sorted(rows.locator(CODE_LINK).all_inner_texts())
        assert codes == sorted(f["error_code"] for f in result["findings"]), run["name"]
        assert re.search(r"\S", page.locator(HEADLINE).first.inner_text())
