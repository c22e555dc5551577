"""``build --single-file``: one self-contained page per run, same content, no request."""

from __future__ import annotations

import json
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import FIRST_WAVE, REPO, SCENARIOS, edit_json
from sandbox_replay.cli import app
from sandbox_replay.report import views
from sandbox_replay.report.build import SITE_MARKER, BuildConfig, build_site
from sandbox_replay.report.incremental import STATUS_FILE
from sandbox_replay.report.single_file import SingleFileError, single_file_page

sys.path.insert(0, str(REPO / "benchmarks"))

from generate_bundle import generate

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "wbr"}
SECTIONS = ("headline", "joins", "findings", "codes")
# The sections a single file shows as its run page does.
SAME = ("headline", "joins", "findings")


class _Page(HTMLParser):
    """Collect every tag's attributes, the text of chosen sections, and style/script bodies."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.sections: dict[str, list[str]] = {name: [] for name in SECTIONS}
        self.open: list[tuple[str, str | None]] = []
        self.raw: dict[str, list[str]] = {"style": [], "script": []}
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if attributes.get("id"):
            self.ids.append(attributes["id"] or "")
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
    for name in SAME:
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
        # The manifest records the option, the site marker holds the manifest's digest,
        # and the build status the option (in its settings hash) and each run's files.
        if path.is_file() and path.name not in ("manifest.json", SITE_MARKER, STATUS_FILE):
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


def test_single_file_explains_each_code_its_findings_raise(site: Path) -> None:
    catalog = (site / "codes" / "index.html").read_text("utf-8")
    for run in RUNS:
        data = (site / "single" / f"{run}.html").read_text("utf-8")
        result = json.loads((site / "runs" / run / "result.json").read_bytes())
        raised = {f["error_code"] for f in result["findings"]}
        assert raised
        explained = re.findall(r'<article class="code-entry" id="code_([a-z0-9-]+)">', data)
        assert sorted(explained) == sorted(c.lower().replace("_", "-") for c in raised)
        for anchor in explained:
            # The explanation is the catalog's, rendered from the same Markdown.
            doc = re.compile(rf'id="{anchor}">.*?<div class="doc">(.*?)</div>', re.DOTALL)
            ours = re.compile(rf'id="code_{anchor}">.*?<div class="doc">(.*?)</div>', re.DOTALL)
            shown = ours.search(data)
            assert shown and "<p>" in shown.group(1)
            assert shown.group(1) == doc.search(catalog).group(1)  # type: ignore[union-attr]
        # Each finding's code links to its explanation in the page.
        for code in raised:
            anchor = code.lower().replace("_", "-")
            assert f'<a class="code" href="#code_{anchor}">{code}</a>' in data


def test_single_file_holds_every_finding(site: Path) -> None:
    for run in RUNS:
        single = parse((site / "single" / f"{run}.html").read_bytes())
        result = json.loads((site / "runs" / run / "result.json").read_bytes())
        anchors = [i for i in single.ids if re.fullmatch(r"f-[0-9a-f]{16}(-\d+)?", i)]
        assert len(anchors) == len(set(anchors)) == len(result["findings"]) > 0


def resolves(page: _Page) -> list[str]:
    """Return every link of ``page`` that does not land on an anchor it holds."""
    ids = set(page.ids)
    return [
        href
        for _, attributes in page.tags
        if (href := attributes.get("href")) is not None
        and not (href.startswith("#") and href[1:] in ids)
    ]


@pytest.mark.parametrize("run", RUNS)
def test_every_link_in_a_single_file_lands_in_the_page(site: Path, run: str) -> None:
    page = parse((site / "single" / f"{run}.html").read_bytes())
    links = [a.get("href") for _, a in page.tags if a.get("href")]
    assert len(links) > 20
    assert resolves(page) == []
    assert len(page.ids) == len(set(page.ids))


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run past the single file's row limit (made small here): the file leaves rows out."""
    root = tmp_path_factory.mktemp("single-large")
    generate(root / "runs" / "large", 1200, seed=3, failing_fraction=0.05)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(views.single, "SINGLE_FILE_ROWS", 40)
        return build(root, "site", single=True)


def gap_rows(site: Path) -> list[str]:
    """The ids of the gaps listing's rows, in order, read from its pages."""
    rows = []
    for listing in sorted((site / "runs" / "large" / "gaps").glob("page-*.html")):
        rows += re.findall(r'<tr id="(req-[^"]+)" class="row-gap"', listing.read_text("utf-8"))
    return rows


def test_a_large_run_single_file_says_what_it_left_out(large: Path) -> None:
    data = (large / "single" / "large.html").read_text("utf-8")
    result = json.loads((large / "runs" / "large" / "result.json").read_bytes())
    requests = len(result["request_rows"])
    spans = len(result["public_agent_execution_trace"]["spans"])
    findings = len(result["findings"])
    gaps = gap_rows(large)
    assert requests == 1200 and 40 < len(gaps) < requests and findings > 40
    note = re.search(r'<div class="notice single-file" role="note">(.*?)</div>', data, re.DOTALL)
    assert note
    text = re.sub(r"<[^>]+>", " ", note.group(1))
    assert f"every finding ({findings:,}), the explanation of each of the" in text
    assert "the 40 request rows with a gap" in text
    assert f"{requests - len(gaps):,} request rows without a gap" in text
    assert f"{len(gaps) - 40:,} request rows with a gap, past the first 40" in text
    assert f"all {spans:,} trace spans" in text
    # It holds the first 40 gaps, worst first, as the gaps listing orders them (the run
    # page holds no row: its join table is on sub-pages), and every finding.
    page = parse(data.encode())
    rows = [i for i in page.ids if i.startswith("req-")]
    assert rows == gaps[:40]
    anchors = [i for i in page.ids if re.fullmatch(r"f-[0-9a-f]{16}(-\d+)?", i)]
    assert len(anchors) == findings
    assert '<tr id="req-' not in (large / "runs" / "large" / "index.html").read_text("utf-8")
    # A finding about a request whose row it left out names the request as text.
    assert resolves(page) == []
    requests_ids = {r["request_id"] for r in result["request_rows"]}
    left_out = [
        f["subject_id"]
        for f in result["findings"]
        if f["subject_id"] in requests_ids and f"req-{f['subject_id']}" not in rows
    ]
    assert left_out
    for rid in left_out:
        assert f'href="#req-{rid}"' not in data
        assert f"<span>{rid}</span>" in data


def test_a_rebuild_with_the_option_writes_every_run_s_file(inputs: Path, tmp_path: Path) -> None:
    """Runs are not reused from a build without single files: they would have none."""
    out = tmp_path / "site"

    def build_into(single: bool) -> int:
        config = BuildConfig(
            (inputs / "runs",), out, cwd=inputs, progress=lambda _: None, jobs=1, single_file=single
        )
        return build_site(config).reused

    assert build_into(False) == 0
    assert build_into(False) == len(RUNS)
    assert build_into(True) == 0
    assert sorted(p.name for p in (out / "single").iterdir()) == sorted(f"{r}.html" for r in RUNS)
    assert build_into(True) == len(RUNS)
    assert sorted(p.name for p in (out / "single").iterdir()) == sorted(f"{r}.html" for r in RUNS)


def test_a_single_file_swapped_for_a_link_is_not_reused(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    config = BuildConfig(
        (inputs / "runs",), out, cwd=inputs, progress=lambda _: None, jobs=1, single_file=True
    )
    build_site(config)
    outside = tmp_path / "secret.txt"
    outside.write_text("not part of any site\n")
    page = out / "single" / f"{RUNS[0]}.html"
    page.unlink()
    page.symlink_to(outside)
    assert build_site(config).reused == len(RUNS) - 1
    assert not page.is_symlink() and page.read_bytes().startswith(b"<!doctype html>")
