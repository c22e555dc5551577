"""Syntax-highlight an input file as HTML with an anchor on every line.

Each line is ``<span class="line" id="<slug>-L<n>">``, so a finding can link to the exact
line and the stylesheet can mark it as the target; line numbers are drawn by a CSS
counter, so copying the code copies no numbers. The line wrapper is Pygments' documented
extension point (``HtmlFormatter.wrap``); the token markup and the escaping of every
input character are Pygments' own. Whitespace and punctuation are left unstyled, which
keeps a page of highlighted JSON about four times its source size rather than eight.
Control and bidi characters in the file (raw bidi overrides are valid JSON) are shown as
``<U+XXXX>`` before highlighting, so the listing reads in the order the bytes are stored.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from markupsafe import Markup
from pygments import highlight
from pygments.filter import Filter
from pygments.formatters import HtmlFormatter
from pygments.lexers import JsonLexer
from pygments.token import Punctuation, Text, Whitespace

from sandbox_replay.exports.text import visible

_SLUG_UNSAFE = re.compile(r"[^a-z0-9]+")


def file_slug(path: str) -> str:
    """Return the fragment-id stem of an input file: its path without ``.json``, as ``[a-z0-9-]``."""
    stem = path.lower().removesuffix(".json")
    return _SLUG_UNSAFE.sub("-", stem).strip("-") or "file"


def line_id(slug: str, line: int) -> str:
    """Return the fragment id of one line of the file with ``slug``."""
    return f"{slug}-L{line}"


class _PlainLayout(Filter):  # type: ignore[misc]
    """Turn whitespace and punctuation into plain text, so they get no span of their own."""

    def filter(self, lexer: Any, stream: Iterator[tuple[Any, str]]) -> Iterator[tuple[Any, str]]:
        for ttype, value in stream:
            yield (Text if ttype in Whitespace or ttype in Punctuation else ttype), value


class _LineAnchorFormatter(HtmlFormatter):  # type: ignore[misc]
    """Wrap each highlighted line in a span carrying its anchor id."""

    def __init__(self, slug: str, first_line: int = 1) -> None:
        super().__init__(cssclass="hl")
        self._slug = slug
        self._first = first_line

    def wrap(self, source: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
        if self._first == 1:
            yield 0, '<pre class="code" tabindex="0"><code>'
        else:  # an excerpt: numbered from its first line (``first_line`` is an int)
            yield (
                0,
                (
                    '<pre class="code excerpt" tabindex="0">'
                    f'<code style="counter-reset: line {self._first - 1}">'
                ),
            )
        number = self._first - 1
        for is_line, text in source:
            if not is_line:
                yield 0, text
                continue
            number += 1
            # Lines are blocks with no newline between them, so a targeted line can be
            # marked across the full width without an empty line after each one.
            body = text.removesuffix("\n")
            yield 1, f'<span class="line" id="{line_id(self._slug, number)}">{body}</span>'
        yield 0, "</code></pre>"


def highlight_json(text: str, slug: str, first_line: int = 1) -> Markup:
    """Return ``text`` as highlighted HTML whose lines carry ``line_id(slug, n)`` anchors.

    ``text`` starts at line ``first_line`` of its file: an excerpt, when that is not 1.
    """
    lexer = JsonLexer()
    lexer.add_filter(_PlainLayout())
    return Markup(highlight(visible(text), lexer, _LineAnchorFormatter(slug, first_line)))
