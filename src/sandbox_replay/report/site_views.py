"""View-models of the site-wide pages: the index and the finding-code catalog.

They read each run only through its ``RunSummary``, which the status file keeps between
builds, so a run reused from the previous build is shown without being replayed.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import msgspec
from markupsafe import Markup

from sandbox_replay.exports import SeededCount
from sandbox_replay.figures import count
from sandbox_replay.model.codes import REGISTRY, Layer, Severity
from sandbox_replay.model.policy_coverage import PolicyCoverage
from sandbox_replay.records.benchmark import BenchmarkFacts
from sandbox_replay.records.changes import Changes
from sandbox_replay.report import charts
from sandbox_replay.report.catalog import render_doc
from sandbox_replay.report.changes_views import (
    IndexChange,
    TrendView,
    index_changes,
    index_order,
    trend_view,
)
from sandbox_replay.report.policy_page import build_policy_view as build_policy_view
from sandbox_replay.report.views import (
    Badge,
    Chrome,
    RunCounts,
    RunView,
    badge,
    chrome,
    plural,
)
from sandbox_replay.report.views.common import CHANGES_PAGE, STATUS_LABELS
from sandbox_replay.report.views.models import CodeDoc, Fact

# ---------------------------------------------------------------------------------------
# Index page


def run_key(name: str) -> str:
    """Return a run's name as the index's ``run=`` filter, its chart bar and its row write it:
    percent-encoded UTF-8, so that they agree whatever the name holds."""
    return quote(name, safe="", errors="replace")


@dataclass(frozen=True)
class IndexRow:
    name: str
    href: str
    mode_label: str
    status: str
    status_badge: Badge
    headline: str
    counts: RunCounts
    findings_note: str
    status_sort: str
    # The "since baseline" cell, only in a build given ``--baseline``.
    since: IndexChange | None = None
    # The worst severity among its findings (expected alarms aside), "" for none; a
    # sort key that puts the worst first; and the counts by severity, as text.
    worst: str = ""
    worst_sort: str = ""
    severity_note: str = ""
    # Its name as the index's ``run=`` filter names it (percent-encoded UTF-8), and the
    # severities its findings have, space-separated, for the ``sev=`` filter.
    run_key: str = ""
    severities: str = ""
    # Its seeded escapes caught ("" without ``--sensitivity``), "gap" when one was missed.
    seeded: str = ""
    seeded_css: str = ""


@dataclass(frozen=True)
class ChartTable:
    """A chart's figures as a table, for screen readers and for reading them exactly."""

    caption: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class ChartView:
    title: str
    svg: Markup
    note: str = ""
    table: ChartTable | None = None


@dataclass(frozen=True)
class IndexView:
    chrome: Chrome
    totals: tuple[Fact, ...]
    charts: tuple[ChartView, ...]
    rows: tuple[IndexRow, ...]
    statuses: tuple[tuple[str, str], ...]
    severities: tuple[tuple[str, str], ...] = ()
    compared: bool = False
    trend: TrendView | None = None
    # Whether any run was replayed with ``--sensitivity`` (the "Seeded escapes" column).
    seeded: bool = False
    # The runs a benchmark judged (AgentDojo), by suite and attack.
    attacks: tuple[AttackRow, ...] = ()


@dataclass(frozen=True)
class AttackRow:
    """One suite and attack of the runs a benchmark judged, as AgentDojo's own tables count."""

    suite: str
    attack: str
    runs: int
    goal_met: int  # runs the benchmark says the injection task's goal was met in
    escaped: int  # runs the replay saw an attacker's call executed in
    disagrees: int


@dataclass(frozen=True)
class RunSummary:
    """What the index, the catalog, the policy page and the manifest need of one run (kept
    between builds)."""

    name: str
    mode: str
    mode_label: str
    status: str
    headline: str
    counts: RunCounts
    findings_by_layer: tuple[tuple[str, int], ...]
    error_codes: tuple[str, ...]
    expected_codes: tuple[str, ...]
    source_path: str
    result_sha256: str
    input_digests: tuple[tuple[str, str], ...]
    policy: PolicyCoverage
    # Each code's first finding, linked from the run's folder: where the catalog links.
    first_findings: tuple[tuple[str, str], ...] = ()
    # Its findings (expected alarms aside) by severity, worst first, none left out.
    findings_by_severity: tuple[tuple[str, int], ...] = ()
    # Only for a run replayed with ``--sensitivity``.
    seeded: SeededCount | None = None
    # Only for a run a benchmark judged.
    benchmark: BenchmarkFacts | None = None

    def badness(self) -> tuple[int, ...]:
        """Return a key that orders runs worst first: by worst severity, then each count."""
        counts = dict(self.findings_by_severity)
        worst = next((rank for rank, s in enumerate(Severity) if counts.get(s.value)), 99)
        return (worst, *(-counts.get(s.value, 0) for s in Severity))

    @property
    def status_badge(self) -> Badge:
        return badge(self.status)

    def to_json(self) -> dict[str, Any]:
        """Return the summary as JSON values, as the status file keeps it."""
        data = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        for name in ("seeded", "benchmark"):
            if data[name] is None:  # a plain build's status file is unchanged
                del data[name]
        return data | {"counts": vars(self.counts), "policy": self.policy.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSummary:
        """Return the summary ``to_json`` gave (``ValueError`` if it is not one)."""
        policy = PolicyCoverage.from_json(data["policy"])
        return msgspec.convert({**data, "policy": policy}, cls)


def summarize_run(view: RunView, result_sha256: str) -> RunSummary:
    """Return the summary of a run page's view-model and its result record's digest."""
    return RunSummary(
        name=view.name,
        mode=view.mode,
        mode_label=view.mode_label,
        status=view.status,
        headline=view.headline.text,
        counts=view.counts,
        findings_by_layer=view.findings_by_layer,
        error_codes=view.error_codes,
        expected_codes=view.expected_codes,
        source_path=view.source_path,
        result_sha256=result_sha256,
        input_digests=view.input_digests,
        policy=view.policy,
        first_findings=view.first_findings,
        findings_by_severity=view.findings_by_severity,
        seeded=view.seeded.count if view.seeded is not None else None,
        benchmark=view.benchmark.facts if view.benchmark is not None else None,
    )


def build_index_view(
    runs: Sequence[RunSummary],
    build_time: str,
    version: str,
    changes: Changes | None = None,
    history: Sequence[Mapping[str, Any]] = (),
) -> IndexView:
    """Return the view-model of the index page: with ``changes`` (``--baseline``), what
    changed, regressions first; with two builds of ``history`` or more, their trend."""
    worst_first = sorted(runs, key=lambda r: (r.status != "blocked", r.badness(), r.name))
    statuses = Counter(r.status for r in runs)
    # A log that could not be read is neither passed nor blocked: it is counted apart.
    shown = ("pass", "blocked", "not_run") if statuses["not_run"] else ("pass", "blocked")
    frame = chrome("sandbox-replay report", "", "index", build_time, version)
    if changes is not None:
        frame = dataclasses.replace(frame, changes_href=CHANGES_PAGE)
    return IndexView(
        chrome=frame,
        totals=(
            Fact("Runs", count(len(runs))),
            *(_status_total(status, statuses[status]) for status in shown),
            Fact("Requests replayed", count(sum(r.counts.requests for r in runs))),
            Fact("Verdict mismatches", count(sum(r.counts.mismatches for r in runs))),
            Fact("Findings", count(sum(r.counts.findings for r in runs))),
        ),
        charts=(
            _status_chart(statuses, shown),
            _severity_chart(worst_first),
            _layer_chart(runs),
        ),
        rows=_index_rows(worst_first, changes),
        statuses=(("", "All statuses"), *((status, STATUS_LABELS[status]) for status in shown)),
        severities=(("", "Any severity"), *((s.value, f"With {s.value}") for s in Severity)),
        compared=changes is not None,
        trend=trend_view(history),
        seeded=any(r.seeded is not None for r in runs),
        attacks=attack_rows(runs),
    )


def attack_rows(runs: Sequence[RunSummary]) -> tuple[AttackRow, ...]:
    """Return the runs a benchmark judged counted by suite and attack, benign runs as "none"."""
    groups: dict[tuple[str, str], list[BenchmarkFacts]] = {}
    for run in runs:
        if run.benchmark is not None:
            groups.setdefault((run.benchmark.suite, run.benchmark.attack), []).append(run.benchmark)
    return tuple(
        AttackRow(
            suite,
            attack,
            len(facts),
            sum(f.goal_met for f in facts),
            sum(f.escaped for f in facts),
            sum(f.disagrees for f in facts),
        )
        for (suite, attack), facts in sorted(groups.items())
    )


# Each status's total on the index: its label, and its CSS class when any run has it.
_STATUS_TOTALS = {
    "pass": ("Passed", "pass"),
    "blocked": ("Blocked", "blocked"),
    "not_run": ("Not run", ""),
}


def _status_total(status: str, runs: int) -> Fact:
    label, css = _STATUS_TOTALS[status]
    return Fact(label, count(runs), css if runs else "")


def _figures(caption: str, columns: tuple[str, str], data: Sequence[charts.BarDatum]) -> ChartTable:
    return ChartTable(caption, columns, tuple((d.label, (count(d.value),)) for d in data))


def _status_chart(statuses: Counter[str], shown: Sequence[str]) -> ChartView:
    data = [charts.BarDatum(s.replace("_", " "), statuses[s], f"status-{s}") for s in shown]
    svg = charts.bar_chart(
        data,
        title="Runs by status",
        id_prefix="chart-status",
        filters=tuple(f"status={status}" for status in shown),
    )
    table = _figures("Runs by status", ("Status", "Runs"), data)
    return ChartView("Runs by status", svg, table=table)


def _severity_chart(worst_first: Sequence[RunSummary]) -> ChartView:
    """Chart each run's findings by severity, worst run first (runs without one left out)."""
    title = "Findings by severity per run, worst first"
    per_run = [(r.name, _by_severity(r)) for r in worst_first if r.findings_by_severity]
    svg = charts.stacked_bar_chart(
        [
            (name, [charts.BarDatum(s.value, n, f"sev-{s.value}") for s, n in counts])
            for name, counts in per_run
        ],
        title=title,
        id_prefix="chart-severity",
        filters=tuple(f"run={run_key(name)}" for name, _ in per_run),
        legend_filters={s.value: f"sev={s.value}" for s in Severity},
    )
    rows = tuple(
        (name, (*(count(n) for _, n in counts), count(sum(n for _, n in counts))))
        for name, counts in per_run
    )
    columns = ("Run", *(s.value for s in Severity), "Total")
    table = ChartTable(title, columns, rows)
    return ChartView("Findings by severity per run", svg, _NO_ALARMS, table)


def _by_severity(run: RunSummary) -> list[tuple[Severity, int]]:
    counts = dict(run.findings_by_severity)
    return [(s, counts.get(s.value, 0)) for s in Severity]


def _layer_chart(runs: Sequence[RunSummary]) -> ChartView:
    by_layer: dict[str, int] = {}
    for run in runs:
        for title, found in run.findings_by_layer:
            by_layer[title] = by_layer.get(title, 0) + found
    data = [
        charts.BarDatum(layer.label, by_layer[layer.label], "finding")
        for layer in Layer
        if layer.label in by_layer
    ]
    svg = charts.bar_chart(
        data, title=f"Findings by layer ({_NO_ALARMS})", id_prefix="chart-layers"
    )
    table = _figures("Findings by layer", ("Layer", "Findings"), data)
    return ChartView("Findings by layer", svg, _NO_ALARMS, table)


_NO_ALARMS = "expected negative-case alarms excluded"


def _index_rows(worst_first: Sequence[RunSummary], changes: Changes | None) -> tuple[IndexRow, ...]:
    """Return the index's rows: regressions and runs with new findings first (with a
    baseline), then worst first."""
    since = index_changes(changes) if changes is not None else {}
    rank = index_order(changes) if changes is not None else {}
    ordered = sorted(worst_first, key=lambda r: rank.get(r.name, 0))
    return tuple(
        IndexRow(
            name=r.name,
            href=f"runs/{r.name}/index.html",
            mode_label=r.mode_label,
            status=r.status,
            status_badge=r.status_badge,
            headline=r.headline,
            counts=r.counts,
            findings_note=(
                f"+{count(r.counts.expected_alarms)} expected" if r.counts.expected_alarms else ""
            ),
            status_sort="0" if r.status == "blocked" else "1",
            since=since.get(r.name),
            worst=r.findings_by_severity[0][0] if r.findings_by_severity else "",
            worst_sort=f"{position:04d}",
            severity_note=" · ".join(f"{n:,} {s}" for s, n in r.findings_by_severity),
            run_key=run_key(r.name),
            severities=" ".join(s for s, n in r.findings_by_severity if n),
            seeded=r.seeded.text if r.seeded is not None else "",
            seeded_css="gap" if r.seeded is not None and r.seeded.missed else "",
        )
        for position, r in enumerate(ordered)
    )


# ---------------------------------------------------------------------------------------
# Catalog page


@dataclass(frozen=True)
class RunLink:
    name: str
    href: str
    note: str


@dataclass(frozen=True)
class CodeEntry(CodeDoc):
    """A code's explanation in the catalog, with the runs that raise it."""

    runs: tuple[RunLink, ...]


@dataclass(frozen=True)
class CatalogGroup:
    layer_id: str
    title: str
    entries: tuple[CodeEntry, ...]


@dataclass(frozen=True)
class CatalogView:
    chrome: Chrome
    groups: tuple[CatalogGroup, ...]
    code_count: int
    toc: tuple[tuple[str, str, int], ...]
    # Each severity, worst first: its name, what it means and how many codes have it.
    severities: tuple[tuple[str, str, str], ...] = ()


def build_catalog_view(runs: Sequence[RunSummary], build_time: str, version: str) -> CatalogView:
    """Return the view-model of the finding-code catalog."""
    groups = []
    for layer in Layer:
        entries = []
        for entry in REGISTRY.by_layer(layer):
            links = tuple(
                RunLink(
                    run.name,
                    # The first finding of this code in that run.
                    f"../runs/{run.name}/" + dict(run.first_findings).get(entry.code, "index.html"),
                    "expected alarm" if entry.code in run.expected_codes else "",
                )
                for run in runs
                if entry.code in run.error_codes
            )
            doc = render_doc(entry.doc)
            entries.append(
                CodeEntry(entry.code, entry.anchor, entry.severity.value, entry.summary, doc, links)
            )
        if entries:
            groups.append(CatalogGroup(f"layer-{layer.value}", layer.label, tuple(entries)))
    return CatalogView(
        chrome=chrome("Finding codes — sandbox-replay", "../", "codes", build_time, version),
        groups=tuple(groups),
        code_count=len(REGISTRY),
        toc=tuple((g.layer_id, g.title, len(g.entries)) for g in groups),
        severities=tuple(
            (
                s.value,
                s.meaning,
                plural(sum(1 for entry in REGISTRY if entry.severity is s), "code"),
            )
            for s in Severity
        ),
    )
