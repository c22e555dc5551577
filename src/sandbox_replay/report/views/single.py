"""The view of a run's single file (``build --single-file``): its run page, self-contained.

Every finding, the explanation of each code they raise, every link within the page; the
join table and the trace whole up to ``SINGLE_FILE_ROWS`` rows each, past that the rows
with a gap (worst first) and no trace, as the file says.
"""

from __future__ import annotations

from dataclasses import replace

from sandbox_replay.model.codes import REGISTRY, Layer
from sandbox_replay.report.catalog import render_doc
from sandbox_replay.report.single_file import CODE_PREFIX
from sandbox_replay.report.views.benchmark import benchmark
from sandbox_replay.report.views.common import MAIN_PAGE
from sandbox_replay.report.views.findings import finding_groups
from sandbox_replay.report.views.index import RunIndex
from sandbox_replay.report.views.joins import Gaps, join_rows
from sandbox_replay.report.views.models import CodeDoc, RunView, SingleFileView
from sandbox_replay.report.views.seeded import seeded
from sandbox_replay.report.views.trace_table import span_rows
from sandbox_replay.report.views.unmapped import unmapped

# As many rows as a browser opens from an attachment at once.
SINGLE_FILE_ROWS = 2000


def single_code_anchor(code: str) -> str:
    """Return the id of a code's explanation in a single file: the catalog's behind
    ``code_``, which no other id of a run page starts with."""
    return CODE_PREFIX.decode() + REGISTRY[code].anchor


def single_view(ix: RunIndex, gaps: Gaps, view: RunView) -> RunView:
    """Return the run page's ``view`` as the run's single file shows it."""
    one = ix.on_one_page()
    requests, spans = ix.join_pager.total, ix.trace_pager.total
    left_out = []
    if requests <= SINGLE_FILE_ROWS:
        rows = join_rows(one, gaps, range(requests), MAIN_PAGE)
        joins_note = ""
        rows_held = f"all {requests:,} request rows"
    else:
        count = len(gaps.order)
        shown = min(count, SINGLE_FILE_ROWS)
        rows = join_rows(one, gaps, gaps.order[:shown], MAIN_PAGE)
        joins_note = (
            f"This file holds the {shown:,} request rows with a gap, worst first, of the "
            f"run's {requests:,} requests."
        )
        rows_held = f"the {shown:,} request rows with a gap"
        if requests > count:
            left_out.append(f"{requests - count:,} request rows without a gap")
        if count > shown:
            left_out.append(f"{count - shown:,} request rows with a gap, past the first {shown:,}")
    if spans <= SINGLE_FILE_ROWS:
        trace = replace(view.trace, spans=span_rows(one, 0, spans, MAIN_PAGE))
        spans_held = f"all {spans:,} trace spans"
    else:
        trace = replace(view.trace, spans=())
        spans_held = "no trace span"
        left_out.append(f"all {spans:,} trace spans")
    findings = ix.findings_pager.total
    codes = _code_docs(ix)
    holds = (
        f"This single file holds every finding ({findings:,}), the explanation of each of "
        f"the {len(codes):,} codes they raise, {rows_held}, and {spans_held}."
        if findings
        else f"This single file holds the run: no finding, {rows_held}, and {spans_held}."
    )
    return replace(
        view,
        join_rows=rows,
        join_first_position=1 if requests <= SINGLE_FILE_ROWS else 0,
        join_nav=None,
        gaps_href="#joins",
        finding_groups=finding_groups(one, 0, findings, MAIN_PAGE),
        findings_nav=None,
        print_findings=(),
        print_findings_note="",
        trace=trace,
        trace_nav=None,
        single=SingleFileView(holds, tuple(left_out), joins_note, codes),
        unmapped=unmapped(one),
        benchmark=benchmark(one),
        seeded=seeded(one),
    )


def _code_docs(ix: RunIndex) -> tuple[CodeDoc, ...]:
    """Return the explanation of each code the run's findings raise, in catalog order."""
    raised = {f.error_code for f in ix.findings}
    return tuple(
        CodeDoc(
            entry.code,
            single_code_anchor(entry.code),
            entry.severity.value,
            entry.summary,
            render_doc(entry.doc),
        )
        for layer in Layer
        for entry in REGISTRY.by_layer(layer)
        if entry.code in raised
    )
