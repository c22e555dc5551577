"""The docs' pictures of the site exist, stay small, and none lies unreferenced.

The README shows one; the docs pages (``docs/*.md``, which link them as ``name.png``)
show the rest.

They are taken by ``docs/refresh_screenshots.py``; this test needs no browser.
"""

from __future__ import annotations

import re

from conftest import REPO

LIMIT = 300 * 1024


def test_readme_pictures_exist_are_small_and_all_referenced() -> None:
    readme = (REPO / "README.md").read_text("utf-8")
    shown = set(re.findall(r"!\[[^]]*\]\((docs/[^)\s]+\.png)\)", readme))
    referenced = set(re.findall(r"\((docs/[^)\s]+\.png)\)", readme))
    for page in sorted((REPO / "docs").glob("*.md")):
        names = re.findall(r"\(([^)\s/]+\.png)\)", page.read_text("utf-8"))
        referenced |= {f"docs/{name}" for name in names}
    on_disk = {p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.png")}
    assert shown, "the README shows the site"
    assert referenced <= on_disk, f"missing: {sorted(referenced - on_disk)}"
    assert on_disk <= referenced, f"unreferenced: {sorted(on_disk - referenced)}"
    for name in sorted(on_disk):
        size = (REPO / name).stat().st_size
        assert size < LIMIT, f"{name} is {size // 1024} KB; retake it smaller"
