"""Markdown summary: structure a renderer keeps, code links, Mermaid, and inert input."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from conftest import FIRST_WAVE, REPO, edit_json
from exports_support import BUILTIN_IDS, HOSTILE, all_builtin_runs, builtin_run, hostile_run
from sandbox_replay import InputMode, ReplayConfig, replay
from sandbox_replay.cli import app
from sandbox_replay.exports import export_run
from sandbox_replay.exports.markdown import (
    MAX_FINDINGS,
    build_markdown,
    check_site_url,
    markdown_bytes,
    md_text,
)


def render(text: str) -> str:
    """Render as GitHub would parse it: CommonMark with tables and raw HTML allowed."""
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(text)


def table_shapes(text: str) -> list[tuple[int, ...]]:
    """Return, per rendered table, the cell count of each row."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    shapes: list[tuple[int, ...]] = []
    row_counts: list[int] = []
    cells = 0
    for token in tokens:
        if token.type == "table_open":
            row_counts = []
        elif token.type == "tr_open":
            cells = 0
        elif token.type in ("th_open", "td_open"):
            cells += 1
        elif token.type == "tr_close":
            row_counts.append(cells)
        elif token.type == "table_close":
            shapes.append(tuple(row_counts))
    return shapes


@pytest.mark.parametrize("name", BUILTIN_IDS)
def test_every_builtin_run_renders(name: str) -> None:
    run = builtin_run(name)
    text = build_markdown([run])
    html = render(text)
    assert f"<h2>{name}: " in html
    for shape in table_shapes(text):
        assert len(set(shape)) == 1, "every row of a table has the header's cell count"
    assert "```mermaid\nflowchart LR\n" in text
    assert ("✅ pass" if run.facts.passed else "❌ blocked") in text
    shown = min(len(run.facts.findings), MAX_FINDINGS)
    if shown:
        assert f"### Findings ({shown} of {len(run.facts.findings)}" in text
    for code in {f.error_code for f in run.facts.findings}:
        assert f"`{code}`" in text


def test_top_findings_are_capped_and_most_severe_first(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    shutil.copytree(FIRST_WAVE, folder)
    with edit_json(folder / "policy_verdicts.json") as data:
        data["policy_verdicts"] = []
    for case in folder.glob("*_*.json"):
        if case.name.startswith(("real_", "live_", "raw_", "unlogged_")):
            case.unlink()
    run = export_run("broken", replay(ReplayConfig(folder, InputMode.FIXTURE)), tmp_path)
    assert len(run.facts.findings) > MAX_FINDINGS
    text = build_markdown([run])
    assert f"### Findings ({MAX_FINDINGS} of {len(run.facts.findings)}" in text
    section = text.split("### Findings", 1)[1].split("```mermaid", 1)[0]
    rows = [
        line for line in section.splitlines() if line.startswith("| ") and "Severity" not in line
    ]
    assert len(rows) == MAX_FINDINGS
    severities = [row.split(" | ")[0].removeprefix("| ") for row in rows]
    order = {"critical": 0, "high": 1, "medium": 2}
    ranks = [order[s.split(" ")[0]] for s in severities]
    assert ranks == sorted(ranks)


def test_codes_link_to_the_catalog_when_a_site_url_is_given() -> None:
    run = builtin_run("first_wave")
    text = build_markdown([run], "https://reports.example.org/sandbox/")
    assert (
        "[`SANDBOX_POLICY_REAL_SECRET_FORBIDDEN`](https://reports.example.org/sandbox/"
        "codes/index.html#sandbox-policy-real-secret-forbidden)"
    ) in text
    assert "](" not in build_markdown([run])


@pytest.mark.parametrize(
    "url", ["javascript:alert(1)", "/relative", "https://x.org/a b", "https://x.org/)(", "ftp://x"]
)
def test_unsafe_site_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        check_site_url(url)


def test_output_is_byte_reproducible() -> None:
    assert markdown_bytes(all_builtin_runs()) == markdown_bytes(all_builtin_runs())


def test_md_text_escapes_every_markup_character() -> None:
    escaped = md_text("*_[x](javascript:alert(1))`code`<b>|#!\n\u202e")
    html = render(escaped)
    assert "<em>" not in html and "<a " not in html and "<code>" not in html and "<b>" not in html
    assert "\n" not in escaped and "\u202e" not in escaped
    assert "<U+202E>" in render(escaped).replace("&lt;", "<").replace("&gt;", ">")


def test_hostile_values_stay_inert(tmp_path: Path) -> None:
    run = hostile_run(tmp_path)
    text = build_markdown([run])
    html = render(text)
    for bad in ("<a ", "<img", "<script", "<em>", "<strong>", 'javascript:alert(1)"'):
        assert bad not in html, bad
    assert html.count("<h1") == 1, "only the summary's own title is a top heading"
    assert "\u202e" not in text and "\x01" not in text and "\x0b" not in text
    assert "\r" not in text
    for shape in table_shapes(text):
        assert len(set(shape)) == 1
    # The mermaid block holds only the tool's own text.
    mermaid = text.split("```mermaid", 1)[1].split("```", 1)[0]
    assert "req_" not in mermaid
    assert HOSTILE not in text


def test_cli_writes_markdown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "summary.md"
    # As the library writes it below: without the seeded escapes pyproject.toml turns on.
    args = [
        "run",
        "--input",
        "fixtures/first_wave",
        "--out",
        str(tmp_path / "o"),
        "--no-sensitivity",
    ]
    result = CliRunner().invoke(app, [*args, "--markdown", str(out), "--site-url", "https://x.org"])
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == markdown_bytes([builtin_run("first_wave")], "https://x.org")
    refused = CliRunner().invoke(app, [*args, "--markdown", str(out), "--site-url", "javascript:x"])
    assert refused.exit_code == 2
