"""Scan input bytes for forbidden material: planted sentinel tokens and real credential shapes.

The classes (``forbidden_table``) compile into one RE2 alternation, one capture group per
class. Counts are of non-overlapping leftmost-first matches; where two classes match at
one place, the first listed wins. Matched texts are handed back in memory for the caller
to redact with and are never formatted into a record, an exception or a repr.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache

import re2

from sandbox_replay.load.forbidden_table import (
    ForbiddenClass,
    ForbiddenClassesError,
    ForbiddenTable,
    check_class,
    load_forbidden_classes,
    re2_options,
    read_forbidden_table,
    with_extra_classes,
)

# The table's names are imported from here too.
__all__ = [
    "ForbiddenClass",
    "ForbiddenClassesError",
    "ForbiddenScanner",
    "ForbiddenTable",
    "ScanHit",
    "ScanReport",
    "load_forbidden_classes",
    "read_forbidden_table",
    "scanner_with",
    "with_extra_classes",
]


@dataclass(frozen=True)
class ScanHit:
    """How often one class matched in one file; ``path`` is the caller's relative path."""

    path: str
    class_id: str
    count: int


@dataclass(frozen=True)
class ScanReport:
    """The outcome of scanning a set of files; it never holds a matched text in a field shown."""

    files_scanned: int
    bytes_scanned: int
    hits: tuple[ScanHit, ...]
    classes: tuple[ForbiddenClass, ...] = field(repr=False)
    # For the caller to redact with; in memory only, never serialised.
    matched_texts: frozenset[bytes] = field(default=frozenset(), repr=False, compare=False)

    @property
    def blocking_hit_count(self) -> int:
        """Return the number of matches across all files and classes."""
        return sum(hit.count for hit in self.hits)

    @property
    def flagged_paths(self) -> frozenset[str]:
        """Return the relative paths with at least one hit."""
        return frozenset(hit.path for hit in self.hits)

    def to_record(self) -> dict[str, object]:
        """Return the JSON-ready scan record: paths, class ids and counts, no matched text."""
        by_class: dict[str, int] = {}
        for hit in self.hits:
            by_class[hit.class_id] = by_class.get(hit.class_id, 0) + hit.count
        return {
            "status": "blocked" if self.hits else "pass",
            "files_scanned": self.files_scanned,
            "bytes_scanned": self.bytes_scanned,
            "blocking_hit_count": self.blocking_hit_count,
            "hits_by_class": dict(sorted(by_class.items())),
            "hits": [
                {"path": hit.path, "class_id": hit.class_id, "count": hit.count}
                for hit in self.hits
            ],
            "classes_hit": [
                {"class_id": c.class_id, "label": c.label, "remediation": c.remediation}
                for c in sorted(self.classes, key=lambda c: c.class_id)
                if c.class_id in by_class
            ],
            "class_count": len(self.classes),
            "body_redacted": True,
        }


class ForbiddenScanner:
    """Count forbidden material in bytes with one compiled matcher.

    Each class is checked (``check_class``) unless ``checked`` says it was, as the test
    suite checks the packaged table's.
    """

    def __init__(self, classes: Sequence[ForbiddenClass], *, checked: bool = False) -> None:
        if not classes:
            raise ForbiddenClassesError("the forbidden-classes table has no classes")
        alternatives = []
        for index, forbidden in enumerate(classes):
            if not checked:
                check_class(forbidden, f"classes[{index}] ({forbidden.class_id})")
            alternatives.append("(" + "|".join(_class_alternatives(forbidden)) + ")")
        self.classes = tuple(classes)
        self._regex = re2.compile("|".join(alternatives).encode("ascii"), re2_options())

    @classmethod
    def default(cls) -> ForbiddenScanner:
        """Return the scanner for the packaged table, compiled once per process."""
        return _default_scanner()

    def scan_bytes(self, data: bytes) -> tuple[dict[str, int], set[bytes]]:
        """Return match counts by class id and the distinct matched texts."""
        counts: dict[str, int] = {}
        matched: set[bytes] = set()
        pos = 0
        while (match := self._regex.search(data, pos)) is not None:
            start, end = match.span()
            if start == end:  # validation rules these out; never count or loop on one
                if end == len(data):
                    break
                pos = end + 1
                continue
            class_id = self.classes[match.lastindex - 1].class_id
            counts[class_id] = counts.get(class_id, 0) + 1
            matched.add(data[start:end])
            pos = end
        return counts, matched


@cache
def scanner_with(extra: tuple[ForbiddenClass, ...]) -> ForbiddenScanner:
    """Return the scanner for the packaged table plus ``extra`` (checked classes), once per process."""
    if not extra:
        return _default_scanner()
    packaged = load_forbidden_classes(check_patterns=False)
    return ForbiddenScanner(with_extra_classes(packaged, extra), checked=True)


@cache
def _default_scanner() -> ForbiddenScanner:
    """Compile the packaged table, whose patterns ``tests/test_scan.py`` checks."""
    return ForbiddenScanner(load_forbidden_classes(check_patterns=False), checked=True)


def _class_alternatives(forbidden: ForbiddenClass) -> list[str]:
    tokens = [_escape_bytes(token.encode("utf-8")) for token in forbidden.tokens]
    return tokens + [f"(?:{pattern})" for pattern in forbidden.patterns]


def _escape_bytes(literal: bytes) -> str:
    return "".join(
        chr(byte) if chr(byte).isascii() and chr(byte).isalnum() else f"\\x{byte:02x}"
        for byte in literal
    )
