"""The hostile bundle's site and exports are inert: no element, attribute or script comes from input.

``tests/data/hostile_bundle`` carries attack text in every string it can (see
``tests/data/make_hostile_bundle.py``). It is built into one site with the built-in
fixtures, and its benign twin (the same generator with a plain suffix, in a folder of the
same name) into another; both builds also write SARIF, JUnit and Markdown. Every page of
the hostile site must have the element and attribute structure of the same page of the
benign site, no script but the site's own, no ``on*`` attribute, no ``javascript:`` URL,
and no raw control or bidi character; its inline SVG must parse as XML; its Mermaid
source and its exports must hold no input-made structure either.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from markdown_it import MarkdownIt

from conftest import FIXTURES, REPO

DATA = REPO / "tests" / "data"
HOSTILE_BUNDLE = DATA / "hostile_bundle"
RUN_PAGE = "runs/hostile_bundle/index.html"
# The characters that must never reach a page or an export raw: C0 and C1 controls but
# tab and line breaks, the bidi embeddings, overrides, isolates and marks.
HIDDEN = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
SCRIPT_SRC = {"index.html": "assets/site.js", "codes/index.html": "../assets/site.js"}
BENIGN_SUFFIX = "_benign"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_hostile_bundle", DATA / "make_hostile_bundle.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKE = _generator()


# ---------------------------------------------------------------------------------------
# Parsing what was written


@dataclass
class Markup:
    """What a page is made of: its elements, attributes, scripts and text."""

    tags: set[tuple[str, tuple[str, ...]]] = field(default_factory=set)
    attributes: list[tuple[str, str, str]] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)
    script_text: str = ""
    text: str = ""


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found = Markup()
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_script = tag == "script"
        if tag == "wbr" and not attrs:
            return  # line-break hints the templates put after `_ : / .` in identifiers
        self.found.tags.add((tag, tuple(sorted(name for name, _ in attrs))))
        self.found.attributes += [(tag, name, value or "") for name, value in attrs]
        if tag == "script":
            self.found.scripts.append(dict(attrs).get("src") or "")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self._in_script = False

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.found.script_text += data
        else:
            self.found.text += data


@functools.cache
def parse_page(path: Path) -> Markup:
    """Parse a written page once per test session (pages are never rewritten)."""
    return parse_html(path.read_text("utf-8"))


def parse_html(text: str) -> Markup:
    parser = _Parser()
    parser.feed(text)
    parser.close()
    return parser.found


def inline_svgs(page: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", page, flags=re.DOTALL)


def mermaid_sources(page: str) -> list[str]:
    return re.findall(r'<details class="mermaid">.*?<pre><code>(.*?)</code></pre>', page, re.DOTALL)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)


# ---------------------------------------------------------------------------------------
# The two builds


@dataclass(frozen=True)
class Build:
    site: Path
    sarif: Path
    junit: Path
    markdown: Path
    stdout: str
    stderr: str


def _start_build(bundle: Path, out: Path) -> subprocess.Popen[str]:
    out.mkdir(parents=True)
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from sandbox_replay.cli import main; main()",
            "build",
            str(bundle),
            str(FIXTURES),
            "--out",
            str(out / "site"),
            "--sarif",
            str(out / "log.sarif"),
            "--junit",
            str(out / "junit.xml"),
            "--markdown",
            str(out / "summary.md"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )


def _finish_build(process: subprocess.Popen[str], out: Path) -> Build:
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    return Build(
        out / "site", out / "log.sarif", out / "junit.xml", out / "summary.md", stdout, stderr
    )


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Build, Build]:
    """Build the hostile bundle and its benign twin, each with every built-in fixture."""
    root = tmp_path_factory.mktemp("hostile_site")
    twin = root / "benign" / "hostile_bundle"  # same folder name, so the same page paths
    twin.parent.mkdir()
    MAKE.build_bundle(twin, BENIGN_SUFFIX)
    # The two builds are independent: run them side by side.
    hostile = _start_build(HOSTILE_BUNDLE, root / "hostile_out")
    benign = _start_build(twin, root / "benign_out")
    return _finish_build(hostile, root / "hostile_out"), _finish_build(benign, root / "benign_out")


def _pages(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))


# ---------------------------------------------------------------------------------------
# The fixture itself


def test_committed_hostile_bundle_is_what_the_generator_writes(tmp_path: Path) -> None:
    fresh = tmp_path / "hostile_bundle"
    MAKE.build_bundle(fresh)
    assert MAKE.same_tree(fresh, HOSTILE_BUNDLE), (
        "tests/data/hostile_bundle is stale; run .venv/bin/python tests/data/make_hostile_bundle.py"
    )


def test_hostile_bundle_is_strict_json_with_attack_text_and_a_clean_scan(
    builds: tuple[Build, Build],
) -> None:
    for path in sorted(HOSTILE_BUNDLE.glob("*.json")):
        data = json.loads(path.read_text("utf-8"))
        texts = list(_strings(data))
        assert any(MAKE.ATTACK in text for text in texts), path.name
    result = json.loads((builds[0].site / "runs/hostile_bundle/result.json").read_text("utf-8"))
    assert result["secret_exclusion_scan"]["blocking_hit_count"] == 0
    assert not any(f["forbidden_material_found"] for f in result["input_files"])
    assert any(MAKE.ATTACK in text for text in _strings(result["request_rows"]))


# ---------------------------------------------------------------------------------------
# The pages


def test_the_same_pages_are_built(builds: tuple[Build, Build]) -> None:
    hostile, benign = builds
    assert _pages(hostile.site) == _pages(benign.site)
    assert RUN_PAGE in _pages(hostile.site)


def test_every_page_has_the_benign_structure(builds: tuple[Build, Build]) -> None:
    hostile, benign = builds
    for page in _pages(hostile.site):
        bad = parse_page(hostile.site / page)
        good = parse_page(benign.site / page)
        assert bad.tags == good.tags, (page, bad.tags ^ good.tags)
        assert bad.scripts == good.scripts, page
        assert bad.script_text.strip() == "", page


def test_no_script_but_the_sites_own(builds: tuple[Build, Build]) -> None:
    hostile, _ = builds
    for page in _pages(hostile.site):
        found = parse_page(hostile.site / page)
        depth = page.count("/")
        assert found.scripts == ["../" * depth + "assets/site.js"], page


def test_no_event_handler_or_script_url_anywhere(builds: tuple[Build, Build]) -> None:
    hostile, _ = builds
    for page in _pages(hostile.site):
        found = parse_page(hostile.site / page)
        for tag, name, value in found.attributes:
            assert not name.lower().startswith("on"), (page, tag, name)
            squeezed = re.sub(r"[\s\x00-\x1f]+", "", value).lower()
            assert not squeezed.startswith(("javascript:", "data:", "vbscript:")), (page, tag, name)
            if name in {"href", "src", "action", "formaction", "xlink:href"}:
                assert not re.match(r"[a-z][a-z0-9+.-]*:", squeezed), (page, tag, name, value)


def test_input_text_only_differs_where_the_benign_page_shows_text(
    builds: tuple[Build, Build],
) -> None:
    """Ids, classes and links are the tool's own: equal on both pages, value for value.

    But for the permalink anchors, which name a row by its content: a join row's is its
    request id encoded into letters, digits and ``_ . ~ -`` (``content_slug``), a finding's
    the hex fingerprint of its code, layer, subject and line; and for the mark the tool puts
    beside each id outside ASCII (issue #46), which only the hostile ids get.
    """
    hostile, benign = builds
    structural = {"id", "class", "href", "src", "rel", "lang", "role", "tabindex", "for"}
    permalink = re.compile(r"(.*#|)(?:req-[A-Za-z0-9_.~-]+|f-[0-9a-f]{16}(?:-\d+)?)")
    mark = ("span", "class", "id-mark")

    def tool_own(attributes: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        return sorted(
            (tag, name, permalink.sub(r"\1<permalink>", value))
            for tag, name, value in attributes
            if name in structural and (tag, name, value) != mark
        )

    marked = 0
    for page in _pages(hostile.site):
        bad = parse_page(hostile.site / page)
        good = parse_page(benign.site / page)
        assert tool_own(bad.attributes) == tool_own(good.attributes), page
        assert mark not in good.attributes, page
        marked += bad.attributes.count(mark)
        anchors = [v for _, n, v in bad.attributes if n == "id" and v.startswith("req-")]
        assert all(re.fullmatch(r"req-[A-Za-z0-9_.~-]+", a) for a in anchors), page
    assert marked, "no hostile id carries its mark"


def test_attack_text_is_shown_as_text(builds: tuple[Build, Build]) -> None:
    page = parse_page(builds[0].site / RUN_PAGE)
    for payload in MAKE.PAYLOADS:
        shown = HIDDEN.sub(lambda m: f"<U+{ord(m.group()):04X}>", payload)
        assert shown in page.text, f"{payload!r} is not on the page as text"
    assert "<U+202E>" in page.text and "<U+0000>" in page.text


def test_no_raw_control_or_bidi_character_in_any_output(builds: tuple[Build, Build]) -> None:
    hostile, _ = builds
    written = [p for p in hostile.site.rglob("*") if p.is_file()]
    written += [hostile.sarif, hostile.junit, hostile.markdown]
    for path in written:
        found = HIDDEN.search(path.read_text("utf-8"))
        assert found is None, f"{path.name} holds U+{ord(found.group()):04X} raw"
    assert HIDDEN.search(hostile.stdout + hostile.stderr) is None


def test_inline_svg_parses_as_xml_and_holds_no_script(builds: tuple[Build, Build]) -> None:
    hostile, benign = builds
    for page in ("index.html", RUN_PAGE):
        bad = inline_svgs((hostile.site / page).read_text("utf-8"))
        good = inline_svgs((benign.site / page).read_text("utf-8"))
        assert bad and len(bad) == len(good), page
        for svg in bad:
            root = ET.fromstring(svg)
            for element in root.iter():
                tag = element.tag.rsplit("}", 1)[-1]
                assert tag not in {"script", "foreignObject", "iframe", "svg"} or element is root
                for name, value in element.attrib.items():
                    assert not name.rsplit("}", 1)[-1].lower().startswith("on")
                    if name.endswith("href"):
                        assert value.startswith("#"), value
                for text in (element.text or "", element.tail or ""):
                    assert HIDDEN.search(text) is None


def test_mermaid_source_holds_no_input(builds: tuple[Build, Build]) -> None:
    hostile, benign = builds
    bad = mermaid_sources((hostile.site / RUN_PAGE).read_text("utf-8"))
    good = mermaid_sources((benign.site / RUN_PAGE).read_text("utf-8"))
    assert bad and bad == good
    for source in bad:
        assert "%%" not in source and "click" not in source and "javascript" not in source


# ---------------------------------------------------------------------------------------
# The exports


def _element_shape(root: ET.Element) -> set[tuple[str, tuple[str, ...]]]:
    return {(e.tag, tuple(sorted(e.attrib))) for e in root.iter()}


def test_junit_parses_with_the_benign_structure(builds: tuple[Build, Build]) -> None:
    hostile, benign = builds
    bad = ET.parse(hostile.junit).getroot()
    good = ET.parse(benign.junit).getroot()
    assert _element_shape(bad) == _element_shape(good)
    assert len(list(bad.iter())) == len(list(good.iter()))
    assert "<script>alert(1)</script>" in ET.tostring(bad, encoding="unicode").replace(
        "&lt;", "<"
    ).replace("&gt;", ">")


def _sarif_shape(value: Any, path: str = "") -> set[str]:
    """Return every key path of a SARIF log (list indexes dropped)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            found.add(f"{path}/{key}")
            found |= _sarif_shape(item, f"{path}/{key}")
    elif isinstance(value, list):
        for item in value:
            found |= _sarif_shape(item, f"{path}[]")
    return found


def test_sarif_is_inert(builds: tuple[Build, Build]) -> None:
    hostile, benign = builds
    bad = json.loads(hostile.sarif.read_text("utf-8"))
    good = json.loads(benign.sarif.read_text("utf-8"))
    assert _sarif_shape(bad) == _sarif_shape(good)
    for text in _strings(bad):
        assert HIDDEN.search(text) is None
    for run in bad["runs"]:
        for result in run["results"]:
            message = result["message"]["text"]
            assert re.search(r"(?<!\\)\[[^\]]*(?<!\\)\]\(", message) is None, message
            for location in result["locations"]:
                uri = location["physicalLocation"]["artifactLocation"]["uri"]
                assert not re.match(r"[a-z][a-z0-9+.-]*:", uri), uri
    assert any("alert(1)" in r["message"]["text"] for run in bad["runs"] for r in run["results"])


def _markdown_html(path: Path) -> str:
    renderer = MarkdownIt("commonmark", {"html": True}).enable("table")
    return renderer.render(path.read_text("utf-8"))


def test_markdown_renders_to_the_benign_structure(builds: tuple[Build, Build]) -> None:
    hostile, benign = builds
    bad = parse_html(_markdown_html(hostile.markdown))
    good = parse_html(_markdown_html(benign.markdown))
    assert bad.tags == good.tags, bad.tags ^ good.tags
    assert not {tag for tag, _ in bad.tags} & {"script", "img", "svg", "iframe", "a"}
    assert sorted(a for a in bad.attributes) == sorted(a for a in good.attributes)
    assert "<script>alert(1)</script>" in bad.text  # shown as text
    assert "![i](http://example.invalid/x.png)" in bad.text


def test_single_run_command_and_its_exports_are_inert(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from sandbox_replay.cli import main; main()",
            "run-sandbox-bundle",
            "--input",
            str(HOSTILE_BUNDLE),
            "--out",
            str(out),
            "--card",
            "--junit",
            str(tmp_path / "junit.xml"),
            "--markdown",
            str(tmp_path / "summary.md"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
    )
    assert done.returncode == 1, done.stderr  # blocked by its findings, not crashed
    for stream in (done.stdout, done.stderr):
        assert HIDDEN.search(stream) is None, "a control or bidi character reached the terminal"
    ET.parse(tmp_path / "junit.xml")
    rendered = parse_html(_markdown_html(tmp_path / "summary.md"))
    assert not {tag for tag, _ in rendered.tags} & {"script", "img", "svg", "iframe", "a"}
