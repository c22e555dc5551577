"""What every layer returns, and the floor checks the layers share."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, count, repeat
from operator import attrgetter, is_, is_not, itemgetter, not_
from typing import Any, TypeVar

from sandbox_replay.codes import Layer
from sandbox_replay.findings import Finding
from sandbox_replay.inputs import RowRef, RunInputs

T = TypeVar("T")


@dataclass
class LayerResult:
    """One layer's verdict on the run: its findings and the counts it reports."""

    layer: Layer
    findings: list[Finding] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    ran: bool = True

    @property
    def status(self) -> str:
        if not self.ran:
            return "not_run"
        return "pass" if not self.findings else "blocked"

    def add(
        self,
        code: str,
        message: str,
        floor: str,
        subject_id: str,
        subject_kind: str,
        path: str | None = None,
        line: int | None = None,
    ) -> None:
        self.findings.append(Finding(code, message, floor, subject_id, subject_kind, path, line))

    def add_for_row(
        self, code: str, message: str, floor: str, ref: RowRef, id_key: str, kind: str
    ) -> None:
        self.add(code, message, floor, subject_of(ref, id_key), kind, ref.file, ref.line)


def subject_of(ref: RowRef, id_key: str) -> str:
    """Return the row's id, or a positional stand-in when the id is unusable."""
    value = ref.get(id_key)
    return value if isinstance(value, str) and value else f"{ref.file}#row{ref.index}"


def is_nonempty(value: Any) -> bool:
    """Say whether a required value is present: not null, not blank, not an empty list."""
    if value is None:
        return False
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, list | dict):
        return bool(value)
    return True


def missing_fields(row: Mapping[str, Any], required: Iterable[str]) -> list[str]:
    """Return the required fields that are absent or empty, in the order given."""
    # ``is_nonempty`` inlined: this runs for every required field of every input row.
    missing = []
    for name in required:
        value = row.get(name)
        if isinstance(value, str):
            if value and not value.isspace():
                continue
        elif value is not None and (value or not isinstance(value, list | dict)):
            continue
        missing.append(name)
    return missing


def not_text(row: Mapping[str, Any], fields: Iterable[str], missing: Collection[str]) -> list[str]:
    """Return the fields that are present and non-empty but not strings (refs are text)."""
    # The type test first: it settles the common case without looking at ``missing``.
    return [name for name in fields if not isinstance(row.get(name), str) and name not in missing]


def wrong_flags(row: Mapping[str, Any], expected: Mapping[str, bool]) -> list[str]:
    """Return the flags whose value is not exactly the expected boolean (a missing flag is wrong)."""
    return [name for name, want in expected.items() if row.get(name) is not want]


def describe(fields: Iterable[str]) -> str:
    return ", ".join(fields)


class _Absent(dict[str, Any]):
    """An empty row whose every field reads as None, with ``[]`` as with ``get``."""

    def __missing__(self, key: str) -> None:
        return None


# The stand-in for a join that finds no row: every field of it reads as absent.
NO_ROW = RowRef("", -1, None, _Absent())


def row_dicts(refs: Iterable[RowRef]) -> list[dict[str, Any]]:
    """Return the rows themselves (the loader makes every row a dict)."""
    return list(map(itemgetter(3), refs))


def column(rows: Sequence[Mapping[str, Any]], name: str) -> list[Any]:
    """Return each row's value of ``name`` (None where absent), in one C-level pass."""
    return list(map(dict.get, rows, repeat(_own_keys(rows, [name])[0])))  # type: ignore[arg-type]


def _own_keys(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[str]:
    """Return ``names`` as the very key objects the rows hold, where they hold them.

    The JSON decoder makes one object per distinct key of a file, so a lookup with
    that object matches on identity at once instead of comparing the text: the same
    answer, about a third faster on a large file.
    """
    row = next(filter(None, rows), {})
    own = {key: key for key in row}
    return [own.get(name, name) for name in names]


def positions(flags: Iterable[object]) -> Iterator[int]:
    """Yield the positions whose flag is true."""
    return compress(count(), flags)


def joined(index: Mapping[str, RowRef], keys: Iterable[Any]) -> list[RowRef]:
    """Return the row each key finds in ``index``, ``NO_ROW`` where none.

    Exporters write every file in request order, so the index's keys are often ``keys``
    themselves, in order; then its rows are the answer as they stand, without a hash
    lookup per key. Where they are but for a few rows missing or added, the keys are
    walked in step with the index (``_in_step``). A key that cannot be hashed raises
    TypeError, as ``dict.get`` does.
    """
    keys = list(keys)
    index_keys = list(index)
    if index_keys == keys:
        return list(index.values())
    return _in_step(index, keys, index_keys)


def _in_step(index: Mapping[str, RowRef], keys: list[Any], index_keys: list[str]) -> list[RowRef]:
    """Return ``[index.get(key, NO_ROW) for key in keys]``, comparing where it can.

    Each key is compared with the index's next key (a string comparison, where a hash
    lookup in an index of 600,000 keys misses the CPU's caches once or twice); a key that
    is not the next one is looked up, and a row found that way moves the walk past it.
    The walk only moves forward, so however the two orders differ, it costs at most one
    pass over the index besides the lookups.
    """
    rows = list(index.values())
    found: list[RowRef] = []
    add = found.append
    get = index.get
    at, end = 0, len(index_keys)
    for key in keys:
        if at < end and index_keys[at] == key:
            add(rows[at])
            at += 1
            continue
        row = get(key, NO_ROW)
        add(row)
        if row is not NO_ROW:
            while at < end and rows[at] is not row:
                at += 1
            at += 1
    return found


@dataclass(frozen=True)
class Join:
    """The row of another file each request joins to, and some of its fields, in order."""

    index: Mapping[str, RowRef]
    refs: list[RowRef]
    columns: dict[str, list[Any]]

    def unknown(self, ids: Sequence[Any], requests: Mapping[str, RowRef]) -> Iterable[int]:
        """Return the positions of the ``ids`` (the file's, by row) that name no request.

        Each request joins a different key of the file's index, so when every key was
        joined, every string id of the file names a request: nothing to look up.
        """
        if len(self.index) == len(self.refs) - sum(map(is_, self.refs, repeat(NO_ROW))):
            return ()
        return positions(map(not_, map(requests.__contains__, ids)))


def join(
    index: Mapping[str, RowRef],
    keyed: Mapping[str, Any],
    names: Sequence[str],
    scan: FloorScan | None = None,
) -> Join:
    """Join each key of ``keyed`` to its row in ``index`` and read ``names`` of those rows.

    ``scan``, of the file ``index`` indexes, may have read those fields already.
    """
    refs = joined(index, keyed)
    return Join(index, refs, read_joined(index, refs, names, scan))


def read_joined(
    index: Mapping[str, RowRef],
    refs: Sequence[RowRef],
    names: Sequence[str],
    scan: FloorScan | None = None,
) -> dict[str, list[Any]]:
    """Return the values of ``names`` in each of ``refs`` (None for ``NO_ROW``), in order.

    ``refs`` are rows found in ``index``; ``scan``, of the file ``index`` indexes, may
    have read those fields already.
    """
    if not names:
        return {}
    if scan is not None and set(names) <= scan.raw.keys():
        found = from_scan(index, refs, names, scan)
        if found is not None:
            return found
    columns, _ = _read_rows(row_dicts(refs), names, ())
    return columns


def from_scan(
    index: Mapping[str, RowRef], refs: Sequence[RowRef], names: Sequence[str], scan: FloorScan
) -> dict[str, list[Any]] | None:
    """Return the ``names`` columns of ``refs`` from what ``scan`` read, or None if it cannot.

    When ``index`` is the one the scan was given, ``refs`` are the scanned file's rows
    (or ``NO_ROW``), and each sits at its own ``index`` in ``scan.refs``, so its values
    sit at that position of the scan's columns: picking them by position gives what
    reading the rows again gives, without touching a row. When ``refs`` are the scanned
    rows themselves, in order (each request has its row, in request order, as exporters
    write), the columns are the answer as they stand. ``NO_ROW``'s index, -1, picks the
    last row's values, so those are set to None.
    """
    if index is not scan.index or not scan.refs:
        return None
    if len(refs) == len(scan.refs) and all(map(is_, refs, scan.refs)):
        return {name: scan.raw[name] for name in names}
    at = list(map(itemgetter(1), refs))  # RowRef.index
    columns = {name: list(map(scan.raw[name].__getitem__, at)) for name in names}
    if at.count(NO_ROW.index):
        for i in positions(map(is_, refs, repeat(NO_ROW))):
            for values in columns.values():
                values[i] = None
    return columns


def shared(run: RunInputs, compute: Callable[..., T], *helps: Any) -> T:
    """Return ``compute(run)``, computed once for the run: layers share joins this way.

    A run does not change once loaded, so the answer holds until ``forget_shared``; it
    is kept on the run itself (``RunInputs.shared``). ``helps`` go to ``compute`` if it is
    computed by this call: what a layer has read already, to spare reading it again;
    they must not change the answer.
    """
    if compute not in run.shared:
        run.shared[compute] = compute(run, *helps)
    answer: T = run.shared[compute]
    return answer


def forget_shared(run: RunInputs) -> None:
    """Drop what the layers shared for ``run``: once they have run, it is only memory."""
    run.shared.clear()


def derived_verdicts(run: RunInputs) -> list[str]:
    """Return each request's derived verdict, in request order."""
    return list(map(attrgetter("verdict"), run.derivations.values()))


@dataclass
class FloorScan:
    """What the bulk pre-check of one list file found.

    ``suspects`` holds the positions of the rows that may break the floor. ``raw`` holds,
    in row order, the values of the fields the layer asked to read, as the rows hold them
    (None where absent); ``columns`` holds the same, except that a text field holds None
    where its value is not a string. ``refs`` are the rows scanned, ``index`` their index
    on the unique field.
    """

    suspects: set[int]
    columns: dict[str, list[Any]]
    raw: dict[str, list[Any]]
    refs: Sequence[RowRef]
    index: Mapping[str, RowRef]


# Rows read per step of a scan: the step's values take little memory.
_SCAN_STEP = 4096


def scan_floor(
    refs: Sequence[RowRef],
    text: Sequence[str],
    flags: Mapping[str, bool],
    index: Mapping[str, RowRef],
    unique: str,
    read: Sequence[str] = (),
) -> FloorScan:
    """Find, in C, the rows whose floor a layer's exact per-row code must check.

    Every row outside ``suspects`` holds a string that is neither empty nor whitespace in
    each ``text`` field, exactly (``is``) the required value in each of ``flags``, and, in
    the ``unique`` text field, a string no other row holds (proved at once when ``index``,
    the file's index on that field, has a key for every row). For such a row
    ``missing_fields``, ``not_text`` and ``wrong_flags`` over these fields return nothing
    and a ``seen`` set of the unique field never already holds its value, so the layer's
    per-row code gives no finding for it: running that code on the suspects only, in row
    order, gives the same findings in the same order. A layer adds suspects for the
    conditions that are its own, from the columns of ``read``; a suspect too many only
    costs time.

    When ``index`` has a key for every row, its keys are the unique field's values in row
    order (the index keeps the first row of each string, and then every row is a first),
    so that column is the index's keys rather than read from the rows. Its text is still
    checked in the rows' stream (``_read_rows``): a value read beside its row's others
    costs next to nothing, the same value read through the index costs a cache miss.
    """
    rows = row_dicts(refs)
    complete = len(index) == len(rows)
    keys = list(index) if complete else None
    kept = [
        name for name in dict.fromkeys([*flags, unique, *read]) if keys is None or name != unique
    ]
    raw, plain = _read_rows(rows, kept, text)
    if keys is not None:
        raw[unique] = keys
    columns = dict(raw)
    suspects: set[int] = set()
    for name, want in flags.items():
        suspects.update(_not_exactly(raw[name], want))
    if not plain:
        for name in text:
            found = raw[name] if name in raw else column(rows, name)
            wrong = []
            for i, value in enumerate(found):
                if not isinstance(value, str):
                    wrong.append(i)
                elif not value or value.isspace():
                    suspects.add(i)
            suspects.update(wrong)
            if wrong and name in columns:
                columns[name] = text_only = list(found)
                for i in wrong:
                    text_only[i] = None
    if not complete:
        suspects.update(repeated(columns[unique]))
    return FloorScan(suspects, columns, raw, refs, index)


def _not_exactly(values: list[Any], want: bool) -> Iterable[int]:
    """Return the positions whose value is not ``want`` itself.

    ``list.count`` compares in C, identity first: when it finds ``want`` everywhere and
    every value is a bool, each value is ``want`` itself (1 and 1.0 equal True, 0 and
    0.0 equal False, but none is a bool), so no position needs testing one by one.
    """
    if values.count(want) == len(values) and set(map(type, values)) <= {bool}:
        return ()
    return positions(map(is_not, values, repeat(want)))


def _read_rows(
    rows: Sequence[dict[str, Any]], kept: Sequence[str], checked: Sequence[str]
) -> tuple[dict[str, list[Any]], bool]:
    """Read the ``kept`` fields' columns, and say whether every ``checked`` value is plain.

    A value is plain when it is a string neither empty nor whitespace: ``str.strip`` of
    each, in one stream, is truthy for all exactly when all are (a value of any other type
    raises TypeError; a missing field, KeyError). The checked values stream into
    ``str.strip`` without being kept; the rows are taken a step at a time so that the
    kept values in flight take little memory.
    """
    columns: dict[str, list[Any]] = {name: [] for name in kept}
    plain = True
    try:
        for start in range(0, len(rows), _SCAN_STEP):
            step = rows[start : start + _SCAN_STEP]
            if plain and checked:
                try:
                    plain = all(map(str.strip, _stream(step, checked)))
                except TypeError:
                    plain = False
            values = list(_stream(step, kept))
            for j, name in enumerate(kept):
                columns[name] += values[j :: len(kept)]
    except KeyError:  # a row lacks a field: read each with ``dict.get``
        return {name: column(rows, name) for name in kept}, False
    return columns, plain


def _stream(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> Iterator[Any]:
    """Yield the values of ``names`` row after row; a missing field raises KeyError."""
    if not names:
        return iter(())
    own = _own_keys(rows, names)
    if len(own) == 1:
        return map(itemgetter(own[0]), rows)
    return chain.from_iterable(map(itemgetter(*own), rows))


def not_of_type(values: Iterable[Any], kind: type) -> Iterator[int]:
    """Yield the positions of the values whose type is not exactly ``kind``."""
    return positions(map(is_not, map(type, values), repeat(kind)))


# JSON booleans and numbers: values of two of these types may be equal (True == 1 == 1.0).
_ALIKE = frozenset({bool, int, float})


def per_distinct(judge: Callable[..., T], *columns: Sequence[Any]) -> list[T]:
    """Return ``judge`` of each position's values, judging each distinct tuple once.

    Equal values are judged alike, but True and 1, or 0, 0.0 and False, hash and compare
    alike: a column that holds values of two of those types is keyed on each value's type
    too, so they are judged apart. Values under one key then differ in nothing a check of
    JSON values can see. If any value cannot be hashed (a list or an object), every
    position is judged on its own. The keys are made twice rather than kept: ``zip``
    reuses its tuple once it is let go, so only the distinct ones take memory.
    """
    typed = [len(_ALIKE.intersection(map(type, values))) > 1 for values in columns]
    try:
        judged = {key: judge(*_untyped(key, typed)) for key in set(_keys(columns, typed))}
    except TypeError:
        return list(map(judge, *columns))
    return list(map(judged.__getitem__, _keys(columns, typed)))


def _keys(columns: Sequence[Sequence[Any]], typed: Sequence[bool]) -> Iterator[tuple[Any, ...]]:
    """Yield each position's values, each after its type where its column is ``typed``."""
    streams: list[Iterable[Any]] = []
    for values, by_type in zip(columns, typed, strict=True):
        if by_type:
            streams.append(map(type, values))
        streams.append(values)
    return zip(*streams, strict=True)


def _untyped(key: tuple[Any, ...], typed: Sequence[bool]) -> list[Any]:
    """Return the values of a key made by ``_keys``, without the types."""
    values, at = [], 0
    for by_type in typed:
        at += by_type
        values.append(key[at])
        at += 1
    return values


def repeated(values: Sequence[str | None]) -> Iterator[int]:
    """Yield the positions of the strings that occur more than once in ``values``."""
    twice = {value for value, times in Counter(values).items() if times > 1 and value is not None}
    return positions(map(twice.__contains__, values))
