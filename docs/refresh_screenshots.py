"""Refresh the README's screenshots of the report site from a fresh build of the fixtures.

    .venv/bin/python docs/refresh_screenshots.py

Builds the site as `make site` does (into a temporary folder), opens it in Debian's
Chromium (``/usr/bin/chromium``, driven by Playwright; never ``playwright install``) and
writes the top of each page as a PNG into ``docs/``: the index, a passing run, a failing
run, the finding-code catalog, the failing run in the dark scheme, the run replayed with a
team's Cedar policy, and the policy coverage page. Each picture is a
fixed 1280x800 window at scale 1, which keeps every file under 300 KB. Prints each file
and its size.
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
LIMIT = 300 * 1024

# file name -> (page of the site, colour scheme)
SHOTS = {
    "index.png": ("index.html", "light"),
    "run-pass.png": ("runs/first_wave/index.html", "light"),
    "run-page.png": ("runs/allow_network_exfil_executed/index.html", "light"),
    "catalog.png": ("codes/index.html", "light"),
    "run-page-dark.png": ("runs/allow_network_exfil_executed/index.html", "dark"),
    "run-cedar.png": ("runs/cedar_team_fixture_freeze/index.html", "light"),
    "policy-coverage.png": ("policy/index.html", "light"),
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
                for name, (page_path, scheme) in SHOTS.items():
                    context = browser.new_context(viewport=WINDOW, color_scheme=scheme)
                    page = context.new_page()
                    page.goto((site / page_path).as_uri())
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
