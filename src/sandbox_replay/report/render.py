"""Render view-models with Jinja2: autoescaped, strict, templates overridable by a user folder.

Templates and assets are package data (``sandbox_replay.templates``, the repository's
top-level ``templates/`` folder). A user folder given with ``--templates`` is searched
first, for templates and for files under ``assets/`` alike. Nothing rendered here reads
an input: templates get only view-models, and the only ``|safe`` values are the
``Markup`` objects this package builds (SVG, Pygments output, the catalog's Markdown).

Every plain string a template prints, in text and in attribute values alike, first has
its control and bidi characters shown as ``<U+XXXX>`` (``exports.text.visible``) and is
then HTML-escaped: a NUL, an ANSI escape or a right-to-left override from an input can
neither break the page's parse nor reorder what a reviewer reads.
"""

from __future__ import annotations

import functools
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from sandbox_replay.exports.text import visible
from sandbox_replay.report.views import breakable

TEMPLATE_PACKAGE = "sandbox_replay.templates"
ASSETS = ("assets/site.css", "assets/site.js")


def _shown(value: Any) -> Any:
    """Finalize every printed value: plain text gets its hidden characters made visible."""
    if isinstance(value, str) and not isinstance(value, Markup):
        # Printable ASCII holds no control or bidi character: skip the substitution (a
        # large run prints tens of millions of values).
        return value if value.isascii() and value.isprintable() else visible(value)
    return value


@functools.lru_cache(maxsize=4096)
def _wbr(value: str) -> Markup:
    """Print an identifier with ``<wbr>`` after each ``_ : / .`` so a narrow cell may wrap it.

    One filter call instead of a template loop over its parts: a 600,000-row join table
    prints five such identifiers per row, most of them (risk classes, rule refs) repeated,
    hence the cache. Each part is finalized as any printed value is.
    """
    # Escaping neither adds nor removes a break character, so escape once, then split.
    return Markup("<wbr>".join(breakable(str(escape(_shown(value))))))


def _package_root() -> Traversable:
    return resources.files(TEMPLATE_PACKAGE)


def _package_source(name: str) -> str | None:
    node = _package_root()
    for part in name.split("/"):
        node = node / part
    if not node.is_file():
        return None
    return node.read_text(encoding="utf-8")


class Renderer:
    """Render pages and read assets, looking in the user folder first, then the package."""

    def __init__(self, override: Path | None = None) -> None:
        loaders: list[jinja2.BaseLoader] = []
        if override is not None:
            loaders.append(jinja2.FileSystemLoader(str(override)))
        loaders.append(jinja2.FunctionLoader(_package_source))
        self.override = override
        self.env = jinja2.Environment(
            loader=jinja2.ChoiceLoader(loaders),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
            finalize=_shown,
        )
        self.env.filters["wbr"] = _wbr
        # A join-table cell is rendered by its template once per distinct cell: most of a
        # large run's 3.6 million cells repeat ("executed · 1 diff", "verified", ...).
        self.env.filters["cell"] = functools.lru_cache(maxsize=8192)(self._cell)

    def _cell(self, cell: Any) -> Markup:
        return Markup(self.env.get_template("_cell.html").render(cell=cell))

    def render(self, template: str, **context: Any) -> bytes:
        """Render one page to UTF-8 bytes."""
        return self.env.get_template(template).render(**context).encode("utf-8")

    def render_listing(self, view: Any) -> bytes:
        """Render one listing sub-page: its table first, then the page around it.

        The table partial is rendered on its own and handed to the page as markup, so its
        tens of thousands of pieces are joined once instead of being passed up through the
        include, block and layout generators one at a time.
        """
        partial = {"join": "_joins.html", "findings": "_findings.html", "trace": "_spans.html"}
        template = self.env.get_template(partial[view.kind])
        table = Markup(
            template.render(rows=view.join_rows, groups=view.finding_groups, spans=view.spans)
        )
        return self.render("listing.html", view=view, table=table)

    def asset(self, name: str) -> bytes:
        """Return an asset's bytes, from the user folder when it has one."""
        if self.override is not None:
            candidate = self.override / name
            if candidate.is_file():
                return candidate.read_bytes()
        source = _package_source(name)
        if source is None:
            raise FileNotFoundError(f"asset {name} is missing from the package")
        return source.encode("utf-8")
