"""Time a run's search in Chromium: from typing a request id to its first result shown.

Run: .venv/bin/python benchmarks/search_latency.py SITE RUN [--ids 12] [--http]

Opens ``SITE/runs/RUN/index.html`` from ``file://`` (or a local static server with
``--http``) in Debian's Chromium, types each of a spread of the run's request ids (the
first, the last and evenly between, read from the search index itself) into a fresh page's
search box, and prints the time until its result shows, the time to resolve a permalink
to a row on a sub-page, the index's file count and largest file, and the page sizes. The
first search of a page pays for loading the manifest and one part: that is the figure
that matters, so each id is searched in a fresh page.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking"]

FIRST_RESULT = """async (query) => {
    const input = document.querySelector('#run-search-q');
    const list = document.querySelector('form.run-search .search-results');
    const started = performance.now();
    input.value = query;
    input.dispatchEvent(new Event('input'));
    while (!list.querySelector('a')) await new Promise(r => setTimeout(r, 2));
    return [performance.now() - started, list.querySelector('a').textContent];
}"""


def request_ids(search: Path, count: int) -> list[str]:
    """Return ``count`` request ids spread over the index, read from its parts."""
    parts = sorted(search.glob("part-*.js"))
    ids: list[str] = []
    for part in parts:
        text = part.read_text("utf-8")
        ids.extend(
            json.loads(m) for m in re.findall(r'^\[("(?:[^"\\]|\\.)*"),"request"', text, re.M)
        )
    step = max(1, (len(ids) - 1) // max(1, count - 1))
    return [ids[i] for i in range(0, len(ids), step)][: count - 1] + [ids[-1]]


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No request log."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path)
    parser.add_argument("run")
    parser.add_argument("--ids", type=int, default=12)
    parser.add_argument("--http", action="store_true")
    args = parser.parse_args()
    run = args.site / "runs" / args.run
    search = run / "search"
    files = sorted(search.iterdir())
    sizes = [f.stat().st_size for f in files]
    print(
        f"index: {len(files)} files, {sum(sizes) / 1e6:.1f} MB, largest {max(sizes) / 1e3:.0f} KB"
    )
    pages = sorted(run.rglob("*.html"))
    page_sizes = [p.stat().st_size for p in pages]
    print(
        f"pages: {len(pages)}, run page {(run / 'index.html').stat().st_size / 1e3:.0f} KB, "
        f"largest {max(page_sizes) / 1e3:.0f} KB"
    )
    ids = request_ids(search, args.ids)
    server = None
    if args.http:
        server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(args.site)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}/"
    else:
        base = args.site.resolve().as_uri() + "/"
    url = f"{base}runs/{args.run}/index.html"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
        timings = []
        loads = []
        for rid in ids:
            page = browser.new_page()
            started = time.perf_counter()
            page.goto(url)
            loads.append(time.perf_counter() - started)
            page.wait_for_selector("form.run-search:not([hidden])")
            elapsed, first = page.evaluate(FIRST_RESULT, rid)
            assert first.startswith(rid), (rid, first)
            timings.append(elapsed)
            page.close()
        print(
            f"first result ({len(ids)} ids, fresh page each, {'http' if args.http else 'file'}): "
            f"median {statistics.median(timings):.0f} ms, max {max(timings):.0f} ms"
        )
        print(f"run page load: median {statistics.median(loads) * 1e3:.0f} ms")
        permalinks = []
        for rid in ids[-3:]:
            page = browser.new_page()
            anchor = "req-" + rid  # the generated ids are plain: their slug is themselves
            started = time.perf_counter()
            page.goto(f"{url}#{anchor}")
            page.wait_for_url(re.compile(rf"join/page-\d+\.html#{re.escape(anchor)}$"))
            page.wait_for_selector(f"tr[id='{anchor}']")
            permalinks.append(time.perf_counter() - started)
            page.close()
        print(
            f"permalink from the run page to a row on a join page: "
            f"median {statistics.median(permalinks) * 1e3:.0f} ms, max {max(permalinks) * 1e3:.0f} ms"
        )
        browser.close()
    if server is not None:
        server.shutdown()


if __name__ == "__main__":
    main()
