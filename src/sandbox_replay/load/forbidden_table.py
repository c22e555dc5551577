"""Read and check a forbidden-classes table: what the forbidden-material scan looks for.

The classes are package data, ``data/forbidden_classes.json``::

    {"table_id": "<id>",
     "classes": [{"class_id": "<lower_snake_case>", "label": "<short name>",
                  "remediation": "<one sentence for the record's author>",
                  "tokens": ["<literal>", ...], "patterns": ["<RE2 regex>", ...]}, ...]}

A class needs at least one token or pattern; no other keys are allowed. The original
implementation's shape is read too (FORMAT 7.2): ``schema_version`` for ``table_id``, and
per class ``terms: [{"term_id", "token"}]``, each ``token`` a literal. Tokens match byte
for byte (as UTF-8). Patterns are ASCII RE2 run over raw bytes (Latin-1 semantics). They
may not capture (use ``(?:...)``), anchor (``^``, ``$``, ``\\A``, ``\\z``), match the empty
string, or repeat without bound (``*``, ``+``, ``{n,}``).

A credential pattern starts at its token's distinctive prefix and does not end in ``\\b``
(``_`` is a word character, so ``\\b`` misses a token glued into ``req_<token>_2``). A
prefix too short to stand alone takes ``(?:\\b|_)`` before it; the ``_`` joins the matched
text, still a substring of the string the token sits in, so redacting by it still works.
A fixed-length shape that must not match the head of a longer run of its own alphabet
ends in ``(?:\\b|[a-z_])``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import re2

from sandbox_replay.small_inputs import unique_keys

_TABLE_KEYS = frozenset({"table_id", "classes"})
# The original implementation's table names itself by schema version, not table id.
_ORIGINAL_TABLE_KEYS = frozenset({"schema_version", "classes"})
_CLASS_KEYS = frozenset({"class_id", "label", "remediation", "tokens", "patterns", "terms"})
_TERM_KEYS = frozenset({"term_id", "token"})
_CLASS_ID = re.compile(r"[a-z][a-z0-9_]*\Z")
_OPEN_REPEAT = re.compile(r"\{[0-9]+,\}")
# Strings an acceptable pattern must not match as empty; a cheap net for `x?`-style slips.
_EMPTY_PROBES = (b"", b"a", b" ", b"a b", b"_-/", b'"":')


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
class ForbiddenTable:
    """A user's forbidden-classes table (``--forbidden-classes``), read once.

    ``path`` is relative to the working directory where it lies inside it; ``sha256`` is
    of the file's bytes, so that a rebuild or ``verify`` can tell the table changed.
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

    Without ``check_patterns`` only the table's shape is validated, not its patterns.
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
        document = json.loads(raw, object_pairs_hook=unique_keys)
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

    A user's class of a packaged id adds its tokens and patterns to that class; any other
    class is appended, in the user's order.
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
            check_class(forbidden, f"{where} ({forbidden.class_id})")
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


def check_class(forbidden: ForbiddenClass, where: str) -> None:
    """Raise on a class the scanner cannot run exactly."""
    if not forbidden.tokens and not forbidden.patterns:
        raise ForbiddenClassesError(f"{where}: needs at least one token or pattern")
    for index, pattern in enumerate(forbidden.patterns):
        try:
            _check_pattern(pattern)
        except ForbiddenClassesError as error:
            raise ForbiddenClassesError(f"{where}: patterns[{index}]: {error}") from None


def _check_pattern(pattern: str) -> None:
    """Raise on a pattern that breaks the table's rules."""
    if not pattern.isascii():
        raise ForbiddenClassesError("must be ASCII (write other bytes as \\xNN)")
    problem = _unbounded_or_anchored(pattern)
    if problem:
        raise ForbiddenClassesError(problem)
    try:
        regex = re2.compile(pattern.encode("ascii"), re2_options())
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


def re2_options() -> Any:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.log_errors = False
    # Room for the DFA over the whole alternation, so RE2 never falls back to its NFA.
    options.max_mem = 64 * 1024 * 1024
    return options
