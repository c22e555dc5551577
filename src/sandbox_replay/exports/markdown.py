"""Write a Markdown summary of one or more runs, for a CI job summary or a PR comment.

File format: GitHub-flavoured Markdown, UTF-8, one trailing newline. A title and a table
of every run (with a "Seeded escapes" column, caught of applicable, when any run was
replayed with ``--sensitivity``), then per run: a heading with its status, its gap headline, the policy in
force with the rules no request exercised, a layer table, the top findings (each code
linked to the site's catalog given ``site_url``) and the pipeline as a ``mermaid`` block.
A summary over ``MAX_SUMMARY_BYTES`` (GitHub's job-summary limit) is shortened for every
run alike, and a closing note says what was left out and where the rest is.

Every input-derived value goes through ``md_text``, which leaves no input able to open a
link, an image, emphasis, a code span or a table cell, nor to mention anyone. Only the
tool's own strings are written unescaped; the Mermaid block holds no input.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import IntEnum
from urllib.parse import urlsplit

from sandbox_replay.checks.base import LayerResult
from sandbox_replay.checks.negative_cases import NEGATIVE_CASES
from sandbox_replay.drawing.flowchart import FlowEdge, FlowNode, draw_flowchart
from sandbox_replay.exports import ExportFacts, ExportRun
from sandbox_replay.exports.text import one_line, subject_look_alikes, subject_mark
from sandbox_replay.load.run import InputMode
from sandbox_replay.model.codes import REGISTRY, Layer, Severity
from sandbox_replay.model.findings import Finding
from sandbox_replay.model.policy_coverage import PolicyCoverage
from sandbox_replay.records.changes import FIX, REGRESSION, Changes, FindingRef, RunChange
from sandbox_replay.version import TOOL_NAME, __version__

MAX_FINDINGS = 20
MAX_SUMMARY_BYTES = 1024 * 1024
# Never-exercised rules named per run before "and N more" (the site's policy page lists all).
MAX_RULES = 20
# The site page holding the finding-code catalog, relative to the site root.
CATALOG_PAGE = "codes/index.html"
MAX_TEXT = 200
STATUS_MARK = {"pass": "✅ pass", "blocked": "❌ blocked", "not_run": "⚪ not run"}
_PUNCT = re.compile(r"([!\"#$%'()*+,\-./:;=?@\[\\\]^_`{|}~])")
# A mention GitHub would link, as a capturing group: ``split`` gives it at odd indices.
# Its characters are all plain in a code span: no backtick, no pipe, nothing to escape.
_MENTION = re.compile(r"(@[A-Za-z0-9][A-Za-z0-9_./-]*)")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_SEVERITY_RANK = {severity: index for index, severity in enumerate(Severity)}


def md_text(value: object, limit: int = MAX_TEXT) -> str:
    """Return an input value as inert Markdown text on one line, cut at ``limit`` chars.

    HTML's ``& < >`` become entities, every other ASCII punctuation character is
    backslash-escaped, and invisible characters are shown as ``<U+XXXX>``.
    """
    text = one_line(str(value))
    if len(text) > limit:
        text = text[:limit] + "…"
    parts = _MENTION.split(text)
    return "".join(f"`{part}`" if index % 2 else _inert(part) for index, part in enumerate(parts))


def _inert(text: str) -> str:
    # Backslashes first: the entities' own "&" and ";" must stay unescaped to be entities.
    text = _PUNCT.sub(r"\\\1", text)
    return "".join(_ENTITIES.get(char, char) for char in text)


def catalog_link(code: str, site_url: str | None) -> str:
    """Return a code as inline code, linked to its catalog entry when a site URL is set."""
    shown = f"`{code}`"
    if not site_url:
        return shown
    return f"[{shown}]({site_url.rstrip('/')}/{CATALOG_PAGE}#{REGISTRY[code].anchor})"


def check_site_url(url: str) -> str:
    """Return ``url`` if it is an absolute http(s) URL safe to put in a Markdown link."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise ValueError(f"site URL must be an absolute http(s) URL, got {url!r}")
    if any(char.isspace() or not char.isprintable() or char in "()<>[]\"'`" for char in url):
        raise ValueError("site URL must not contain spaces, quotes, brackets or control characters")
    return url


# The pipeline chart: each step's id, label, the layer its status comes from, and the
# text of its count (from the record's counts).
PIPELINE: tuple[tuple[str, str, Layer, str], ...] = (
    ("requests", "Action requests", Layer.ACTION_REQUESTS, "{action_request_count} requests"),
    (
        "derived",
        "Derived verdicts",
        Layer.ACTION_REQUESTS,
        "{derived_block_count} block, {derived_allow_count} allow, {derived_review_count} review",
    ),
    (
        "declared",
        "Declared verdicts checked",
        Layer.POLICY_VERDICTS,
        "{derived_policy_verdict_mismatch_count} mismatches",
    ),
    (
        "effects",
        "Side-effect records",
        Layer.SIDE_EFFECTS,
        "{side_effect_receipt_count} rows, {blocked_without_execution_count} blocked clean",
    ),
    (
        "rollbacks",
        "Rollbacks",
        Layer.ROLLBACKS,
        "{rollback_verified_count}/{rollback_receipt_count} verified",
    ),
    (
        "replay",
        "Cold replay",
        Layer.COLD_REPLAY,
        "{cold_replay_confirmed_count}/{cold_replay_count} confirmed",
    ),
    ("trace", "Public trace", Layer.PUBLIC_TRACE, "{span_count} spans"),
)
PIPELINE_EDGES = (
    ("requests", "derived"),
    ("derived", "declared"),
    ("declared", "effects"),
    ("effects", "rollbacks"),
    ("effects", "replay"),
    ("rollbacks", "trace"),
    ("replay", "trace"),
    ("trace", "result"),
)


def _layer_status(facts: ExportFacts, layer: Layer) -> str:
    result = facts.layer(layer)
    return "not_applicable" if result is None else result.status


def pipeline_mermaid(facts: ExportFacts) -> str:
    """Return the run's pipeline chart as Mermaid source; it holds only the tool's own text."""
    nodes = [
        FlowNode(node_id, label, text.format_map(facts.counts), _layer_status(facts, layer))
        for node_id, label, layer, text in PIPELINE
    ]
    result = f"{facts.status}, {len(facts.findings)} findings"
    nodes.append(FlowNode("result", "Result", result, "pass" if facts.passed else "blocked"))
    edges = [FlowEdge(a, b) for a, b in PIPELINE_EDGES]
    return draw_flowchart(nodes, edges, title="Replay pipeline").mermaid


def top_findings(run: ExportRun) -> list[Finding]:
    """Return the findings to show: unexpected ones first, most severe first, then by order."""
    ranked = sorted(
        run.facts.findings,
        key=lambda f: (run.facts.expected(f), _SEVERITY_RANK[REGISTRY[f.error_code].severity]),
    )
    return ranked[:MAX_FINDINGS]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _layer_mark(layer: LayerResult, facts: ExportFacts) -> str:
    """Return a layer's status mark; planted negative cases that all fired read as a pass."""
    fixture = facts.input_mode is InputMode.FIXTURE
    expected = len(NEGATIVE_CASES) if fixture else 0
    if layer.layer is Layer.NEGATIVE_CASES and expected and layer.status != "not_run":
        missing = facts.negative.missing if facts.negative else []
        fired = expected - len(missing)
        status = "pass" if fired == expected else "blocked"
        return f"{STATUS_MARK[status]} ({fired}/{expected} fired as expected)"
    return STATUS_MARK.get(layer.status, md_text(layer.status))


def policy_line(policy: PolicyCoverage) -> str:
    """Name the policy in force and the rules of it that no request exercised."""
    shown = f"Policy {md_text(policy.kind)} {md_text(policy.policy_id)} ({md_text(policy.sha256)})"
    unexercised = policy.unexercised
    total = len(policy.rules)
    in_force = f"{total} {'rule' if total == 1 else 'rules'} in force"
    if not unexercised:
        return f"{shown}: each of its {in_force} determined at least one request."
    named = ", ".join(md_text(ref) for ref in unexercised[:MAX_RULES])
    if len(unexercised) > MAX_RULES:
        named += f" and {len(unexercised) - MAX_RULES} more"
    return f"{shown}: {len(unexercised)} of {in_force} never exercised: {named}."


def run_section(run: ExportRun, site_url: str | None) -> tuple[list[str], ...]:
    """Return one run's section as its parts, each a list of lines, kept by ``Detail`` in order.

    The parts: heading and headline; input, policy, layers and findings; the chart.
    """
    facts = run.facts
    if facts.headline is None:
        raise ValueError(f"run {run.name!r}: its export facts were made without the summary")
    head = [
        f"## {md_text(run.name)}: {STATUS_MARK[facts.status]}",
        "",
        md_text(facts.headline, limit=2000),
        "",
    ]
    details = [
        f"Input `{facts.input_mode.value}`, bundle {md_text(facts.bundle_id)}, "
        f"folder {md_text(run.source_root or '.')}.",
        "",
        policy_line(facts.policy),
        "",
    ]
    layer_rows = [
        [layer.layer.label, _layer_mark(layer, facts), str(len(layer.findings))]
        for layer in facts.layers
    ]
    details += _table(["Layer", "Status", "Findings"], layer_rows)
    findings = top_findings(run)
    look_alikes = subject_look_alikes(facts.findings)
    if findings:
        total = len(facts.findings)
        details += ["", f"### Findings ({len(findings)} of {total}, most severe first)", ""]
        rows = []
        for f in findings:
            entry = REGISTRY[f.error_code]
            where = run.location(f)
            note = " (expected)" if run.facts.expected(f) else ""
            mark = subject_mark(f.subject_id, look_alikes)
            rows.append(
                [
                    entry.severity.value + note,
                    catalog_link(f.error_code, site_url),
                    md_text(f.subject_id) + (f" {md_text(mark)}" if mark else ""),
                    md_text(where),
                    md_text(f.message),
                ]
            )
        details += _table(["Severity", "Code", "Subject", "Where", "Message"], rows)
    details.append("")
    chart = ["```mermaid", pipeline_mermaid(facts).rstrip("\n"), "```", ""]
    return head, details, chart


class Detail(IntEnum):
    """How many parts of each run's section a summary keeps, from all of them down to none."""

    FULL = 3
    NO_CHARTS = 2
    HEADLINES = 1
    TABLE = 0


# What a summary shortened to each level says it left out.
LEFT_OUT = {
    Detail.NO_CHARTS: "the pipeline flowchart of each run",
    Detail.HEADLINES: "the pipeline flowchart and the details of each run (input, policy, "
    "layer table and findings); each run keeps its status and headline",
    Detail.TABLE: "every run's section (flowchart, details and headline)",
}


def shortened_note(detail: Detail, site_url: str | None, runs_left_out: int = 0) -> list[str]:
    """Return the closing note of a shortened summary: what it left out, where the rest is."""
    left_out = LEFT_OUT[detail]
    if runs_left_out:
        left_out += f" and the last {runs_left_out} rows of the run table"
    where = (
        f"the report site at {site_url}"
        if site_url
        else "the report site built with this summary, and the SARIF and JUnit exports"
    )
    return [
        "---",
        "",
        f"**Summary shortened** to stay under the {MAX_SUMMARY_BYTES:,}-byte limit of a "
        f"GitHub job summary: it leaves out {left_out}. The full report is {where}.",
    ]


def build_markdown(runs: Sequence[ExportRun], site_url: str | None = None) -> str:
    """Return the Markdown summary of ``runs``, shortened to fit ``MAX_SUMMARY_BYTES``.

    Over the limit it leaves out, for every run alike, first the flowcharts, then the
    details, then the whole section; last, the table's rows from the end.
    """
    if site_url is not None:
        check_site_url(site_url)
    passed = sum(1 for run in runs if run.facts.passed)
    title = [f"# {TOOL_NAME} {__version__}: {passed}/{len(runs)} runs pass", ""]
    compared = [run.change for run in runs if run.change is not None]
    if compared:  # a build given --baseline leads with what changed
        title += changes_lines(compared, site_url)
    seeded = any(run.facts.seeded for run in runs)
    header, rule, *rows = _table(
        ["Run", "Status", "Requests", "Findings", *(["Seeded escapes"] if seeded else [])],
        [
            [
                md_text(run.name),
                STATUS_MARK[run.facts.status],
                str(run.facts.request_count),
                str(len(run.facts.findings)),
                *([_seeded_cell(run.facts)] if seeded else []),
            ]
            for run in runs
        ],
    )
    sections = [run_section(run, site_url) for run in runs]
    for detail in Detail:
        lines = [*title, header, rule, *rows, ""]
        for section in sections:
            lines += [line for part in section[:detail] for line in part]
        if detail is not Detail.FULL:
            lines += shortened_note(detail, site_url)
        text = _joined(lines)
        if _fits(text):
            return text
    # The table alone is too long: keep its first rows, as many as fit.
    size, kept = len(text.encode("utf-8")), len(rows)
    while kept and size > MAX_SUMMARY_BYTES:
        kept -= 1
        size -= len(rows[kept].encode("utf-8")) + 1
    while True:
        note = shortened_note(Detail.TABLE, site_url, len(rows) - kept)
        text = _joined([*title, header, rule, *rows[:kept], "", *note])
        if _fits(text) or not kept:
            return text
        kept -= 1


def _seeded_cell(facts: ExportFacts) -> str:
    """Return a run's seeded escapes caught, a miss marked; "—" for a run without them."""
    if facts.seeded is None:
        return "—"
    return f"⚠️ **{facts.seeded.text}**" if facts.seeded.missed else facts.seeded.text


def _changed_finding(run: RunChange, finding: FindingRef, site_url: str | None) -> str:
    where = f"{finding.path}:{finding.line}" if finding.path and finding.line else finding.path
    place = f" `{md_text(where, 120)}`" if where else ""
    return (
        f"- **{md_text(run.name)}**: {catalog_link(finding.code, site_url)}{place} "
        f"{md_text(finding.message)}"
    )


def changes_lines(runs: Sequence[RunChange], site_url: str | None = None) -> list[str]:
    """Return the "Changes since baseline" section: regressions, new findings, fixes."""
    regressions = [r for r in runs if r.kind == REGRESSION]
    fixes = [r for r in runs if r.kind == FIX]
    new = [(r, f) for r in runs for f in r.new]
    fixed = sum(len(r.fixed) for r in runs)
    lines = [
        "## Changes since baseline",
        "",
        f"{len(regressions)} regression(s), {len(new)} new finding(s), "
        f"{fixed} fixed finding(s), {len(fixes)} run(s) fixed.",
        "",
    ]
    if regressions:
        lines += [
            f"- ❌ **{md_text(r.name)}**: passed in the baseline, blocked now" for r in regressions
        ]
        lines.append("")
    if new:
        lines += ["**New findings**", ""]
        lines += [_changed_finding(r, f, site_url) for r, f in new[:MAX_FINDINGS]]
        if len(new) > MAX_FINDINGS:
            lines.append(f"- … and {len(new) - MAX_FINDINGS} more")
        lines.append("")
    if fixes:
        lines += [f"- ✅ **{md_text(r.name)}**: blocked in the baseline, passes now" for r in fixes]
        lines.append("")
    return lines


def diff_markdown(changes: Changes, site_url: str | None = None) -> bytes:
    """Return ``sandbox-replay diff``'s Markdown, for a pull-request comment."""
    if site_url is not None:
        check_site_url(site_url)
    title = [f"# {TOOL_NAME} {__version__}: changes since baseline", ""]
    removed = [f"- {md_text(run.name)} is no longer built" for run in changes.removed]
    body = changes_lines(changes.runs, site_url)[2:]
    return _joined([*title, *body, *removed]).encode("utf-8")


def _joined(lines: Sequence[str]) -> str:
    return "\n".join(lines).rstrip("\n") + "\n"


def _fits(text: str) -> bool:
    return len(text.encode("utf-8")) <= MAX_SUMMARY_BYTES


def markdown_bytes(runs: Sequence[ExportRun], site_url: str | None = None) -> bytes:
    """Return the Markdown summary of ``runs`` as written."""
    return build_markdown(runs, site_url).encode("utf-8")
