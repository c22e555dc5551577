"""The seeded escapes are shown where a reviewer looks (issue #44 item 3).

Built with ``--sensitivity``, each run page's Calibration has a "Would this audit have
caught it?" table, the index a "Seeded escapes" column and the exports the figure; a
weakened check shows its escape as missed, at the top of a passing run's page. Built
without it, none of them is there.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import FIRST_WAVE, REPO, copy_fixture, project_policies
from sandbox_replay.checks import pipeline
from sandbox_replay.checks.base import LayerResult
from sandbox_replay.checks.escapes import ESCAPES
from sandbox_replay.exports import ExportFacts, ExportTargets, SeededCount, render_exports
from sandbox_replay.load.run import RunInputs
from sandbox_replay.load.scan import ForbiddenScanner
from sandbox_replay.model import codes
from sandbox_replay.report.build import BuildConfig, BuildResult, build_site
from sandbox_replay.report.site_views import RunSummary

WEAKENED = "cold_replay_state_changed"
SEEDED_IDS = [f"seeded-{escape.escape_id}" for escape in ESCAPES]
HREF = re.compile(r'href="([^"]*)"')
ID = re.compile(r'\sid="([^"]*)"')


def build(out: Path, *paths: Path, sensitivity: bool = True) -> BuildResult:
    config = BuildConfig(
        paths or (REPO / "fixtures",),
        out,
        cwd=REPO,
        progress=lambda _message: None,
        policies=project_policies(),
        jobs=1,
        exports=True,
        sensitivity=sensitivity,
    )
    return build_site(config)


@pytest.fixture(scope="module")
def seeded_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BuildResult]:
    out = tmp_path_factory.mktemp("seeded") / "site"
    return out, build(out)


@pytest.fixture(scope="module")
def weakened_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BuildResult]:
    """First wave built with the cold-replay layer blind to a state that no longer matches."""
    real = pipeline.cold_replay.check

    def blind(run: RunInputs) -> LayerResult:
        result = real(run)
        result.findings = [f for f in result.findings if f.error_code != codes.COLD_REPLAY_INVALID]
        return result

    out = tmp_path_factory.mktemp("weakened") / "site"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline.cold_replay, "check", blind)
        return out, build(out, FIRST_WAVE)


@pytest.fixture(scope="module")
def plain_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BuildResult]:
    out = tmp_path_factory.mktemp("plain") / "site"
    return out, build(out, FIRST_WAVE, sensitivity=False)


def run_pages(site: Path) -> Iterator[Path]:
    yield from sorted(site.glob("runs/*/index.html"))


def table(page: str) -> str:
    start = page.index('<table class="seeded">')
    return page[start : page.index("</table>", start)]


def row(page: str, escape_id: str) -> str:
    start = page.index(f'<tr id="seeded-{escape_id}">')
    return page[start : page.index("</tr>", start)]


def test_every_run_page_has_one_row_per_escape(seeded_site: tuple[Path, BuildResult]) -> None:
    site, _ = seeded_site
    pages = list(run_pages(site))
    assert len(pages) == len(list((REPO / "site" / "runs").glob("*/index.html")))
    for page in pages:
        shown = table(page.read_text("utf-8"))
        assert ID.findall(shown) == SEEDED_IDS, page


def test_the_table_has_a_caption_and_headers(seeded_site: tuple[Path, BuildResult]) -> None:
    shown = table((seeded_site[0] / "runs/first_wave/index.html").read_text("utf-8"))
    caption = re.search(r"<caption>(.*?)</caption>", shown)
    assert caption and caption.group(1) == (
        "10 of 10 seeded escapes caught; 1 not applicable to this run."
    )
    head = shown[shown.index("<thead>") : shown.index("</thead>")]
    headers = re.findall(r'<th scope="col"[^>]*>(.*?)</th>', head)
    assert headers[:3] == ["Escape", "Declared codes", "Outcome"]
    assert "Missed" in headers and "Planted in" in headers
    body = shown[shown.index("<tbody>") :]
    assert body.count('<th scope="row">') == len(ESCAPES)


def test_first_wave_reads_10_of_10_and_says_why_one_does_not_apply(
    seeded_site: tuple[Path, BuildResult],
) -> None:
    page = (seeded_site[0] / "runs/first_wave/index.html").read_text("utf-8")
    assert "10 of 10 seeded escapes caught.</p>" in page
    assert "seeded-missed" not in page
    copied = row(page, "copied_body_edited")
    assert "status-not_applicable" in copied and "(a fixture has none)" in copied
    assert "status-pass" in row(page, "block_declared_allow")


def test_the_links_of_the_table_resolve(seeded_site: tuple[Path, BuildResult]) -> None:
    site, _ = seeded_site
    for page in run_pages(site):
        text = page.read_text("utf-8")
        hrefs = HREF.findall(table(text))
        assert any(h.startswith("#req-") for h in hrefs), page
        for href in map(html.unescape, hrefs):
            path, _, fragment = href.partition("#")
            target = (page.parent / path).resolve() if path else page
            assert fragment in ID.findall(target.read_text("utf-8")), (page, href)


def test_the_index_has_the_column(seeded_site: tuple[Path, BuildResult]) -> None:
    index = (seeded_site[0] / "index.html").read_text("utf-8")
    assert "Seeded escapes</abbr></th>" in index
    assert index.count('<td class="num">10 of 10</td>') == 1  # first_wave
    assert "missed" not in index


def test_a_weakened_check_shows_as_missed(weakened_site: tuple[Path, BuildResult]) -> None:
    site, result = weakened_site
    page = (site / "runs/first_wave/index.html").read_text("utf-8")
    missed = row(page, WEAKENED)
    assert '<span class="badge status-blocked">missed</span>' in missed
    assert '<td class="num gap">3</td>' in missed
    assert "status-pass" in row(page, "block_declared_allow")
    # The warning comes before the headline and links the escape's row.
    notice = page.index('class="notice seeded-missed"')
    assert notice < page.index('<section id="headline"')
    warning = page[notice : page.index("</div>", notice)]
    assert f'<a href="#seeded-{WEAKENED}"><code>{WEAKENED}</code></a>' in warning
    assert "9 of 10 seeded escapes caught, 1 missed" in table(page)
    index = (site / "index.html").read_text("utf-8")
    assert '<td class="num gap">9 of 10 (1 missed)</td>' in index
    assert result.export_runs[0].facts.seeded == SeededCount(9, 10)


def exports(result: BuildResult, out: Path) -> dict[str, str]:
    targets = ExportTargets(sarif=out / "r.sarif", junit=out / "j.xml", markdown=out / "m.md")
    rendered = render_exports(targets, result.export_runs)
    return {path.suffix: data.decode("utf-8") for path, data in rendered}


def test_the_exports_carry_the_figure(
    weakened_site: tuple[Path, BuildResult], tmp_path: Path
) -> None:
    shown = exports(weakened_site[1], tmp_path)
    properties = json.loads(shown[".sarif"])["runs"][0]["properties"]
    assert properties["seededEscapesApplicable"] == 10
    assert properties["seededEscapesCaught"] == 9
    assert properties["seededEscapesMissed"] == 1
    assert '<property name="seeded_escapes" value="9 of 10 (1 missed) caught" />' in shown[".xml"]
    assert "| Run | Status | Requests | Findings | Seeded escapes |" in shown[".md"]
    assert "| ⚠️ **9 of 10 (1 missed)** |" in shown[".md"]


def test_the_figure_survives_the_status_file(weakened_site: tuple[Path, BuildResult]) -> None:
    site, result = weakened_site
    facts = result.export_runs[0].facts
    assert ExportFacts.from_json(facts.to_json()).seeded == facts.seeded
    status = json.loads((site / "build-status.json").read_text("utf-8"))
    summary = RunSummary.from_json(status["runs"][0]["summary"])
    assert summary.seeded == SeededCount(9, 10)


def test_a_plain_build_shows_none_of_it(
    plain_site: tuple[Path, BuildResult], tmp_path: Path
) -> None:
    site, result = plain_site
    page = (site / "runs/first_wave/index.html").read_text("utf-8")
    assert 'class="seeded' not in page and "Seeded escapes" not in page
    assert "Seeded escapes" not in (site / "index.html").read_text("utf-8")
    status = (site / "build-status.json").read_text("utf-8")
    assert '"seeded"' not in status
    assert result.export_runs[0].facts.seeded is None
    shown = exports(result, tmp_path)
    assert "seededEscapes" not in shown[".sarif"]
    assert "seeded_escapes" not in shown[".xml"]
    assert "Seeded escapes" not in shown[".md"]


def test_the_ids_shown_are_escaped_marked_and_redacted(tmp_path: Path) -> None:
    """A look-alike id holding markup is escaped and marked; one holding a secret is redacted."""
    folder = copy_fixture(tmp_path)
    token = next(t for c in ForbiddenScanner.default().classes for t in c.tokens)
    for path in folder.glob("*.json"):
        data = path.read_text("utf-8")
        data = data.replace("req_secret_env_read", "req_s\u0435cret<b>")
        path.write_text(data.replace("req_network_exfil_attempt", f"req_{token}"), "utf-8")
    build(tmp_path / "site", folder)
    page = (tmp_path / "site/runs/first_wave/index.html").read_text("utf-8")
    planted = row(page, "block_declared_allow")
    assert '<a href="#req-req_s~D0~B5cret~3Cb~3E">req_s\u0435cret&lt;b&gt;</a>' in planted
    assert "non-ASCII id: req_s&lt;U+0435&gt;cret&lt;b&gt;" in planted
    assert ">[redacted: forbidden material]</a>" in planted
    assert token not in page and "<b>" not in planted
    assert {h.removeprefix("#") for h in HREF.findall(planted)[-3:]} <= set(ID.findall(page))
