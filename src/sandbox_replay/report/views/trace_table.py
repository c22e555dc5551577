"""The public trace's spans, paged."""

from __future__ import annotations

from collections.abc import Mapping

from sandbox_replay.exports.text import subject_mark
from sandbox_replay.report.views.common import GAP, MAIN_PAGE, badge, text
from sandbox_replay.report.views.index import RunIndex
from sandbox_replay.report.views.joins import trace_cell
from sandbox_replay.report.views.models import SpanRow, TraceView


def span_rows(ix: RunIndex, start: int, end: int, from_page: str) -> tuple[SpanRow, ...]:
    """Return the trace spans ``[start, end)`` as seen from ``from_page``."""
    spans = ix.spans[start:end]
    span_ids = [text(span.get("span_id")) for span in spans]
    hrefs = ix.request_hrefs([s.removeprefix("span:") for s in span_ids], from_page)
    rows = []
    for span, span_id, href in zip(spans, span_ids, hrefs, strict=True):
        digest = text(span.get("input_digest"))
        rows.append(
            SpanRow(
                href,
                text(span.get("sequence_index")),
                span_id,
                text(span.get("episode_id")),
                text(span.get("action_kind")),
                trace_cell(text(span.get("outcome")), False),
                text(span.get("authority_verdict_id")) or GAP,
                text(span.get("state_transition_ref")) or "—",
                text(span.get("recovery_ref")) or "—",
                digest,
                digest.removeprefix("sha256:")[:12],
                subject_mark(span_id, ix.look_alikes),
            )
        )
    return tuple(rows)


def trace(ix: RunIndex) -> TraceView:
    """Return the trace's summary, with its spans where the run page holds them."""
    summary = ix.shown(ix.replay.trace.summary)
    pager = ix.trace_pager
    return TraceView(
        status=badge(ix.replay.trace.audit.status),
        spans=() if pager.split else span_rows(ix, 0, pager.total, MAIN_PAGE),
        span_count=len(ix.spans),
        digest=text(summary["trace_digest"]),
        outcome_counts=_counts(summary["outcome_counts"]),
        audit_count=summary["finding_count"],
    )


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n:,} {k}" for k, n in counts.items()) or "none"
