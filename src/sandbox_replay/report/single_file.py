"""Turn a rendered run page into one self-contained HTML file (``build --single-file``).

The file is ``single/<run>.html`` at the root of the site: the run page with the site's
stylesheet inlined as ``<style>`` and its script as ``<script>``, the SVG already being
inline. It makes no request of any kind: no ``<link>``, no ``src=``, and every link to
another file of the site (the index, the catalog, the result record, a large run's
listing sub-pages) becomes plain text, keeping only links to anchors inside the page;
the run's search, which reads the index files beside the run page, is left out.
It holds no ``http://`` or ``https://`` at all: inline SVG drops its ``xmlns``, which HTML
implies. A large run's split listings stay on their sub-pages; its single file carries
the run page with its summaries, as the site's run page does.

The rewrite works on the bytes this package's own templates rendered, in which every
attribute value is double-quoted and autoescaped (a ``"``, ``<`` or ``>`` from an input is
always an entity), so a tag ends at its first ``>`` and no input can open or close one.
Inputs never reach the inlined stylesheet or script; those are package (or ``--templates``)
assets, and one holding ``</style`` or ``</script`` is refused rather than inlined.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

SINGLE_DIR = "single"

_STYLESHEET = re.compile(rb'<link rel="stylesheet" href="[^"]*">')
_SCRIPT = re.compile(rb'<script src="[^"]*"></script>')
# The run's search reads script files beside the run page: a single file has none.
_SEARCH = re.compile(rb'<form class="run-search".*?</form>\n?', re.DOTALL)
_ANCHOR = re.compile(rb"<a\b([^>]*)>(.*?)</a>", re.DOTALL)
_HREF = re.compile(rb'\s(?:(?:href|rel|aria-current|type)="[^"]*"|download(?=[\s>]|$))')
# A namespace name, not a request; the HTML parser puts <svg> in it without being told.
_SVG_XMLNS = b'<svg xmlns="http://www.w3.org/2000/svg" '


class SingleFileError(ValueError):
    """An asset cannot be inlined safely."""


def single_file_path(run_name: str) -> str:
    """Return the site-relative path of a run's single-file page."""
    return f"{SINGLE_DIR}/{run_name}.html"


def _inline(tag: bytes, body: bytes, name: str) -> bytes:
    if re.search(rb"</" + tag, body, re.IGNORECASE) or b"<!--" in body:
        raise SingleFileError(f"{name} holds </{tag.decode()} or <!--; it cannot be inlined")
    return b"<" + tag + b">\n" + body.rstrip(b"\n") + b"\n</" + tag + b">"


def _unlink(match: re.Match[bytes]) -> bytes:
    attributes, content = match.group(1), match.group(2)
    href = re.search(rb'\shref="([^"]*)"', attributes)
    if href is None or href.group(1).startswith(b"#"):
        return match.group(0)
    return b"<span" + _HREF.sub(b"", attributes) + b">" + content + b"</span>"


def single_file_page(page: bytes, css: bytes, js: bytes) -> bytes:
    """Return ``page`` with ``css`` and ``js`` inlined and links to other files made text."""
    styles = _STYLESHEET.findall(page)
    scripts = _SCRIPT.findall(page)
    if len(styles) != 1 or len(scripts) != 1:
        raise SingleFileError("a run page must link exactly one stylesheet and one script")
    style = _inline(b"style", css, "the stylesheet")
    script = _inline(b"script", js, "the script")
    # Links first: nothing inside the inlined assets is taken for a tag.
    page = _SEARCH.sub(b"", page)
    page = _ANCHOR.sub(_unlink, page).replace(_SVG_XMLNS, b"<svg ")
    page = _STYLESHEET.sub(lambda _: style, page)
    return _SCRIPT.sub(lambda _: script, page)


def single_file_pages(
    run_names: Iterable[str], read: Callable[[str], bytes], css: bytes, js: bytes
) -> dict[str, bytes]:
    """Return every run's single-file page, reading each run page with ``read``."""
    return {
        single_file_path(name): single_file_page(read(f"runs/{name}/index.html"), css, js)
        for name in run_names
    }
