"""Nothing from an input can run as script or change a page's structure, or leak past the scan."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import pytest

from conftest import FIXTURES
from sandbox_replay.report.build import BuildConfig, build_site

HOSTILE = {
    "req_secret_env_read": '"><script>alert(1)</script>',
    "req_network_exfil_attempt": "javascript:alert(1)",
    "ep_002": "<img src=x onerror=alert(1)>",
}


def quiet(message: str) -> None:
    """Swallow progress lines in tests."""


class _Shape(HTMLParser):
    """Count every element with its attribute names, and keep every link value."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.shape: Counter[tuple[str, tuple[str, ...]]] = Counter()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "wbr" and not attrs:
            return  # our own line-break hints, placed after `_ : / .` in identifiers
        self.shape[tag, tuple(sorted(name for name, _ in attrs))] += 1
        self.links += [value or "" for name, value in attrs if name in ("href", "src")]


def shape(path: Path) -> _Shape:
    parser = _Shape()
    parser.feed(path.read_text("utf-8"))
    parser.close()
    return parser


def _replace_everywhere(folder: Path, replacements: dict[str, str]) -> None:
    """Swap each benign value for a hostile one in every file, as JSON string content."""
    for path in folder.glob("*.json"):
        text = path.read_text("utf-8")
        for old, new in replacements.items():
            text = text.replace(old, json.dumps(new)[1:-1])
        path.write_text(text, "utf-8")


def _build(source: Path, out: Path) -> None:
    build_site(BuildConfig((source,), out, cwd=source.parent, progress=quiet))


def test_hostile_values_appear_only_as_escaped_text(tmp_path: Path) -> None:
    benign = tmp_path / "benign" / "first_wave"
    hostile = tmp_path / "hostile" / "first_wave"
    shutil.copytree(FIXTURES / "first_wave", benign)
    shutil.copytree(FIXTURES / "first_wave", hostile)
    _replace_everywhere(hostile, HOSTILE)
    _build(benign, tmp_path / "site_benign")
    _build(hostile, tmp_path / "site_hostile")
    for page in ("index.html", "codes/index.html", "runs/first_wave/index.html"):
        good = shape(tmp_path / "site_benign" / page)
        bad = shape(tmp_path / "site_hostile" / page)
        assert bad.shape == good.shape, page
        # A row's permalink names it by its id, encoded: a fragment, never a scheme.
        assert not [
            link
            for link in bad.links
            if "javascript" in link.lower() and not re.fullmatch(r"#req-[A-Za-z0-9_.~-]+", link)
        ], page
        assert not [link for link in bad.links if ":" in link.split("#", 1)[-1]], page
        raw = (tmp_path / "site_hostile" / page).read_bytes()
        assert b"<script>alert" not in raw
        assert b"<img src=x" not in raw
    # The search index holds the hostile ids as script strings that cannot close a script.
    index = b"".join(
        p.read_bytes() for p in (tmp_path / "site_hostile/runs/first_wave/search").iterdir()
    )
    assert b"javascript:alert(1)" in index
    assert b"<" not in index and b">" not in index
    run_page = (tmp_path / "site_hostile/runs/first_wave/index.html").read_text("utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in run_page
    assert "javascript:alert(1)" in run_page  # shown, as text only


def _sentinel() -> str:
    table = json.loads(
        (resources.files("sandbox_replay") / "data" / "forbidden_classes.json").read_text("utf-8")
    )
    for entry in table["classes"]:
        if entry.get("tokens"):
            token: str = entry["tokens"][0]
            return token
    pytest.skip("the forbidden-classes table has no literal token")


def test_scan_flagged_file_is_withheld_everywhere(tmp_path: Path) -> None:
    token = _sentinel()
    source = tmp_path / "in" / "first_wave"
    shutil.copytree(FIXTURES / "first_wave", source)
    path = source / "action_requests.json"
    path.write_text(
        path.read_text("utf-8").replace(
            "action:environment_read/synthetic_credential_name", f"action:{token}"
        ),
        "utf-8",
    )
    out = tmp_path / "site"
    _build(source, out)
    needle = token.encode("utf-8")
    for written in sorted(out.rglob("*")):
        if written.is_file():
            assert written.read_bytes().find(needle) == -1, f"{written} repeats the sentinel"
    page = (out / "runs/first_wave/index.html").read_text("utf-8")
    assert "Withheld: the forbidden-material scan matched this file" in page
    assert 'id="action-requests-L1"' not in page
    assert 'id="policy-verdicts-L1"' in page  # other files are still shown


def test_catalog_markdown_escapes_raw_html() -> None:
    from sandbox_replay.report.catalog import render_doc

    html = str(render_doc("## Fix\n<script>alert(1)</script> [x](javascript:alert(1))\n"))
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert 'href="javascript' not in html
    assert html.startswith("<h4>Fix</h4>")
