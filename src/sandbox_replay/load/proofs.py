"""What the JSON grammar leaves open, proved on a file's bytes in whole-buffer passes.

msgspec decodes every input and refuses what the grammar and Unicode refuse (invalid
UTF-8, lone surrogate escapes, NaN and Infinity, numbers out of range). The loader's
other rules are proved here, each by counting, without a second parser:

- Depth (``Layout.depth``): the deepest nesting of the brackets and braces that stand
  outside strings. Checked before decoding, so a deep file never reaches a decoder.
- Object count (``Layout.objects``): the braces outside strings; a list file holding more
  objects than rows allowed is refused before decoding.
- Duplicate keys (``Layout.strings``): the strings spelled in the text, keys included.
  A decoder keeps one of a repeated key, so the decoded value holds as many strings as
  the text spells exactly when no key was given twice.
- String length (``strings_may_exceed``, ``has_long_string``): the decoded strings are
  measured unless the bytes show that none can be longer than the limit.
- Lines (``Layout.row_lines``, ``line_of_nth``, ``depth_exceeded_line``, ``line_at``):
  where a row opens, or where a refused file breaks a limit.

This is the simplest design that keeps loading strict: one fast decoder does the
grammar, and each rule it leaves open is one count on bytes it has accepted. A file any
step refuses is read again only to word its finding (``refusal``); the fuzz test
(``tests/test_decode_fuzz.py``) holds the decoder and these proofs to the standard
library's strict reading.
"""

from __future__ import annotations

import re
from array import array
from itertools import accumulate
from typing import Any, NamedTuple

_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_DEPTH_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]|[\]}]', re.DOTALL)
# Below this chunk size, looking for marks in every chunk costs more than measuring.
_MIN_MARK_CHUNK = 4096


class Layout(NamedTuple):
    """What a file's bytes spell outside its strings: its brackets, braces and line ends, in
    order (``text``), and how many strings it spells, keys included (``strings``)."""

    text: bytes
    strings: int

    @classmethod
    def of(cls, raw: bytes) -> Layout:
        return cls(*_outside_strings(raw, b"{}[]\n"))

    @property
    def depth(self) -> int:
        """The deepest nesting of arrays and objects."""
        brackets = self.text.translate(None, b"\n")
        if not brackets:
            return 0
        return max(accumulate(array("b", brackets.translate(_BRACKET_STEPS))))

    @property
    def objects(self) -> int:
        return self.text.count(b"{")

    def row_lines(self, count: int, container: int) -> list[int]:
        """Return the line each of ``count`` rows opens on: the ``{`` of each object in the
        list that is the top object's ``container``-th array or object value (0 for the
        first).

        Where every object is the top one or a row, the rows' braces are the second on,
        and the line ends between braces count the lines. Otherwise the walk counts the
        top object's array and object values as they open and takes the objects directly
        inside that list.
        """
        text = self.text
        if text.count(b"{") == count + 1:
            between = text.translate(None, b"}[]").split(b"{")
            return list(accumulate(map(len, between[1:-1]), initial=len(between[0]) + 1))[1:]
        lines, line, depth, containers, inside = [], 1, 0, -1, False
        for byte in text:
            if byte == 10:  # a line end
                line += 1
            elif byte in b"{[":
                depth += 1
                if depth == 2:  # a value of the top object opens: is it that list?
                    containers += 1
                    inside = containers == container and byte == 91
                elif inside and depth == 3 and byte == 123:  # an object in that list: a row
                    lines.append(line)
            else:
                depth -= 1
        return lines


def _outside_strings(raw: bytes, keep: bytes) -> tuple[bytes, int]:
    """Return the bytes of ``keep`` that stand outside strings in ``raw``, in order, and how
    many strings ``raw`` spells.

    Escaped backslashes and quotes are dropped, so every quote left delimits a string (two
    to each); then every byte but quotes and ``keep``. A string holding none of ``keep`` is
    then ``""``. Where every string is, only the quotes are dropped. Otherwise the ``""``
    are dropped (a closing quote next to the following opening one only merges two strings
    with nothing outside between them), and the strings left are cut out by splitting on
    their quotes. ``keep`` must not hold a quote or a backslash.
    """
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    reduced = raw.translate(None, bytes(b for b in range(256) if b not in keep + b'"'))
    strings = reduced.count(b'"') // 2
    if reduced.count(b'""') == strings:
        return reduced.translate(None, b'"'), strings
    reduced = reduced.replace(b'""', b"")
    if b'"' in reduced:
        reduced = b"".join(reduced.split(b'"')[::2])
    return reduced, strings


def strings_may_exceed(raw: bytes, limit: int) -> bool:
    """Return False where no string in ``raw`` can be longer than ``limit`` characters.

    Such a string spans more than ``limit`` bytes, and a run that long covers one of the
    file's aligned chunks of ``(limit + 2) // 2`` bytes whole. No string holds a raw line
    end, nor (where no backslash escapes one) a ``"``: if every chunk holds one of those,
    no string is that long.
    """
    if len(raw) <= limit:
        return False
    size = (limit + 2) // 2
    if size < _MIN_MARK_CHUNK:
        return True
    marks = [b"\n"] if b"\\" in raw else [b"\n", b'"']
    return any(
        all(raw.find(mark, start, start + size) == -1 for mark in marks)
        for start in range(0, len(raw) - size + 1, size)
    )


def has_long_string(value: Any, limit: int) -> bool:
    """Return whether any string or key in ``value`` is longer than ``limit`` characters."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) > limit:
                return True
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
    return False


def line_at(doc: str, pos: int) -> int:
    return doc.count("\n", 0, pos) + 1


def line_of_nth(raw: bytes, byte: bytes, n: int) -> int:
    """Return the line of the ``n``-th (1-based) ``byte`` in ``raw`` (which holds that many),
    by a binary search on counts."""
    low, high = 0, len(raw)  # the n-th byte lies in raw[low:high]
    while high - low > 1:
        middle = (low + high) // 2
        if raw.count(byte, 0, middle) >= n:
            high = middle
        else:
            low = middle
    return raw.count(b"\n", 0, low) + 1


def depth_exceeded_line(raw: bytes, limit: int) -> int | None:
    """Return the line where nesting first goes past ``limit``."""
    depth = 0
    for token in _DEPTH_TOKENS.finditer(raw):
        first = raw[token.start()]
        if first in b"[{":
            depth += 1
            if depth > limit:
                return raw.count(b"\n", 0, token.start()) + 1
        elif first in b"]}":
            depth -= 1
    return None
