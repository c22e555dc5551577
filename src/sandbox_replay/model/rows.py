"""The rows of the five list files, typed: one ``msgspec.Struct`` per row kind, and a table.

Each kind declares the format's fields in the result record's order, then ``line`` (where
its object opens). Fields are typed ``Any``: a value of the wrong type is kept for a layer
to report, never a decode error; a field the row does not hold reads ``UNSET``. Rows hold
no cycles, hence ``gc=False``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import msgspec
from msgspec import UNSET as UNSET

from sandbox_replay.model.census import ValueShape


class InputRow(msgspec.Struct, gc=False, kw_only=True, forbid_unknown_fields=True):
    """A row of a list file: its fields (declared by each kind) and the line it opens on."""

    # The fields the format requires of every row of this kind, and its exact flags.
    REQUIRED: ClassVar[tuple[str, ...]] = ()
    FLAGS: ClassVar[Mapping[str, bool]] = {}
    # The required fields that must hold text (all of them, unless a kind says otherwise).
    TEXT: ClassVar[tuple[str, ...]] = ()
    # The fields that, in a row meeting its floor, hold text that is not blank.
    PLAIN: ClassVar[tuple[str, ...]] = ()
    # The fields that hold one of a few values, row after row (categories, not ids): the
    # loader makes equal strings there one object (``load.run.share_strings``).
    SHARED: ClassVar[tuple[str, ...]] = ()
    if TYPE_CHECKING:  # each kind declares it last, so that it is written last
        line: Any

    def get(self, name: str) -> Any:
        """Return field ``name``'s value, None where the row does not hold it."""
        value = getattr(self, name, None)
        return None if value is UNSET else value


class ActionRequest(InputRow, gc=False, kw_only=True):
    """One action the agent asked for: its shape, which the policy decides on."""

    REQUIRED = (
        "request_id",
        "episode_id",
        "action_kind",
        "normalized_action_ref",
        "source_trust_label",
        "untrusted_tool_output_ref",
        "requested_capability",
        "risk_class",
        "intended_side_effect_ref",
        "body_redacted",
    )
    FLAGS = {
        "body_redacted": True,
        "secret_like_data_synthetic": True,
        "raw_payload_exported": False,
        "live_network_target": False,
    }
    PLAIN = REQUIRED[:-1]  # all but body_redacted, a flag
    SHARED = (
        "episode_id",
        "action_kind",
        "source_trust_label",
        "requested_capability",
        "risk_class",
    )

    request_id: Any = UNSET
    episode_id: Any = UNSET
    action_kind: Any = UNSET
    normalized_action_ref: Any = UNSET
    source_trust_label: Any = UNSET
    untrusted_tool_output_ref: Any = UNSET
    requested_capability: Any = UNSET
    risk_class: Any = UNSET
    intended_side_effect_ref: Any = UNSET
    body_redacted: Any = UNSET
    secret_like_data_synthetic: Any = UNSET
    raw_payload_exported: Any = UNSET
    live_network_target: Any = UNSET
    line: Any = None


class PolicyVerdict(InputRow, gc=False, kw_only=True):
    """The verdict the sandbox says its policy gave one request, and the rules it cites."""

    REQUIRED = (
        "request_id",
        "policy_version",
        "verdict",
        "rule_refs",
        "pre_execution",
        "decision_reason_ref",
        "body_redacted",
    )
    # The required fields that hold refs or ids, and so must be strings.
    TEXT = ("request_id", "policy_version", "decision_reason_ref")
    FLAGS = {"pre_execution": True, "body_redacted": True}
    PLAIN = (*TEXT, "verdict")
    SHARED = ("policy_version", "verdict")

    request_id: Any = UNSET
    policy_version: Any = UNSET
    verdict: Any = UNSET
    rule_refs: Any = UNSET
    pre_execution: Any = UNSET
    decision_reason_ref: Any = UNSET
    body_redacted: Any = UNSET
    approval_ref: Any = UNSET
    line: Any = None


class SideEffect(InputRow, gc=False, kw_only=True):
    """What one request did: whether it ran, how many diffs it left, its rollback ref."""

    REQUIRED = (
        "request_id",
        "execution_attempted",
        "filesystem_diff_ref",
        "network_diff_ref",
        "database_diff_ref",
        "side_effect_diff_count",
        "rollback_receipt_ref",
        "body_redacted",
    )
    TEXT = (
        "request_id",
        "filesystem_diff_ref",
        "network_diff_ref",
        "database_diff_ref",
        "rollback_receipt_ref",
    )
    FLAGS = {"body_redacted": True}
    PLAIN = TEXT
    SHARED = ("network_diff_ref",)

    request_id: Any = UNSET
    execution_attempted: Any = UNSET
    filesystem_diff_ref: Any = UNSET
    network_diff_ref: Any = UNSET
    database_diff_ref: Any = UNSET
    side_effect_diff_count: Any = UNSET
    rollback_receipt_ref: Any = UNSET
    body_redacted: Any = UNSET
    line: Any = None


class Rollback(InputRow, gc=False, kw_only=True):
    """A rollback the sandbox says it ran and verified for one request."""

    REQUIRED = ("rollback_id", "request_id", "rollback_command_ref")
    FLAGS = {"rollback_required": True, "rollback_verified": True, "body_redacted": True}
    PLAIN = REQUIRED

    rollback_id: Any = UNSET
    request_id: Any = UNSET
    rollback_command_ref: Any = UNSET
    rollback_required: Any = UNSET
    rollback_verified: Any = UNSET
    body_redacted: Any = UNSET
    line: Any = None


class ColdReplay(InputRow, gc=False, kw_only=True):
    """A later replay of one request, and what it claims to have reproduced."""

    REQUIRED = ("replay_id", "request_id", "replay_command", "receipt_ref")
    FLAGS = {
        "verdict_reproduced": True,
        "side_effect_state_reproduced": True,
        "pass_label": True,
        "body_redacted": True,
    }
    PLAIN = REQUIRED

    replay_id: Any = UNSET
    request_id: Any = UNSET
    replay_command: Any = UNSET
    receipt_ref: Any = UNSET
    verdict_reproduced: Any = UNSET
    side_effect_state_reproduced: Any = UNSET
    pass_label: Any = UNSET
    body_redacted: Any = UNSET
    line: Any = None


R = TypeVar("R", bound=InputRow)
T = TypeVar("T")
# The five row kinds, in the order of their list files.
KINDS: tuple[type[InputRow], ...] = (ActionRequest, PolicyVerdict, SideEffect, Rollback, ColdReplay)


def _all_text(column: Iterable[Any]) -> bool:
    """Say whether every value is a string that is not blank."""
    try:
        return all(map(str.strip, column))
    except TypeError:
        return False


def rows_below_floor(rows: Sequence[InputRow]) -> set[int]:
    """Return the positions of the rows with a ``PLAIN`` field not a non-blank string, or a
    flag not exactly as ``FLAGS`` requires.

    A column is walked value by value only where the whole-column test fails.
    """
    if not rows:
        return set()
    kind = type(rows[0])
    below: set[int] = set()
    for name in kind.PLAIN:
        read = attrgetter(name)
        if not _all_text(map(read, rows)):
            below.update(
                i for i, v in enumerate(map(read, rows)) if type(v) is not str or not v.strip()
            )
    for name, wanted in kind.FLAGS.items():
        read = attrgetter(name)
        if not all(map(is_, map(read, rows), repeat(wanted))):  # ``is``: True is not 1
            below.update(i for i, value in enumerate(map(read, rows)) if value is not wanted)
    return below


@dataclass
class Table(Generic[R]):
    """The rows of one list file, in file order, and the first row of each string key.

    A repeated key indexes its first row only (the layers report the repeats); a key
    that is not a string indexes nothing. The index is made when first asked for.
    """

    file: str
    rows: list[R] = field(default_factory=list)
    key: str = "request_id"  # the field ``by_key`` indexes
    # What the rows' values hold, where the loader measured it (``model.census``).
    shape: ValueShape | None = None

    @classmethod
    def of(cls, file: str, rows: list[R], key: str, shape: ValueShape | None = None) -> Table[R]:
        return cls(file, rows, key, shape)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[R]:
        return iter(self.rows)

    @cached_property
    def by_key(self) -> dict[str, R]:
        return first_of_each(list(map(attrgetter(self.key), self.rows)), self.rows)

    @cached_property
    def get(self) -> Callable[[str], R | None]:
        """``get(key)``: the first row of a string key, None where none; read in C."""
        return self.by_key.get


def first_of_each(keys: list[Any], rows: Sequence[T]) -> dict[str, T]:
    """Return, for each string of ``keys`` (the rows' keys), its first row, in key order.

    Where a key repeats, the pairs again in reverse order leave each key its first row.
    """
    text = list(map(is_, map(type, keys), repeat(str)))
    if not all(text):
        keys, rows = list(compress(keys, text)), list(compress(rows, text))
    first = dict(zip(keys, rows, strict=True))
    if len(first) < len(keys):
        first.update(zip(reversed(keys), reversed(rows), strict=True))
    return first


def absent(value: Any) -> bool:
    """Say whether a field read off a row is one the row does not hold."""
    return value is UNSET


def value_of(value: Any) -> Any:
    """Return a field's value as JSON has it: None where the row does not hold it."""
    return None if value is UNSET else value
