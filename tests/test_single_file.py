"""``build --single-file``: one self-contained page per run, same content, no request."""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import FIRST_WAVE, SCENARIOS, edit_json
from sandbox_replay.cli import app
from sandbox_replay.report.build import SITE_MARKER, BuildConfig, build_site
from sandbox_replay.report.single_file import SingleFileError, single_file_page

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "wbr"}
SECTIONS = ("headline", "joins", "findings")


class _Page(HTMLParser):
    """Collect every tag's attributes, the text of chosen sections, and style/script bodies."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.sections: dict[str, list[str]] = {name: [] for name in SECTIONS}
        self.open: list[tuple[str, str | None]] = []
        self.raw: dict[str, list[str]] = {"style": [], "script": []}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag not in VOID:
            self.open.append((tag, attributes.get("id")))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        while self.open:
            if self.open.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        names = {element_id for _, element_id in self.open}
        for name in SECTIONS:
            if name in names:
                self.sections[name].append(data)
        if self.open and self.open[-1][0] in self.raw:
            self.raw[self.open[-1][0]].append(data)


def parse(data: bytes) -> _Page:
    page = _Page()
    page.feed(data.decode("utf-8"))
    page.close()
    return page


def build(root: Path, out: str, *, single: bool) -> Path:
    site = root / out
    build_site(
        BuildConfig(
            (root / "runs",), site, cwd=root, progress=lambda _: None, jobs=1, single_file=single
        )
    )
    return site


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("single")
    shutil.copytree(FIRST_WAVE, root / "runs" / "first_wave")
    shutil.copytree(
        SCENARIOS / "allow_network_exfil_executed", root / "runs" / "allow_network_exfil_executed"
    )
    return root


@pytest.fixture(scope="module")
def site(inputs: Path) -> Path:
    return build(inputs, "site", single=True)


RUNS = ("first_wave", "allow_network_exfil_executed")


@pytest.mark.parametrize("run", RUNS)
def test_single_file_requests_nothing(site: Path, run: str) -> None:
    data = (site / "single" / f"{run}.html").read_bytes()
    assert not re.search(rb"https?://", data)
    page = parse(data)
    for tag, attributes in page.tags:
        assert tag != "link", attributes
        assert "src" not in attributes, (tag, attributes)
        href = attributes.get("href")
        assert href is None or href.startswith("#"), (tag, href)
    # Styles and script are inlined, whole.
    css = (site / "assets" / "site.css").read_text("utf-8").strip()
    js = (site / "assets" / "site.js").read_text("utf-8").strip()
    assert "".join(page.raw["style"]).strip() == css
    assert "".join(page.raw["script"]).strip() == js
    assert data.count(b"<style>") == 1 and data.count(b"<script>") == 1
    assert b"<svg " in data


@pytest.mark.parametrize("run", RUNS)
def test_single_file_shows_what_the_run_page_shows(site: Path, run: str) -> None:
    single = parse((site / "single" / f"{run}.html").read_bytes())
    page = parse((site / "runs" / run / "index.html").read_bytes())
    for name in SECTIONS:
        text = "".join(single.sections[name])
        assert text.strip(), name
        assert text == "".join(page.sections[name]), name


def test_single_file_is_recorded_in_the_manifest(site: Path) -> None:
    manifest = (site / "manifest.json").read_text("utf-8")
    for run in RUNS:
        assert f'"single_file": "single/{run}.html"' in manifest


def test_two_builds_give_identical_bytes(inputs: Path, site: Path) -> None:
    again = build(inputs, "again", single=True)
    for run in RUNS:
        path = f"single/{run}.html"
        assert (again / path).read_bytes() == (site / path).read_bytes()


def test_without_the_option_the_site_is_unchanged(inputs: Path, site: Path) -> None:
    plain = build(inputs, "plain", single=False)
    assert not (plain / "single").exists()
    assert "single_file" not in (plain / "manifest.json").read_text("utf-8")
    for path in sorted(plain.rglob("*")):
        # The manifest records the option, and the site marker holds the manifest's digest.
        if path.is_file() and path.name not in ("manifest.json", SITE_MARKER):
            assert path.read_bytes() == (site / path.relative_to(plain)).read_bytes(), path


def test_input_text_stays_escaped(tmp_path: Path) -> None:
    root = tmp_path
    run = root / "runs" / "first_wave"
    shutil.copytree(FIRST_WAVE, run)
    hostile = "</style></script><script>alert(1)</script><a href=x>"
    with edit_json(run / "action_requests.json") as data:
        data["action_requests"][0]["request_id"] = hostile
    site = build(root, "site", single=True)
    data = (site / "single" / "first_wave.html").read_bytes()
    assert hostile.encode() not in data
    assert data.count(b"<script>") == 1 and data.count(b"</script>") == 1
    assert data.count(b"<style>") == 1 and data.count(b"</style>") == 1
    assert b"&lt;/script&gt;" in data


@pytest.mark.parametrize("asset", [b"a { }</STYLE><b>", b"<!-- x"])
def test_an_asset_that_would_break_out_is_refused(asset: bytes) -> None:
    page = b'<link rel="stylesheet" href="s.css"><script src="s.js"></script>'
    with pytest.raises(SingleFileError):
        single_file_page(page, asset, b"")
    with pytest.raises(SingleFileError):
        single_file_page(page, b"", asset.replace(b"STYLE", b"script"))


def test_cli_option(inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(inputs)
    out = tmp_path / "cli-site"
    result = CliRunner().invoke(
        app, ["build", "runs", "--out", str(out), "--single-file", "-j", "1"]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "single").iterdir()) == sorted(f"{r}.html" for r in RUNS)
