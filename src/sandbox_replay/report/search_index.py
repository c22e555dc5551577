"""Write a run's search index: script files in ``runs/<run>/search/``, read from ``file://``.

A browser may not ``fetch`` a local file but runs a ``<script src>`` of one, so each file
calls a function ``site.js`` defines:

``index.js``
    ``SandboxReplaySearch.manifest({"count": <entries>, "parts": [[<first key>, <file>],
    ...]})``: each part's file and its first key, lower-cased.
``part-NNNN.js``
    ``SandboxReplaySearch.part(<file>, [[<key>, <kind>, <page>, <note>, <anchor>], ...])``,
    sorted by lower-cased key (as UTF-16 code units, as JavaScript compares), kind, key.
    ``kind`` is one of ``KINDS``; ``page`` is relative to the run page's folder. ``note``
    and ``anchor`` are left out when empty, ``anchor`` also when it is
    ``DEFAULT_ANCHORS[kind]`` and the key, as for most entries.

A part holds at most ``PART_ENTRIES`` entries and about ``PART_BYTES`` bytes. Every string
is written by ``js_string``; the pages' check for text the forbidden-material scan matched
looks for that form too (``parallel.needles_of``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import NamedTuple

SEARCH_DIR = "search"
PART_ENTRIES = 4000
PART_BYTES = 256 * 1024
# Longer keys are not indexed: nobody types them, and one could outgrow a part.
MAX_KEY = 512
KINDS = ("request", "finding", "code", "rule", "input", "line")
DEFAULT_ANCHORS = {"request": "req-", "finding": "f-"}

_MARKUP = frozenset("<>&")
# A string as ``json.dumps(value, ensure_ascii=False)`` writes it: the function it calls
# for a string, without making an encoder for each call.
_json_string = json.encoder.encode_basestring


def _escaped(character: str) -> str:
    """Return ``character`` as JavaScript ``\\uXXXX`` escapes (a surrogate pair above U+FFFF)."""
    units = character.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))


class SearchEntry(NamedTuple):
    """One thing a run's search finds; ``href`` (page and anchor) is relative to the run's folder."""

    key: str
    kind: str
    href: str
    note: str = ""


def js_string(value: str) -> str:
    """Return ``value`` as a JavaScript (and JSON) string literal, safe inside any script.

    ``< > &`` and every character that is not printable are written as ``\\uXXXX``: no
    value can close a ``<script>``, break a line or hide in the file.
    """
    literal = _json_string(value)
    if literal.isascii() and literal.isprintable() and _MARKUP.isdisjoint(literal):
        return literal
    return "".join(c if c.isprintable() and c not in _MARKUP else _escaped(c) for c in literal)


def _sort_key(entry: SearchEntry) -> tuple[bytes, str, str]:
    return (entry.key.lower().encode("utf-16-be", "surrogatepass"), entry.kind, entry.key)


def _entry(entry: SearchEntry, quoted: dict[str, str]) -> str:
    """Return ``entry`` as its index file holds it; ``quoted`` keeps the literals of the
    kinds, pages and notes already written (most entries share them)."""
    page, _, anchor = entry.href.partition("#")
    if anchor == DEFAULT_ANCHORS.get(entry.kind, "#") + entry.key:
        anchor = ""
    fields = [entry.kind, page, entry.note, anchor]
    while fields[-1] == "" and len(fields) > 2:
        fields.pop()
    shared = [quoted.get(value) or quoted.setdefault(value, js_string(value)) for value in fields]
    return "[" + js_string(entry.key) + "," + ",".join(shared) + "]"


def search_files(entries: Iterable[SearchEntry]) -> list[tuple[str, bytes]]:
    """Return the run-relative path and bytes of each file of the index of ``entries``."""
    ordered = sorted((e for e in entries if len(e.key) <= MAX_KEY), key=_sort_key)
    parts: list[list[str]] = []
    firsts: list[str] = []
    size = 0
    quoted: dict[str, str] = {}
    for entry in ordered:
        printed = _entry(entry, quoted)
        if not parts or len(parts[-1]) >= PART_ENTRIES or size + len(printed) > PART_BYTES:
            parts.append([])
            firsts.append(entry.key.lower())
            size = 0
        parts[-1].append(printed)
        size += len(printed) + 2
    names = [f"part-{n + 1:04d}.js" for n in range(len(parts))]
    files = [(f"{SEARCH_DIR}/index.js", _manifest(len(ordered), firsts, names))]
    for name, printed_entries in zip(names, parts, strict=True):
        body = ",\n".join(printed_entries)
        script = f"SandboxReplaySearch.part({js_string(name)}, [\n{body}\n]);\n"
        files.append((f"{SEARCH_DIR}/{name}", script.encode("utf-8")))
    return files


def _manifest(count: int, firsts: Sequence[str], names: Sequence[str]) -> bytes:
    parts = ",\n".join(
        f"[{js_string(first)},{js_string(name)}]" for first, name in zip(firsts, names, strict=True)
    )
    script = f'SandboxReplaySearch.manifest({{"count": {count}, "parts": [\n{parts}\n]}});\n'
    return script.encode("utf-8")
