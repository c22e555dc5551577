"""A run page printed by Chromium is a clean audit printout.

Under print media the navigation is gone, table rows never split across pages and the
flowchart is the top-to-bottom copy, large enough to read on A4; the PDF carries the
gap headline as text.
"""

from __future__ import annotations

import io
import re
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page

    from browser.conftest import PageOpener, Site

RUN = "runs/allow_network_exfil_executed/index.html"
PT_PER_PX = 0.75
PRINTABLE_PX = round((595 - 2 * 36) / PT_PER_PX)  # A4 less half-inch margins, in CSS px
SMALLEST_LEGIBLE_PT = 6.5


def display(page: Page, selector: str) -> str:
    value: str = page.eval_on_selector(selector, "e => getComputedStyle(e).display")
    return value


def words(value: str) -> str:
    """Spaces collapsed and ligatures (a PDF's "ﬁ") unfolded, for comparing text."""
    return " ".join(unicodedata.normalize("NFKC", value).split())


def test_print_stylesheet_applies(page: Page, site: Site) -> None:
    page.goto(site.url(RUN))
    navigation = ("body > header", 'nav[aria-label="On this page"]', "details:has(pre code)")
    for shown in navigation:
        assert display(page, shown) != "none", f"{shown} is on screen"
    page.emulate_media(media="print")
    for hidden in navigation:
        assert display(page, hidden) == "none", f"{hidden} prints"
    breaks = page.eval_on_selector_all(
        "main table tbody tr",
        "rows => [...new Set(rows.map(r => getComputedStyle(r).breakInside))]",
    )
    assert breaks == ["avoid"], "no table row may split across pages"
    assert display(page, "thead") == "table-header-group", "column heads repeat on each page"


def test_printed_flowchart_is_the_legible_top_to_bottom_copy(page: Page, site: Site) -> None:
    page.goto(site.url(RUN))
    assert display(page, ".flowchart-screen-only") != "none"
    assert display(page, ".flowchart-print-only") == "none"
    page.emulate_media(media="print")
    assert display(page, ".flowchart-screen-only") == "none"
    assert display(page, ".flowchart-print-only") != "none"
    # Lay the page out at A4's printable width, then measure the text as drawn.
    page.set_viewport_size({"width": PRINTABLE_PX, "height": 1000})
    sizes = page.eval_on_selector(
        ".flowchart-print-only svg",
        """svg => {
            const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
            return [...svg.querySelectorAll('text')].map(
                t => parseFloat(getComputedStyle(t).fontSize) * scale);
        }""",
    )
    smallest_pt = min(sizes) * PT_PER_PX
    assert smallest_pt >= SMALLEST_LEGIBLE_PT, f"chart text prints at {smallest_pt:.1f}pt"


def test_pdf_has_the_headline_text(page: Page, site: Site) -> None:
    from pypdf import PdfReader

    page.goto(site.url(RUN))
    headline = words(page.locator("#headline p").first.text_content() or "")
    page.emulate_media(media="print")
    pdf = page.pdf(
        format="A4", margin={side: "0.5in" for side in ("top", "bottom", "left", "right")}
    )
    reader = PdfReader(io.BytesIO(pdf))
    assert len(reader.pages) >= 2
    first = words(reader.pages[0].extract_text())
    # Text extraction may break lines anywhere a space or a wrap point was.
    squeezed = re.sub(r"\s", "", first)
    assert re.sub(r"\s", "", headline.removeprefix("Blocked ")) in squeezed, first[:400]
    assert "req_network_exfil_attempt" in first
    # The chart prints once (the print copy, not both), with every step's label as text.
    assert first.count("Strict load") == 1
    assert "Side-effect receipts" in first and "Result ✗ BLOCKED" in first


LUMINANCE = """element => {
    const style = getComputedStyle(element);
    const parse = value => (value.match(/[\\d.]+/g) || []).slice(0, 4).map(Number);
    const [r, g, b, a] = parse(style.backgroundColor);
    const [tr, tg, tb] = parse(style.color);
    const lum = (x, y, z) => (0.2126 * x + 0.7152 * y + 0.0722 * z) / 255;
    return {background: a === 0 ? null : lum(r, g, b), text: lum(tr, tg, tb)};
}"""


def test_a_dark_preference_prints_in_light_colours(opener: PageOpener, site: Site) -> None:
    """On paper the page is dark text on light ground whatever the screen's scheme."""
    page = opener.open(site, color_scheme="dark")
    page.goto(site.url(RUN))
    on_screen = page.eval_on_selector("body", LUMINANCE)
    assert on_screen["background"] is not None and on_screen["background"] < 0.3
    page.emulate_media(media="print", color_scheme="dark")
    for selector in ("body", ".headline", "table.joins td.gap", "table.findings td", "h2"):
        seen = page.eval_on_selector(selector, LUMINANCE)
        assert seen["text"] < 0.35, (selector, seen)
        assert seen["background"] is None or seen["background"] > 0.8, (selector, seen)
    pdf = page.pdf(format="A4")
    assert pdf.startswith(b"%PDF")


def test_print_keeps_headings_with_what_follows(page: Page, site: Site) -> None:
    page.goto(site.url(RUN))
    page.emulate_media(media="print")
    after = page.eval_on_selector_all(
        "main h2", "hs => [...new Set(hs.map(h => getComputedStyle(h).breakAfter))]"
    )
    assert after == ["avoid"]
    before = page.eval_on_selector("#joins h2 + *", "e => getComputedStyle(e).breakBefore")
    assert before == "avoid"
