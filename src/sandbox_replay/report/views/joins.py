"""The join table: one row per request, joined across every record that should mention it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sandbox_replay.load.run import rollback_id_of
from sandbox_replay.report.views.base import RunBase
from sandbox_replay.report.views.cells import (
    _declared,
    _derived,
    _effect,
    _replay,
    _rollback,
    _trace,
)
from sandbox_replay.report.views.common import (
    ACTIONS_FILE,
    GAP,
    Cell,
    short_code,
    text,
)
from sandbox_replay.report.views.models import FindingLink, JoinRow


class JoinTable(RunBase):
    def join_rows(self, start: int, end: int, from_page: str) -> tuple[JoinRow, ...]:
        """Return the join rows of requests ``[start, end)`` as seen from ``from_page``."""
        request_rows = self.result["request_rows"]
        file_href = self._request_file_href(from_page)
        return tuple(
            self._join_row(index, request_rows[index], from_page, file_href)
            for index in range(start, min(end, len(request_rows)))
        )

    def _request_file_href(self, from_page: str) -> str | None:
        """Return where every request of a page links (its file's entry, or nothing).

        None when the request file is highlighted: each request then links its own line.
        """
        if ACTIONS_FILE in self.highlighted:
            return None
        return self.line_href(ACTIONS_FILE, None, from_page)

    def _join_row(
        self, index: int, request: Mapping[str, Any], from_page: str, file_href: str | None
    ) -> JoinRow:
        """Return the join row of request ``index`` (``file_href`` as ``_request_file_href``)."""
        rid = request.get("request_id")
        anchor = f"request-{index + 1}"
        shape = " · ".join(
            [
                text(request.get("action_kind")),
                text(request.get("requested_capability")),
                text(request.get("source_trust_label")),
            ]
        )
        # A request id seen on an earlier row is a duplicate: only its first row joins.
        joined = isinstance(rid, str) and self.request_index[rid] == index
        request_href = (
            self.line_href(ACTIONS_FILE, request.get("line"), from_page)
            if file_href is None
            else file_href
        )
        if not joined:
            unjoined = Cell("— not joined", "duplicate or unusable request id", "gap")
            return JoinRow(
                anchor,
                text(rid) or "(no id)",
                request_href,
                text(request.get("risk_class")),
                shape,
                unjoined,
                unjoined,
                unjoined,
                unjoined,
                unjoined,
                unjoined,
                self._links((), [(ACTIONS_FILE, request.get("line"))], from_page),
                "row-gap",
            )
        assert isinstance(rid, str)
        derived = self._partner(0, rid)
        verdict = self._partner(1, rid)
        effect = self._partner(2, rid)
        replay_row = self._partner(4, rid)
        span_key = "span:" + rid
        span = self._partner(5, span_key)
        rollback = None
        if effect is not None:
            ref = effect.get("rollback_receipt_ref")
            if isinstance(ref, str):
                rollback = self._partner(3, rollback_id_of(ref, self.join_index[3]))
        links = self._row_links(rid, request, verdict, effect, rollback, replay_row, from_page)
        derived_verdict = text(derived.get("derived_verdict")) if derived else ""
        return JoinRow(
            anchor,
            rid,
            request_href,
            text(request.get("risk_class")),
            shape,
            self._declared_cell(derived, verdict),
            self._derived_cell(derived),
            self._effect_cell(derived_verdict, effect),
            self._rollback_cell(effect, rollback, rid),
            self._replay_cell(replay_row),
            self._trace_cell(span, span_key in self.flagged_spans),
            links,
            "row-gap" if links else "",
        )

    def _partner(self, which: int, key: str) -> Mapping[str, Any] | None:
        """Return the row of ``key`` in the ``which``-th joined list, or None."""
        found: Mapping[str, Any] | None = self.join_index[which].get(key)
        return found

    def _row_links(
        self,
        rid: str,
        request: Mapping[str, Any],
        verdict: Mapping[str, Any] | None,
        effect: Mapping[str, Any] | None,
        rollback: Mapping[str, Any] | None,
        replay_row: Mapping[str, Any] | None,
        from_page: str,
    ) -> tuple[FindingLink, ...]:
        """Link the findings about a joined request: its ids, and its lines in the inputs."""
        subjects = [rid, "span:" + rid]
        lines = [(ACTIONS_FILE, request.get("line"))]
        if verdict is not None:
            lines.append(("policy_verdicts.json", verdict.get("line")))
        if effect is not None:
            lines.append(("side_effect_receipts.json", effect.get("line")))
        if replay_row is not None:
            lines.append(("cold_replay.json", replay_row.get("line")))
            replay_id = replay_row.get("replay_id")
            if isinstance(replay_id, str):
                subjects.append(replay_id)
        if rollback is not None:
            lines.append(("rollback_receipts.json", rollback.get("line")))
            rollback_id = rollback.get("rollback_id")
            if isinstance(rollback_id, str):
                subjects.append(rollback_id)
        return self._links(subjects, lines, from_page)

    def _links(
        self, subjects: Sequence[str], lines: Sequence[tuple[str, Any]], from_page: str
    ) -> tuple[FindingLink, ...]:
        """Link the findings about these subjects or input lines (expected alarms aside)."""
        by_subject, by_line = self.by_subject, self.by_line
        hits: set[int] = set()
        for subject in subjects:
            if subject in by_subject:
                hits.update(by_subject[subject])
        for line in lines:
            if line in by_line:
                hits.update(by_line[line])
        if not hits:
            return ()
        return tuple(
            FindingLink(short_code(self.findings[i]["error_code"]), self.finding_href(i, from_page))
            for i in sorted(hits)
        )

    @staticmethod
    def _declared_cell(
        derived: Mapping[str, Any] | None, verdict: Mapping[str, Any] | None
    ) -> Cell:
        if verdict is None:
            return Cell(GAP, "no verdict row", "gap")
        return _declared(
            text(verdict.get("verdict")),
            bool(derived and derived.get("policy_derivation_passed")),
            text(verdict.get("rule_refs")),
            verdict.get("pre_execution") is True,
        )

    @staticmethod
    def _derived_cell(derived: Mapping[str, Any] | None) -> Cell:
        if derived is None:
            return Cell(GAP, "", "gap")
        return _derived(
            text(derived.get("derived_verdict")),
            text(derived.get("derived_rule_ref")),
            bool(derived.get("fail_closed")),
        )

    @staticmethod
    def _effect_cell(derived_verdict: str, effect: Mapping[str, Any] | None) -> Cell:
        if effect is None:
            return Cell(GAP, "no side-effect receipt", "gap")
        return _effect(
            derived_verdict,
            effect.get("execution_attempted") is True,
            effect.get("side_effect_diff_count"),
        )

    @staticmethod
    def _rollback_cell(
        effect: Mapping[str, Any] | None, rollback: Mapping[str, Any] | None, rid: str
    ) -> Cell:
        if effect is None:
            return Cell(GAP, "no receipt to recover from", "gap")
        return _rollback(
            text(effect.get("rollback_receipt_ref")),
            effect.get("execution_attempted") is True,
            rollback is not None,
            rollback is not None
            and rollback.get("request_id") == rid
            and rollback.get("rollback_verified") is True,
        )

    def _replay_cell(self, replay_row: Mapping[str, Any] | None) -> Cell:
        if replay_row is None:
            return Cell(GAP, "no cold-replay row", "gap")
        claims = (
            replay_row.get("verdict_reproduced") is True
            and replay_row.get("side_effect_state_reproduced") is True
            and replay_row.get("pass_label") is True
        )
        return _replay(text(replay_row.get("replay_id")) in self.flagged_replays, claims)

    @staticmethod
    def _trace_cell(span: Mapping[str, Any] | None, flagged: bool = False) -> Cell:
        if span is None:
            return Cell(GAP, "", "gap")
        return _trace(text(span.get("outcome")), flagged)
