"""The report site built from the built-in fixtures: pages, order, links, bytes, CLI."""

from __future__ import annotations

import filecmp
import hashlib
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from conftest import FIXTURES, REPO, SCENARIOS, project_policies
from sandbox_replay.model.codes import REGISTRY
from sandbox_replay.report.build import BuildConfig, BuildResult, build_site
from sandbox_replay.report.publish import same_file, same_tree

RUN_SECTIONS = (
    "headline",
    "flowchart",
    "joins",
    "findings",
    "calibration",
    "layers",
    "trace",
    "inputs",
    "provenance",
)
SCENARIO_NAMES = sorted(p.name for p in SCENARIOS.iterdir() if p.is_dir())


def quiet(message: str) -> None:
    """Swallow progress lines in tests."""


def build(paths: tuple[Path, ...], out: Path, epoch: int | None = None) -> BuildResult:
    # The project's policies, as `make run` builds the fixtures (the Cedar scenario's own).
    config = BuildConfig(
        paths, out, source_date_epoch=epoch, cwd=REPO, progress=quiet, policies=project_policies()
    )
    return build_site(config)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BuildResult]:
    out = tmp_path_factory.mktemp("site") / "site"
    return out, build((FIXTURES,), out)


class _Page(HTMLParser):
    """Collect a page's ids, links and the ids of its top-level sections, in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, str]] = []
        self.sections: list[str] = []
        self.tags: list[tuple[str, tuple[str, ...]]] = []
        self.depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        self.tags.append((tag, tuple(sorted(values))))
        if "id" in values:
            self.ids.add(values["id"])
        for name in ("href", "src", "xlink:href", "action"):
            if name in values:
                self.links.append((name, values[name]))
        if tag == "section":
            self.depth += 1
            if self.depth == 1 and "id" in values:
                self.sections.append(values["id"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.depth -= 1


def parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text("utf-8"))
    page.close()
    return page


def html_pages(root: Path) -> list[Path]:
    return sorted(root.rglob("*.html"))


def test_every_page_exists(site: tuple[Path, BuildResult]) -> None:
    out, result = site
    names = {run.name for run in result.runs}
    assert {"first_wave", "exported_bundle", *SCENARIO_NAMES} <= names
    for fixed in ("index.html", "codes/index.html", "assets/site.css", "assets/site.js"):
        assert (out / fixed).is_file(), fixed
    assert (out / "manifest.json").is_file()
    for name in names:
        assert (out / "runs" / name / "index.html").is_file()
        assert (out / "runs" / name / "result.json").is_file()


def test_result_json_is_the_run_record(site: tuple[Path, BuildResult]) -> None:
    out, _ = site
    from conftest import FIRST_WAVE, replay_dir

    _, records = replay_dir(FIRST_WAVE)
    assert (out / "runs/first_wave/result.json").read_bytes() == records.result_bytes


def test_run_pages_have_sections_in_site_md_order(site: tuple[Path, BuildResult]) -> None:
    out, result = site
    for run in result.runs:
        page = parse(out / "runs" / run.name / "index.html")
        expected = RUN_SECTIONS
        if run.name == "example-agent_run-e1":  # an Inspect log with calls no rule maps
            at = RUN_SECTIONS.index("calibration")
            expected = (*RUN_SECTIONS[:at], "unmapped", *RUN_SECTIONS[at:])
        assert tuple(page.sections) == expected, run.name


def test_catalog_has_every_code(site: tuple[Path, BuildResult]) -> None:
    out, _ = site
    page = parse(out / "codes/index.html")
    for entry in REGISTRY:
        assert entry.anchor in page.ids, entry.code


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_failing_scenario_headline_names_its_gap(site: tuple[Path, BuildResult], name: str) -> None:
    out, result = site
    run = next(r for r in result.runs if r.name == name)
    assert run.status == "blocked"
    assert "FAILED" not in run.headline
    # A gap is counted and names what it concerns: a request, replay or module id.
    assert re.match(r"^\d+ ", run.headline), run.headline
    assert re.search(r"\((req_|replay_|module:|rollback)", run.headline), run.headline
    page = (out / "runs" / name / "index.html").read_text("utf-8")
    headline = page[page.index('id="headline"') : page.index('id="flowchart"')]
    escaped_start = run.headline.split(" (")[0]
    assert escaped_start in headline


def test_passing_headlines(site: tuple[Path, BuildResult]) -> None:
    _, result = site
    by_name = {r.name: r for r in result.runs}
    assert by_name["first_wave"].headline == (
        "All 6 verdicts re-derived; 4 blocks left no side effect; 2 rollbacks verified; "
        "6/6 cold replays confirmed; 8/8 negative cases fired; 1 of 7 rules never exercised: "
        "rule:sandbox_policy_fail_closed_unrecognized_action."
    )
    assert by_name["exported_bundle"].status == "pass"
    assert by_name["exported_bundle"].headline.startswith("All 6 verdicts re-derived;")


def test_specific_gap_headlines(site: tuple[Path, BuildResult]) -> None:
    _, result = site
    by_name = {r.name: r.headline for r in result.runs}
    if "allow_network_exfil_executed" in by_name:
        assert by_name["allow_network_exfil_executed"].startswith(
            "1 declared allow derives to block (req_network_exfil_attempt) and left 1 side effect"
        )
    if "missing_verdict_row" in by_name:
        assert by_name["missing_verdict_row"].startswith(
            "1 request has no verdict row (req_obfuscated_shell)"
        )


def _resolve(page: Path, link: str, root: Path) -> tuple[Path, str]:
    parts = urlsplit(link)
    target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
    assert target.is_relative_to(root.resolve()), f"{page}: {link} leaves the site"
    return target, unquote(parts.fragment)


def test_every_relative_link_resolves(site: tuple[Path, BuildResult]) -> None:
    out, _ = site
    parsed = {path.resolve(): parse(path) for path in html_pages(out)}
    checked = 0
    for path, page in parsed.items():
        for _, link in page.links:
            assert not re.match(r"^[a-z][a-z0-9+.-]*:", link, re.I), f"{path}: {link}"
            assert not link.startswith("//"), f"{path}: {link}"
            target, fragment = _resolve(path, link, out)
            assert target.is_file(), f"{path}: {link} -> missing {target}"
            if fragment:
                assert target.suffix == ".html", f"{path}: fragment into {target}"
                assert fragment in parsed[target].ids, f"{path}: {link} -> no id {fragment}"
            checked += 1
    assert checked > 300


def test_no_url_to_another_host(site: tuple[Path, BuildResult]) -> None:
    out, _ = site
    pattern = re.compile(
        rb"""(?:href|src|action)\s*=\s*["']?\s*(?:https?:|//)|url\(\s*["']?\s*(?:https?:|//)""",
        re.I,
    )
    for path in sorted(out.rglob("*")):
        if path.is_file() and path.suffix in (".html", ".css", ".js"):
            assert not pattern.search(path.read_bytes()), path
    css = (out / "assets/site.css").read_text("utf-8")
    assert "@import" not in css
    assert "@font-face" not in css


def test_two_builds_are_byte_identical(tmp_path: Path, site: tuple[Path, BuildResult]) -> None:
    out, _ = site
    again = tmp_path / "again"
    build((FIXTURES,), again)
    assert _tree(again) == _tree(out)


def test_source_date_epoch_is_honoured(tmp_path: Path, site: tuple[Path, BuildResult]) -> None:
    out, _ = site
    first, second = tmp_path / "a", tmp_path / "b"
    build((FIXTURES / "first_wave",), first, epoch=1_700_000_000)
    build((FIXTURES / "first_wave",), second, epoch=1_700_000_000)
    assert _tree(first) == _tree(second)
    page = (first / "runs/first_wave/index.html").read_text("utf-8")
    assert "2023-11-14T22:13:20Z" in page
    assert b"2023-11-14" not in (out / "runs/first_wave/index.html").read_bytes()
    assert b"not recorded" in (out / "runs/first_wave/index.html").read_bytes()


def test_unchanged_rebuild_rewrites_nothing(tmp_path: Path) -> None:
    out = tmp_path / "site"
    build((FIXTURES / "first_wave",), out)
    stamp = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    assert build((FIXTURES / "first_wave",), out).unchanged
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == stamp


def test_trees_are_the_same_only_with_the_same_bytes_in_every_file(tmp_path: Path) -> None:
    """Files are compared by content, in pieces: a byte changed deep in a large file, at
    the same size and modification time, makes the trees differ, however often asked."""
    a, b = tmp_path / "a", tmp_path / "b"
    body = bytes(range(256)) * 4096  # 1 MiB: many of the comparison's pieces
    for root in (a, b):
        (root / "runs/x").mkdir(parents=True)
        (root / "runs/x/result.json").write_bytes(body)
        (root / "index.html").write_bytes(b"<p>same</p>")
    assert same_tree(a, b)
    target = b / "runs/x/result.json"
    times = target.stat().st_atime_ns, target.stat().st_mtime_ns
    target.write_bytes(body[:-10] + b"0123456789")  # the same size
    os.utime(target, ns=times)  # and the same modification time
    assert not same_tree(a, b)
    assert not same_tree(a, b)
    (b / "extra.html").write_bytes(b"")
    assert not same_tree(a, b)


def test_a_hard_link_to_the_old_file_is_the_same_without_being_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (b / "result.json").write_bytes(b"{}" * 1000)
    os.link(b / "result.json", a / "result.json")  # as a reused run's pages are staged

    def unread(*args: object, **kwargs: object) -> bool:
        raise AssertionError("a hard link was read")

    monkeypatch.setattr("filecmp.cmp", unread)
    assert same_tree(a, b)
    (a / "page.html").write_bytes(b"x")
    (b / "page.html").write_bytes(b"x")
    with pytest.raises(AssertionError, match="read"):  # a copy is compared by content
        same_tree(a, b)


def test_a_staged_file_of_known_digest_is_compared_by_the_old_files_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The staged record is not read back: the old file is hashed against its digest."""
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        root.mkdir()
        (root / "result.json").write_bytes(b'{"a": 1}')
    digest = "sha256:" + hashlib.sha256(b'{"a": 1}').hexdigest()

    def unread(*args: object, **kwargs: object) -> bool:
        raise AssertionError("compared byte for byte")

    monkeypatch.setattr("filecmp.cmp", unread)
    assert same_tree(a, b, {"result.json": digest})
    (b / "result.json").write_bytes(b'{"a": 2}')  # the old file differs from the digest
    assert not same_tree(a, b, {"result.json": digest})


def test_an_old_file_swapped_for_a_fifo_is_not_waited_on(tmp_path: Path) -> None:
    staged = tmp_path / "staged.json"
    staged.write_bytes(b"{}")
    old = tmp_path / "old.json"
    os.mkfifo(old)  # no writer: opening it to read would wait for ever
    digest = "sha256:" + hashlib.sha256(b"{}").hexdigest()
    assert not same_file(staged, old, digest)


def test_a_rebuild_restores_an_old_record_changed_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rebuilt record is compared by its digest (never read back), and still found
    to differ from an old one changed in place."""
    out = tmp_path / "site"
    config = BuildConfig((FIXTURES / "bundles",), out, cwd=REPO, progress=quiet, rebuild=True)
    build_site(config)
    compared: list[str] = []
    real_cmp = filecmp.cmp

    def cmp(staged: Path, old: Path, shallow: bool = True) -> bool:
        compared.append(Path(staged).name)
        return real_cmp(staged, old, shallow)

    monkeypatch.setattr(filecmp, "cmp", cmp)
    assert build_site(config).unchanged
    assert "index.html" in compared
    assert "result.json" not in compared
    record = next(out.glob("runs/*/result.json"))
    good = record.read_bytes()
    record.write_bytes(good.replace(b'"status"', b'"STATUS"', 1))  # the same size
    assert not build_site(config).unchanged
    assert record.read_bytes() == good


def test_six_request_run_page_is_small(site: tuple[Path, BuildResult]) -> None:
    out, _ = site
    assert (out / "runs/first_wave/index.html").stat().st_size < 200 * 1024


def test_rebuild_replaces_a_previous_site_and_refuses_a_foreign_folder(tmp_path: Path) -> None:
    out = tmp_path / "site"
    build((FIXTURES / "first_wave",), out)
    build((FIXTURES / "bundles",), out)
    assert not (out / "runs/first_wave").exists()
    assert (out / "runs/exported_bundle/index.html").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    foreign = tmp_path / "documents"
    foreign.mkdir()
    (foreign / "thesis.txt").write_text("keep me", "utf-8")
    result = _cli("build", str(FIXTURES / "first_wave"), "--out", str(foreign))
    assert result.returncode == 2
    assert (foreign / "thesis.txt").read_text("utf-8") == "keep me"


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from sandbox_replay.cli import main; main()", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_cli_exit_codes(tmp_path: Path) -> None:
    passing = _cli("build", "fixtures/first_wave", "--out", str(tmp_path / "a"))
    assert passing.returncode == 0, passing.stderr
    assert "replayed fixtures/first_wave as runs/first_wave: pass" in passing.stderr
    assert passing.stdout == ""
    gated = _cli(
        "build", "fixtures/first_wave", "--out", str(tmp_path / "b"), "--fail-on", "blocked"
    )
    assert gated.returncode == 0
    if SCENARIO_NAMES:
        scenario = f"fixtures/scenarios/{SCENARIO_NAMES[0]}"
        report_only = _cli("build", scenario, "--out", str(tmp_path / "c"))
        assert report_only.returncode == 0
        blocked = _cli("build", scenario, "--out", str(tmp_path / "d"), "--fail-on", "blocked")
        assert blocked.returncode == 1
        assert (tmp_path / "d/index.html").is_file()


@pytest.mark.parametrize(
    "args",
    [
        ("build", "no/such/folder", "--out", "{tmp}/x"),
        ("build", "fixtures/first_wave", "--out", "{tmp}/file.txt"),
        ("build", "src/sandbox_replay/data", "--out", "{tmp}/x"),
        ("build", "fixtures/first_wave", "--out", "{tmp}/x", "--fail-on", "never"),
        ("build", "fixtures/first_wave", "--out", "{tmp}/x", "--templates", "no/such"),
    ],
)
def test_cli_usage_errors_exit_2_with_one_line(tmp_path: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "file.txt").write_text("not a folder", "utf-8")
    result = _cli(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("sandbox-replay: error: ")


def test_cli_without_path_needs_fixtures_here(tmp_path: Path) -> None:
    result = _cli("build", cwd=tmp_path)
    assert result.returncode == 2
    assert "fixtures/" in result.stderr
    assert not (tmp_path / "site").exists()


def test_user_templates_override_the_package(tmp_path: Path) -> None:
    override = tmp_path / "theme"
    (override / "assets").mkdir(parents=True)
    (override / "assets" / "site.css").write_text("body { color: black; }\n", "utf-8")
    base = (REPO / "templates" / "base.html").read_text("utf-8")
    (override / "base.html").write_text(base.replace("<main", "<!-- themed -->\n<main"), "utf-8")
    out = tmp_path / "site"
    build_site(
        BuildConfig((FIXTURES / "first_wave",), out, templates=override, cwd=REPO, progress=quiet)
    )
    assert (out / "assets/site.css").read_text("utf-8") == "body { color: black; }\n"
    assert "<!-- themed -->" in (out / "index.html").read_text("utf-8")


def test_colliding_run_names_are_disambiguated(tmp_path: Path) -> None:
    import shutil

    for parent in ("team_a", "team_b"):
        shutil.copytree(FIXTURES / "first_wave", tmp_path / "in" / parent / "run")
    out = tmp_path / "site"
    result = build_site(BuildConfig((tmp_path / "in",), out, cwd=tmp_path, progress=quiet))
    assert sorted(r.name for r in result.runs) == ["in-team_a-run", "in-team_b-run"]


def test_index_reaches_every_run_without_scripts(site: tuple[Path, BuildResult]) -> None:
    out, result = site
    page = parse(out / "index.html")
    linked = {link for _, link in page.links}
    for run in result.runs:
        assert f"runs/{run.name}/index.html" in linked
    # The filter panel is hidden until the script shows it; every row is in the markup.
    text = (out / "index.html").read_text("utf-8")
    assert "data-filters hidden" in text
    assert text.count('<tr data-status="') == len(result.runs)


def test_broken_runs_still_build_and_name_their_gaps(tmp_path: Path) -> None:
    import shutil

    source = tmp_path / "in"
    missing = source / "missing_files"
    shutil.copytree(FIXTURES / "first_wave", missing)
    (missing / "cold_replay.json").unlink()
    (missing / "real_secret_material.json").unlink()
    broken = source / "bad_json"
    shutil.copytree(FIXTURES / "first_wave", broken)
    (broken / "action_requests.json").write_text('{"action_requests": [', "utf-8")
    out = tmp_path / "site"
    result = build_site(BuildConfig((source,), out, cwd=tmp_path, progress=quiet))
    headlines = {r.name: r.headline for r in result.runs}
    assert (
        "2 input files are missing (cold_replay.json, real_secret_material.json)"
        in (headlines["missing_files"])
    )
    assert (
        "only 7/8 negative cases fired (missing: real_secret_material)"
        in (headlines["missing_files"])
    )
    assert "1 input file is not valid JSON (action_requests.json)" in headlines["bad_json"]
    page = (out / "runs/missing_files/index.html").read_text("utf-8")
    assert "— missing" in page
    assert parse(out / "runs/bad_json/index.html").sections == list(RUN_SECTIONS)


@pytest.mark.parametrize(
    ("out", "needle"),
    [(".", "the working directory"), ("fixtures", "the input fixtures/first_wave")],
)
def test_cli_refuses_an_output_folder_holding_cwd_or_inputs(out: str, needle: str) -> None:
    result = _cli("build", "fixtures/first_wave", "--out", out)
    assert result.returncode == 2
    assert needle in result.stderr
    assert (REPO / "fixtures/first_wave/action_requests.json").is_file()
