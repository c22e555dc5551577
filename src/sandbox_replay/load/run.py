"""What a run reads: the input files of each mode and the joined view of their rows."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from itertools import repeat
from operator import attrgetter, eq
from pathlib import Path
from typing import Any, TypeVar

from sandbox_replay.load.decode import (
    LoadedFile,
    note_forbidden_keys,
    parse_input,
    read_input,
    type_rows,
)
from sandbox_replay.load.files import LoadLimits
from sandbox_replay.model.policy import Derivation, Policy
from sandbox_replay.model.rows import (
    UNSET,
    ActionRequest,
    ColdReplay,
    InputRow,
    PolicyVerdict,
    Rollback,
    SideEffect,
    Table,
    first_of_each,
)


class InputMode(StrEnum):
    """Which folder shape a run reads."""

    FIXTURE = "fixture"
    BUNDLE = "exported_sandbox_policy_escape_bundle"


PROJECTION_PROTOCOL = "projection_protocol.json"
SANDBOX_POLICY = "sandbox_policy.json"
ACTION_REQUESTS = "action_requests.json"
POLICY_VERDICTS = "policy_verdicts.json"
SIDE_EFFECT_RECEIPTS = "side_effect_receipts.json"
ROLLBACK_RECEIPTS = "rollback_receipts.json"
COLD_REPLAY = "cold_replay.json"
BUNDLE_MANIFEST = "bundle_manifest.json"
SOURCE_MODULE_MANIFEST = "source_module_manifest.json"
SOURCE_MODULES_DIR = "source_modules"

# The seven core files, with the key of the row list for list files (None: the object itself).
CORE_FILES: dict[str, str | None] = {
    PROJECTION_PROTOCOL: None,
    SANDBOX_POLICY: None,
    ACTION_REQUESTS: "action_requests",
    POLICY_VERDICTS: "policy_verdicts",
    SIDE_EFFECT_RECEIPTS: "side_effect_receipts",
    ROLLBACK_RECEIPTS: "rollback_receipts",
    COLD_REPLAY: "cold_replay",
}
BUNDLE_FILES: dict[str, str | None] = {BUNDLE_MANIFEST: None, SOURCE_MODULE_MANIFEST: None}
# The row kind of each list file.
ROW_KINDS: dict[str, type[InputRow]] = {
    ACTION_REQUESTS: ActionRequest,
    POLICY_VERDICTS: PolicyVerdict,
    SIDE_EFFECT_RECEIPTS: SideEffect,
    ROLLBACK_RECEIPTS: Rollback,
    COLD_REPLAY: ColdReplay,
}

# The original implementation names a rollback as ``rollback/<rollback_id>`` (FORMAT 7.1).
ROLLBACK_REF_PREFIX = "rollback/"


def rollback_id_of(ref: Any, rollback_ids: Container[str]) -> Any:
    """Return the rollback id a side effect's ``rollback_receipt_ref`` names.

    A ref names a rollback by its bare ``rollback_id`` or by ``rollback/`` followed by
    it, nothing else (FORMAT 7.1); where the ref is itself an id in ``rollback_ids`` the
    bare reading wins. Any other value is returned as it is, to find nothing.
    """
    if type(ref) is str and ref.startswith(ROLLBACK_REF_PREFIX) and ref not in rollback_ids:
        return ref[len(ROLLBACK_REF_PREFIX) :]
    return ref


@dataclass(frozen=True)
class Joined:
    """Each declared request's row in the other list files, in request order.

    Position ``i`` of each list is about request ``ids[i]``, the ``i``-th key of
    ``RunInputs.derivations``: its request row, and the first verdict row, receipt and
    cold-replay row naming it (None where none does). Each ``*_at`` list gives where
    that row stands in its file's rows, which is also where the result record lists it:
    the pages join the record's rows by these positions.
    """

    ids: list[str]
    requests: Sequence[ActionRequest]
    verdicts: Sequence[PolicyVerdict | None]
    effects: Sequence[SideEffect | None]
    replays: Sequence[ColdReplay | None]
    request_at: Sequence[int]  # ascending: the first row of each id, in file order
    verdict_at: Sequence[int | None]
    effect_at: Sequence[int | None]
    replay_at: Sequence[int | None]

    def takes_whole(self, table: Table[Any]) -> bool:
        """Say whether the join takes every row of ``table`` as its request's own: the
        file names each declared request once, in request order, and nothing else."""
        return any(
            rows is table.rows
            for rows in (self.requests, self.verdicts, self.effects, self.replays)
        )


def joined_rows(table: Table[R], ids: list[str]) -> tuple[Sequence[R | None], Sequence[int | None]]:
    """Return the first row of ``table`` naming each of ``ids`` (None where none does), and
    where each stands in the table's rows.

    A file that lists exactly these ids in this order, as exporters write them, is its
    own answer (its row list, not a copy, and its positions in order); any other file is
    looked up id by id.
    """
    rows = table.rows
    if len(rows) == len(ids) and all(map(eq, ids, map(attrgetter(table.key), rows))):
        return rows, range(len(rows))
    at = list(map(first_positions(table).get, ids))
    return [None if position is None else rows[position] for position in at], at


def first_positions(table: Table[Any]) -> dict[str, int]:
    """Return where the first row of each string key of ``table`` stands in its rows."""
    return first_of_each(list(map(attrgetter(table.key), table.rows)), range(len(table)))


@dataclass
class RunInputs:
    """Every loaded file of one run and the row indexes the layers join on."""

    root: Path
    mode: InputMode
    policy: Policy
    files: dict[str, LoadedFile]
    extra_files: dict[str, LoadedFile] = field(default_factory=dict)
    # The rows of each list file; each table indexes its rows by request id (rollbacks by
    # rollback id).
    requests: Table[ActionRequest] = field(default_factory=lambda: Table(ACTION_REQUESTS))
    verdicts: Table[PolicyVerdict] = field(default_factory=lambda: Table(POLICY_VERDICTS))
    effects: Table[SideEffect] = field(default_factory=lambda: Table(SIDE_EFFECT_RECEIPTS))
    rollbacks: Table[Rollback] = field(
        default_factory=lambda: Table(ROLLBACK_RECEIPTS, key="rollback_id")
    )
    replays: Table[ColdReplay] = field(default_factory=lambda: Table(COLD_REPLAY))
    # Each request's derivation, by request id, in the order the requests first appear.
    derivations: dict[str, Derivation] = field(default_factory=dict)
    # What the layers computed once and share (joins, judged receipts): ``layers.base.shared``.
    shared: dict[Callable[..., Any], Any] = field(default_factory=dict, repr=False, compare=False)

    def object(self, name: str) -> Mapping[str, Any] | None:
        """Return a loaded object file's top-level object, or None if it did not load."""
        loaded = self.files.get(name) or self.extra_files.get(name)
        return loaded.data if loaded is not None else None

    def key_line(self, name: str, *keys: str) -> int:
        """Return the line of the first of ``keys`` in object file ``name`` (1 if none)."""
        loaded = self.files.get(name) or self.extra_files.get(name)
        return loaded.key_line(*keys) if loaded is not None else 1

    def all_files(self) -> Iterator[LoadedFile]:
        yield from self.files.values()
        yield from self.extra_files.values()

    @cached_property
    def joined(self) -> Joined:
        """Each declared request's rows in the other list files (made on first use, once
        the tables and derivations are in place)."""
        ids = list(self.derivations)
        requests = self.requests
        first_requests: Sequence[ActionRequest] = requests.rows
        request_at: Sequence[int] = range(len(requests))
        if len(requests.by_key) < len(requests):  # else the first rows are all the rows
            first_requests = [*requests.by_key.values()]
            request_at = list(first_positions(requests).values())
        verdicts, verdict_at = joined_rows(self.verdicts, ids)
        effects, effect_at = joined_rows(self.effects, ids)
        replays, replay_at = joined_rows(self.replays, ids)
        return Joined(
            ids,
            first_requests,
            verdicts,
            effects,
            replays,
            request_at,
            verdict_at,
            effect_at,
            replay_at,
        )


def _table(loaded: LoadedFile, key: str) -> Table[Any]:
    """Index a loaded list file's typed rows on ``key``; the file lets go of them, and of
    their lines, which each row holds."""
    rows, loaded.rows, loaded.row_lines = loaded.rows, [], []
    if loaded.data is not None:
        loaded.data = {name: value for name, value in loaded.data.items() if value is not rows}
    return Table.of(loaded.name, rows, key, loaded.row_shape)


def _derive_all(policy: Policy, requests: Table[ActionRequest]) -> dict[str, Derivation]:
    """Derive every request (once per distinct shape: ``Policy.derive_each``)."""
    rows = list(requests.by_key.values())
    return dict(zip(requests.by_key, policy.derive_each(rows), strict=True))


BytesHook = Callable[[str, bytes], None]
DecodedHook = Callable[[str, Any], None]
R = TypeVar("R", bound=InputRow)


def _load(
    root: Path,
    name: str,
    key: str | None,
    limits: LoadLimits,
    on_bytes: BytesHook,
    on_decoded: DecodedHook,
    pool: dict[Any, Any],
) -> LoadedFile:
    """Read one file, hand its bytes to ``on_bytes``, parse them, then hand the parsed value
    to ``on_decoded``.

    A list file's rows end typed (``ROW_KINDS``), decoded so where the file allows, else
    typed once its forbidden keys are noted; no dict per row outlives the file's load.
    """
    raw, loaded = read_input(root, name, limits)
    if raw is None:
        return loaded
    on_bytes(name, raw)
    kind = ROW_KINDS.get(name)
    parse_input(raw, loaded, key, limits, kind)
    if loaded.data is not None:
        on_decoded(name, loaded.data)
        note_forbidden_keys(loaded)
        if kind is not None:
            type_rows(loaded, kind)
            share_strings(loaded.rows, kind.SHARED, pool)
    return loaded


# The types of the values one string may stand for: a string, or no value at all.
_SHAREABLE = frozenset({str, type(UNSET), type(None)})


def share_strings(rows: Sequence[InputRow], fields: tuple[str, ...], pool: dict[Any, Any]) -> None:
    """Make the rows' equal strings under ``fields`` one string object each: the one
    ``pool`` holds, or else the first one seen, which ``pool`` then keeps.

    A decoder makes a new string for every value it reads, so a risk class or a verdict
    would be held once per row. Ids, each held by one row of a file, are left alone. A
    field holding anything but strings (and no value) is left as it is: sharing goes by
    equality, and ``True == 1``.
    """
    for name in fields:
        column = list(map(attrgetter(name), rows))
        if set(map(type, column)) <= _SHAREABLE:
            list(map(setattr, rows, repeat(name), map(pool.setdefault, column, column)))


def _load_largest_first(
    root: Path,
    names: Mapping[str, str | None],
    limits: LoadLimits,
    on_bytes: BytesHook,
    on_decoded: DecodedHook,
) -> dict[str, LoadedFile]:
    """Load ``names``, the largest file first; return them in the order of ``names``.

    A file's raw bytes live beside the rows of every file parsed before it, so the run's
    peak memory is lowest when the big files are parsed while little else is held. The
    size is only a hint (``lstat``, nothing followed or opened); ``read_input`` still
    checks every file.
    """

    def size(name: str) -> int:
        try:
            return (root / name).lstat().st_size
        except OSError:
            return 0

    order = sorted(names, key=lambda name: -size(name))  # stable: ties keep their order
    pool: dict[Any, Any] = {}  # the strings shared so far (``share_strings``)
    loaded = {
        name: _load(root, name, names[name], limits, on_bytes, on_decoded, pool) for name in order
    }
    return {name: loaded[name] for name in names}


def load_run(
    root: Path,
    mode: InputMode,
    policy: Policy,
    limits: LoadLimits,
    extra: Mapping[str, str | None] | None = None,
    on_bytes: BytesHook = lambda name, raw: None,
    on_decoded: DecodedHook = lambda name, data: None,
) -> RunInputs:
    """Load every file of a run and build the join indexes and derivations.

    ``on_bytes`` sees each file's raw bytes once, before they are parsed (the
    forbidden-material scan, so every input byte is read from disk only once), in the
    order the files are loaded. ``on_decoded`` sees each file's decoded top-level object
    once, before its rows are typed. What either raises, ``load_run`` raises.
    """
    names = dict(CORE_FILES)
    if mode is InputMode.BUNDLE:
        names.update(BUNDLE_FILES)
    files = _load_largest_first(root, names, limits, on_bytes, on_decoded)
    extra_files = _load_largest_first(root, extra or {}, limits, on_bytes, on_decoded)
    run = RunInputs(root, mode, policy, files, extra_files)
    run.requests = _table(files[ACTION_REQUESTS], "request_id")
    run.verdicts = _table(files[POLICY_VERDICTS], "request_id")
    run.effects = _table(files[SIDE_EFFECT_RECEIPTS], "request_id")
    run.rollbacks = _table(files[ROLLBACK_RECEIPTS], "rollback_id")
    run.replays = _table(files[COLD_REPLAY], "request_id")
    run.derivations = _derive_all(policy, run.requests)
    return run
