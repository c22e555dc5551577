"""The join table: one row per request, joined across every record that should mention it,
and the gaps listing: the rows with a gap, worst first."""

from __future__ import annotations

import functools
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from sandbox_replay.exports.text import id_mark
from sandbox_replay.importers.inspect_bundle import CHANGE_UNKNOWN
from sandbox_replay.load.run import rollback_id_of
from sandbox_replay.model.codes import REGISTRY, Severity
from sandbox_replay.model.policy import VERDICTS
from sandbox_replay.report.views.common import (
    ACTIONS_FILE,
    GAP,
    TRACE_OUTCOMES,
    Cell,
    is_count,
    plural,
    request_anchor,
    short_code,
    text,
)
from sandbox_replay.report.views.index import RunIndex
from sandbox_replay.report.views.models import FindingLink, JoinRow

# The rows a joined request meets: derived verdict, declared verdict, side-effect receipt,
# rollback receipt, cold replay and trace span (each None when missing).
_Row = Mapping[str, Any] | None
Partners = tuple[_Row, _Row, _Row, _Row, _Row, _Row]
# Severities worst first.
SEVERITY_RANK = {severity.value: rank for rank, severity in enumerate(Severity)}


class Gaps(NamedTuple):
    """The request rows with a gap: their positions, worst first, and each one's worst
    severity ("not joined" for a row that joins nothing and has no finding)."""

    order: tuple[int, ...]
    severity: dict[int, str]


def join_rows(
    ix: RunIndex, gaps: Gaps, positions: Sequence[int], from_page: str
) -> tuple[JoinRow, ...]:
    """Return the join rows of the requests at ``positions`` as seen from ``from_page``."""
    # Where every request of the page links when the request file is neither shown whole
    # nor in excerpts: the file's entry, or nothing.
    shown = ACTIONS_FILE in ix.highlighted or ACTIONS_FILE in ix.excerpted
    file_href = None if shown else ix.line_href(ACTIONS_FILE, None, from_page)
    requests = ix.requests
    return tuple(
        _join_row(ix, index, requests[index], from_page, file_href, gaps.severity)
        for index in positions
        if index < len(requests)
    )


def _join_row(
    ix: RunIndex,
    index: int,
    request: Any,
    from_page: str,
    file_href: str | None,
    gaps: Mapping[int, str],
) -> JoinRow:
    rid = request.get("request_id")
    shape = " · ".join(
        [
            text(request.get("action_kind")),
            text(request.get("requested_capability")),
            text(request.get("source_trust_label")),
        ]
    )
    if file_href is None:
        file_href = ix.line_href(ACTIONS_FILE, request.get("line"), from_page)
    partners = partners_of(ix, index, request)
    # Only a row with a gap has findings: most rows of a large run are looked up no further.
    hits = row_findings(ix, request, partners) if index in gaps else []
    links = tuple(
        FindingLink(short_code(ix.findings[i].error_code), ix.finding_href(i, from_page))
        for i in hits
    )
    severity = _worst_severity(ix, hits)
    risk = text(request.get("risk_class"))
    if partners is None:
        unjoined = Cell("— not joined", "duplicate or unusable request id", "gap")
        # No id of its own to name it by: its position in the request file.
        anchor, shown = f"request-row-{index + 1}", text(rid) or "(no id)"
        cells = (unjoined,) * 6
        mark = id_mark(text(rid), ix.look_alikes)
        return JoinRow(
            anchor, shown, file_href, risk, shape, *cells, links, "row-gap", severity, mark
        )
    assert isinstance(rid, str)
    derived, verdict, effect, rollback, replay_row, span = partners
    derived_verdict = text(derived.get("derived_verdict")) if derived else ""
    return JoinRow(
        request_anchor(rid),
        rid,
        file_href,
        risk,
        shape,
        _declared(derived, verdict),
        _derived(derived),
        _effect(derived_verdict, effect),
        _rollback(effect, rollback, rid),
        _replay(ix, replay_row),
        Cell(GAP, "", "gap")
        if span is None
        else trace_cell(text(span.get("outcome")), "span:" + rid in ix.flagged_spans),
        links,
        "row-gap" if links else "",
        severity,
        id_mark(rid, ix.look_alikes),
    )


def partners_of(ix: RunIndex, index: int, request: Any) -> Partners | None:
    """Return the rows request ``index`` joins, or None when it joins nothing
    (``_join_position``)."""
    at = _join_position(ix, index, request.get("request_id"))
    if at is None:
        return None
    joined = ix.replay.run.joined
    effect = _row_at(ix.effects, joined.effect_at[at])
    rollback = None
    if effect is not None:
        ref = effect.get("rollback_receipt_ref")
        if isinstance(ref, str):
            rollback = ix.rollback_index.get(rollback_id_of(ref, ix.rollback_index))
    return (
        ix.derived[at],
        _row_at(ix.verdicts, joined.verdict_at[at]),
        effect,
        rollback,
        _row_at(ix.replays, joined.replay_at[at]),
        ix.spans[ix.replay.trace.span_at[at]],
    )


def _join_position(ix: RunIndex, index: int, rid: Any) -> int | None:
    """Return where request row ``index`` stands in the replay's join; None where it joins
    nothing: its id unusable or a duplicate, or as the record shows it (cut, or a type's
    name) not text or an earlier row's too, so that each joined row's anchor is its own."""
    request_at = ix.replay.run.joined.request_at
    at = bisect_left(request_at, index)
    if at == len(request_at) or request_at[at] != index:
        return None
    if not (isinstance(rid, str) and ix.request_index[rid] == index):
        return None
    return at


def row_findings(ix: RunIndex, request: Any, partners: Partners | None) -> list[int]:
    """Return the findings about a request row's ids and input lines (a row that joins
    nothing: its own line), expected alarms aside, in record order."""
    lines = [(ACTIONS_FILE, request.get("line"))]
    subjects = []
    if partners is not None:
        rid = request.get("request_id")
        _, verdict, effect, rollback, replay_row, _ = partners
        subjects = [rid, "span:" + text(rid)]
        if verdict is not None:
            lines.append(("policy_verdicts.json", verdict.get("line")))
        if effect is not None:
            lines.append(("side_effect_receipts.json", effect.get("line")))
        if replay_row is not None:
            lines.append(("cold_replay.json", replay_row.get("line")))
            subjects.append(replay_row.get("replay_id"))
        if rollback is not None:
            lines.append(("rollback_receipts.json", rollback.get("line")))
            subjects.append(rollback.get("rollback_id"))
    hits: set[int] = set()
    for subject in subjects:
        if isinstance(subject, str) and subject in ix.by_subject:
            hits.update(ix.by_subject[subject])
    for line in lines:
        if line in ix.by_line:
            hits.update(ix.by_line[line])
    return sorted(hits)


def _worst_severity(ix: RunIndex, hits: Sequence[int]) -> str:
    """Return the worst severity among ``hits`` ("" for none)."""
    if not hits:
        return ""
    severities = (REGISTRY[ix.findings[i].error_code].severity.value for i in hits)
    return min(severities, key=SEVERITY_RANK.__getitem__)


def find_gaps(ix: RunIndex) -> Gaps:
    """Return the request rows that join nothing or that a finding is about, worst first:
    by their findings' worst severity, then how many, then request order (no finding last)."""
    ranked = []
    severity: dict[int, str] = {}
    for index, request in enumerate(ix.requests):
        partners = partners_of(ix, index, request)
        hits = row_findings(ix, request, partners)
        if hits:
            worst = _worst_severity(ix, hits)
            severity[index] = worst
            ranked.append((SEVERITY_RANK[worst], -len(hits), index))
        elif partners is None:
            severity[index] = "not joined"
            ranked.append((len(SEVERITY_RANK), 0, index))
    ranked.sort()
    return Gaps(tuple(index for _, _, index in ranked), severity)


def _declared(derived: _Row, verdict: _Row) -> Cell:
    if verdict is None:
        return Cell(GAP, "no verdict row", "gap")
    return declared_cell(
        text(verdict.get("verdict")),
        bool(derived and derived.get("policy_derivation_passed")),
        text(verdict.get("rule_refs")),
        verdict.get("pre_execution") is True,
    )


def _derived(derived: _Row) -> Cell:
    """The derived-verdict cell: the verdict and the rule that gave it."""
    if derived is None:
        return Cell(GAP, "", "gap")
    verdict, note = text(derived.get("derived_verdict")), text(derived.get("derived_rule_ref"))
    if derived.get("fail_closed"):
        note += " · fail-closed"
    return Cell(verdict, note, f"verdict v-{verdict}")


def _effect(derived_verdict: str, effect: _Row) -> Cell:
    """The side-effect cell: whether it ran, its diff count held to the verdict, its diffs."""
    if effect is None:
        return Cell(GAP, "no side-effect receipt", "gap")
    executed = effect.get("execution_attempted") is True
    count = effect.get("side_effect_diff_count")
    diffs = plural(count, "diff") if is_count(count) else "diff count unusable"
    if str(effect.get("filesystem_diff_ref")).startswith(f"diff:{CHANGE_UNKNOWN}/"):
        diffs = f"change unknown, counted as {diffs}"
    diffs = " · ".join([diffs, *_diff_refs(effect)])
    if derived_verdict == "block":
        ok = not executed and count == 0
    elif derived_verdict in ("allow", "review"):
        ok = executed and is_count(count) and count >= 1
    else:
        ok = True
    return Cell("executed" if executed else "not executed", diffs, "" if ok else "gap")


# The diff refs of a side-effect receipt, and how the join table names each.
DIFF_REFS = (
    ("filesystem_diff_ref", "fs"),
    ("network_diff_ref", "net"),
    ("database_diff_ref", "db"),
)
NO_DIFF = "diff:none"


def _diff_refs(effect: Mapping[str, Any]) -> list[str]:
    """Name the diffs a side-effect receipt points to: ``fs diff:...``."""
    refs = ((label, effect.get(field)) for field, label in DIFF_REFS)
    return [
        f"{label} {ref}" for label, ref in refs if isinstance(ref, str) and ref != NO_DIFF and ref
    ]


def _rollback(effect: _Row, rollback: _Row, rid: str) -> Cell:
    if effect is None:
        return Cell(GAP, "no receipt to recover from", "gap")
    if rollback is None:
        verified, rollback_id = False, ""
    else:
        verified = rollback.get("request_id") == rid and rollback.get("rollback_verified") is True
        rollback_id = text(rollback.get("rollback_id"))
    return rollback_cell(
        text(effect.get("rollback_receipt_ref")),
        effect.get("execution_attempted") is True,
        rollback is not None,
        verified,
        rollback_id,
    )


def _replay(ix: RunIndex, replay_row: _Row) -> Cell:
    """The cold-replay cell: whether it claims to reproduce, and whether that was refuted."""
    if replay_row is None:
        return Cell(GAP, "no cold-replay row", "gap")
    claims = (
        replay_row.get("verdict_reproduced") is True
        and replay_row.get("side_effect_state_reproduced") is True
        and replay_row.get("pass_label") is True
    )
    label = "reproduced" if claims else "not reproduced"
    if text(replay_row.get("replay_id")) in ix.flagged_replays:
        return Cell(f"claims {label}", "does not re-derive", "gap")
    return Cell(label, "", "" if claims else "gap")


def _row_at(rows: Sequence[Any], position: int | None) -> Any:
    return None if position is None else rows[position]


# The cells with more to decide, each a function of the few values it shows: most cells
# of a large run repeat one made before (``typed``: ``True`` and ``1`` are not one argument).


@functools.lru_cache(maxsize=4096, typed=True)
def declared_cell(declared: str, agrees: bool, note: str, pre_execution: bool) -> Cell:
    """The declared-verdict cell: the verdict, and whether the derivation agrees."""
    declared = declared or "(none)"
    css = f"verdict v-{declared}" if declared in VERDICTS else "verdict"
    if not agrees:
        css += " gap"
    if not pre_execution:
        note = (note + " · " if note else "") + "not pre-execution"
        css += " gap" if "gap" not in css else ""
    return Cell(declared + ("" if agrees else " ≠"), note, css)


@functools.lru_cache(maxsize=4096, typed=True)
def rollback_cell(
    ref: str, executed: bool, found: bool, verified: bool, rollback_id: str = ""
) -> Cell:
    """The rollback cell: whether a rollback was due, found and verified; its note is the
    receipt's ref, and the rollback row it resolved to where that differs."""
    if not found:
        return Cell(GAP, ref, "gap") if executed else Cell("not required", "", "muted")
    note = ref if rollback_id in ("", ref) else f"{ref} → {rollback_id}"
    return Cell("verified", note) if verified else Cell("not verified", note, "gap")


@functools.lru_cache(maxsize=4096, typed=True)
def trace_cell(outcome: str, flagged: bool) -> Cell:
    """The trace cell: the span's outcome, and whether its audit found something."""
    # Any other outcome is a recorded verdict label, input text: never a class name.
    css = f"outcome o-{outcome if outcome in TRACE_OUTCOMES else 'other'}"
    if flagged:
        return Cell(outcome, "audit finding", f"{css} gap")
    return Cell(outcome, "", css)
