"""A run's single file (``build --single-file``) in a browser: whole, and every link inside it.

On the built-in runs, from disk; the 60,000-request run's file is in ``test_find_large.py``.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import pytest

from browser.conftest import Site
from conftest import REPO, project_policies
from sandbox_replay.report.build import BuildConfig, build_site
from sandbox_replay.report.views.common import request_anchor

if TYPE_CHECKING:
    from browser.conftest import PageOpener

FAILING_RUN = "allow_network_exfil_executed"

# Every link of the page that does not land on an element of the page.
DEAD_LINKS = """() => [...document.querySelectorAll('a[href]')]
    .map(a => a.getAttribute('href'))
    .filter(h => !(h.startsWith('#') && document.getElementById(decodeURIComponent(h.slice(1)))))"""


@pytest.fixture(scope="module")
def single_site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    out = tmp_path_factory.mktemp("single") / "site"
    config = BuildConfig(
        (REPO / "fixtures",),
        out,
        cwd=REPO,
        progress=lambda _: None,
        policies=project_policies(),
        single_file=True,
    )
    build_site(config)
    return Site("file", out, out.as_uri() + "/")


def test_every_link_of_every_single_file_lands_in_it(opener: PageOpener, single_site: Site) -> None:
    files = sorted((single_site.root / "single").iterdir())
    assert len(files) == len(list((single_site.root / "runs").iterdir()))
    page = opener.open(single_site)
    for path in files:
        page.goto(single_site.url(f"single/{path.name}"))
        assert page.eval_on_selector_all("a[href]", "links => links.length") > 20, path.name
        assert page.evaluate(DEAD_LINKS) == [], path.name
    # The page asked for nothing but itself.
    assert all(url.endswith(".html") for url in opener.logs[-1].requests)


def test_a_single_file_explains_its_codes_and_holds_every_finding(
    opener: PageOpener, single_site: Site
) -> None:
    result = json.loads((single_site.root / "runs" / FAILING_RUN / "result.json").read_bytes())
    page = opener.open(single_site)
    page.goto(single_site.url(f"single/{FAILING_RUN}.html"))
    rows = page.locator("#findings tbody tr[id^='f-']")
    assert rows.count() == len(result["findings"]) > 0
    codes = sorted({f["error_code"] for f in result["findings"]})
    shown = page.eval_on_selector_all("#codes article h3", "hs => hs.map(h => h.textContent)")
    assert sorted(shown) == codes
    # A finding's code leads to its explanation, in the page, rendered from Markdown.
    link = rows.first.locator("a.code")
    code = link.inner_text()
    link.click()
    page.wait_for_function("location.hash.startsWith('#code_')")
    article = page.locator("article.code-entry:target")
    assert article.locator("h3").inner_text() == code
    assert article.locator(".doc p").count() >= 2
    assert article.is_visible()
    assert re.search(r"\w{4,}", article.locator(".doc").inner_text())


def test_an_old_position_link_lands_in_a_single_file(opener: PageOpener, single_site: Site) -> None:
    result = json.loads((single_site.root / "runs" / FAILING_RUN / "result.json").read_bytes())
    rows = result["request_rows"]
    page = opener.open(single_site)
    page.goto(single_site.url(f"single/{FAILING_RUN}.html#request-{len(rows)}"))
    anchor = request_anchor(rows[-1]["request_id"])
    page.wait_for_url(re.compile(rf"#{anchor}$"))
    # There is no search box to point to, and no other page to go to: the notice says so.
    page.goto(single_site.url(f"single/{FAILING_RUN}.html#request-{len(rows) + 1}"))
    notice = page.locator("#old-link-notice")
    assert notice.is_visible()
    assert notice.inner_text().endswith("by its request id or finding code.")
