"""What every layer returns, and the floor checks the layers share."""

from __future__ import annotations

import weakref
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
    lookup per key. A key that cannot be hashed raises TypeError, as ``dict.get`` does.
    """
    keys = list(keys)
    if len(index) == len(keys) and list(index) == keys:
        return list(index.values())
    return list(map(index.get, keys, repeat(NO_ROW)))


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


def join(index: Mapping[str, RowRef], keyed: Mapping[str, Any], names: Sequence[str]) -> Join:
    """Join each key of ``keyed`` to its row in ``index`` and read ``names`` of those rows."""
    refs = joined(index, keyed)
    values = _row_major(row_dicts(refs), names) if names else []
    return Join(index, refs, {name: values[j :: len(names)] for j, name in enumerate(names)})


_SHARED: dict[int, dict[Callable[[RunInputs], Any], Any]] = {}


def shared(run: RunInputs, compute: Callable[[RunInputs], T]) -> T:
    """Return ``compute(run)``, computed once for the run: layers share joins this way.

    A run does not change once loaded, so the answer holds for the run's life; it is
    dropped with the run (whose id is then free again). ``compute`` must not return
    anything that holds the run itself.
    """
    memo = _SHARED.get(id(run))
    if memo is None:
        memo = _SHARED[id(run)] = {}
        weakref.finalize(run, _SHARED.pop, id(run), None)
    if compute not in memo:
        memo[compute] = compute(run)
    answer: T = memo[compute]
    return answer


def forget_shared(run: RunInputs) -> None:
    """Drop what the layers shared for ``run``: once they have run, it is only memory."""
    _SHARED.pop(id(run), None)


def derived_verdicts(run: RunInputs) -> list[str]:
    """Return each request's derived verdict, in request order."""
    return list(map(attrgetter("verdict"), run.derivations.values()))


def _row_major(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> list[Any]:
    """Return the values of ``names`` row after row (None where absent), in C.

    One ``itemgetter`` call per row reads all the fields while the row is in cache.
    """
    if len(names) == 1:
        return column(rows, names[0])
    names = _own_keys(rows, names)
    try:
        return list(chain.from_iterable(map(itemgetter(*names), rows)))
    except KeyError:
        columns = [map(dict.get, rows, repeat(name)) for name in names]
        return list(chain.from_iterable(zip(*columns, strict=True)))


@dataclass
class FloorScan:
    """What the bulk pre-check of one list file found.

    ``suspects`` holds the positions of the rows that may break the floor; ``columns``
    holds, in row order, the values of the fields the layer asked to read (a text field
    holds None where its value is not a string).
    """

    suspects: set[int]
    columns: dict[str, list[Any]]


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

    Reading a row's values costs a cache miss each on a large run, so each value is
    tested while it is in cache: ``str.strip`` of every text value, in one stream, is
    truthy for all exactly when all are strings neither empty nor whitespace (a value of
    any other type raises TypeError).
    """
    rows = row_dicts(refs)
    try:
        plain = all(map(str.strip, _stream(rows, text)))
    except (TypeError, KeyError):  # a value that is not a string, or a missing field
        plain = False
    names = list(dict.fromkeys([*flags, unique, *read]))
    values = _row_major(rows, names)
    columns = {name: values[j :: len(names)] for j, name in enumerate(names)}
    suspects: set[int] = set()
    for name, want in flags.items():
        suspects.update(positions(map(is_not, columns[name], repeat(want))))
    if not plain:
        for name in text:
            found = columns.get(name) or column(rows, name)
            for i, value in enumerate(found):
                if not isinstance(value, str):
                    found[i] = None
                    suspects.add(i)
                elif not value or value.isspace():
                    suspects.add(i)
    if len(index) != len(rows):
        suspects.update(repeated(columns[unique]))
    return FloorScan(suspects, columns)


def _stream(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> Iterator[Any]:
    """Yield the values of ``names`` row after row; a missing field raises KeyError."""
    names = _own_keys(rows, names)
    if len(names) == 1:
        return map(itemgetter(names[0]), rows)
    return chain.from_iterable(map(itemgetter(*names), rows))


def not_of_type(values: Iterable[Any], kind: type) -> Iterator[int]:
    """Yield the positions of the values whose type is not exactly ``kind``."""
    return positions(map(is_not, map(type, values), repeat(kind)))


def per_distinct(judge: Callable[..., T], *columns: Sequence[Any]) -> list[T]:
    """Return ``judge`` of each position's values, judging each distinct tuple once.

    Each value is keyed together with its type, so True and 1, or 0, 0.0 and False, which
    hash and compare alike, are judged apart; values under one key then differ in nothing
    a check of JSON values can see. If any value cannot be hashed (a list or an object),
    every position is judged on its own.
    """
    typed: list[Iterable[Any]] = []
    for values in columns:
        typed += [map(type, values), values]
    keys = list(zip(*typed, strict=True))
    try:
        judged = {key: judge(*key[1::2]) for key in set(keys)}
    except TypeError:
        return list(map(judge, *columns))
    return list(map(judged.__getitem__, keys))


def repeated(values: Sequence[str | None]) -> Iterator[int]:
    """Yield the positions of the strings that occur more than once in ``values``."""
    twice = {value for value, times in Counter(values).items() if times > 1 and value is not None}
    return positions(map(twice.__contains__, values))
