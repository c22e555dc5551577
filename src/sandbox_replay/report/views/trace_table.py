"""The public trace's spans, paged."""

from __future__ import annotations

from sandbox_replay.report.views.base import RunBase
from sandbox_replay.report.views.cells import _trace
from sandbox_replay.report.views.common import GAP, MAIN_PAGE, badge, text
from sandbox_replay.report.views.models import SpanRow, TraceView


class TraceTable(RunBase):
    def span_rows(self, start: int, end: int, from_page: str) -> tuple[SpanRow, ...]:
        """Return the trace spans ``[start, end)`` as seen from ``from_page``."""
        spans = self.spans[start:end]
        span_ids = [text(span.get("span_id")) for span in spans]
        hrefs = self.request_hrefs([s.removeprefix("span:") for s in span_ids], from_page)
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
                    _trace(text(span.get("outcome")), False),
                    text(span.get("authority_verdict_id")) or GAP,
                    text(span.get("state_transition_ref")) or "—",
                    text(span.get("recovery_ref")) or "—",
                    digest,
                    digest.removeprefix("sha256:")[:12],
                )
            )
        return tuple(rows)

    def trace(self) -> TraceView:
        trace = self.result["public_agent_execution_trace"]
        pager = self.trace_pager
        summary = trace["summary"]
        return TraceView(
            status=badge(trace["status"]),
            spans=() if pager.split else self.span_rows(0, pager.total, MAIN_PAGE),
            span_count=len(self.spans),
            digest=text(summary["trace_digest"]),
            outcome_counts=", ".join(f"{n:,} {k}" for k, n in summary["outcome_counts"].items())
            or "none",
            kind_counts=", ".join(f"{n:,} {k}" for k, n in summary["action_kind_counts"].items())
            or "none",
            audit_count=summary["finding_count"],
        )
