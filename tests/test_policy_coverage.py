"""Policy identity and coverage as shown: headline, run page, policy page, Markdown summary."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from conftest import EXPORTED_BUNDLE, FIRST_WAVE, REPO, SCENARIOS, read_json, replay_dir
from exports_support import sarif_bytes
from sandbox_replay import InputMode, ReplayConfig, replay
from sandbox_replay.exports import export_run, junit
from sandbox_replay.exports.markdown import MAX_RULES, build_markdown
from sandbox_replay.model.policy import FAIL_CLOSED_RULE_REF, PolicyChoice, read_policy
from sandbox_replay.model.policy_coverage import PolicyCoverage, RuleUse
from sandbox_replay.records.build import build_records
from sandbox_replay.records.headline import gap_headline
from sandbox_replay.report import incremental
from sandbox_replay.report.build import BuildConfig, BuildResult, build_site

PACKAGED_TABLE = REPO / "src" / "sandbox_replay" / "data" / "policy_table.json"
HOSTILE_REF = 'rule:<b>&"x"</b>'
HOSTILE_REF_SHOWN = "rule:&lt;b&gt;&amp;&#34;x&#34;&lt;/b&gt;"
HOSTILE_TABLE_ID = 'team_<i>"table"&'
UNKNOWN_CLASS = SCENARIOS / "unknown_risk_class_allowed"


def quiet(message: str) -> None:
    """Swallow progress lines in tests."""


def _table_with(path: Path, extra: list[dict[str, str]], table_id: str) -> Path:
    """Write the packaged policy table plus ``extra`` rules to ``path``."""
    table = read_json(PACKAGED_TABLE)
    table["table_id"] = table_id
    table["rules"] += extra
    path.write_text(json.dumps(table, indent=2), "utf-8")
    return path


def _rule(risk_class: str, rule_ref: str) -> dict[str, str]:
    """A rule for a risk class no fixture request has: never exercised."""
    return {
        "risk_class": risk_class,
        "action_kind": "shell_command",
        "requested_capability": "shell_exec",
        "source_trust_label": "untrusted_tool_output",
        "verdict": "review",
        "rule_ref": rule_ref,
    }


def _hostile_table(folder: Path) -> Path:
    return _table_with(
        folder / "hostile_policy.json", [_rule("hostile_class", HOSTILE_REF)], HOSTILE_TABLE_ID
    )


def _no_wbr(page: str) -> str:
    return page.replace("<wbr>", "")


class _Tables(HTMLParser):
    """Collect each table of a page: its class and, per row, each cell's tag, class and text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[tuple[str, list[list[tuple[str, str, str]]]]] = []
        self.tags: list[str] = []
        self.nav_links: list[str] = []
        self._cell: list[Any] | None = None
        self._in_nav = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        self.tags.append(tag)
        if tag == "nav" and "site-nav" in values.get("class", ""):
            self._in_nav = True
        elif tag == "a" and self._in_nav:
            self.nav_links.append(values.get("href", ""))
        elif tag == "table":
            self.tables.append((values.get("class", ""), []))
        elif tag == "tr" and self.tables:
            self.tables[-1][1].append([])
        elif tag in ("th", "td") and self.tables:
            self._cell = [tag, values.get("class", ""), ""]

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav":
            self._in_nav = False
        elif tag in ("th", "td") and self._cell is not None:
            self.tables[-1][1][-1].append((self._cell[0], self._cell[1], self._cell[2].strip()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell[2] += data


def _parse(path: Path) -> _Tables:
    page = _Tables()
    page.feed(path.read_text("utf-8"))
    page.close()
    return page


def _build(inputs: Path, out: Path, policy: Path, **extra: Any) -> BuildResult:
    """Build ``inputs``, replaying the run ``hostile`` with ``policy`` and the others by default."""
    choice = PolicyChoice(runs=(((inputs / "hostile").resolve(), read_policy(policy)),))
    config = BuildConfig(
        (inputs,), out, cwd=inputs.parent, progress=quiet, jobs=1, policies=choice, **extra
    )
    return build_site(config)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Four runs: three under the packaged table, one (``hostile``) under a hostile one."""
    root = tmp_path_factory.mktemp("policy") / "inputs"
    shutil.copytree(FIRST_WAVE, root / "first_wave")
    shutil.copytree(EXPORTED_BUNDLE, root / "exported_bundle")
    shutil.copytree(UNKNOWN_CLASS, root / "unknown_class")
    shutil.copytree(FIRST_WAVE, root / "hostile")
    return root, _hostile_table(root.parent)


@pytest.fixture(scope="module")
def site(inputs: tuple[Path, Path]) -> tuple[Path, BuildResult]:
    root, policy = inputs
    out = root.parent / "site"
    return out, _build(root, out, policy)


# ---------------------------------------------------------------------------------------
# The headline


def test_never_exercised_text_names_a_few_rules_and_counts_the_rest() -> None:
    def policy(unused: int, used: int) -> PolicyCoverage:
        rules = [RuleUse(f"rule:u{n}", "block", 0) for n in range(unused)]
        rules += [RuleUse(f"rule:e{n}", "allow", 2) for n in range(used)]
        return PolicyCoverage("table", "t", "sha256:0", len(rules), tuple(rules))

    assert policy(2, 9).never_exercised_text() == (
        "2 of 11 rules never exercised: rule:u0, rule:u1"
    )
    assert policy(25, 3).never_exercised_text() == (
        "25 of 28 rules never exercised: rule:u0, rule:u1, rule:u2 and 22 more"
    )
    assert policy(0, 4).never_exercised_text() == ""
    assert policy(1, 0).never_exercised_text() == "1 of 1 rule never exercised: rule:u0"


def test_the_headline_ends_with_the_rules_no_request_exercised() -> None:
    _, records = replay_dir(FIRST_WAVE)
    headline = gap_headline(records.result)
    assert headline.passed
    assert headline.never_exercised == f"1 of 7 rules never exercised: {FAIL_CLOSED_RULE_REF}"
    assert headline.text.endswith(f"; 8/8 negative cases fired; {headline.never_exercised}.")
    # A blocked run's gaps come first, the coverage clause last.
    _, records = replay_dir(SCENARIOS / "allow_network_exfil_executed", InputMode.BUNDLE)
    blocked = gap_headline(records.result)
    assert not blocked.passed
    assert blocked.text.startswith("1 declared allow derives to block")
    assert blocked.text.endswith(f"; {blocked.never_exercised}.")


def test_a_run_that_exercised_every_rule_says_nothing_of_coverage() -> None:
    _, records = replay_dir(UNKNOWN_CLASS, InputMode.BUNDLE)
    assert records.result["policy_coverage"]["unexercised_rule_refs"] == []
    headline = gap_headline(records.result)
    assert headline.never_exercised == ""
    assert "never exercised" not in headline.text


def test_many_unexercised_rules_keep_the_headline_one_short_clause(tmp_path: Path) -> None:
    extra = [_rule(f"unused_{n:02}", f"rule:unused_{n:02}") for n in range(25)]
    policy = read_policy(_table_with(tmp_path / "wide.json", extra, "wide"))
    outcome = replay(ReplayConfig(FIRST_WAVE, InputMode.FIXTURE, policy=policy))
    text = gap_headline(build_records(outcome).result).text
    assert text.endswith(
        "; 26 of 32 rules never exercised: rule:unused_00, rule:unused_01, rule:unused_02 "
        "and 23 more."
    )
    # The Markdown summary names more of them, up to its own cap.
    markdown = build_markdown([export_run("wide", outcome, REPO)])
    line = next(line for line in markdown.splitlines() if line.startswith("Policy "))
    assert line.count("rule\\:unused\\_") == MAX_RULES
    assert line.endswith(f"and {26 - MAX_RULES} more.")


# ---------------------------------------------------------------------------------------
# The run page


def test_the_run_page_shows_coverage_with_the_fail_closed_rule_never_exercised(
    site: tuple[Path, BuildResult],
) -> None:
    out, _ = site
    path = out / "runs/first_wave/index.html"
    page = _no_wbr(path.read_text("utf-8"))
    calibration = page[page.index('id="calibration"') : page.index('id="layers"')]
    assert "Policy coverage" in calibration
    [(_, rows)] = [t for t in _parse(path).tables if t[0] == "coverage"]
    header, body = rows[0], rows[1:]
    assert [text for _, _, text in header] == [
        "Rule",
        "Verdict",
        "Requests determined",
        "Exercised",
    ]
    coverage = read_json(out / "runs/first_wave/result.json")["policy_coverage"]["rules"]
    assert [row[0][2] for row in body] == [rule["rule_ref"] for rule in coverage]
    assert [row[1][2] for row in body] == [rule["verdict"] for rule in coverage]
    assert [row[2][2].lstrip("○ ") for row in body] == [
        str(rule["request_count"]) for rule in coverage
    ]
    never = [row[0][2] for row in body if row[3][2] == "never exercised"]
    assert never == [FAIL_CLOSED_RULE_REF]
    fail_closed = body[-1]
    assert "zero" in fail_closed[2][1] and fail_closed[2][2].startswith("○")
    assert all(row[3][2] == "yes" for row in body[:-1])


def test_the_run_page_provenance_names_the_policy(site: tuple[Path, BuildResult]) -> None:
    out, _ = site
    source = read_json(out / "runs/first_wave/result.json")["policy_source"]
    page = (out / "runs/first_wave/index.html").read_text("utf-8")
    provenance = page[page.index('id="provenance"') :]
    assert source["sha256"] in provenance
    assert f"<code>{source['id']}</code> · {source['rule_count']} rules" in provenance
    assert "policy table" in provenance


# ---------------------------------------------------------------------------------------
# The policy page


def test_every_page_links_the_policy_page_from_its_navigation(
    site: tuple[Path, BuildResult],
) -> None:
    out, _ = site
    pages = sorted(out.rglob("*.html"))
    assert len(pages) >= 7
    for path in pages:
        links = _parse(path).nav_links
        policy = [link for link in links if link.endswith("policy/index.html")]
        assert len(policy) == 1, path
        assert (path.parent / policy[0]).resolve() == (out / "policy/index.html").resolve()


def test_the_policy_page_has_a_table_per_policy_a_column_per_run_and_totals(
    site: tuple[Path, BuildResult],
) -> None:
    out, result = site
    page = _parse(out / "policy/index.html")
    tables = [rows for kind, rows in page.tables if kind == "policy-matrix"]
    assert len(tables) == 2  # the packaged table, and the hostile one
    by_policy: dict[str, list[tuple[str, Any]]] = {}
    for run in result.runs:
        record = read_json(out / "runs" / run.name / "result.json")
        by_policy.setdefault(record["policy_source"]["sha256"], []).append((run.name, record))
    for rows, members in zip(tables, by_policy.values(), strict=True):
        header, body, foot = rows[0], rows[1:-1], rows[-1]
        names = [name for name, _ in members]
        assert [text for _, _, text in header] == ["Rule", "Verdict", *names, "Total"]
        assert all(tag == "th" for tag, _, _ in header)
        rules = [rule["rule_ref"] for rule in members[0][1]["policy_coverage"]["rules"]]
        assert [row[0][2].removesuffix("never exercised") for row in body] == rules
        column_sums = [0] * len(members)
        for row in body:
            rule_ref = row[0][2].removesuffix("never exercised")
            expected = [
                next(
                    r["request_count"]
                    for r in record["policy_coverage"]["rules"]
                    if r["rule_ref"] == rule_ref
                )
                for _, record in members
            ]
            cells = row[2:-1]
            assert [
                int(text.lstrip("○ ").removesuffix(" (not exercised)")) for _, _, text in cells
            ] == expected
            for _, css, text in cells:
                zero = text.startswith("○")
                assert zero == ("zero" in css) == text.endswith("(not exercised)")
                assert zero == (text.lstrip("○ ").startswith("0"))
            assert int(row[-1][2]) == sum(expected)
            assert row[0][2].endswith("never exercised") == (sum(expected) == 0)
            column_sums = [a + b for a, b in zip(column_sums, expected, strict=True)]
        assert foot[0][2] == "Total"
        assert [int(text) for _, _, text in foot[1:]] == [*column_sums, sum(column_sums)]


def test_the_fixtures_fail_closed_rule_reads_zero_but_in_the_run_that_used_it(
    site: tuple[Path, BuildResult],
) -> None:
    out, _ = site
    rows = next(rows for kind, rows in _parse(out / "policy/index.html").tables)
    names = [text for _, _, text in rows[0][2:-1]]
    [fail_closed] = [row for row in rows[1:-1] if row[0][2] == FAIL_CLOSED_RULE_REF]
    counts = dict(zip(names, [text for _, _, text in fail_closed[2:-1]], strict=True))
    assert counts["unknown_class"] == "1"
    assert counts["first_wave"] == counts["exported_bundle"] == "○ 0 (not exercised)"
    assert fail_closed[-1][2] == "1"


def test_rule_refs_and_policy_ids_are_escaped_everywhere(site: tuple[Path, BuildResult]) -> None:
    out, _ = site
    for name in ("policy/index.html", "runs/hostile/index.html", "index.html"):
        path = out / name
        text = _no_wbr(path.read_text("utf-8"))
        assert HOSTILE_REF not in text and "<b>" not in text and "<i>" not in text, name
        assert HOSTILE_REF_SHOWN in text, name
        tags = _parse(path).tags
        assert "b" not in tags and "i" not in tags, name
    policy_page = _no_wbr((out / "policy/index.html").read_text("utf-8"))
    assert "team_&lt;i&gt;&#34;table&#34;&amp;" in policy_page
    # The hostile rule no request exercised is named at the end of the run's headline.
    run_page = _no_wbr((out / "runs/hostile/index.html").read_text("utf-8"))
    headline = run_page[run_page.index('id="headline"') : run_page.index('id="flowchart"')]
    assert f"2 of 8 rules never exercised: {HOSTILE_REF_SHOWN}, {FAIL_CLOSED_RULE_REF}." in (
        headline
    )


def test_a_build_reusing_every_run_writes_the_same_policy_page(
    inputs: tuple[Path, Path], tmp_path: Path
) -> None:
    root, policy = inputs
    out = tmp_path / "site"
    _build(root, out, policy)
    first = (out / "policy/index.html").read_bytes()
    again = _build(root, out, policy)
    assert again.reused == 4
    assert (out / "policy/index.html").read_bytes() == first
    fresh = tmp_path / "fresh"
    _build(root, fresh, policy, rebuild=True)
    assert (fresh / "policy/index.html").read_bytes() == first
    status = read_json(out / incremental.STATUS_FILE)
    assert {run["summary"]["policy"]["id"] for run in status["runs"]} == {
        "sandbox_policy_fail_closed_table",
        HOSTILE_TABLE_ID,
    }


@pytest.mark.parametrize(
    "damage",
    [
        lambda policy: policy["rules"][0].__setitem__(2, "1"),
        lambda policy: policy["rules"][0].pop(),
        lambda policy: policy.update(id=["not", "text"]),
        lambda policy: policy.pop("sha256"),
    ],
    ids=["count-not-a-number", "rule-cut-short", "id-not-text", "no-digest"],
)
def test_a_damaged_policy_in_the_status_file_means_a_full_build(
    inputs: tuple[Path, Path], tmp_path: Path, damage: Any
) -> None:
    root, policy = inputs
    out = tmp_path / "site"
    _build(root, out, policy)
    before = (out / "policy/index.html").read_bytes()
    status = out / incremental.STATUS_FILE
    data = json.loads(status.read_bytes())
    damage(data["runs"][0]["summary"]["policy"])
    status.write_text(json.dumps(data))
    result = _build(root, out, policy)
    assert result.reused == 0
    assert (out / "policy/index.html").read_bytes() == before


# ---------------------------------------------------------------------------------------
# The exports


def test_the_markdown_summary_names_the_unexercised_rules(tmp_path: Path) -> None:
    first_wave = export_run("first_wave", replay(ReplayConfig(FIRST_WAVE, InputMode.FIXTURE)), REPO)
    folder = tmp_path / "hostile"
    shutil.copytree(FIRST_WAVE, folder)
    policy = read_policy(_hostile_table(tmp_path))
    outcome = replay(ReplayConfig(folder, InputMode.FIXTURE, policy=policy))
    hostile = export_run("hostile", outcome, tmp_path)
    text = build_markdown([first_wave, hostile])
    lines = [line for line in text.splitlines() if line.startswith("Policy ")]
    assert len(lines) == 2
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    assert (
        "Policy table sandbox_policy_fail_closed_table (sha256:"
        + first_wave.facts.policy.sha256.removeprefix("sha256:")
        + f"): 1 of 7 rules in force never exercised: {FAIL_CLOSED_RULE_REF}.</p>"
    ) in html
    # As markdown-it renders the escaped text: the quotes as &quot;, no tag.
    shown = "rule:&lt;b&gt;&amp;&quot;x&quot;&lt;/b&gt;"
    assert f"2 of 8 rules in force never exercised: {shown}, {FAIL_CLOSED_RULE_REF}." in html
    assert "<b>" not in html and "<i>" not in html


def test_a_run_that_exercised_every_rule_says_so_in_markdown() -> None:
    run = export_run("unknown", replay(ReplayConfig(UNKNOWN_CLASS, InputMode.BUNDLE)), REPO)
    text = build_markdown([run])
    assert "each of its 7 rules in force determined at least one request." in text
    assert "never exercised" not in text


def test_sarif_and_junit_do_not_show_the_policy() -> None:
    run = export_run("first_wave", replay(ReplayConfig(FIRST_WAVE, InputMode.FIXTURE)), REPO)
    other = PolicyCoverage("cedar", "other", "sha256:1", 1, (RuleUse("rule:x", "allow", 0),))
    changed = dataclasses.replace(run, facts=dataclasses.replace(run.facts, policy=other))
    assert sarif_bytes([changed]) == sarif_bytes([run])
    assert junit.junit_bytes([changed]) == junit.junit_bytes([run])


def test_policy_coverage_reads_back_what_it_wrote_and_refuses_bad_values() -> None:
    _, records = replay_dir(FIRST_WAVE)
    policy = PolicyCoverage.of_record(records.result)
    assert PolicyCoverage.from_json(json.loads(json.dumps(policy.to_json()))) == policy
    assert policy.unexercised == tuple(records.result["policy_coverage"]["unexercised_rule_refs"])
    bad = policy.to_json()
    bad["rules"][0][2] = -1
    with pytest.raises(TypeError):
        PolicyCoverage.from_json(bad)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", policy.sha256)
