"""The calibration tables: declared against derived verdicts, the negative cases, and the
policy's coverage (every rule in force and how many requests it determined)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sandbox_replay.checks.negative_cases import NEGATIVE_CASES
from sandbox_replay.load.run import InputMode
from sandbox_replay.model.codes import REGISTRY, Layer
from sandbox_replay.model.findings import Finding
from sandbox_replay.model.policy import VERDICTS
from sandbox_replay.records.build import column_of
from sandbox_replay.report import charts
from sandbox_replay.report.views.common import (
    CORE_VERDICTS,
    MAIN_PAGE,
    check_badge,
    code_href,
    plural,
    policy_kind_label,
    rule_anchor,
    verdict_css,
)
from sandbox_replay.report.views.index import RunIndex, location
from sandbox_replay.report.views.models import (
    CoverageRow,
    CoverageView,
    FindingLink,
    MatrixCell,
    MatrixRow,
    MatrixView,
    NegativeRow,
)


def matrix(ix: RunIndex) -> MatrixView:
    """Return the declared verdicts against the derived ones, request by request."""
    rows = ix.derived
    derived_values: list[str] = column_of(rows, "derived_verdict")
    declared_values = [
        value if value in VERDICTS else ("(no verdict row)" if value is None else "(other)")
        for value in column_of(rows, "declared_verdict")
    ]
    derived_seen, declared_seen = set(derived_values), set(declared_values)
    derived_axis = [v for v in VERDICTS if v in CORE_VERDICTS or v in derived_seen]
    declared_axis = [v for v in VERDICTS if v in CORE_VERDICTS or v in declared_seen]
    declared_axis += [v for v in ("(other)", "(no verdict row)") if v in declared_seen]
    counts = Counter(zip(declared_values, derived_values, strict=True))
    maximum = max(counts.values(), default=0)
    matrix_rows = []
    for declared in declared_axis:
        cells = []
        for derived in derived_axis:
            value = counts.get((declared, derived), 0)
            agrees = declared == derived
            label = f"{plural(value, 'request')} declared {declared}, derived {derived}" + (
                " (agree)" if agrees else " (disagree)" if value else ""
            )
            css = f"heat-{charts.heat_level(value, maximum)} {'agree' if agrees else 'disagree'}"
            cells.append(MatrixCell(value, css, label))
        total = sum(counts.get((declared, d), 0) for d in derived_axis)
        matrix_rows.append(MatrixRow(declared, tuple(cells), total))
    agree = sum(n for (declared, derived), n in counts.items() if declared == derived)
    disagree = sum(row.total for row in matrix_rows) - agree
    summary = (
        f"{agree:,} of {len(rows):,} declared verdicts agree with the derived verdict"
        + (f"; {disagree:,} disagree" if disagree else "")
        + "."
    )
    return MatrixView(tuple(derived_axis), tuple(matrix_rows), summary)


def negative_rows(ix: RunIndex) -> tuple[NegativeRow, ...] | None:
    """Return each planted negative case and whether it raised its code (fixtures only)."""
    if ix.run.mode is not InputMode.FIXTURE:
        return None
    observed = ix.replay.negative.observed if ix.replay.negative is not None else {}
    first: dict[Any, Finding] = {}  # each case's first finding
    for f in ix.findings:
        if f.layer is Layer.NEGATIVE_CASES:
            first.setdefault(f.subject_id, f)
    rows = []
    for case in NEGATIVE_CASES:
        seen = observed.get(case.case_id, [])
        finding = first.get(case.case_id)
        path = finding.path if finding else case.file_name
        line = finding.line if finding else None
        fired = case.code in seen
        rows.append(
            NegativeRow(
                case_id=case.case_id,
                expected_code=case.code,
                expected_href=code_href(case.code, "../../"),
                observed=tuple(
                    FindingLink(c, code_href(c, "../../")) for c in seen if c in REGISTRY
                ),
                outcome=check_badge(fired, "fired", "missing"),
                location=location(path, line),
                location_href=ix.line_href(path, line, MAIN_PAGE),
            )
        )
    return tuple(rows)


def coverage(ix: RunIndex) -> CoverageView:
    """Return every rule of the policy in force with the requests it determined."""
    policy = ix.policy
    rows = tuple(
        CoverageRow(
            rule_ref=rule.rule_ref,
            verdict=rule.verdict,
            verdict_css=verdict_css(rule.verdict),
            request_count=rule.request_count,
            never=not rule.request_count,
            css="" if rule.request_count else "row-never",
            anchor=rule_anchor(rule.rule_ref),
        )
        for rule in policy.rules
    )
    never = len(policy.unexercised)
    summary = (
        f"{plural(len(rows), 'rule')} in force under the {policy_kind_label(policy.kind)} "
        f"{policy.policy_id}; "
        + (
            f"{never:,} never exercised by this run's requests."
            if never
            else "each determined at least one of this run's requests."
        )
    )
    return CoverageView(summary, rows, f"{ix.root_of(MAIN_PAGE)}policy/index.html")
