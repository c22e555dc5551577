"""Scan input bytes for forbidden material: planted sentinel tokens and real credential shapes.

The classes are package data, ``data/forbidden_classes.json``::

    {"table_id": "<id>",
     "classes": [{"class_id": "<lower_snake_case>", "label": "<short name>",
                  "remediation": "<one sentence for the record's author>",
                  "tokens": ["<literal>", ...], "patterns": ["<RE2 regex>", ...]}, ...]}

A class needs at least one token or pattern; no other keys are allowed. The original
implementation's table shape is read too (FORMAT 7.2): ``{"schema_version": ...,
"classes": [{"class_id", "label", "remediation", "terms": [{"term_id", "token"}]}]}``,
each term's ``token`` a literal like ``tokens`` above. Tokens match
byte for byte (as UTF-8). Patterns are RE2 syntax, ASCII only, and run over raw bytes
(Latin-1 semantics: ``[^"]`` is any one byte but ``"``). They may not capture (use
``(?:...)``), anchor (``^``, ``$``, ``\\A``, ``\\z``), match the empty string, or repeat
without bound (``*``, ``+``, ``{n,}``): bounded matches are what lets a file be scanned
in chunks and still find every match once, exactly where a whole-file scan would.

A credential pattern starts at its token's distinctive prefix and does not end in ``\\b``:
``_`` is a word character, so a ``\\b`` misses a token glued into an id such as
``req_<token>_2``, and a missed token is a leak. Where a prefix is too short to stand
alone, ``(?:\\b|_)`` keeps a letter or digit from preceding it (for the Hugging Face
shape, also from following it) yet still finds it next to ``_``; the ``_`` then joins the
matched text, which is still a substring of the string the token sits in, so redacting by
matched text still replaces that string. A fixed-length shape that must not match the head
of a longer run of its own alphabet (the AWS key id, ``[A-Z0-9]``) ends in
``(?:\\b|[a-z_])``, so it is still found before ``_`` or a letter outside that alphabet.

Every class compiles into one RE2 alternation with one capture group per class, so clean
input is a single DFA pass and the capture groups cost only where something matched.
Counts are of non-overlapping leftmost-first matches; where two classes could match at
one place, the class listed first wins. Matched texts are handed back in memory for the
caller to redact with and are never formatted into a record, an exception or a repr.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import re2

_TABLE_KEYS = frozenset({"table_id", "classes"})
# The original implementation's table names itself by schema version, not table id.
_ORIGINAL_TABLE_KEYS = frozenset({"schema_version", "classes"})
_CLASS_KEYS = frozenset({"class_id", "label", "remediation", "tokens", "patterns", "terms"})
_TERM_KEYS = frozenset({"term_id", "token"})
_CLASS_ID = re.compile(r"[a-z][a-z0-9_]*\Z")
_OPEN_REPEAT = re.compile(r"\{[0-9]+,\}")
# Strings an acceptable pattern must not match as empty; a cheap net for `x?`-style slips.
_EMPTY_PROBES = (b"", b"a", b" ", b"a b", b"_-/", b'"":')
# Bytes kept before the resume point so that `\b` sees the byte it looks back at.
_LOOKBEHIND = 1
DEFAULT_CHUNK_SIZE = 8 * 1024 * 1024
_MIN_CHUNK = 64 * 1024


class ForbiddenClassesError(ValueError):
    """The forbidden-classes table is malformed."""


@dataclass(frozen=True)
class ForbiddenClass:
    """One kind of forbidden material, with what the record's author should do about it."""

    class_id: str
    label: str
    remediation: str
    # Kept out of repr: a sentinel token in a log line would itself be a hit.
    tokens: tuple[str, ...] = field(repr=False)
    patterns: tuple[str, ...] = field(repr=False)


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

    ``chunk_size`` is how many bytes of a file are read at a time; it is raised to twice
    the longest match the table allows, below which chunks would mostly rescan overlap.
    Each class is checked (``_check_class``) unless ``checked`` says it was: the packaged
    table's classes are, by the test suite, and not again at each start.
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
                longest = max(longest, _check_class(forbidden, where))
            alternatives.append("(" + "|".join(_class_alternatives(forbidden)) + ")")
        self.classes = tuple(classes)
        self._regex = re2.compile("|".join(alternatives).encode("ascii"), _re2_options())
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


@dataclass(frozen=True)
class ForbiddenTable:
    """A user's forbidden-classes table (``--forbidden-classes``), read once.

    ``path`` is as a build records it (relative to the working directory where it lies
    inside it); ``sha256`` is of the file's bytes, so that a rebuild or ``verify`` can tell
    the table changed.
    """

    path: str
    sha256: str
    classes: tuple[ForbiddenClass, ...]


def read_forbidden_table(path: Path) -> ForbiddenTable:
    """Read and validate a user's table; raise ForbiddenClassesError or OSError."""
    raw = path.read_bytes()
    classes = _classes_of(raw, str(path), check_patterns=True)
    shown = os.path.relpath(path) if path.resolve().is_relative_to(Path.cwd()) else path.name
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    return ForbiddenTable(Path(shown).as_posix(), digest, classes)


def load_forbidden_classes(
    path: Path | None = None, *, check_patterns: bool = True
) -> tuple[ForbiddenClass, ...]:
    """Load and validate a forbidden-classes table; the packaged one when ``path`` is None.

    Without ``check_patterns`` the table's shape is validated but not its patterns
    (``_check_class``): for the packaged table, whose patterns the tests check.
    """
    if path is None:
        source = "forbidden_classes.json"
        raw = (resources.files("sandbox_replay") / "data" / source).read_bytes()
    else:
        source = str(path)
        raw = path.read_bytes()
    return _classes_of(raw, source, check_patterns)


def _classes_of(raw: bytes, source: str, check_patterns: bool) -> tuple[ForbiddenClass, ...]:
    try:
        document = json.loads(raw, object_pairs_hook=_reject_duplicate_keys)
    except ValueError as error:
        raise ForbiddenClassesError(f"{source}: not valid JSON: {error}") from None
    try:
        classes = _parse_table(document, check_patterns)
    except ForbiddenClassesError as error:
        raise ForbiddenClassesError(f"{source}: {error}") from None
    return classes


def with_extra_classes(
    packaged: Sequence[ForbiddenClass], extra: Sequence[ForbiddenClass]
) -> tuple[ForbiddenClass, ...]:
    """Return the packaged classes with a user's table added: nothing is ever taken away.

    A user's class of a packaged id adds its tokens and patterns to that class (so the
    original implementation's table, whose classes the packaged table also carries, adds
    only what is new); any other class is appended, in the user's order.
    """
    merged = {forbidden.class_id: forbidden for forbidden in packaged}
    for forbidden in extra:
        known = merged.get(forbidden.class_id)
        if known is None:
            merged[forbidden.class_id] = forbidden
            continue
        merged[forbidden.class_id] = replace(
            known,
            tokens=tuple(dict.fromkeys((*known.tokens, *forbidden.tokens))),
            patterns=tuple(dict.fromkeys((*known.patterns, *forbidden.patterns))),
        )
    return tuple(merged.values())


@cache
def scanner_with(extra: tuple[ForbiddenClass, ...]) -> ForbiddenScanner:
    """Return the scanner for the packaged table plus ``extra`` (checked classes), once per process."""
    if not extra:
        return _default_scanner()
    packaged = load_forbidden_classes(check_patterns=False)
    return ForbiddenScanner(with_extra_classes(packaged, extra), checked=True)


@cache
def _default_scanner() -> ForbiddenScanner:
    """Compile the packaged table, whose patterns ``tests/test_scan.py`` checks.

    Checking them compiles each pattern on its own and searches probes with it: as long
    as compiling the scanner itself, and on the thread a replay compiles it on, each of
    those calls waits for the GIL while the load parses (0.35 s instead of 0.1 s at
    60,000 requests, with the first file's scan waiting for it).
    """
    return ForbiddenScanner(load_forbidden_classes(check_patterns=False), checked=True)


def _parse_table(document: Any, check_patterns: bool = True) -> tuple[ForbiddenClass, ...]:
    if not isinstance(document, dict):
        raise ForbiddenClassesError("the top level must be an object")
    if "table_id" in document or "schema_version" not in document:
        _check_keys(document, _TABLE_KEYS, _TABLE_KEYS, "the top level")
        if not isinstance(document["table_id"], str) or not document["table_id"]:
            raise ForbiddenClassesError("table_id must be a non-empty string")
    else:
        _check_keys(document, _ORIGINAL_TABLE_KEYS, _ORIGINAL_TABLE_KEYS, "the top level")
    entries = document["classes"]
    if not isinstance(entries, list) or not entries:
        raise ForbiddenClassesError("classes must be a non-empty list")
    classes: list[ForbiddenClass] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"classes[{index}]"
        forbidden = _parse_class(entry, where)
        if forbidden.class_id in seen:
            raise ForbiddenClassesError(f"{where}: duplicate class_id {forbidden.class_id!r}")
        seen.add(forbidden.class_id)
        if check_patterns:
            _check_class(forbidden, f"{where} ({forbidden.class_id})")
        classes.append(forbidden)
    return tuple(classes)


def _parse_class(entry: Any, where: str) -> ForbiddenClass:
    if not isinstance(entry, dict):
        raise ForbiddenClassesError(f"{where}: must be an object")
    _check_keys(entry, _CLASS_KEYS, {"class_id", "label", "remediation"}, where)
    strings = {}
    for key in ("class_id", "label", "remediation"):
        value = entry[key]
        if not isinstance(value, str) or not value.strip():
            raise ForbiddenClassesError(f"{where}: {key} must be a non-empty string")
        strings[key] = value
    if not _CLASS_ID.match(strings["class_id"]):
        raise ForbiddenClassesError(f"{where}: class_id must be lower_snake_case")
    lists = {}
    for key in ("tokens", "patterns"):
        value = entry.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ForbiddenClassesError(f"{where}: {key} must be a list of non-empty strings")
        lists[key] = tuple(value)
    terms = _terms(entry.get("terms", []), f"{where}.terms")
    return ForbiddenClass(
        strings["class_id"],
        strings["label"],
        strings["remediation"],
        tuple(dict.fromkeys((*lists["tokens"], *terms))),
        lists["patterns"],
    )


def _terms(value: Any, where: str) -> tuple[str, ...]:
    """Return the tokens of an original-shape class's ``terms`` (FORMAT 7.2)."""
    if not isinstance(value, list):
        raise ForbiddenClassesError(f"{where} must be a list of objects")
    tokens = []
    for index, term in enumerate(value):
        place = f"{where}[{index}]"
        if not isinstance(term, dict):
            raise ForbiddenClassesError(f"{place}: must be an object")
        _check_keys(term, _TERM_KEYS, {"token"}, place)
        token = term["token"]
        if not isinstance(token, str) or not token:
            raise ForbiddenClassesError(f"{place}: token must be a non-empty string")
        term_id = term.get("term_id")
        if term_id is not None and not isinstance(term_id, str):
            raise ForbiddenClassesError(f"{place}: term_id must be a string")
        tokens.append(token)
    return tuple(tokens)


def _check_keys(
    obj: dict[str, Any], allowed: Iterable[str], required: Iterable[str], where: str
) -> None:
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise ForbiddenClassesError(f"{where}: unknown key(s) {', '.join(unknown)}")
    missing = sorted(set(required) - set(obj))
    if missing:
        raise ForbiddenClassesError(f"{where}: missing key(s) {', '.join(missing)}")


def _check_class(forbidden: ForbiddenClass, where: str) -> int:
    """Raise on a class the scanner cannot run exactly; return its longest possible match."""
    if not forbidden.tokens and not forbidden.patterns:
        raise ForbiddenClassesError(f"{where}: needs at least one token or pattern")
    longest = max((len(token.encode("utf-8")) for token in forbidden.tokens), default=1)
    for index, pattern in enumerate(forbidden.patterns):
        try:
            longest = max(longest, _check_pattern(pattern))
        except ForbiddenClassesError as error:
            raise ForbiddenClassesError(f"{where}: patterns[{index}]: {error}") from None
    return longest


def _check_pattern(pattern: str) -> int:
    """Raise on a pattern that breaks the table's rules; return a bound on its match length."""
    if not pattern.isascii():
        raise ForbiddenClassesError("must be ASCII (write other bytes as \\xNN)")
    problem = _unbounded_or_anchored(pattern)
    if problem:
        raise ForbiddenClassesError(problem)
    try:
        regex = re2.compile(pattern.encode("ascii"), _re2_options())
    except re2.error as error:
        detail = error.args[0] if error.args else error
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise ForbiddenClassesError(f"not a valid RE2 pattern: {detail}") from None
    if regex.groups:
        raise ForbiddenClassesError("must not capture; write groups as (?:...)")
    for probe in _EMPTY_PROBES:
        match = regex.search(probe)
        if match is not None and match.start() == match.end():
            raise ForbiddenClassesError("must not match the empty string")
    # Without loops the program is acyclic and every byte matched runs a distinct
    # instruction, so the instruction count bounds the match length.
    return int(regex.programsize)


def _unbounded_or_anchored(pattern: str) -> str | None:
    """Return why a pattern is unbounded or anchored, or None; misreads only ever refuse."""
    index = 0
    in_class = False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            if not in_class and pattern[index + 1 : index + 2] in ("A", "z", "Z"):
                return "must not anchor (\\A, \\z)"
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            # A `]` straight after `[` or `[^` is a member, not the end of the class.
            index += 2 if pattern.startswith("^", index + 1) else 1
            if pattern.startswith("]", index):
                index += 1
            continue
        elif char in "*+":
            return "must not repeat without bound (*, +); use {m,n}"
        elif char == "{" and _OPEN_REPEAT.match(pattern, index):
            return "must not repeat without bound ({n,}); use {m,n}"
        elif char in "^$":
            return "must not anchor (^, $)"
        index += 1
    return None


def _class_alternatives(forbidden: ForbiddenClass) -> list[str]:
    tokens = [_escape_bytes(token.encode("utf-8")) for token in forbidden.tokens]
    return tokens + [f"(?:{pattern})" for pattern in forbidden.patterns]


def _escape_bytes(literal: bytes) -> str:
    return "".join(
        chr(byte) if chr(byte).isascii() and chr(byte).isalnum() else f"\\x{byte:02x}"
        for byte in literal
    )


def _re2_options() -> Any:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.log_errors = False
    # Room for the DFA over the whole alternation, so RE2 never falls back to its NFA.
    options.max_mem = 64 * 1024 * 1024
    return options


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ForbiddenClassesError(f"duplicate key {key!r}")
        result[key] = value
    return result
