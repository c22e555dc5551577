"""Browser fixtures: one fresh build of the site, one static server, one Chromium per session.

The browser is Debian's Chromium (``/usr/bin/chromium``) driven by Playwright for Python;
Playwright's own browser download is never used (it cannot run here). Without Chromium
these tests skip with a message saying how to enable them, except in CI (``CI=true``),
where a missing browser fails the run: ``.ci/run`` installs it, so its absence is a fault.

Every page a test opens comes from the ``opener`` fixture (``page`` is one such page): it
records every request and aborts (and reports) any that leaves the page's own origin or
``file://``, and it collects failed requests, console errors and warnings and uncaught
exceptions; the test fails on any of them. Every test here is marked ``browser``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

from conftest import REPO, project_policies, project_sensitivity
from sandbox_replay.report.build import BuildConfig, build_site

if TYPE_CHECKING:
    from playwright.sync_api import (
        Browser,
        BrowserContext,
        ConsoleMessage,
        Page,
        Request,
        Response,
        Route,
    )

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ENABLE = (
    "install Debian's Chromium (`apt-get install chromium`) and the test extra "
    "(`pip install -e '.[test]'`); never `playwright install`"
)
VIEWPORT = {"width": 1280, "height": 900}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def unavailable(what: str, how: str) -> None:
    """Skip on a developer machine, fail in CI, where .ci/run must have installed ``what``."""
    message = f"{what} is not available: {how}"
    if in_ci():
        pytest.fail(f"{message} (CI=true: .ci/run should have installed it)", pytrace=False)
    pytest.skip(message)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test in this folder ``browser`` (the hook sees the whole session's items)."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.browser)


@dataclass(frozen=True)
class Site:
    """One origin the built site is opened from: ``file://`` or the local static server."""

    name: str
    root: Path
    base: str

    def url(self, page: str = "index.html") -> str:
        return self.base + page

    def allows(self, url: str) -> bool:
        """Whether a request to ``url`` stays on this origin (the only place a page may go)."""
        parts = urlsplit(url)
        if self.name == "file":
            return parts.scheme == "file"
        base = urlsplit(self.base)
        return (parts.scheme, parts.netloc) == (base.scheme, base.netloc)

    def pages(self) -> list[str]:
        """Every HTML page of the site, as paths relative to its root."""
        return sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*.html"))


@dataclass
class PageLog:
    """What a page did that a self-contained, quiet report must never do."""

    site: Site
    requests: list[str] = field(default_factory=list)
    offsite: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)

    def on_request(self, request: Request) -> None:
        self.requests.append(request.url)
        if not self.site.allows(request.url):
            self.offsite.append(request.url)

    def on_response(self, response: Response) -> None:
        if response.status >= 400:
            self.console.append(f"HTTP {response.status}: {response.url}")

    def on_request_failed(self, request: Request) -> None:
        if self.site.allows(request.url):
            self.console.append(f"request failed ({request.failure}): {request.url}")

    def on_console(self, message: ConsoleMessage) -> None:
        if message.type in {"error", "warning"}:
            self.console.append(f"console {message.type}: {message.text} at {message.location}")

    def on_page_error(self, error: Any) -> None:
        self.console.append(f"uncaught: {error}")

    def problems(self) -> list[str]:
        return [f"request off the page's origin: {url}" for url in self.offsite] + self.console


@pytest.fixture(scope="session")
def site_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh build of the built-in fixtures, as `make site` builds it."""
    out = tmp_path_factory.mktemp("browser") / "site"
    config = BuildConfig(
        (REPO / "fixtures",),
        out,
        cwd=REPO,
        progress=lambda _: None,
        policies=project_policies(),
        sensitivity=project_sensitivity(),
    )
    build_site(config)
    return out


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output clean."""


LARGE_REQUESTS = 60_000
LARGE_RUN = "large60k"


@pytest.fixture(scope="session")
def large(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """A site of one generated 60,000-request run (1% failing), with its single file,
    opened from ``file://``.

    Built by the CLI in a process of its own, not in this one: a 60,000-request replay
    would leave this process's resident set large, and a child it starts later
    (``test_limits`` measures one's peak) inherits that figure across ``exec``.
    """
    sys.path.insert(0, str(REPO / "benchmarks"))
    from generate_bundle import generate

    root = tmp_path_factory.mktemp("large")
    generate(root / "inputs" / LARGE_RUN, LARGE_REQUESTS, seed=7, failing_fraction=0.01)
    out = root / "site"
    cli = Path(sys.executable).with_name("sandbox-replay")
    built = subprocess.run(
        [str(cli), "build", str(root / "inputs"), "--out", str(out), "--single-file", "-q"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    assert (out / "runs" / LARGE_RUN / "index.html").is_file(), built.stderr
    return Site("file", out, out.as_uri() + "/")


@pytest.fixture(scope="session")
def server_base(site_dir: Path) -> Iterator[str]:
    """Serve the build on 127.0.0.1 at an ephemeral port, in a thread, for the session."""
    handler = partial(_QuietHandler, directory=str(site_dir))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="session")
def file_site(site_dir: Path) -> Site:
    return Site("file", site_dir, site_dir.as_uri() + "/")


@pytest.fixture(scope="session")
def http_site(site_dir: Path, server_base: str) -> Site:
    return Site("http", site_dir, server_base)


@pytest.fixture(params=["file", "http"])
def site(request: pytest.FixtureRequest) -> Site:
    """The site from each origin in turn: a journey must work from disk and from a host."""
    name: str = request.param
    fixture: Site = request.getfixturevalue(f"{name}_site")
    return fixture


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One headless Debian Chromium for the whole session."""
    if not CHROMIUM.is_file():
        unavailable(f"Chromium ({CHROMIUM})", ENABLE)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright for Python", ENABLE)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


class PageOpener:
    """Open watched pages in fresh contexts; every context is closed at teardown."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.contexts: list[BrowserContext] = []
        self.logs: list[PageLog] = []

    def open(self, site: Site, *, javascript: bool = True, **options: Any) -> Page:
        """A new page in a new context, watched as the module docstring says."""
        context = self.browser.new_context(
            java_script_enabled=javascript, viewport=options.pop("viewport", VIEWPORT), **options
        )
        self.contexts.append(context)
        log = PageLog(site)
        self.logs.append(log)

        def guard(route: Route) -> None:
            if site.allows(route.request.url):
                route.continue_()
            else:
                route.abort()

        context.route("**/*", guard)
        page = context.new_page()
        page.on("request", log.on_request)
        page.on("response", log.on_response)
        page.on("requestfailed", log.on_request_failed)
        page.on("console", log.on_console)
        page.on("pageerror", log.on_page_error)
        return page

    def problems(self) -> list[str]:
        return [problem for log in self.logs for problem in log.problems()]

    def close(self) -> None:
        for context in self.contexts:
            context.close()


@pytest.fixture
def opener(browser: Browser) -> Iterator[PageOpener]:
    """Open pages for one test; fail it on any off-origin request or console message."""
    pages = PageOpener(browser)
    try:
        yield pages
        problems = pages.problems()
        assert not problems, "the pages misbehaved:\n" + "\n".join(problems)
    finally:
        pages.close()


@pytest.fixture
def page(opener: PageOpener, site: Site) -> Page:
    """A watched page with scripts on, for ``site``'s origin."""
    return opener.open(site)
