"""The public trace's spans, paged."""

from __future__ import annotations

from itertools import repeat

from sandbox_replay.report.views.base import RunBase
from sandbox_replay.report.views.cells import _cells, _trace
from sandbox_replay.report.views.common import GAP, MAIN_PAGE, _column, _texts, badge, text
from sandbox_replay.report.views.models import SpanRow, TraceView


class TraceTable(RunBase):
    def span_rows(self, start: int, end: int, from_page: str) -> tuple[SpanRow, ...]:
        """Return the trace spans ``[start, end)`` as seen from ``from_page``.

        Built a column at a time: ``text`` of one field of every span (``_texts``).
        """
        spans = self.spans[start:end]
        span_ids = _texts(_column(spans, "span_id"))
        digests = _texts(_column(spans, "input_digest"))
        # ``SpanRow._make`` of each row without its Python frame, as in ``_plain_join_rows``.
        return tuple(
            map(
                tuple.__new__,
                repeat(SpanRow),
                zip(
                    self.request_hrefs([s.removeprefix("span:") for s in span_ids], from_page),
                    _texts(_column(spans, "sequence_index")),
                    span_ids,
                    _texts(_column(spans, "episode_id")),
                    _texts(_column(spans, "action_kind")),
                    _cells(_trace, _texts(_column(spans, "outcome")), [False] * len(spans)),
                    [t or GAP for t in _texts(_column(spans, "authority_verdict_id"))],
                    [t or "—" for t in _texts(_column(spans, "state_transition_ref"))],
                    [t or "—" for t in _texts(_column(spans, "recovery_ref"))],
                    digests,
                    [digest.removeprefix("sha256:")[:12] for digest in digests],
                    strict=True,
                ),
            )
        )

    def trace(self) -> TraceView:
        trace = self.result["public_agent_execution_trace"]
        pager = self.trace_pager
        summary = trace["summary"]
        return TraceView(
            status=badge(trace["status"]),
            spans=() if pager.split else self.span_rows(0, pager.total, MAIN_PAGE),
            span_count=len(self.spans),
            digest=text(summary["trace_digest"]),
            outcome_counts=", ".join(f"{n} {k}" for k, n in summary["outcome_counts"].items())
            or "none",
            kind_counts=", ".join(f"{n} {k}" for k, n in summary["action_kind_counts"].items())
            or "none",
            audit_count=summary["finding_count"],
        )
