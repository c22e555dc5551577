"""The join table: one row per request, joined across every record that should mention it."""

from __future__ import annotations

import functools
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any

from sandbox_replay.load.run import ROLLBACK_REF_PREFIX, rollback_id_of
from sandbox_replay.model.codes import REGISTRY, Severity
from sandbox_replay.records.build import column_of
from sandbox_replay.report.views.base import RunBase
from sandbox_replay.report.views.cells import (
    _declared,
    _derived,
    _effect,
    _replay,
    _rollback,
    _trace,
    diff_refs,
)
from sandbox_replay.report.views.common import (
    ACTIONS_FILE,
    GAP,
    Cell,
    request_anchor,
    short_code,
    text,
)
from sandbox_replay.report.views.models import FindingLink, JoinRow

# The rows a joined request meets: derived verdict, declared verdict, side-effect receipt,
# rollback receipt, cold replay and trace span (each None when missing).
_Row = Mapping[str, Any] | None
_Partners = tuple[_Row, _Row, _Row, _Row, _Row, _Row]
# Severities worst first.
SEVERITY_RANK = {severity.value: rank for rank, severity in enumerate(Severity)}


class JoinTable(RunBase):
    def join_rows(self, start: int, end: int, from_page: str) -> tuple[JoinRow, ...]:
        """Return the join rows of requests ``[start, end)`` as seen from ``from_page``."""
        request_rows = self.result["request_rows"]
        file_href = self._request_file_href(from_page)
        gaps = self.gap_severity
        return tuple(
            self._join_row(index, request_rows[index], from_page, file_href, gaps)
            for index in range(start, min(end, len(request_rows)))
        )

    def _request_file_href(self, from_page: str) -> str | None:
        """Return where every request of a page links (its file's entry, or nothing).

        None when the request file is highlighted, or shows excerpts: each request then
        links its own line (or, where no excerpt shows it, the file's entry).
        """
        if ACTIONS_FILE in self.highlighted or ACTIONS_FILE in self.excerpted:
            return None
        return self.line_href(ACTIONS_FILE, None, from_page)

    def _join_row(
        self,
        index: int,
        request: Mapping[str, Any],
        from_page: str,
        file_href: str | None,
        gaps: Mapping[int, str],
    ) -> JoinRow:
        """Return the join row of request ``index`` (``file_href`` as ``_request_file_href``,
        ``gaps`` as ``gap_severity``)."""
        rid = request.get("request_id")
        shape = " · ".join(
            [
                text(request.get("action_kind")),
                text(request.get("requested_capability")),
                text(request.get("source_trust_label")),
            ]
        )
        request_href = (
            self.line_href(ACTIONS_FILE, request.get("line"), from_page)
            if file_href is None
            else file_href
        )
        partners = self._partners_of(index, request)
        # Only a row with a gap has findings: most rows of a large run are looked up no further.
        hits = self._row_findings(request, partners) if index in gaps else []
        links = self._finding_links(hits, from_page)
        severity = self._worst_severity(hits)
        if partners is None:
            unjoined = Cell("— not joined", "duplicate or unusable request id", "gap")
            return JoinRow(
                # No id of its own to name it by: its position in the request file.
                f"request-row-{index + 1}",
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
                links,
                "row-gap",
                severity,
            )
        assert isinstance(rid, str)
        derived, verdict, effect, rollback, replay_row, span = partners
        derived_verdict = text(derived.get("derived_verdict")) if derived else ""
        return JoinRow(
            request_anchor(rid),
            rid,
            request_href,
            text(request.get("risk_class")),
            shape,
            self._declared_cell(derived, verdict),
            self._derived_cell(derived),
            self._effect_cell(derived_verdict, effect),
            self._rollback_cell(effect, rollback, rid),
            self._replay_cell(replay_row),
            self._trace_cell(span, "span:" + rid in self.flagged_spans),
            links,
            "row-gap" if links else "",
            severity,
        )

    def _partners_of(self, index: int, request: Mapping[str, Any]) -> _Partners | None:
        """Return the rows request ``index`` joins, or None when it joins nothing
        (``_join_position``)."""
        at = self._join_position(index, request.get("request_id"))
        if at is None:
            return None
        joined, r = self.joined, self.result
        effect = _row_at(r["side_effect_rows"], joined.effect_at[at])
        rollback = None
        if effect is not None:
            ref = effect.get("rollback_receipt_ref")
            if isinstance(ref, str):
                rollbacks = self.rollback_index
                rollback = rollbacks.get(rollback_id_of(ref, rollbacks))
        return (
            r["derived_policy_verdict_rows"][at],
            _row_at(r["policy_verdict_rows"], joined.verdict_at[at]),
            effect,
            rollback,
            _row_at(r["cold_replay_rows"], joined.replay_at[at]),
            self.spans[self.span_at[at]],
        )

    def _join_position(self, index: int, rid: Any) -> int | None:
        """Return where request row ``index`` stands in the replay's join, None where it
        joins nothing.

        It joins nothing where the replay found its id unusable (not text) or held by an
        earlier row (a duplicate: only the first row joins), and where its id as the
        record shows it (cut to length, or a value's type standing for a value that is not
        text) is not text or an earlier row's too, so that each joined row's anchor is its
        own.
        """
        request_at = self.joined.request_at
        at = bisect_left(request_at, index)
        if at == len(request_at) or request_at[at] != index:
            return None
        if not (isinstance(rid, str) and self.request_index[rid] == index):
            return None
        return at

    def _row_findings(self, request: Mapping[str, Any], partners: _Partners | None) -> list[int]:
        """Return the findings about a request row (expected alarms aside), in record order.

        Those about its ids (request, span, replay, rollback) and its lines in the inputs;
        a row that joins nothing only by its own line.
        """
        lines = [(ACTIONS_FILE, request.get("line"))]
        if partners is None:
            return self._hits((), lines)
        rid = request.get("request_id")
        _, verdict, effect, rollback, replay_row, _ = partners
        subjects = [rid, "span:" + text(rid)]
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
        return self._hits(subjects, lines)

    def _hits(self, subjects: Sequence[Any], lines: Sequence[tuple[str, Any]]) -> list[int]:
        """Return the findings about these subjects or input lines (expected alarms aside)."""
        by_subject, by_line = self.by_subject, self.by_line
        hits: set[int] = set()
        for subject in subjects:
            if subject in by_subject:
                hits.update(by_subject[subject])
        for line in lines:
            if line in by_line:
                hits.update(by_line[line])
        return sorted(hits)

    def _finding_links(self, hits: Sequence[int], from_page: str) -> tuple[FindingLink, ...]:
        return tuple(
            FindingLink(short_code(self.findings[i]["error_code"]), self.finding_href(i, from_page))
            for i in hits
        )

    def _worst_severity(self, hits: Sequence[int]) -> str:
        """Return the worst severity among ``hits`` ("" for none)."""
        if not hits:
            return ""
        return min((self.severity_of(i) for i in hits), key=SEVERITY_RANK.__getitem__)

    def severity_of(self, finding: int) -> str:
        return REGISTRY[self.findings[finding]["error_code"]].severity.value

    # -- the gaps listing

    @functools.cached_property
    def _gaps(self) -> tuple[tuple[int, ...], dict[int, str]]:
        """Return the positions of the request rows with a gap, worst first, and their severity.

        A row has a gap when it joins nothing or a finding is about it (the rows the join
        table marks). Worst first: by the worst severity of its findings, then by how many
        it has, then in request order; a row that joins nothing and has no finding last.
        Only the rows that may have one (``_gap_candidates``) are looked at.
        """
        request_rows = self.result["request_rows"]
        ranked = []
        severity: dict[int, str] = {}
        for index in sorted(self._gap_candidates()):
            request = request_rows[index]
            partners = self._partners_of(index, request)
            hits = self._row_findings(request, partners)
            if hits:
                worst = self._worst_severity(hits)
                severity[index] = worst
                ranked.append((SEVERITY_RANK[worst], -len(hits), index))
            elif partners is None:
                severity[index] = "not joined"
                ranked.append((len(SEVERITY_RANK), 0, index))
        ranked.sort()
        return tuple(index for _, _, index in ranked), severity

    def _gap_candidates(self) -> set[int]:
        """Return the positions of the request rows that may have a gap: at least those that
        do, found from what the findings cite rather than by joining every request.

        A row's findings are about its ids and its rows' lines (``_row_findings``), so a row
        with one holds a cited id or line, or names a row of another file that does: by its
        request id (a verdict, receipt or cold-replay row) or through its receipt's rollback
        ref (a rollback row). A row that joins nothing (``_join_position``) has an id that is
        not text or that an earlier row holds: there is one only where fewer ids are
        indexed or joined than there are rows.
        """
        r = self.result
        request_rows = r["request_rows"]
        cited_ids = _texts(list(self.by_subject))
        cited_lines = self.finding_lines
        named = cited_ids | {s.removeprefix("span:") for s in cited_ids}
        for path, rows, own_id in (
            ("policy_verdicts.json", r["policy_verdict_rows"], None),
            ("side_effect_receipts.json", r["side_effect_rows"], None),
            ("cold_replay.json", r["cold_replay_rows"], "replay_id"),
        ):
            cited = _cited(rows, cited_lines.get(path, set()), own_id, cited_ids)
            named.update(_texts(column_of([rows[i] for i in cited], "request_id")))
        rollbacks = r["rollback_rows"]
        cited = _cited(
            rollbacks, cited_lines.get("rollback_receipts.json", set()), "rollback_id", cited_ids
        )
        rollback_ids = _texts(column_of([rollbacks[i] for i in cited], "rollback_id"))
        if rollback_ids:  # the receipts whose ref may name one of them
            refs = rollback_ids | {ROLLBACK_REF_PREFIX + i for i in rollback_ids}
            effects = r["side_effect_rows"]
            naming = _positions_in(column_of(effects, "rollback_receipt_ref"), refs)
            named.update(_texts(column_of([effects[i] for i in naming], "request_id")))
        index = self.request_index
        candidates = {index[rid] for rid in named if rid in index}
        candidates.update(
            _positions_in(column_of(request_rows, "line"), cited_lines.get(ACTIONS_FILE, set()))
        )
        count = len(request_rows)
        if len(index) < count or len(self.joined.request_at) < count:  # some rows join nothing
            rids = column_of(request_rows, "request_id")
            candidates.update(
                position
                for position, rid in enumerate(rids)
                if self._join_position(position, rid) is None
            )
        return candidates

    @property
    def gap_order(self) -> tuple[int, ...]:
        return self._gaps[0]

    @property
    def gap_severity(self) -> dict[int, str]:
        """The worst severity of each row with a gap ("not joined" for one with no finding)."""
        return self._gaps[1]

    def gap_rows(self, start: int, end: int, from_page: str) -> tuple[JoinRow, ...]:
        """Return the join rows of the gaps at positions ``[start, end)`` of ``gap_order``."""
        request_rows = self.result["request_rows"]
        file_href = self._request_file_href(from_page)
        gaps = self.gap_severity
        return tuple(
            self._join_row(index, request_rows[index], from_page, file_href, gaps)
            for index in self.gap_order[start:end]
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
            diff_refs(effect),
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
            text(rollback.get("rollback_id")) if rollback is not None else "",
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


def _row_at(rows: Sequence[Any], position: int | None) -> Any:
    return None if position is None else rows[position]


def _positions_in(values: Sequence[Any], wanted: set[Any]) -> list[int]:
    """Return the positions of the ``values`` in ``wanted`` (a set of strings or numbers;
    a value of another type, which may not hash, is in it only if it is one of them)."""
    if not wanted:
        return []
    return [i for i, value in enumerate(values) if type(value) in _KEYS and value in wanted]


_KEYS = frozenset({str, int})


def _texts(values: Sequence[Any]) -> set[str]:
    return {value for value in values if type(value) is str}


def _cited(
    rows: Sequence[Any], lines: set[Any], own_id: str | None, cited_ids: set[str]
) -> list[int]:
    """Return the positions of the rows a finding cites: by their line, or by their
    ``own_id`` (a field holding the row's own id, where it has one)."""
    cited = set(_positions_in(column_of(rows, "line"), lines))
    if own_id is not None:
        cited.update(_positions_in(column_of(rows, own_id), cited_ids))
    return sorted(cited)
