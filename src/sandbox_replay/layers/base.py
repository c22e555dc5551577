"""What every layer returns, and the floor checks the layers share."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sandbox_replay.codes import Layer
from sandbox_replay.findings import Finding
from sandbox_replay.inputs import RowRef


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
