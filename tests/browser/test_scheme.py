"""The colour picker: system by default, light or dark on request, kept across pages where
the browser keeps storage, set before the first paint, and never on paper. And the run
page's sticky input file name never slides under its contents bar when that bar wraps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Page

    from browser.conftest import PageOpener, Site

PHONE = {"width": 390, "height": 844}
BACKGROUND = "getComputedStyle(document.body).backgroundColor"
LIGHT_BG = "rgb(251, 251, 250)"
DARK_BG = "rgb(20, 22, 25)"
STORAGE = "(() => { try { localStorage.setItem('probe', '1'); return true; } catch (e) { return false; } })()"


def test_the_picker_follows_the_system_until_asked(opener: PageOpener, site: Site) -> None:
    page = opener.open(site, color_scheme="dark")
    page.goto(site.url("index.html"))
    picker = page.locator("[data-scheme-pick]")
    assert picker.is_visible() and picker.input_value() == ""
    assert page.evaluate(BACKGROUND) == DARK_BG
    picker.select_option("light")
    assert page.evaluate("document.documentElement.dataset.scheme") == "light"
    assert page.evaluate(BACKGROUND) == LIGHT_BG
    picker.select_option("dark")
    assert page.evaluate(BACKGROUND) == DARK_BG
    # The accessible name says what the control is.
    assert page.get_by_label("Colours").count() == 1


def test_the_choice_survives_a_reload_and_another_page(opener: PageOpener, site: Site) -> None:
    page = opener.open(site, color_scheme="light")
    page.goto(site.url("index.html"))
    if not page.evaluate(STORAGE):
        pytest.skip(f"this browser keeps no storage for {site.name} pages")
    page.locator("[data-scheme-pick]").select_option("dark")
    page.goto(site.url("runs/first_wave/index.html"))
    assert page.evaluate("document.documentElement.dataset.scheme") == "dark"
    assert page.locator("[data-scheme-pick]").input_value() == "dark"
    assert page.evaluate(BACKGROUND) == DARK_BG
    page.reload()
    assert page.evaluate(BACKGROUND) == DARK_BG
    # Back to the system's, which is light here.
    page.locator("[data-scheme-pick]").select_option("")
    page.reload()
    assert page.evaluate("document.documentElement.hasAttribute('data-scheme')") is False
    assert page.evaluate(BACKGROUND) == LIGHT_BG


def test_the_stored_scheme_applies_before_the_first_paint(opener: PageOpener, site: Site) -> None:
    page = opener.open(site, color_scheme="light")
    page.goto(site.url("index.html"))
    if not page.evaluate(STORAGE):
        pytest.skip(f"this browser keeps no storage for {site.name} pages")
    page.evaluate("localStorage.setItem('sandbox-replay-scheme', 'dark')")
    # Record the scheme as the body is first parsed, before any later script could run.
    page.add_init_script(
        """new MutationObserver((changes, observer) => {
            if (document.body) {
                window.__firstScheme = document.documentElement.dataset.scheme || '';
                observer.disconnect();
            }
        }).observe(document, {childList: true, subtree: true});"""
    )
    page.goto(site.url("codes/index.html"))
    assert page.evaluate("window.__firstScheme") == "dark"


def test_paper_is_light_whatever_the_choice(page: Page, site: Site) -> None:
    page.goto(site.url("runs/allow_network_exfil_executed/index.html"))
    page.locator("[data-scheme-pick]").select_option("dark")
    assert page.evaluate(BACKGROUND) == DARK_BG
    page.emulate_media(media="print")
    assert page.evaluate(BACKGROUND) == "rgb(255, 255, 255)"
    assert page.evaluate("getComputedStyle(document.body).color") == "rgb(0, 0, 0)"
    assert page.locator("[data-scheme-pick]").is_hidden()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_sideways_scroll_at_phone_width_with_the_picker(
    opener: PageOpener, file_site: Site, scheme: str
) -> None:
    page = opener.open(file_site, viewport=PHONE)
    for path in ("index.html", "runs/example-agent_run-e1/index.html", "codes/index.html"):
        page.goto(file_site.url(path))
        picker = page.locator("[data-scheme-pick]")
        picker.select_option(scheme)
        box = picker.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], path


@pytest.mark.parametrize("width", [720, 850, 1000])
@pytest.mark.parametrize("javascript", [True, False])
def test_a_wrapped_contents_bar_never_covers_the_sticky_file_name(
    opener: PageOpener, file_site: Site, width: int, javascript: bool
) -> None:
    page = opener.open(file_site, javascript=javascript, viewport={"width": width, "height": 700})
    page.goto(file_site.url("runs/example-agent_run-e1/index.html"))
    toc = page.locator(".page-toc")
    files = page.locator("details.input-file[open]")
    assert files.count() > 0
    # Scroll into the middle of the longest shown file, where its name is stuck at the top.
    page.evaluate(
        """() => {
            const files = [...document.querySelectorAll('details.input-file[open]')];
            const file = files.reduce((a, b) => (b.offsetHeight > a.offsetHeight ? b : a));
            window.scrollTo(0, file.offsetTop + file.offsetHeight / 2);
        }"""
    )
    bar = toc.bounding_box()
    stuck = page.evaluate(
        """() => [...document.querySelectorAll('details.input-file[open] > summary')]
            .map(s => s.getBoundingClientRect()).filter(r => r.top >= -1 && r.top < 300)
            .map(r => r.top)"""
    )
    assert bar is not None and stuck, (bar, stuck)
    assert min(stuck) >= bar["y"] + bar["height"] - 1, (bar, stuck)
