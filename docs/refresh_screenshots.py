"""Refresh the docs' screenshots of the report site from a fresh build of the fixtures.

    .venv/bin/python docs/refresh_screenshots.py

Builds the site as `make site` does (into a temporary folder), opens it in Debian's
Chromium (``/usr/bin/chromium``, driven by Playwright; never ``playwright install``) and
writes the top of each page as a PNG into ``docs/``: the index, a passing run, a failing
run, the finding-code catalog, the failing run in the dark scheme, the run replayed with a
team's Cedar policy, the policy coverage page, a run's gaps listing, its search with a
query typed, and the index and a run page at phone width. Each picture is a fixed
1280x800 window (390x844 for the phone) at scale 1, which keeps every file under 300 KB.
Prints each file and its size.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from sandbox_replay.model.policy import choose_policies
from sandbox_replay.report.build import BuildConfig, build_site

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--no-first-run", "--disable-sync"]
WINDOW = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
LIMIT = 300 * 1024

FAILING = "runs/allow_network_exfil_executed"
# file name -> (page of the site, colour scheme, window, text typed into the run's search)
SHOTS = {
    "index.png": ("index.html", "light", WINDOW, ""),
    "run-pass.png": ("runs/first_wave/index.html", "light", WINDOW, ""),
    "run-page.png": (f"{FAILING}/index.html", "light", WINDOW, ""),
    "catalog.png": ("codes/index.html", "light", WINDOW, ""),
    "run-page-dark.png": (f"{FAILING}/index.html", "dark", WINDOW, ""),
    "run-cedar.png": ("runs/cedar_team_fixture_freeze/index.html", "light", WINDOW, ""),
    "policy-coverage.png": ("policy/index.html", "light", WINDOW, ""),
    "gaps.png": (f"{FAILING}/gaps/page-0001.html", "light", WINDOW, ""),
    "search.png": (f"{FAILING}/index.html", "light", WINDOW, "req_"),
    "phone-index.png": ("index.html", "light", PHONE, ""),
    "phone-run.png": (f"{FAILING}/index.html#joins", "dark", PHONE, ""),
}


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        site = Path(scratch) / "site"
        # With the project's policies, as `make site` builds (the Cedar scenario's own).
        policies = choose_policies(None, None, REPO)
        config = BuildConfig(
            (REPO / "fixtures",), site, cwd=REPO, progress=lambda _: None, policies=policies
        )
        build_site(config)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                for name, (page_path, scheme, window, query) in SHOTS.items():
                    context = browser.new_context(viewport=window, color_scheme=scheme)
                    page = context.new_page()
                    path, _, fragment = page_path.partition("#")
                    page.goto((site / path).as_uri() + (f"#{fragment}" if fragment else ""))
                    if query:
                        page.fill("#run-search-q", query)
                        page.wait_for_selector("form.run-search .search-results a")
                    target = DOCS / name
                    page.screenshot(path=str(target), animations="disabled", caret="hide")
                    context.close()
                    size = target.stat().st_size
                    print(f"{target.relative_to(REPO)}: {size // 1024} KB")
                    if size > LIMIT:
                        print(f"  over {LIMIT // 1024} KB: shrink WINDOW", file=sys.stderr)
                        return 1
            finally:
                browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
