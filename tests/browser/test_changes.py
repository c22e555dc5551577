"""Comparing builds in the browser: the changes page, the index's column and its trend.

The site is the third build of ``history_support``'s scripted history (a regression, a
moved run, a baseline with two builds of history before it), opened from ``file://``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from functools import partial
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from browser.conftest import Site, _QuietHandler
from browser.test_accessibility import BLOCKING_IMPACTS, axe_violations
from history_support import make_history

if TYPE_CHECKING:
    from browser.conftest import PageOpener

# Where a screenshot of each page is saved when set (the note shows them).
SHOTS = os.environ.get("SANDBOX_REPLAY_SHOTS", "")


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> Site:
    root = make_history(tmp_path_factory.mktemp("compared")).site("v3")
    return Site("file", root, root.as_uri() + "/")


@pytest.fixture(scope="module")
def compared_http(compared: Site) -> Iterator[Site]:
    """The same site from a static server on 127.0.0.1 (axe-core reads the stylesheet)."""
    handler = partial(_QuietHandler, directory=str(compared.root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="compared-server", daemon=True)
    thread.start()
    try:
        yield Site("http", compared.root, f"http://127.0.0.1:{server.server_address[1]}/")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _shot(page: object, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / name), full_page=True)  # type: ignore[attr-defined]


def test_the_changes_page_leads_to_the_regression(opener: PageOpener, compared: Site) -> None:
    page = opener.open(compared)
    page.goto(compared.url())
    page.get_by_role("navigation", name="Site").get_by_role("link", name="Changes").click()
    page.wait_for_url("**/changes/index.html")  # loaded, not only committed
    assert page.get_by_role("heading", level=1).inner_text() == "Changes since the baseline"
    facts = page.locator(".facts .fact").all_inner_texts()
    assert [" ".join(f.split()) for f in facts[:3]] == [
        "REGRESSIONS 1",
        "FIXED RUNS 0",
        "NEW FINDINGS 5",
    ]
    assert page.locator("#new-findings tbody tr").count() == 5
    assert "blocked_action_left_diff" in page.locator("#other-changes").inner_text()
    _shot(page, "27-changes-page.png")
    page.locator("#regressions").get_by_role("link", name="exported_bundle").click()
    page.wait_for_url("**/runs/exported_bundle/index.html")  # loaded, not only committed
    section = page.locator("#changes")
    assert section.is_visible()
    assert "Regression: passed in the baseline, blocked now" in section.inner_text()
    assert section.locator("li").count() == 5 + 2  # new findings, changed inputs
    code = section.locator('a[href*="codes/index.html#"]').first
    code.click()
    assert "codes/index.html#sandbox-policy-" in page.url


def test_the_index_puts_the_regression_first_and_draws_the_trend(
    opener: PageOpener, compared: Site
) -> None:
    page = opener.open(compared)
    page.goto(compared.url())
    first = page.locator("table[data-sortable] tbody tr").first
    assert first.locator("th a").inner_text() == "exported_bundle"
    assert "regression" in first.inner_text()
    trend = page.locator("figure.trend svg")
    assert trend.is_visible()
    box = trend.bounding_box()
    assert box is not None and box["width"] > 200 and box["height"] > 80
    assert trend.locator(":scope > rect.status-blocked").count() == 3  # not the legend's
    assert trend.locator("circle.trend-point").count() == 3
    description = trend.locator("desc").text_content() or ""
    assert "v1: 3 passed, 8 blocked" in description
    rows = page.locator("table.trend-table tbody tr").all_inner_texts()
    assert [row.split()[0] for row in rows] == ["v1", "v2", "v3"]
    trend.scroll_into_view_if_needed()
    _shot(page, "27-index-trend.png")


@pytest.mark.parametrize("path", ["changes/index.html", "index.html"])
def test_axe_finds_nothing_serious_on_the_compared_pages(
    opener: PageOpener, compared_http: Site, path: str
) -> None:
    page = opener.open(compared_http)
    page.goto(compared_http.url(path))
    blocking = [v for v in axe_violations(page) if v["impact"] in BLOCKING_IMPACTS]
    assert not blocking, [f"{v['id']}: {v['help']}" for v in blocking]
