"""The index's charts choose for the reader, and no label is cut, at any size.

A bar filters the runs table (and the URL fragment says so), a bar's title carries its
full name and figures, and each chart's figures are in a table too. On a generated
60,000-request run every flowchart count fits inside its node with its separators, and
the gap headline stays short.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from browser.conftest import LARGE_RUN

if TYPE_CHECKING:
    from playwright.sync_api import Page

    from browser.conftest import PageOpener, Site

SHOWN_ROWS = "[...document.querySelectorAll('table.runs tbody tr')].filter(r => !r.hidden)"


def shown_runs(page: Page) -> list[str]:
    names: list[str] = page.evaluate(
        f"{SHOWN_ROWS}.map(r => r.querySelector('th').textContent.trim())"
    )
    return names


def test_a_run_bar_filters_the_index_to_that_run(page: Page, site: Site) -> None:
    page.goto(site.url("index.html"))
    bars = page.locator("#chart-severity-title + desc ~ g.chart-row")
    assert bars.count() >= 2
    second = bars.nth(1)
    name = second.locator("title").first.text_content() or ""
    run = name.split(":")[0]
    second.locator("rect").first.click()
    assert shown_runs(page) == [run]
    assert page.evaluate("location.hash") == f"#run={run}"
    # The filter says what it is and undoes itself.
    only = page.locator("[data-filter-run]")
    assert only.is_visible() and run in (only.text_content() or "")
    only.click()
    assert len(shown_runs(page)) == page.locator("table.runs tbody tr").count()
    assert "run=" not in page.evaluate("location.hash")


def test_a_severity_key_and_a_status_bar_filter_the_index(page: Page, site: Site) -> None:
    page.goto(site.url("index.html"))
    page.locator('.chart-key[data-filter="sev=low"]').click()
    assert page.evaluate("location.hash") == "#sev=low"
    assert page.locator("[data-filter-sev]").input_value() == "low"
    low = shown_runs(page)
    with_low = page.evaluate(
        "[...document.querySelectorAll('table.runs tbody tr')]"
        ".filter(r => r.dataset.severities.split(' ').includes('low'))"
        ".map(r => r.querySelector('th').textContent.trim())"
    )
    assert low == with_low and 0 < len(low) < page.locator("table.runs tbody tr").count()
    page.locator('#chart-status-title ~ g.chart-row[data-filter="status=pass"] rect').click()
    assert page.evaluate("location.hash") == "#status=pass"
    statuses = page.evaluate(f"{SHOWN_ROWS}.map(r => r.dataset.status)")
    assert statuses and set(statuses) == {"pass"}
    # The fragment is the filter: reloading it shows the same rows.
    page.reload()
    assert page.evaluate(f"{SHOWN_ROWS}.map(r => r.dataset.status)") == statuses


def test_without_scripts_the_charts_filter_nothing_and_every_run_is_listed(
    opener: PageOpener, file_site: Site
) -> None:
    page = opener.open(file_site, javascript=False)
    page.goto(file_site.url("index.html"))
    page.locator('#chart-status-title ~ g.chart-row[data-filter="status=pass"] rect').click()
    assert len(shown_runs(page)) == page.locator("table.runs tbody tr").count()
    assert page.locator("[data-filters]").is_hidden()
    assert page.locator("details.chart-data").count() == 3


def test_bar_titles_carry_full_names_and_labels_are_not_cut(page: Page, site: Site) -> None:
    page.goto(site.url("index.html"))
    runs = shown_runs(page)
    titles = page.evaluate(
        "[...document.querySelectorAll('#chart-severity-title ~ g.chart-row > title')]"
        ".map(t => t.textContent)"
    )
    names = [title.split(":")[0] for title in titles]
    assert set(names) <= set(runs) and max(names, key=len) == max(runs, key=len)
    labels = page.evaluate(
        "[...document.querySelectorAll('.charts text.chart-label')].map(t => t.textContent)"
    )
    assert labels and not any("…" in label for label in labels)
    assert set(names) <= set(labels)
    # A segment's title names its run, its severity and its figure.
    segment = page.evaluate(
        "document.querySelector('#chart-severity-title ~ g.chart-row rect > title').textContent"
    )
    assert re.fullmatch(r"[^:]+: (critical|high|medium|low) [\d,]+", segment), segment


def test_each_chart_has_its_figures_in_a_table(page: Page, site: Site) -> None:
    page.goto(site.url("index.html"))
    tables = page.locator("details.chart-data table")
    assert tables.count() == 3
    page.locator("details.chart-data summary").nth(1).click()
    table = tables.nth(1)
    assert table.is_visible()
    header = table.locator("thead th").all_text_contents()
    assert header == ["Run", "critical", "high", "medium", "low", "Total"]
    findings = dict(
        page.evaluate(
            "(() => { const at = [...document.querySelectorAll('table.runs thead th')]"
            ".findIndex(h => h.textContent.trim().startsWith('Findings'));"
            "return [...document.querySelectorAll('table.runs tbody tr')].map(r => "
            "[r.querySelector('th').textContent.trim(), r.cells[at]"
            ".firstChild.textContent.trim()]); })()"
        )
    )
    rows = table.locator("tbody tr")
    assert rows.count() >= 2
    for index in range(rows.count()):
        name = rows.nth(index).locator("th").text_content() or ""
        cells = [int(c.replace(",", "")) for c in rows.nth(index).locator("td").all_text_contents()]
        assert sum(cells[:-1]) == cells[-1]
        assert str(cells[-1]) == findings[name].replace(",", "")
    # The SVG's own description says the same figures in words.
    desc = page.locator("#chart-severity-desc").text_content() or ""
    first = rows.nth(0).locator("th").text_content() or ""
    assert f"{first}: critical " in desc


def test_a_huge_run_keeps_its_labels_whole_and_its_headline_short(
    opener: PageOpener, large: Site
) -> None:
    page = opener.open(large)
    page.goto(large.url(f"runs/{LARGE_RUN}/index.html"))
    overflow = page.evaluate(
        """() => [...document.querySelectorAll('.flowchart-screen-only g.flow-node')].flatMap(g => {
            const box = g.querySelector('rect').getBBox();
            return [...g.querySelectorAll('text')].filter(t => {
                const b = t.getBBox();
                return b.x < box.x || b.x + b.width > box.x + box.width
                    || b.y < box.y || b.y + b.height > box.y + box.height;
            }).map(t => t.textContent);
        })"""
    )
    assert overflow == []
    counts = " ".join(page.locator(".flowchart-screen-only .flow-count").all_text_contents())
    assert "60,000" in counts and "…" not in counts
    assert not re.search(r"\d{4}", counts), counts  # every figure has its separators
    headline = page.locator(".headline-text").text_content() or ""
    assert len(headline) < 600 and "more kinds of gap" in headline
    assert page.locator(".headline-text").bounding_box()["height"] < 200  # type: ignore[index]
    facts = " ".join(page.locator(".headline .facts dd").all_text_contents())
    assert "60,000" in facts and not re.search(r"\d{4}", facts)
    page.goto(large.url("index.html"))
    values = page.locator(".charts text.chart-value").all_text_contents()
    assert "1," in " ".join(values) and not any(re.search(r"\d{4}", v) for v in values)
    clipped = page.evaluate(
        """() => [...document.querySelectorAll('.charts svg')].flatMap(svg => {
            const width = svg.viewBox.baseVal.width;
            return [...svg.querySelectorAll('text')].filter(t => {
                const b = t.getBBox();
                return b.x < 0 || b.x + b.width > width;
            }).map(t => t.textContent);
        })"""
    )
    assert clipped == []
    totals = " ".join(page.locator(".totals dd").all_text_contents())
    assert "60,000" in totals
