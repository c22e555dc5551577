"""Accessibility: axe-core finds nothing serious, and the keyboard reaches every control.

axe-core is the copy bundled in axe-playwright-python (its ``axe.min.js``), injected into
the page: nothing is fetched while it runs, which the ``opener`` watch would catch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Page

    from browser.conftest import PageOpener, Site

PAGES = {
    "index": "index.html",
    "passing run": "runs/first_wave/index.html",
    "failing run": "runs/allow_network_exfil_executed/index.html",
    "catalog": "codes/index.html",
    "policy coverage": "policy/index.html",
}
BLOCKING_IMPACTS = {"serious", "critical"}

# What the keyboard can reach, and how a focused element looks. An SVG link has no box of
# its own to outline, so its first shape's stroke counts as its indicator too.
FOCUS_SCRIPT = """() => {
window.__focusables = () => [...document.querySelectorAll(
    'a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex="-1"])'
)].filter(e => !e.disabled && e.getClientRects().length > 0
    && getComputedStyle(e).visibility !== 'hidden');
window.__indicator = e => {
    const s = getComputedStyle(e);
    const shape = e instanceof SVGElement ? e.querySelector('rect, path, circle') : null;
    return [s.outlineStyle, s.outlineWidth, s.outlineColor, s.boxShadow,
            shape ? getComputedStyle(shape).strokeWidth : ''].join(' | ');
};
window.__describe = e => {
    const label = (e.getAttribute('aria-label') || e.textContent || '').trim().slice(0, 60);
    return e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + ' "' + label + '"';
};
}"""


def axe_violations(page: Page) -> list[dict[str, Any]]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    violations: list[dict[str, Any]] = results.response["violations"]
    return violations


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("name", list(PAGES))
def test_axe_finds_no_serious_or_critical_violation(
    opener: PageOpener, http_site: Site, name: str, scheme: str
) -> None:
    page = opener.open(http_site, color_scheme=scheme)
    page.goto(http_site.url(PAGES[name]))
    blocking = [v for v in axe_violations(page) if v["impact"] in BLOCKING_IMPACTS]
    report = [
        f"{v['impact']} {v['id']}: {v['help']} at {[n['target'] for n in v['nodes'][:3]]}"
        for v in blocking
    ]
    assert not blocking, f"{name} ({scheme}):\n" + "\n".join(report)


def tab_through(page: Page) -> tuple[list[str], list[dict[str, Any]]]:
    """Press Tab until focus leaves the page; return the controls and every stop."""
    page.evaluate(FOCUS_SCRIPT)
    controls: list[str] = page.evaluate("() => window.__focusables().map(window.__describe)")
    resting: list[str] = page.evaluate("() => window.__focusables().map(window.__indicator)")
    stops: list[dict[str, Any]] = []
    for _ in range(len(controls) + 5):
        page.keyboard.press("Tab")
        stop = page.evaluate(
            """() => {
                const e = document.activeElement;
                if (!e || e === document.body) return null;
                return {index: window.__focusables().indexOf(e), what: window.__describe(e),
                        indicator: window.__indicator(e)};
            }"""
        )
        if stop is None or (stops and stop["index"] == stops[0]["index"]):
            break
        stop["resting"] = resting[stop["index"]] if stop["index"] >= 0 else None
        stops.append(stop)
    return controls, stops


@pytest.mark.parametrize("name", ["index", "failing run"])
def test_keyboard_reaches_every_control_with_a_visible_focus(
    page: Page, site: Site, name: str
) -> None:
    page.goto(site.url(PAGES[name]))
    controls, stops = tab_through(page)
    assert len(controls) > 5

    strays = [stop["what"] for stop in stops if stop["index"] < 0]
    assert not strays, f"focus landed on something that is not a control: {strays}"
    reached = {stop["index"] for stop in stops}
    missed = [what for index, what in enumerate(controls) if index not in reached]
    assert not missed, f"{len(missed)} controls the keyboard never reaches: {missed[:10]}"
    assert len(stops) == len(controls), "each control is reached once per round"
    order = [stop["index"] for stop in stops]
    assert order == sorted(order), "Tab follows the reading order, one control at a time"

    unmarked = [stop["what"] for stop in stops if stop["indicator"] == stop["resting"]]
    assert not unmarked, f"focus is invisible on {len(unmarked)} controls: {unmarked[:10]}"
