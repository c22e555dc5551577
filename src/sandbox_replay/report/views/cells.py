"""The join table's cells, each a function of the few values it shows."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from sandbox_replay.model import codes
from sandbox_replay.model.codes import REGISTRY, Layer
from sandbox_replay.model.policy import VERDICTS
from sandbox_replay.report.views.common import GAP, TRACE_OUTCOMES, Cell, is_count, plural


def expected_alarm(code: str) -> bool:
    """Say whether a finding of ``code`` is a planted negative case's alarm, as expected."""
    return REGISTRY[code].layer is Layer.NEGATIVE_CASES and code != codes.NEGATIVE_CASE_MISSING


# The join table's cells, each a function of the few values it shows. Most cells of a large
# run repeat one made before, so the cells of text and flags are kept (``typed``: ``True``
# and ``1`` are not one argument).


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
def derived_cell(verdict: str, rule_ref: str, fail_closed: bool) -> Cell:
    """The derived-verdict cell: the verdict and the rule that gave it."""
    note = rule_ref + " · fail-closed" if fail_closed else rule_ref
    return Cell(verdict, note, f"verdict v-{verdict}")


def effect_cell(derived_verdict: Any, executed: bool, count: Any, refs: str = "") -> Cell:
    """The side-effect cell: whether it ran and its diff count, held to the verdict.

    ``refs`` names the diffs the receipt points to (``diff_refs``), shown after the count.
    """
    diffs = plural(count, "diff") if is_count(count) else "diff count unusable"
    if refs:
        diffs += " · " + refs
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


def diff_refs(effect: Mapping[str, Any]) -> str:
    """Return the diffs a side-effect receipt points to, as ``fs diff:...`` ("" for none)."""
    named = []
    for field, label in DIFF_REFS:
        ref = effect.get(field)
        if isinstance(ref, str) and ref and ref != NO_DIFF:
            named.append(f"{label} {ref}")
    return " · ".join(named)


@functools.lru_cache(maxsize=4096, typed=True)
def rollback_cell(
    ref: str, executed: bool, found: bool, verified: bool, rollback_id: str = ""
) -> Cell:
    """The rollback cell: whether a rollback was due, found, and verified for this request.

    Its note is the receipt's ref, and the id of the rollback row it resolved to where
    that differs.
    """
    if not found:
        return Cell(GAP, ref, "gap") if executed else Cell("not required", "", "muted")
    note = ref if rollback_id in ("", ref) else f"{ref} → {rollback_id}"
    return Cell("verified", note) if verified else Cell("not verified", note, "gap")


@functools.lru_cache(maxsize=4096, typed=True)
def replay_cell(flagged: bool, claims: bool) -> Cell:
    """The cold-replay cell: whether it claims to reproduce, and whether that was refuted."""
    label = "reproduced" if claims else "not reproduced"
    if flagged:
        return Cell(f"claims {label}", "does not re-derive", "gap")
    return Cell(label, "", "" if claims else "gap")


@functools.lru_cache(maxsize=4096, typed=True)
def trace_cell(outcome: str, flagged: bool) -> Cell:
    """The trace cell: the span's outcome, and whether its audit found something."""
    # Any other outcome is a recorded verdict label, input text: never a class name.
    css = f"outcome o-{outcome if outcome in TRACE_OUTCOMES else 'other'}"
    if flagged:
        return Cell(outcome, "audit finding", f"{css} gap")
    return Cell(outcome, "", css)
