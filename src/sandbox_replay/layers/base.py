"""What every layer returns, and the floor checks the layers share."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, count, cycle, repeat
from operator import is_not, itemgetter
from typing import Any, TypeVar

from sandbox_replay.codes import Layer
from sandbox_replay.findings import Finding
from sandbox_replay.inputs import RowRef

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


def column(rows: Iterable[Mapping[str, Any]], name: str) -> list[Any]:
    """Return each row's value of ``name`` (None where absent), in one C-level pass."""
    return list(map(dict.get, rows, repeat(name)))  # type: ignore[arg-type]


def positions(flags: Iterable[object]) -> Iterator[int]:
    """Yield the positions whose flag is true."""
    return compress(count(), flags)


def joined(index: Mapping[str, RowRef], keys: Iterable[str]) -> list[RowRef]:
    """Return the row each key joins to in ``index``, ``NO_ROW`` where none."""
    return list(map(index.get, keys, repeat(NO_ROW)))


def _row_major(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> list[Any]:
    """Return the values of ``names`` row after row (None where absent), in C.

    One ``itemgetter`` call per row reads all the fields while the row is in cache.
    """
    if len(names) == 1:
        return column(rows, names[0])
    try:
        return list(chain.from_iterable(map(itemgetter(*names), rows)))
    except KeyError:
        columns = [map(dict.get, rows, repeat(name)) for name in names]
        return list(chain.from_iterable(zip(*columns, strict=True)))


@dataclass
class FloorScan:
    """What the bulk pre-check of one list file found.

    ``suspects`` holds the positions of the rows that may break the floor; ``text`` gives
    a text field's values in row order, with None for anything that is not a string.
    """

    suspects: set[int]
    columns: dict[str, list[Any]]

    def text(self, name: str) -> list[Any]:
        return self.columns[name]


def scan_floor(
    refs: Sequence[RowRef],
    text: Sequence[str],
    flags: Mapping[str, bool] | None = None,
    index: Mapping[str, RowRef] | None = None,
    unique: str | None = None,
    also: Sequence[str] = (),
) -> FloorScan:
    """Find, in C, the rows whose floor a layer's exact per-row code must check.

    Every row outside ``suspects`` holds a string that is neither empty nor whitespace in
    each ``text`` field, exactly (``is``) the required value in each of ``flags``, and, in
    the ``unique`` field, a string no other row holds (``index``, the file's index on that
    field, holds as many keys as the file has rows). For such a row ``missing_fields``,
    ``not_text`` and ``wrong_flags`` over these fields return nothing and a ``seen`` set
    of the unique field never already holds its value, so the layer's per-row code gives
    no finding for it: running that code on the suspects only, in row order, gives the
    same findings in the same order. A layer adds suspects for the conditions that are
    its own (``also`` names more fields to read in the same pass, for those); a suspect
    too many only costs time.
    """
    rows = row_dicts(refs)
    wanted = dict(flags or {})
    names = (*text, *wanted, *also)
    width = len(names)
    # One pass over the rows reads every field while the row is in cache.
    values = _row_major(rows, names)
    columns = {name: values[j::width] for j, name in enumerate(names)}
    suspects: set[int] = set()
    for name, want in wanted.items():
        suspects.update(positions(map(is_not, columns[name], repeat(want))))
    text_mask = cycle([True] * len(text) + [False] * (width - len(text)))
    try:
        plain = all(compress(values, text_mask)) and not any(
            map(str.isspace, compress(values, text_mask))
        )
    except TypeError:  # str.isspace met something that is not a string
        plain = False
    if not plain:
        for name in text:
            column = columns[name]
            for i, value in enumerate(column):
                if not isinstance(value, str):
                    column[i] = None
                    suspects.add(i)
                elif not value or value.isspace():
                    suspects.add(i)
    if unique is not None and (index is None or len(index) != len(rows)):
        suspects.update(repeated(columns[unique]))
    return FloorScan(suspects, columns)


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
    judged: dict[tuple[Any, ...], T] = {}
    try:
        for key in set(keys):
            judged[key] = judge(*key[1::2])
    except TypeError:
        return list(map(judge, *columns))
    return list(map(judged.__getitem__, keys))


def repeated(values: Sequence[str | None]) -> Iterator[int]:
    """Yield the positions of the strings that occur more than once in ``values``."""
    twice = {value for value, times in Counter(values).items() if times > 1 and value is not None}
    return positions(map(twice.__contains__, values))
