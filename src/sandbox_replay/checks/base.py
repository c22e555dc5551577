"""What every layer returns, and the row checks the layers share."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, filterfalse, repeat
from operator import attrgetter, is_
from typing import Any, TypeVar

from sandbox_replay.load.run import RunInputs
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.findings import Finding
from sandbox_replay.model.rows import UNSET, InputRow, Table

T = TypeVar("T")
Gap = tuple[str, str]
"""A finding's code and message, before the layer says where it is."""


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
        self, code: str, message: str, floor: str, file: str, row: InputRow, subject: str, kind: str
    ) -> None:
        """Add a finding about ``row`` of ``file``, pointing at the row's line."""
        self.add(code, message, floor, subject, kind, file, row.line)

    def add_for_file(self, code: str, message: str, floor: str, file: str) -> None:
        """Add a finding about a whole list file, pointing at its first line."""
        self.add(code, message, floor, file.removesuffix(".json"), "input_file", file, 1)

    def add_for_request(
        self, code: str, message: str, floor: str, run: RunInputs, request_id: str
    ) -> None:
        """Add a finding about a request that lacks a row in the layer's file, at its line."""
        request = run.requests.by_key[request_id]
        self.add_for_row(
            code, message, floor, run.requests.file, request, request_id, "action_request"
        )


@dataclass(frozen=True)
class RowFile:
    """The list file a layer checks: what a finding about one of its rows names."""

    file: str
    floor: str
    kind: str
    id_key: str = "request_id"

    def add(
        self,
        result: LayerResult,
        code: str,
        message: str,
        row: InputRow,
        position: int = 0,
        subject: str | None = None,
    ) -> None:
        """Add a finding about ``row``, named ``subject`` or else as ``subject_of`` has it."""
        named = (
            subject if subject is not None else subject_of(row, self.id_key, self.file, position)
        )
        result.add_for_row(code, message, self.floor, self.file, row, named, self.kind)


def subject_of(row: InputRow, id_key: str, file: str, position: int) -> str:
    """Return the row's id, or where it sits (``file#row<n>``) when the id is unusable."""
    value = getattr(row, id_key)
    return value if isinstance(value, str) and value else f"{file}#row{position}"


def undeclared(run: RunInputs, table: Table[Any]) -> set[int]:
    """Return the positions of the rows of ``table`` whose request id is a string no
    action request declares (any other value is the floor's finding).

    Only a file that names such a request is walked.
    """
    if run.joined.takes_whole(table):
        return set()
    read = attrgetter("request_id")
    named = table.by_key if table.key == "request_id" else _strings(list(map(read, table)))
    unknown = set(filterfalse(run.requests.by_key.__contains__, named))
    if not unknown:
        return set()
    return {at for at, row in enumerate(table) if type(read(row)) is str and read(row) in unknown}


def repeated(run: RunInputs, table: Table[Any], field: str | None = None) -> set[int]:
    """Return the positions of the rows whose ``field`` (the table's key unless given) is
    a string an earlier row holds already; only the first row of a key is joined.

    Where the distinct strings are as many as the rows, nothing is walked.
    """
    if field is None and run.joined.takes_whole(table):
        return set()
    read = attrgetter(field or table.key)
    distinct = table.by_key if field in (None, table.key) else _strings(list(map(read, table)))
    if len(distinct) == len(table):
        return set()
    seen: set[str] = set()
    found = set()
    for at, row in enumerate(table):
        value = read(row)
        if type(value) is str:
            if value in seen:
                found.add(at)
            seen.add(value)
    return found


def _strings(values: Sequence[Any]) -> set[str]:
    return set(compress(values, map(is_, map(type, values), repeat(str))))


def is_nonempty(value: Any) -> bool:
    """Say whether a required value is present: held, not null, not blank, not an empty list."""
    if type(value) is str:
        return bool(value) and not value.isspace()
    if value is None or value is UNSET:
        return False
    if isinstance(value, list | dict):
        return bool(value)
    return True


# A row of a list file, or an object file's object.
Fields = InputRow | Mapping[str, Any]


def reader(row: Fields) -> Callable[[str], Any]:
    """Return what reads a field of ``row`` by name: ``UNSET`` or None where it is not held."""
    return row.get if isinstance(row, dict) else row.__getattribute__


def missing_fields(row: Fields, required: Iterable[str]) -> list[str]:
    """Return the required fields that are absent or empty (``is_nonempty``), in order."""
    read = reader(row)
    return [name for name in required if not is_nonempty(read(name))]


def not_text(row: Fields, fields: Iterable[str], missing: Iterable[str]) -> list[str]:
    """Return the fields that are present and non-empty but not strings (refs are text)."""
    read = reader(row)
    return [name for name in fields if type(read(name)) is not str and name not in missing]


def wrong_flags(row: Fields, expected: Mapping[str, bool]) -> list[str]:
    """Return the flags whose value is not exactly the expected boolean (a missing flag is wrong)."""
    read = reader(row)
    return [name for name, want in expected.items() if read(name) is not want]


def floor_breaks(row: InputRow, flags_word: str | None = "not true") -> list[str]:
    """Return what a row breaks of its kind's floor: required fields absent or empty,
    ``PLAIN`` fields held but not strings, and (unless ``flags_word`` is None, where the
    layer words them itself) the flags not exactly as required."""
    kind = type(row)
    problems = []
    missing = missing_fields(row, kind.REQUIRED)
    if missing:
        problems.append(f"missing or empty: {describe(missing)}")
    wrong_type = not_text(row, kind.PLAIN, missing)
    if wrong_type:
        problems.append(f"not a string: {describe(wrong_type)}")
    flags = wrong_flags(row, kind.FLAGS) if flags_word is not None else []
    if flags:
        problems.append(f"{flags_word}: {describe(flags)}")
    return problems


def strings_in(value: object) -> set[str]:
    """Return the strings a list holds; none when ``value`` is not a list."""
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


def describe(fields: Iterable[str]) -> str:
    return ", ".join(fields)


def shared(run: RunInputs, compute: Callable[..., T]) -> T:
    """Return ``compute(run)``, computed once for the run (until ``forget_shared``): layers
    share joins this way."""
    if compute not in run.shared:
        run.shared[compute] = compute(run)
    answer: T = run.shared[compute]
    return answer


def forget_shared(run: RunInputs) -> None:
    """Drop what the layers shared for ``run``: once they have run, it is only memory."""
    run.shared.clear()


def derived_verdicts(run: RunInputs) -> list[str]:
    """Return each request's derived verdict, in request order."""
    return [derivation.verdict for derivation in run.derivations.values()]
