"""Syntax-highlight an input file as HTML with an anchor on every line.

Each line is ``<span class="line" id="<slug>-L<n>">`` so a finding can link to it; line
numbers are a CSS counter, so copying the code copies none. The opening line of a linked
row that closes on a later line also carries ``data-row-end="<m>"``, for the script to
mark the whole row. Token markup and escaping are Pygments' own (the line wrapper is its
``HtmlFormatter.wrap`` extension point); whitespace and punctuation stay unstyled. Control
and bidi characters are shown as ``<U+XXXX>`` first, so the listing reads as stored.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from typing import Any

from markupsafe import Markup
from pygments import highlight
from pygments.filter import Filter
from pygments.formatters import HtmlFormatter
from pygments.lexers import JsonLexer
from pygments.token import Punctuation, Text, Whitespace

from sandbox_replay.exports.text import visible

_SLUG_UNSAFE = re.compile(r"[^a-z0-9]+")
# A row is marked over at most this many lines: a link to a file's first line (a finding
# about the whole file) names a "row" as long as the file.
MAX_ROW_LINES = 2000


def file_slug(path: str) -> str:
    """Return the fragment-id stem of an input file: its path without ``.json``, as ``[a-z0-9-]``."""
    stem = path.lower().removesuffix(".json")
    return _SLUG_UNSAFE.sub("-", stem).strip("-") or "file"


def line_id(slug: str, line: int) -> str:
    """Return the fragment id of one line of the file with ``slug``."""
    return f"{slug}-L{line}"


def row_end(lines: Mapping[int, str], first: int, last: int) -> int:
    """Return the line that closes the JSON value opening on line ``first`` (at most ``last``).

    Brackets inside strings do not count; a line that opens nothing is a row of its own.
    """
    depth, opened = 0, False
    for number in range(first, last + 1):
        line = lines.get(number)
        if line is None:
            return number - 1
        quoted = escaped = False
        for c in line:
            if quoted:
                if escaped:
                    escaped = False
                elif c == "\\":
                    escaped = True
                elif c == '"':
                    quoted = False
            elif c == '"':
                quoted = True
            elif c in "{[":
                depth, opened = depth + 1, True
            elif c in "}]":
                depth -= 1
        if not opened or depth <= 0:
            return number
    return last


def row_ends(text: str, first_line: int, rows: Collection[int]) -> dict[int, int]:
    """Return the closing line of each of ``rows`` (opening lines) that closes later in ``text``.

    ``text`` starts at line ``first_line`` of its file.
    """
    lines = dict(enumerate(text.split("\n"), first_line))
    last = first_line + len(lines) - 1
    ends = {}
    for first in sorted(rows):
        if first in lines:
            end = row_end(lines, first, min(last, first + MAX_ROW_LINES - 1))
            if end > first:
                ends[first] = end
    return ends


class _PlainLayout(Filter):  # type: ignore[misc]
    """Turn whitespace and punctuation into plain text, so they get no span of their own."""

    def filter(self, lexer: Any, stream: Iterator[tuple[Any, str]]) -> Iterator[tuple[Any, str]]:
        for ttype, value in stream:
            yield (Text if ttype in Whitespace or ttype in Punctuation else ttype), value


class _LineAnchorFormatter(HtmlFormatter):  # type: ignore[misc]
    """Wrap each highlighted line in a span carrying its anchor id."""

    def __init__(self, slug: str, first_line: int, ends: Mapping[int, int]) -> None:
        super().__init__(cssclass="hl")
        self._slug = slug
        self._first = first_line
        self._ends = ends

    def wrap(self, source: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
        if self._first == 1:
            yield 0, '<pre class="code" tabindex="0"><code>'
        else:  # an excerpt, numbered from its first line
            start = f'<code style="counter-reset: line {self._first - 1}">'
            yield 0, f'<pre class="code excerpt" tabindex="0">{start}'
        number = self._first - 1
        for is_line, text in source:
            if not is_line:
                yield 0, text
                continue
            number += 1
            # Lines are blocks with no newline between them, so a targeted line can be
            # marked across the full width without an empty line after each one.
            body = text.removesuffix("\n")
            end = self._ends.get(number)
            extent = f' data-row-end="{end}"' if end is not None else ""
            yield 1, f'<span class="line" id="{line_id(self._slug, number)}"{extent}>{body}</span>'
        yield 0, "</code></pre>"


def highlight_json(text: str, slug: str, first_line: int = 1, rows: Collection[int] = ()) -> Markup:
    """Return ``text`` as highlighted HTML whose lines carry ``line_id(slug, n)`` anchors.

    ``text`` starts at line ``first_line`` of its file; each of ``rows`` (opening lines the
    pages link to) that closes on a later line is marked with its extent.
    """
    lexer = JsonLexer()
    lexer.add_filter(_PlainLayout())
    formatter = _LineAnchorFormatter(slug, first_line, row_ends(text, first_line, rows))
    return Markup(highlight(visible(text), lexer, formatter))
