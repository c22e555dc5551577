"""Render a finding code's Markdown document to HTML for the catalog page.

The documents are ours (package data), but they are still rendered with raw HTML off, so
any markup written in one is shown as text. Headings are moved down two levels to sit
under the catalog's layer (h2) and code (h3) headings.
"""

from __future__ import annotations

from functools import cache

from markdown_it import MarkdownIt
from markupsafe import Markup

HEADING_SHIFT = 2


@cache
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False})


def render_doc(markdown: str) -> Markup:
    """Return the HTML of one code document, its headings shifted under the code's heading."""
    parser = _parser()
    tokens = parser.parse(markdown)
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            level = min(6, int(token.tag[1:]) + HEADING_SHIFT)
            token.tag = f"h{level}"
    return Markup(parser.renderer.render(tokens, parser.options, {}))
