"""The view-model of the policy page: the coverage of every policy in force, run by run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sandbox_replay.figures import count
from sandbox_replay.report.views import Chrome, chrome, plural
from sandbox_replay.report.views.common import policy_kind_label, verdict_css
from sandbox_replay.report.views.models import Fact

if TYPE_CHECKING:
    from sandbox_replay.report.site_views import RunSummary


@dataclass(frozen=True)
class PolicyRunColumn:
    name: str
    href: str


@dataclass(frozen=True)
class PolicyCount:
    """One rule's count in one run; a zero is marked by a sign and words, not colour alone."""

    value: int
    zero: bool
    css: str


@dataclass(frozen=True)
class PolicyRuleRow:
    rule_ref: str
    verdict: str
    verdict_css: str
    counts: tuple[PolicyCount, ...]
    total: int
    never: bool
    css: str


@dataclass(frozen=True)
class PolicyTableView:
    """One policy in force and the runs replayed with it: a row per rule, a column per run."""

    anchor: str
    title: str
    policy_id: str
    kind_label: str
    sha256: str
    rule_count: str
    caption: str
    used_by: str
    runs: tuple[PolicyRunColumn, ...]
    rows: tuple[PolicyRuleRow, ...]
    run_totals: tuple[int, ...]
    total: int
    never_count: int


@dataclass(frozen=True)
class PolicyPageView:
    chrome: Chrome
    totals: tuple[Fact, ...]
    tables: tuple[PolicyTableView, ...]


def build_policy_view(runs: Sequence[RunSummary], build_time: str, version: str) -> PolicyPageView:
    """Return the view-model of the policy page: the coverage of every policy, run by run.

    Runs of one policy (kind, id and digest) share a table, in the order of its first
    run; every rule any of them lists is a row, in the policy's order.
    """
    grouped: dict[tuple[str, str, str], list[RunSummary]] = {}
    for run in runs:
        grouped.setdefault(run.policy.key, []).append(run)
    tables = [_policy_table(n, members) for n, members in enumerate(grouped.values(), start=1)]
    never = sum(table.never_count for table in tables)
    totals = (
        Fact("Policies", count(len(tables))),
        Fact("Runs", count(len(runs))),
        Fact("Rules in force", count(sum(len(table.rows) for table in tables))),
        Fact("Never exercised in any run", count(never), "gap" if never else ""),
    )
    return PolicyPageView(
        chrome=chrome("Policy coverage — sandbox-replay", "../", "policy", build_time, version),
        totals=totals,
        tables=tuple(tables),
    )


def _policy_table(number: int, members: Sequence[RunSummary]) -> PolicyTableView:
    policy = members[0].policy
    verdicts: dict[str, str] = {}
    for run in members:
        for rule in run.policy.rules:
            verdicts.setdefault(rule.rule_ref, rule.verdict)
    per_run: list[Counter[str]] = [Counter() for _ in members]
    for counts, run in zip(per_run, members, strict=True):
        for rule in run.policy.rules:
            counts[rule.rule_ref] += rule.request_count
    rows = []
    for rule_ref, verdict in verdicts.items():
        values = [counts.get(rule_ref, 0) for counts in per_run]
        total = sum(values)
        rows.append(
            PolicyRuleRow(
                rule_ref=rule_ref,
                verdict=verdict,
                verdict_css=verdict_css(verdict),
                counts=tuple(PolicyCount(v, not v, "num zero" if not v else "num") for v in values),
                total=total,
                never=not total,
                css="" if total else "row-never",
            )
        )
    run_totals = tuple(sum(counts.values()) for counts in per_run)
    kind = policy_kind_label(policy.kind)
    never = sum(1 for row in rows if row.never)
    caption = (
        f"{plural(len(rows), 'rule')} in force × {plural(len(members), 'run')}: how many "
        "requests each rule determined in each run"
        + (f"; {count(never)} never exercised in any run." if never else ".")
    )
    return PolicyTableView(
        anchor=f"policy-{number}",
        title=kind[:1].upper() + kind[1:],
        policy_id=policy.policy_id or "(no id)",
        kind_label=kind,
        sha256=policy.sha256,
        rule_count=plural(policy.rule_count, "rule"),
        caption=caption,
        used_by=f"replayed {plural(len(members), 'run')}",
        runs=tuple(PolicyRunColumn(r.name, f"../runs/{r.name}/index.html") for r in members),
        rows=tuple(rows),
        run_totals=run_totals,
        total=sum(run_totals),
        never_count=never,
    )
