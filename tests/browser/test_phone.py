"""At phone width (390 px) no page of the site scrolls sideways, in light and dark.

The long tables become one card per row with each value labelled, and the flowchart
switches to its vertical form. The generated 60,000-request run's pages are checked in
``test_find_large.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from browser.conftest import PageOpener, Site

PHONE = {"width": 390, "height": 844}
LABEL = "cell => getComputedStyle(cell, '::before').content"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_page_scrolls_sideways_at_phone_width(
    opener: PageOpener, file_site: Site, scheme: str
) -> None:
    page = opener.open(file_site, viewport=PHONE, color_scheme=scheme)
    wide = []
    for path in file_site.pages():
        if path.startswith("single/"):
            continue
        page.goto(file_site.url(path))
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > PHONE["width"]:
            wide.append(f"{path}: {width} px")
    assert not wide, wide


def test_phone_layout_is_cards_and_a_vertical_flowchart(
    opener: PageOpener, file_site: Site
) -> None:
    page = opener.open(file_site, viewport=PHONE)
    page.goto(file_site.url("index.html"))
    row = page.locator("table.runs tbody tr").first
    assert row.evaluate("r => getComputedStyle(r).display") == "block"
    assert row.locator("td").nth(9).evaluate(LABEL) == '"Findings"'
    page.goto(file_site.url("runs/allow_network_exfil_executed/index.html"))
    cell = page.locator("table.joins tbody tr td").nth(2)
    assert cell.evaluate(LABEL) == '"Side effect"'
    finding = page.locator("table.findings tbody tr td").nth(3)
    assert finding.evaluate(LABEL) == '"Message"'
    assert finding.is_visible()
    assert page.locator(".flowchart-screen-only").is_hidden()
    flow = page.locator(".flowchart-print-only svg")
    box = flow.bounding_box()
    assert box is not None and box["height"] > box["width"]
