"""How an input file's rows stand in the result record: known fields, scalar values.

A value is kept as it is, but for a string longer than ``MAX_TEXT`` (cut, and marked so)
and a value that is neither a scalar nor a short list of strings (named by its type).
Nearly every file's values stand as they are, so a row list is the loaded rows
themselves wherever none changes, not a copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain
from operator import attrgetter
from typing import Any, TypeVar

import msgspec

from sandbox_replay.checks.verdicts import derivation_passes
from sandbox_replay.load.run import RunInputs
from sandbox_replay.model.census import ValueShape, census
from sandbox_replay.model.rows import UNSET, InputRow, Table

MAX_TEXT = 512
MAX_LIST = 64  # the most strings a row's list may hold to be recorded as a list


def _scalar(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + "...[truncated]"
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, list) and len(value) <= MAX_LIST and all(type(v) is str for v in value):
        return [_scalar(v) for v in value]
    return f"<{type(value).__name__}>"


_KEPT_AS_IS = frozenset({bool, int, float, type(None)})
_STR_ONLY = frozenset({str})
# Rows looked at together when telling whether their values stand in the record as they are.
_ROWS_PER_STEP = 4096
R = TypeVar("R", bound=InputRow)
S = TypeVar("S", bound=msgspec.Struct)


def _kept_as_is(shape: ValueShape, absent: frozenset[type]) -> bool:
    """Say whether ``_scalar`` returns every value of that ``shape`` unchanged (or an equal
    copy); a value of a type in ``absent`` is one the record leaves out."""
    return (
        shape.kinds <= _KEPT_AS_IS | absent | {str, list}
        and shape.longest <= MAX_TEXT
        and shape.widest <= MAX_LIST
        and shape.item_kinds <= _STR_ONLY
        and shape.longest_item <= MAX_TEXT
    )


def _as_recorded(
    rows: list[S],
    project: Callable[[S], S],
    projected: Callable[[S], tuple[Any, ...]],
    absent: frozenset[type],
    shape: ValueShape | None = None,
) -> list[S]:
    """Return ``rows`` as the record lists them: ``project`` of each, or the row itself
    wherever the values ``projected`` reads would not change; ``rows`` itself where none
    would. The loader's ``shape`` of the values, where given, saves walking them again.
    """
    if shape is not None and _kept_as_is(shape, absent):
        return rows
    recorded: list[S] | None = None  # a list of its own from the first step that changes
    for start in range(0, len(rows), _ROWS_PER_STEP):
        step = rows[start : start + _ROWS_PER_STEP]
        values = list(chain.from_iterable(map(projected, step)))
        if not _kept_as_is(census(values).shape, absent):
            if recorded is None:
                recorded = rows[:start]
            recorded += map(project, step)
        elif recorded is not None:
            recorded += step
    return rows if recorded is None else recorded


def _projected(row: R) -> R:
    """Return the row with each value it holds as ``_scalar`` has it."""
    changes = {}
    for name in row.__struct_fields__:
        value = getattr(row, name)
        if name != "line" and value is not UNSET:
            changes[name] = _scalar(value)
    return msgspec.structs.replace(row, **changes)


def record_rows(table: Table[R]) -> list[R]:
    """Return a list file's rows as the result record lists them (``_projected``); a field
    the row does not hold is left out."""
    return _as_recorded(
        table.rows, _projected, msgspec.structs.astuple, frozenset({type(UNSET)}), table.shape
    )


class DerivedRow(msgspec.Struct, gc=False):
    """One derived request: its shape, its derivation and the verdict declared for it."""

    request_id: str
    action_kind: Any
    requested_capability: Any
    risk_class: Any
    derived_verdict: str
    derived_rule_ref: str
    fail_closed: bool
    mismatched_fields: list[str]
    declared_verdict: Any
    declared_rule_refs: Any
    policy_derivation_passed: bool

    def get(self, name: str) -> Any:
        return getattr(self, name, None)


# The fields of a derived row copied from the request and verdict rows.
_COPIED = (
    "action_kind",
    "requested_capability",
    "risk_class",
    "declared_verdict",
    "declared_rule_refs",
)

_copied = attrgetter(*_COPIED)


def _shown(row: DerivedRow) -> DerivedRow:
    """Return the row with each value copied from an input as ``_scalar`` has it, None
    where the input row does not hold it."""
    changes = {}
    for name in _COPIED:
        value = getattr(row, name)
        changes[name] = None if value is UNSET else _scalar(value)
    return msgspec.structs.replace(row, **changes)


def column_of(rows: Sequence[Any], name: str) -> list[Any]:
    """Return ``[row.get(name) for row in rows]`` of a record's row list.

    A record built in this process holds typed rows, one read from a file holds dicts.
    Typed rows that all declare the field are read by ``attrgetter``; ``UNSET`` as None.
    """
    if all(name in getattr(kind, "__struct_fields__", ()) for kind in set(map(type, rows))):
        column = list(map(attrgetter(name), rows))
        return (
            [None if value is UNSET else value for value in column] if UNSET in column else column
        )
    return [row.get(name) for row in rows]


def derived_rows(run: RunInputs) -> list[DerivedRow]:
    """Return one row per derived request, in request order, as the record lists them."""
    rows = []
    joined = run.joined
    # Requests of one shape share a derivation; their rows share one list of its fields.
    shapes = {derivation.mismatched_fields for derivation in run.derivations.values()}
    mismatched = {fields: list(fields) for fields in shapes}
    for request_id, derivation, request, verdict in zip(
        joined.ids, run.derivations.values(), joined.requests, joined.verdicts, strict=True
    ):
        rows.append(
            DerivedRow(
                request_id,
                request.action_kind,
                request.requested_capability,
                request.risk_class,
                derivation.verdict,
                derivation.rule_ref,
                derivation.fail_closed,
                mismatched[derivation.mismatched_fields],
                verdict.verdict if verdict is not None else None,
                verdict.rule_refs if verdict is not None else None,
                derivation_passes(derivation, verdict),
            )
        )
    return _as_recorded(rows, _shown, _copied, frozenset())
