"""What a run reads: the input files of each mode and the joined view of their rows."""

from __future__ import annotations

import threading
from collections.abc import Callable, Container, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar, cast

from sandbox_replay.loader import LoadedFile, LoadLimits, parse_input, read_input, sha256_of
from sandbox_replay.policy import Derivation, Policy


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


class RowRef(NamedTuple):
    """One row of a list file, with where it sits in its file.

    A named tuple, so that ``_row_refs`` can make one per input row in C.
    """

    file: str
    index: int  # type: ignore[assignment]  # shadows tuple.index, which nothing here calls
    line: int | None
    row: Mapping[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        return self.row.get(key, default)


def _index_by(rows: list[RowRef], key: str) -> dict[str, RowRef]:
    """Index rows by a string key; the first row wins, later ones are left to the layers.

    Where every key is a distinct string (as in an exporter's file), the index is built
    in C; otherwise row by row. The loader makes every row a dict.
    """
    values: list[Any] = list(map(dict.get, map(itemgetter(3), rows), repeat(key)))  # RowRef.row
    index: dict[str, RowRef]
    if set(map(type, values)) <= {str}:
        index = dict(zip(values, rows, strict=True))
        if len(index) == len(rows):  # no key repeated: each row is its key's first
            return index
    index = {}
    for value, ref in zip(values, rows, strict=True):
        if isinstance(value, str) and value not in index:
            index[value] = ref
    return index


@dataclass
class RunInputs:
    """Every loaded file of one run and the row indexes the layers join on."""

    root: Path
    mode: InputMode
    policy: Policy
    files: dict[str, LoadedFile]
    extra_files: dict[str, LoadedFile] = field(default_factory=dict)
    requests: list[RowRef] = field(default_factory=list)
    verdicts: list[RowRef] = field(default_factory=list)
    effects: list[RowRef] = field(default_factory=list)
    rollbacks: list[RowRef] = field(default_factory=list)
    replays: list[RowRef] = field(default_factory=list)
    request_by_id: dict[str, RowRef] = field(default_factory=dict)
    verdict_by_request: dict[str, RowRef] = field(default_factory=dict)
    effect_by_request: dict[str, RowRef] = field(default_factory=dict)
    rollback_by_id: dict[str, RowRef] = field(default_factory=dict)
    replay_by_request: dict[str, RowRef] = field(default_factory=dict)
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


def _row_refs(loaded: LoadedFile, positions: list[int]) -> list[RowRef]:
    """Make each row's ref; ``positions`` (0, 1, 2, ... at least one per row) are its indexes.

    The files share one list of position ints: an int past 256 is an object of 28 bytes,
    and five files of 600,000 rows would otherwise make 2.7 million of them.
    """
    lines: list[int | None] = list(loaded.row_lines)
    if len(lines) != len(loaded.rows):
        lines = [loaded.line_of(i) for i in range(len(loaded.rows))]
    fields = zip(repeat(loaded.name), positions, lines, loaded.rows)
    return list(map(tuple.__new__, repeat(RowRef), fields))


def _derive_all(policy: Policy, requests: Mapping[str, RowRef]) -> dict[str, Derivation]:
    """Derive every request (once per distinct shape: ``Policy.derive_each``)."""
    rows = [ref.row for ref in requests.values()]
    return dict(zip(requests, policy.derive_each(rows), strict=True))


BytesHook = Callable[[str, bytes], None]
T = TypeVar("T")


class OnThread(Generic[T]):
    """Call ``work(*args)`` on a thread of its own; ``result`` waits for it.

    ``result`` returns what the call returned or raises what it raised. A plain thread
    rather than a pool: once ``join`` returns, the thread has dropped its arguments
    (``Thread.run`` deletes them), so a caller holding the last other reference to them
    (a file's bytes) frees them when it lets go; a pool's worker may hold its last work
    item a moment past the future's result. And no thread outlives its ``result`` or
    ``join``.
    """

    def __init__(self, name: str, work: Callable[..., T], *args: Any) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(work, *args), name=name, daemon=True
        )
        self._thread.start()

    def _run(self, work: Callable[..., T], *args: Any) -> None:
        try:
            self._value = work(*args)
        except BaseException as error:  # raised in the waiting thread by result()
            self._error = error

    def join(self) -> None:
        """Wait for the call to end, and leave what it returned or raised where it is."""
        self._thread.join()

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return cast(T, self._value)


def _load(
    root: Path, name: str, key: str | None, limits: LoadLimits, on_bytes: BytesHook
) -> LoadedFile:
    """Read one file, then parse its bytes while two threads digest them and scan them.

    The overlap is safe and pays: the digest (``hashlib`` lets go of the GIL for any
    buffer past 2 KiB) and the forbidden-material scan (RE2 searches with the GIL let
    go) run in C on bytes nobody changes, while parsing holds the GIL. Each has a thread
    of its own so that both are in C before the parse takes the GIL for long (msgspec
    holds it a tenth of a second decoding a large file): a thread that ends one C call
    waits for the GIL before it can begin the next. Every file waits for its threads
    before the next is read, so the hook sees the files in the same order as ever, one
    at a time, and no two files' bytes are held at once. An error from the hook is
    raised here, as it was when the hook ran before the parse; it wins over an error
    from the parse, which would not have run.
    """
    raw, loaded = read_input(root, name, limits, digest=False)
    if raw is None:
        return loaded
    digest = OnThread("sandbox-replay-digest", sha256_of, raw)
    scan = OnThread("sandbox-replay-scan", on_bytes, name, raw)
    try:
        parse_input(raw, loaded, key, limits)
    finally:
        try:
            scan.result()
        finally:
            loaded.sha256 = digest.result()
    return loaded


def _load_largest_first(
    root: Path, names: Mapping[str, str | None], limits: LoadLimits, on_bytes: BytesHook
) -> dict[str, LoadedFile]:
    """Load ``names``, the largest file first; return them in the order of ``names``.

    A file's raw bytes live beside the rows of every file parsed before it, so the run's
    peak memory is lowest when the big files are parsed while little else is held (at
    600,000 requests that is ~130 MB less than the format's order). The size is only a
    hint (``lstat``, nothing followed or opened); ``read_input`` still checks every file.
    """

    def size(name: str) -> int:
        try:
            return (root / name).lstat().st_size
        except OSError:
            return 0

    order = sorted(names, key=lambda name: -size(name))  # stable: ties keep their order
    loaded = {name: _load(root, name, names[name], limits, on_bytes) for name in order}
    return {name: loaded[name] for name in names}


def load_run(
    root: Path,
    mode: InputMode,
    policy: Policy,
    limits: LoadLimits,
    extra: Mapping[str, str | None] | None = None,
    on_bytes: BytesHook = lambda name, raw: None,
) -> RunInputs:
    """Load every file of a run and build the join indexes and derivations.

    ``on_bytes`` sees each file's raw bytes once, while they are parsed (the
    forbidden-material scan runs there, so every input byte is read from disk only
    once). It is called on a thread of its own but never for two files at once, in the
    order the files are loaded; nothing else touches what it touches until ``load_run``
    returns. What it raises, ``load_run`` raises.
    """
    names = dict(CORE_FILES)
    if mode is InputMode.BUNDLE:
        names.update(BUNDLE_FILES)
    files = _load_largest_first(root, names, limits, on_bytes)
    extra_files = _load_largest_first(root, extra or {}, limits, on_bytes)
    run = RunInputs(root, mode, policy, files, extra_files)
    lists = (ACTION_REQUESTS, POLICY_VERDICTS, SIDE_EFFECT_RECEIPTS, ROLLBACK_RECEIPTS, COLD_REPLAY)
    positions = list(range(max(len(files[name].rows) for name in lists)))
    run.requests = _row_refs(files[ACTION_REQUESTS], positions)
    run.verdicts = _row_refs(files[POLICY_VERDICTS], positions)
    run.effects = _row_refs(files[SIDE_EFFECT_RECEIPTS], positions)
    run.rollbacks = _row_refs(files[ROLLBACK_RECEIPTS], positions)
    run.replays = _row_refs(files[COLD_REPLAY], positions)
    run.request_by_id = _index_by(run.requests, "request_id")
    run.verdict_by_request = _index_by(run.verdicts, "request_id")
    run.effect_by_request = _index_by(run.effects, "request_id")
    run.rollback_by_id = _index_by(run.rollbacks, "rollback_id")
    run.replay_by_request = _index_by(run.replays, "request_id")
    run.derivations = _derive_all(policy, run.request_by_id)
    return run
