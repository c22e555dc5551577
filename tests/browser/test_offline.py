"""Every page works offline and quietly: no request leaves its origin, nothing is logged.

The ``opener`` fixture fails a test on any request off the page's origin (other than
``file://``), any failed or 4xx/5xx request, any console error or warning and any
uncaught exception; these tests open every page under both origins through it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from browser.conftest import PageOpener, Site

if TYPE_CHECKING:
    from playwright.sync_api import Browser


# Each origin, and each colour scheme, once (a scheme changes no request, only what shows).
@pytest.mark.parametrize(("origin", "scheme"), [("file", "light"), ("http", "dark")])
def test_every_page_loads_only_its_own_files(
    opener: PageOpener, origin: str, scheme: str, request: pytest.FixtureRequest
) -> None:
    site: Site = request.getfixturevalue(f"{origin}_site")
    pages = site.pages()
    assert len(pages) >= 3 and "index.html" in pages and "codes/index.html" in pages
    page = opener.open(site, color_scheme=scheme)
    for name in pages:
        page.goto(site.url(name), wait_until="load")
        # The details a reader opens and the print view must not fetch anything either.
        page.emulate_media(media="print")
        page.emulate_media(media="screen")
    log = opener.logs[-1]
    loaded = {url.removeprefix(site.base).partition("#")[0] for url in log.requests}
    assert {"assets/site.css", "assets/site.js", *pages} <= loaded
    assert not log.problems()


def test_the_watch_catches_a_foreign_request_and_a_console_error(
    browser: Browser, tmp_path: Path
) -> None:
    """The guard is not vacuous: a planted external asset and a console error are caught."""
    (tmp_path / "index.html").write_text(
        "<!doctype html><html lang=en><title>t</title>"
        '<link rel="stylesheet" href="https://cdn.invalid/site.css">'
        "<script>console.error('boom'); console.warn('careful');</script>",
        "utf-8",
    )
    site = Site("file", tmp_path, tmp_path.as_uri() + "/")
    pages = PageOpener(browser)
    try:
        page = pages.open(site)
        page.goto(site.url())
        problems = pages.problems()
    finally:
        pages.close()
    assert "request off the page's origin: https://cdn.invalid/site.css" in problems
    assert any("console error: boom" in problem for problem in problems)
    assert any("console warning: careful" in problem for problem in problems)
