"""Scan input bytes for forbidden material: planted sentinel tokens and real credential shapes.

The classes (``forbidden_table``) compile into one RE2 alternation, one capture group per
class. Counts are of non-overlapping leftmost-first matches; where two classes match at
one place, the first listed wins. Matched texts are handed back in memory for the caller
to redact with and are never formatted into a record, an exception or a repr.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

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

# Bytes kept before the resume point so that `\b` sees the byte it looks back at.
_LOOKBEHIND = 1
DEFAULT_CHUNK_SIZE = 8 * 1024 * 1024
_MIN_CHUNK = 64 * 1024


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
    """Count forbidden material in bytes and files with one compiled matcher.

    ``chunk_size`` (bytes of a file read at a time) is raised to twice the longest match
    the table allows. Each class is checked (``check_class``) unless ``checked`` says it
    was, as the test suite checks the packaged table's.
    """

    def __init__(
        self,
        classes: Sequence[ForbiddenClass],
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        checked: bool = False,
    ) -> None:
        if not classes:
            raise ForbiddenClassesError("the forbidden-classes table has no classes")
        longest = 1
        alternatives = []
        for index, forbidden in enumerate(classes):
            if not checked:
                where = f"classes[{index}] ({forbidden.class_id})"
                longest = max(longest, check_class(forbidden, where))
            alternatives.append("(" + "|".join(_class_alternatives(forbidden)) + ")")
        self.classes = tuple(classes)
        self._regex = re2.compile("|".join(alternatives).encode("ascii"), re2_options())
        if checked:
            # Checked patterns have no loop, so the whole program is acyclic too, and its
            # size bounds every match as each pattern's own size bounds that pattern's.
            longest = int(self._regex.programsize)
        # A match ending within `_overlap` of a chunk's end may still grow or move once
        # the next chunk arrives, so it is left for the next window to find.
        self._overlap = longest
        self._chunk_size = max(chunk_size, 2 * longest)

    @classmethod
    def default(cls) -> ForbiddenScanner:
        """Return the scanner for the packaged table, compiled once per process."""
        return _default_scanner()

    def scan_bytes(self, data: bytes) -> tuple[dict[str, int], set[bytes]]:
        """Return match counts by class id and the distinct matched texts."""
        counts: dict[str, int] = {}
        matched: set[bytes] = set()
        self._scan_window(data, 0, True, counts, matched)
        return counts, matched

    def scan_file(self, path: Path) -> tuple[dict[str, int], set[bytes]]:
        """Return match counts by class id and the distinct matched texts, reading in chunks."""
        counts, matched, _ = self._scan_path(path)
        return counts, matched

    def scan_files(self, files: Iterable[tuple[str, Path]]) -> ScanReport:
        """Scan ``(relative_path, absolute_path)`` pairs; a path given twice has its counts summed."""
        counts: dict[tuple[str, str], int] = {}
        matched: set[bytes] = set()
        files_scanned = 0
        bytes_scanned = 0
        for relative, absolute in files:
            file_counts, file_matched, size = self._scan_path(absolute)
            files_scanned += 1
            bytes_scanned += size
            matched |= file_matched
            for class_id, count in file_counts.items():
                counts[relative, class_id] = counts.get((relative, class_id), 0) + count
        hits = tuple(ScanHit(path, class_id, n) for (path, class_id), n in sorted(counts.items()))
        return ScanReport(files_scanned, bytes_scanned, hits, self.classes, frozenset(matched))

    def _scan_path(self, path: Path) -> tuple[dict[str, int], set[bytes], int]:
        counts: dict[str, int] = {}
        matched: set[bytes] = set()
        with path.open("rb") as stream:
            # A small file gets a small buffer; one read past its size confirms the end.
            size_hint = os.fstat(stream.fileno()).st_size
            chunk = min(self._chunk_size, max(size_hint + 1, _MIN_CHUNK))
            buffer = bytearray(chunk + 2 * self._overlap + _LOOKBEHIND)
            view = memoryview(buffer)
            kept = 0  # bytes carried over at the front of the buffer
            pos = 0  # where the next search starts; bytes before it are look-behind only
            total = 0
            while True:
                end = kept
                at_eof = False
                while end < kept + chunk and not at_eof:
                    read = stream.readinto(view[end : kept + chunk])
                    at_eof = not read
                    end += read
                total += end - kept
                resume = self._scan_window(view[:end], pos, at_eof, counts, matched)
                if at_eof:
                    return counts, matched, total
                pos = min(_LOOKBEHIND, resume)
                kept = end - resume + pos
                buffer[:kept] = buffer[resume - pos : end]

    def _scan_window(
        self,
        text: bytes | memoryview,
        pos: int,
        final: bool,
        counts: dict[str, int],
        matched: set[bytes],
    ) -> int:
        """Count the matches in ``text[pos:]``; return where the next window must resume.

        Unless ``final``, only matches ending at least ``_overlap`` before the end count:
        a longer or earlier-starting match may need bytes that have not arrived yet.
        """
        limit = len(text) if final else max(pos, len(text) - self._overlap)
        while True:
            match = self._regex.search(text, pos)
            if match is None:
                return max(pos, limit)
            span: tuple[int, int] = match.span()
            start, end = span
            if end > limit:
                return min(start, limit)
            if start == end:  # validation rules these out; never count or loop on one
                if end == len(text):
                    return end
                pos = end + 1
                continue
            class_id = self.classes[match.lastindex - 1].class_id
            counts[class_id] = counts.get(class_id, 0) + 1
            matched.add(bytes(text[start:end]))
            pos = end


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
