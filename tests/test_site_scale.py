"""A large run's listings live on linked sub-pages; every row and link still resolves."""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from conftest import REPO
from sandbox_replay.report.build import BuildConfig, BuildResult, build_site
from sandbox_replay.report.views import PAGE_ROWS

sys.path.insert(0, str(REPO / "benchmarks"))

from generate_bundle import generate

REQUESTS = 2 * PAGE_ROWS + 37  # three join pages, the last one short
MAX_PAGE = 2_000_000


def quiet(message: str) -> None:
    """Swallow progress lines in tests."""


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: list[str] = []
        self.links: list[str] = []
        self.sections: list[str] = []
        self.depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if "id" in values:
            self.ids.append(values["id"])
        if "href" in values:
            self.links.append(values["href"])
        if tag == "section":
            self.depth += 1
            if self.depth == 1 and "id" in values:
                self.sections.append(values["id"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.depth -= 1


def parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text("utf-8"))
    page.close()
    return page


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BuildResult]:
    root = tmp_path_factory.mktemp("scale")
    generate(root / "inputs" / "large_bundle", REQUESTS, seed=3, failing_fraction=0.2)
    out = root / "site"
    result = build_site(BuildConfig((root / "inputs",), out, cwd=root, progress=quiet, jobs=1))
    return out / "runs" / "large_bundle", result


def test_listings_are_split_into_numbered_pages(large: tuple[Path, BuildResult]) -> None:
    run, _ = large
    assert sorted(p.name for p in (run / "join").iterdir()) == [
        "page-0001.html",
        "page-0002.html",
        "page-0003.html",
    ]
    assert sorted(p.name for p in (run / "trace").iterdir())[-1] == "page-0003.html"
    main = parse(run / "index.html")
    assert main.sections == [
        "headline",
        "flowchart",
        "joins",
        "findings",
        "calibration",
        "layers",
        "trace",
        "inputs",
        "provenance",
    ]
    # The run page keeps no row of the split listings, only links to their pages.
    assert not any(i.startswith("request-") for i in main.ids)
    assert "join/page-0003.html#join-list" in main.links


def test_every_request_is_on_exactly_one_join_page(large: tuple[Path, BuildResult]) -> None:
    run, _ = large
    anchors = [
        i for page in sorted((run / "join").iterdir()) for i in parse(page).ids if "request-" in i
    ]
    assert anchors == [f"request-{n}" for n in range(1, REQUESTS + 1)]


def test_every_link_of_every_page_resolves(large: tuple[Path, BuildResult]) -> None:
    run, _ = large
    site = run.parent.parent
    parsed = {p.resolve(): parse(p) for p in sorted(site.rglob("*.html"))}
    followed = 0
    for path, page in parsed.items():
        for link in page.links:
            parts = urlsplit(link)
            assert not parts.scheme, f"{path}: {link}"
            target = path if not parts.path else (path.parent / unquote(parts.path)).resolve()
            assert target.is_file(), f"{path}: {link}"
            if parts.fragment:
                assert parts.fragment in parsed[target].ids, f"{path}: {link}"
            followed += 1
    assert followed > 4 * REQUESTS


def test_pages_link_previous_next_and_stay_small(large: tuple[Path, BuildResult]) -> None:
    run, _ = large
    middle = parse(run / "join" / "page-0002.html")
    assert "page-0001.html#join-list" in middle.links
    assert "page-0003.html#join-list" in middle.links
    assert "../index.html#joins" in middle.links
    for page in run.rglob("*.html"):
        assert page.stat().st_size < MAX_PAGE, page


def test_findings_link_rows_across_pages(large: tuple[Path, BuildResult]) -> None:
    run, _ = large
    findings = (run / "findings" / "page-0001.html").read_text("utf-8")
    assert re.search(r'href="\.\./join/page-000\d\.html#request-\d+"', findings)
    joins = "".join(p.read_text("utf-8") for p in sorted((run / "join").iterdir()))
    assert re.search(r'href="\.\./findings/page-000\d\.html#finding-\d+"', joins)


def test_a_large_input_is_listed_but_not_highlighted(large: tuple[Path, BuildResult]) -> None:
    run, _ = large
    page = (run / "index.html").read_text("utf-8")
    assert 'id="file-action-requests"' in page
    assert "Not shown: larger than" in page
    assert 'id="action-requests-L1"' not in page
