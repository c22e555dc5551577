"""The join table: one row per request, joined across every record that should mention it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import compress, repeat
from typing import Any, cast

from sandbox_replay.inputs import rollback_id_of
from sandbox_replay.lazyrows import PickedRows
from sandbox_replay.report.views.base import RunBase
from sandbox_replay.report.views.cells import (
    _cells,
    _declared,
    _derived,
    _effect,
    _Joined,
    _replay,
    _rollback,
    _trace,
)
from sandbox_replay.report.views.common import (
    ACTIONS_FILE,
    GAP,
    Cell,
    _are_true,
    _column,
    _joined_rows,
    _texts,
    short_code,
    text,
)
from sandbox_replay.report.views.models import FindingLink, JoinRow


class JoinTable(RunBase):
    def join_rows(self, start: int, end: int, from_page: str) -> tuple[JoinRow, ...]:
        """Return the join rows of requests ``[start, end)`` as seen from ``from_page``.

        Each row is what ``_join_row`` builds for it. Plain rows, nearly all of a run's, are
        built a column at a time instead (``_plain_join_rows``, which gives the same rows
        in a fraction of the time): a row whose request id is a string seen first on that
        row, and which every record that should mention it does (derived and declared
        verdict, side effect, cold replay and span).
        """
        request_rows = self.result["request_rows"]
        count = max(0, min(end, len(request_rows)) - start)
        requests = PickedRows(request_rows, range(start, start + count))
        indexes = list(range(start, start + count))
        derived_at, verdict_at, effect_at, _, replay_at, span_at = self.join_index
        derived_rows, verdict_rows, effect_rows, _, replay_rows, span_rows = self.joined_lists
        first = self.request_index
        # The id each row joins by: None where it is a duplicate or not a string.
        rids: list[Any] = [
            rid if isinstance(rid, str) and first[rid] == index else None
            for index, rid in zip(indexes, _column(requests, "request_id"), strict=True)
        ]
        span_keys: list[Any] = [None if rid is None else "span:" + rid for rid in rids]
        lists = (derived_rows, verdict_rows, effect_rows, replay_rows, span_rows)
        joined_at = (
            list(map(derived_at.get, rids)),
            list(map(verdict_at.get, rids)),
            list(map(effect_at.get, rids)),
            list(map(replay_at.get, rids)),
            list(map(span_at.get, span_keys)),
        )
        plain = [None not in row for row in zip(*joined_at, strict=True)]
        file_href = self._request_file_href(from_page)
        # The plain rows together, read by columns; the others one by one; put in order.
        kept = list(compress(range(count), plain))
        joined = _Joined(
            [indexes[n] for n in kept],
            PickedRows(request_rows, [start + n for n in kept]),
            [rids[n] for n in kept],
            *(
                PickedRows(rows, cast(list[int], [positions[n] for n in kept]))  # no None kept
                for rows, positions in zip(lists, joined_at, strict=True)
            ),
        )
        built = dict(zip(kept, self._plain_join_rows(joined, from_page, file_href), strict=True))
        return tuple(
            built[n]
            if n in built
            else self._join_row(indexes[n], requests[n], from_page, file_href)
            for n in range(count)
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
        derived_verdict = derived["derived_verdict"] if derived else ""
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
        return _joined_rows(self.joined_lists[which], [self.join_index[which].get(key)])[0]

    def _plain_join_rows(
        self, joined: _Joined, from_page: str, file_href: str | None
    ) -> list[JoinRow]:
        """Return ``_join_row`` of each plain row (see ``join_rows``), built by columns.

        Each column reads the values ``_join_row`` reads, with ``text`` applied as it
        applies it (``_texts``), and each cell is the same function of them (``_declared``
        and the others, made once per distinct arguments by ``_cells``). A row links
        findings only if one of its ids or input lines is one a finding is about:
        ``_hot_rows`` finds those rows, whose links ``_row_links`` makes as ``_join_row``
        does. ``tests/test_site_scale.py`` holds the two ways equal on odd values.
        """
        indexes, requests, rids, derived, verdicts, effects, replays, spans = joined
        rollback_at = self.join_index[3]
        rollbacks = _joined_rows(
            self.joined_lists[3],
            [
                rollback_at.get(rollback_id_of(ref, rollback_at)) if isinstance(ref, str) else None
                for ref in _column(effects, "rollback_receipt_ref")
            ],
        )
        span_keys = ["span:" + rid for rid in rids]
        hot = self._hot_rows(joined, span_keys, rollbacks)
        # Only a row that may link a finding is built whole, to find its links.
        links: list[tuple[FindingLink, ...]] = [()] * len(rids)
        for n in hot:
            links[n] = self._row_links(
                rids[n], requests[n], verdicts[n], effects[n], rollbacks[n], replays[n], from_page
            )
        if file_href is None:
            hrefs = [
                self.line_href(ACTIONS_FILE, line, from_page) for line in _column(requests, "line")
            ]
        else:
            hrefs = [file_href] * len(requests)
        shapes = map(
            " · ".join,
            zip(
                _texts(_column(requests, "action_kind")),
                _texts(_column(requests, "requested_capability")),
                _texts(_column(requests, "source_trust_label")),
                strict=True,
            ),
        )
        derived_verdicts = _column(derived, "derived_verdict")
        executed = _are_true(_column(effects, "execution_attempted"))
        cells = (
            _cells(
                _declared,
                _texts(_column(verdicts, "verdict")),
                list(map(bool, _column(derived, "policy_derivation_passed"))),
                _texts(_column(verdicts, "rule_refs")),
                _are_true(_column(verdicts, "pre_execution")),
            ),
            _cells(
                _derived,
                _texts(derived_verdicts),
                _texts(_column(derived, "derived_rule_ref")),
                list(map(bool, _column(derived, "fail_closed"))),
            ),
            _cells(_effect, derived_verdicts, executed, _column(effects, "side_effect_diff_count")),
            list(
                map(
                    _rollback,
                    _texts(_column(effects, "rollback_receipt_ref")),
                    executed,
                    [rollback is not None for rollback in rollbacks],
                    [
                        rollback is not None
                        and rollback.get("request_id") == rid
                        and rollback.get("rollback_verified") is True
                        for rollback, rid in zip(rollbacks, rids, strict=True)
                    ],
                )
            ),
            _cells(
                _replay,
                list(map(self.flagged_replays.__contains__, _texts(_column(replays, "replay_id")))),
                list(
                    map(
                        all,
                        zip(
                            _are_true(_column(replays, "verdict_reproduced")),
                            _are_true(_column(replays, "side_effect_state_reproduced")),
                            _are_true(_column(replays, "pass_label")),
                            strict=True,
                        ),
                    )
                ),
            ),
            _cells(
                _trace,
                _texts(_column(spans, "outcome")),
                list(map(self.flagged_spans.__contains__, span_keys)),
            ),
        )
        # ``JoinRow._make`` of each row without its Python frame: 600,000 rows at most.
        return list(
            map(
                tuple.__new__,
                repeat(JoinRow),
                zip(
                    [f"request-{index + 1}" for index in indexes],
                    rids,
                    hrefs,
                    _texts(_column(requests, "risk_class")),
                    shapes,
                    *cells,
                    links,
                    ["row-gap" if row_links else "" for row_links in links],
                    strict=True,
                ),
            )
        )

    def _hot_rows(
        self,
        joined: _Joined,
        span_keys: list[str],
        rollbacks: list[Mapping[str, Any] | None],
    ) -> set[int]:
        """Return the positions of the rows that may link a finding (see ``_row_links``).

        A row can link a finding only through one of its ids (request, span, replay,
        rollback) or one of its lines in the five input files. Every position is returned
        when a value cannot be looked up (not hashable): each row is then linked exactly.
        """
        _, requests, rids, _, verdicts, effects, replays, _ = joined
        ids: list[list[Any]] = [
            span_keys,
            rids,
            [i if isinstance(i, str) else None for i in _column(replays, "replay_id")],
            [r.get("rollback_id") if r is not None else None for r in rollbacks],
        ]
        lines = [
            (ACTIONS_FILE, _column(requests, "line")),
            ("policy_verdicts.json", _column(verdicts, "line")),
            ("side_effect_receipts.json", _column(effects, "line")),
            ("cold_replay.json", _column(replays, "line")),
            (
                "rollback_receipts.json",
                [r.get("line") if r is not None else None for r in rollbacks],
            ),
        ]
        positions = range(len(rids))
        hot: set[int] = set()
        try:
            for values in ids:
                hot.update(compress(positions, map(self.by_subject.__contains__, values)))
            for path, values in lines:
                if path in self.finding_lines:
                    found = self.finding_lines[path].__contains__
                    hot.update(compress(positions, map(found, values)))
        except TypeError:
            return set(positions)
        return hot

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
            if isinstance(replay_row.get("replay_id"), str):
                subjects.append(replay_row["replay_id"])
        if rollback is not None:
            lines.append(("rollback_receipts.json", rollback.get("line")))
            if isinstance(rollback.get("rollback_id"), str):
                subjects.append(rollback["rollback_id"])
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
            text(derived["derived_verdict"]),
            text(derived["derived_rule_ref"]),
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
