"""Turn a run's single-file view into one self-contained HTML file (``build --single-file``).

The file is ``single/<run>.html``: the run's single-file view (``views.single``) with the
stylesheet and script inlined. It makes no request and holds no ``http(s)://``: a catalog
link points at the code's explanation in the page, any other link leaving the page
becomes plain text, the search is left out and inline SVG drops its ``xmlns``.

The rewrite works on bytes our own templates rendered, where every attribute value is
double-quoted and autoescaped, so a tag ends at its first ``>`` and no input can open or
close one. An asset holding ``</style`` or ``</script`` is refused rather than inlined.
"""

from __future__ import annotations

import re

SINGLE_DIR = "single"

_STYLESHEET = re.compile(rb'<link rel="stylesheet" href="[^"]*">')
_SCRIPT = re.compile(rb'<script src="[^"]*"></script>')
# The run's search reads script files beside the run page: a single file has none.
_SEARCH = re.compile(rb'<form class="run-search".*?</form>\n?', re.DOTALL)
_ANCHOR = re.compile(rb"<a\b([^>]*)>(.*?)</a>", re.DOTALL)
_HREF = re.compile(rb'\s(?:(?:href|rel|aria-current|type)="[^"]*"|download(?=[\s>]|$))')
# A namespace name, not a request; the HTML parser puts <svg> in it without being told.
_SVG_XMLNS = b'<svg xmlns="http://www.w3.org/2000/svg" '
_ID = re.compile(rb'\sid="([^"]*)"')
# A link to a code's catalog entry, from a run page or one of its sub-pages.
_CODE_LINK = re.compile(rb"(?:\.\./)+codes/index\.html#([a-z0-9-]+)")
# What a code's explanation in a single file is named by: its catalog anchor behind this
# (``views.single.single_code_anchor``).
CODE_PREFIX = b"code_"


class SingleFileError(ValueError):
    """An asset cannot be inlined safely."""


def single_file_path(run_name: str) -> str:
    """Return the site-relative path of a run's single-file page."""
    return f"{SINGLE_DIR}/{run_name}.html"


def _inline(tag: bytes, body: bytes, name: str) -> bytes:
    if re.search(rb"</" + tag, body, re.IGNORECASE) or b"<!--" in body:
        raise SingleFileError(f"{name} holds </{tag.decode()} or <!--; it cannot be inlined")
    return b"<" + tag + b">\n" + body.rstrip(b"\n") + b"\n</" + tag + b">"


def _relink(match: re.Match[bytes], ids: frozenset[bytes]) -> bytes:
    """Keep a link to an anchor of the page, point a catalog link at the page's copy of the
    code's explanation, and make any other link plain text."""
    attributes, content = match.group(1), match.group(2)
    href = re.search(rb'\shref="([^"]*)"', attributes)
    if href is None:
        return match.group(0)
    target = href.group(1)
    code = _CODE_LINK.fullmatch(target)
    if code is not None:
        target = b"#" + CODE_PREFIX + code.group(1)
    if target.startswith(b"#") and target[1:] in ids:
        start, end = href.span(1)
        return b"<a" + attributes[:start] + target + attributes[end:] + b">" + content + b"</a>"
    return b"<span" + _HREF.sub(b"", attributes) + b">" + content + b"</span>"


def single_file_page(page: bytes, css: bytes, js: bytes) -> bytes:
    """Return ``page`` with ``css`` and ``js`` inlined and every link kept within it."""
    styles = _STYLESHEET.findall(page)
    scripts = _SCRIPT.findall(page)
    if len(styles) != 1 or len(scripts) != 1:
        raise SingleFileError("a run page must link exactly one stylesheet and one script")
    style = _inline(b"style", css, "the stylesheet")
    script = _inline(b"script", js, "the script")
    # Links first: nothing inside the inlined assets is taken for a tag.
    page = _SEARCH.sub(b"", page)
    ids = frozenset(_ID.findall(page))
    page = _ANCHOR.sub(lambda match: _relink(match, ids), page).replace(_SVG_XMLNS, b"<svg ")
    page = _STYLESHEET.sub(lambda _: style, page)
    return _SCRIPT.sub(lambda _: script, page)
