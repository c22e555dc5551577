"""View-models of what changed since a baseline build, and of the builds' trend.

A run page's "Changes since baseline" (``with_changes``), ``changes/index.html``
(``build_changes_view``), the index's "since baseline" column (``index_changes``) and
its trend chart from ``history.json`` (``trend_view``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from sandbox_replay.figures import count
from sandbox_replay.model.codes import REGISTRY
from sandbox_replay.records.changes import FIX, NEW_RUN, REGRESSION, Changes, FindingRef, RunChange
from sandbox_replay.report import charts
from sandbox_replay.report.views import Chrome, RunPages, chrome, plural
from sandbox_replay.report.views.common import CHANGES_PAGE as CHANGES_PAGE
from sandbox_replay.report.views.common import code_href
from sandbox_replay.report.views.models import ChangedFinding, Fact, RunChangesView

KIND_CSS = {REGRESSION: "change-regression", FIX: "change-fix", NEW_RUN: "change-new-run"}
_KIND_WORDS = {REGRESSION: "regression", FIX: "fixed", NEW_RUN: "new run"}
# At most this many new or fixed findings are listed per run page (the changes page lists all).
SHOWN_CHANGES = 50


def changed_finding(run: str, finding: FindingRef, root: str, run_href: str) -> ChangedFinding:
    """Return one new or fixed finding as the pages list it (``root``: the site root, relative)."""
    path, line = finding.path, finding.line
    return ChangedFinding(
        code=finding.code,
        code_href=code_href(finding.code, root) if finding.code in REGISTRY else "",
        run=run,
        run_href=run_href,
        subject=finding.subject_id,
        message=finding.message,
        location=(f"{path}:{line}" if line else path) if path else "—",
    )


def _summary(change: RunChange) -> str:
    if change.before is None:
        status = f"New since the baseline: {change.after.status}"
    elif change.kind == REGRESSION:
        status = "Regression: passed in the baseline, blocked now"
    elif change.kind == FIX:
        status = "Fixed: blocked in the baseline, passes now"
    else:
        status = f"Status unchanged ({change.after.status})"
    parts = [status, plural(len(change.new), "new finding")]
    if change.before is not None:
        parts += [
            f"{len(change.fixed):,} fixed",
            f"{len(change.unchanged):,} unchanged",
            plural(len(change.inputs), "changed input file"),
        ]
    return "; ".join(parts) + "."


def run_changes_view(change: RunChange, root: str) -> RunChangesView:
    """Return the run page's "Changes since baseline" (``root``: the way to the site root)."""
    moved = change.moved_from
    return RunChangesView(
        css=KIND_CSS.get(change.kind, "change-none"),
        summary=_summary(change),
        moved_note=(
            f"Matched to the baseline run of the same name, whose inputs were at {moved}."
            if moved is not None
            else ""
        ),
        new=tuple(
            changed_finding(change.name, f, root, "#findings") for f in change.new[:SHOWN_CHANGES]
        ),
        fixed=tuple(
            changed_finding(change.name, f, root, "") for f in change.fixed[:SHOWN_CHANGES]
        ),
        inputs=tuple((c.path, c.how) for c in change.inputs),
    )


def with_changes(pages: RunPages, change: RunChange) -> RunPages:
    """Return ``pages`` with the run's changes section and the "Changes" link in each page."""
    return dataclasses.replace(pages, changes=functools.partial(run_changes_view, change))


@dataclass(frozen=True)
class IndexChange:
    """One run's "since baseline" cell on the index: its text, class and sort key."""

    text: str
    css: str
    sort: str


def index_changes(changes: Changes) -> dict[str, IndexChange]:
    """Return each run's "since baseline" cell, by run name."""
    cells = {}
    for change in changes.runs:
        parts = [_KIND_WORDS[change.kind]] if change.kind in _KIND_WORDS else []
        if change.new:
            parts.append(f"+{len(change.new):,} new")
        if change.fixed:
            parts.append(f"−{len(change.fixed):,} fixed")
        if change.inputs:
            parts.append(plural(len(change.inputs), "input") + " changed")
        if change.moved_from is not None:
            parts.append("moved")
        rank = 3 if _rank(change) == 2 and not change.changed else _rank(change)
        cells[change.name] = IndexChange(
            text=", ".join(parts) or "no change",
            css=KIND_CSS.get(change.kind, "change-new" if change.new else "change-none"),
            sort=f"{rank}{9999 - min(len(change.new), 9999):04d}",
        )
    return cells


def index_order(changes: Changes) -> dict[str, int]:
    """Return each run's rank on the index: regressions first, then runs with new findings."""
    return {change.name: _rank(change) for change in changes.runs}


def _rank(change: RunChange) -> int:
    return 0 if change.kind == REGRESSION else 1 if change.new else 2


@dataclass(frozen=True)
class StatusChangeRow:
    name: str
    href: str
    before: str
    after: str
    note: str


@dataclass(frozen=True)
class ChangesPageView:
    chrome: Chrome
    baseline: str
    facts: tuple[Fact, ...]
    regressions: tuple[StatusChangeRow, ...]
    fixes: tuple[StatusChangeRow, ...]
    new_runs: tuple[StatusChangeRow, ...]
    new: tuple[ChangedFinding, ...]
    fixed: tuple[ChangedFinding, ...]
    inputs: tuple[tuple[str, str, str, str], ...]  # run, href, path, how
    removed: tuple[str, ...]
    moved: tuple[tuple[str, str, str], ...]  # run, href, old folder


def _status_row(change: RunChange) -> StatusChangeRow:
    before = change.before.status if change.before is not None else "—"
    return StatusChangeRow(
        name=change.name,
        href=f"../runs/{change.name}/index.html",
        before=before,
        after=change.after.status,
        note=_summary(change),
    )


def build_changes_view(changes: Changes, build_time: str, version: str) -> ChangesPageView:
    """Return the view-model of ``changes/index.html``."""
    root = "../"

    def href(change: RunChange, anchor: str) -> str:
        return f"../runs/{change.name}/index.html#{anchor}"

    def fact(label: str, items: Sequence[Any], css: str = "") -> Fact:
        return Fact(label, count(len(items)), css if items else "")

    label = changes.baseline_label
    baseline = f"{label} ({changes.baseline_sha256})" if label else changes.baseline_sha256
    facts = (
        fact("Regressions", changes.regressions, "blocked"),
        fact("Fixed runs", changes.fixes, "pass"),
        fact("New findings", changes.new_findings, "blocked"),
        fact("Fixed findings", changes.fixed_findings),
        Fact("Unchanged findings", str(changes.unchanged_count)),
        fact("Runs with changed inputs", [c for c in changes.runs if c.inputs]),
    )
    return ChangesPageView(
        chrome=dataclasses.replace(
            chrome("Changes since baseline — sandbox-replay", root, "changes", build_time, version),
            changes_href=f"{root}{CHANGES_PAGE}",
        ),
        baseline=baseline,
        facts=facts,
        regressions=tuple(_status_row(c) for c in changes.regressions),
        fixes=tuple(_status_row(c) for c in changes.fixes),
        new_runs=tuple(_status_row(c) for c in changes.runs if c.kind == NEW_RUN),
        new=tuple(
            changed_finding(c.name, f, root, href(c, "findings")) for c, f in changes.new_findings
        ),
        fixed=tuple(
            changed_finding(c.name, f, root, href(c, "changes")) for c, f in changes.fixed_findings
        ),
        inputs=tuple(
            (c.name, href(c, "provenance"), i.path, i.how) for c in changes.runs for i in c.inputs
        ),
        removed=tuple(run.name for run in changes.removed),
        moved=tuple(
            (c.name, href(c, "changes"), c.moved_from)
            for c in changes.runs
            if c.moved_from is not None
        ),
    )


@dataclass(frozen=True)
class TrendRow:
    label: str
    runs: int
    passed: int
    blocked: int
    findings: int
    by_severity: str


@dataclass(frozen=True)
class TrendView:
    svg: Markup
    rows: tuple[TrendRow, ...]


def trend_view(history: Sequence[Mapping[str, Any]]) -> TrendView | None:
    """Return the index's trend chart and table, None with fewer than two builds."""
    if len(history) < 2:
        return None
    rows = []
    for number, entry in enumerate(history, start=1):
        severity, label = entry["findings_by_severity"], entry.get("label")
        rows.append(
            TrendRow(
                label=label if isinstance(label, str) and label else f"build {number}",
                runs=entry["runs"],
                passed=entry["passed"],
                blocked=entry["blocked"],
                findings=entry["findings"],
                by_severity=", ".join(f"{n:,} {name}" for name, n in severity.items() if n) or "—",
            )
        )
    svg = charts.trend_chart(
        [charts.TrendPoint(r.label, r.passed, r.blocked, r.findings) for r in rows],
        title="Runs and findings per build",
        id_prefix="chart-trend",
    )
    return TrendView(svg, tuple(rows))
