"""Render view-models with Jinja2: autoescaped, strict, templates overridable by a user folder.

Templates and assets are package data (``sandbox_replay.templates``, the repository's
top-level ``templates/`` folder). A user folder given with ``--templates`` is searched
first, for templates and for files under ``assets/`` alike. Nothing rendered here reads
an input: templates get only view-models, and the only ``|safe`` values are the
``Markup`` objects this package builds (SVG, Pygments output, the catalog's Markdown).

Every plain string a template prints, in text and in attribute values alike, first has
its control, format and other invisible characters shown as ``<U+XXXX>``
(``exports.text.visible``) and is then HTML-escaped: a NUL, an ANSI escape or a
right-to-left override from an input can neither break the page's parse nor reorder what
a reviewer reads, and a zero-width space or a tag character cannot hide in an id.

Three partials are printed by Python instead when no user folder overrides them: the rows
of the join table (``_joins.html``), of the trace (``_spans.html``) and the join-table
cells (``_cell.html``), hundreds of thousands of rows at 600,000 requests. They print the
bytes the template would, with the same finalize and escape (``_printed``); the template
stays the reference, is used when overridden, and ``tests/test_site_scale.py`` renders
varied and hostile rows both ways and compares them.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable
from importlib import resources
from importlib.resources.abc import Traversable
from itertools import chain
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from sandbox_replay.exports.text import visible

TEMPLATE_PACKAGE = "sandbox_replay.templates"
ASSETS = ("assets/site.css", "assets/site.js")


def _shown(value: Any) -> Any:
    """Finalize every printed value: plain text gets its hidden characters made visible."""
    if isinstance(value, str) and not isinstance(value, Markup):
        # Printable ASCII holds no character ``visible`` marks: skip the substitution (a
        # large run prints tens of millions of values).
        return value if value.isascii() and value.isprintable() else visible(value)
    return value


def _breaks(text: str) -> str:
    """Return ``text`` with ``<wbr>`` where ``breakable`` splits it.

    That is after each ``_ : / . ·`` but a final one (``breakable`` drops the empty part
    after it). Five ``str.replace`` calls: twice as fast as one regular-expression pass,
    and a join table breaks two identifiers of every row.
    """
    broken = (
        text.replace("_", "_<wbr>")
        .replace(":", ":<wbr>")
        .replace("/", "/<wbr>")
        .replace(".", ".<wbr>")
        .replace("·", "·<wbr>")
    )
    return broken[:-5] if text.endswith(("_", ":", "/", ".", "·")) else broken


@functools.lru_cache(maxsize=4096)
def _wbr(value: str) -> Markup:
    """Print an identifier with ``<wbr>`` after each ``_ : / .`` so a narrow cell may wrap it.

    One filter call instead of a template loop over its parts: a 600,000-row join table
    prints five such identifiers per row, most of them (risk classes, rule refs) repeated,
    hence the cache. The text is printed as any value is (``_printed``); escaping neither
    adds nor removes a break character, so the breaks go into the escaped text: the
    ``<wbr>``-joined parts of ``breakable`` (which drops empty parts: none before the
    first character, none after the last break character).
    """
    return Markup(_breaks(_printed(value)))


def _printed(value: Any) -> str:
    """Return what a template's ``{{ value }}`` prints: finalized, then HTML-escaped.

    The same characters as Jinja's autoescape, which calls ``markupsafe.escape``: markup as
    it is; anything else as text (``_shown`` first for a string), with ``& > < ' "``
    replaced in the order ``markupsafe`` replaces them.
    """
    if type(value) is str:
        text = value if value.isascii() and value.isprintable() else visible(value)
    elif hasattr(value, "__html__"):
        return str(value.__html__())
    else:
        text = str(_shown(value))
    return (
        text.replace("&", "&amp;")
        .replace(">", "&gt;")
        .replace("<", "&lt;")
        .replace("'", "&#39;")
        .replace('"', "&#34;")
    )


# The plain-text fields of a ``JoinRow`` and a ``SpanRow`` that their partials print.
_JOIN_TEXTS = operator.attrgetter("anchor", "css", "request_href", "request_id")
_SPAN_TEXTS = operator.attrgetter(
    "request_href",
    "sequence",
    "span_id",
    "episode",
    "action_kind",
    "verdict_id",
    "state_ref",
    "recovery_ref",
    "input_digest",
    "input_digest_short",
)
_NO_LINKS = '<span class="muted">none</span>'
_ESCAPED = "&<>'\""


def _print_as_is(values: Iterable[str]) -> bool:
    """Say whether every value prints as it is: no hidden character, nothing to escape.

    ``_printed`` leaves such a value unchanged, so a table whose values all pass, nearly
    every table, prints them with ``str`` (which returns a string itself) instead: one
    check of the joined text instead of a call per value. ``visible`` and the escapes
    replace single characters, so the joined text passes exactly when each value does.

    ``visible`` replaces no printable ASCII character, so such a text is left as it is
    without running its pattern; any other text (a tab, a line break, a letter outside
    ASCII, which may be a variation selector or another invisible one) is checked by
    running it. Each escaped character is looked for with ``in``, several times faster
    than one pattern over the text.
    """
    try:
        joined = "".join(values)
    except TypeError:  # not all strings: print each
        return False
    if any(character in joined for character in _ESCAPED):
        return False
    return (joined.isascii() and joined.isprintable()) or visible(joined) == joined


def _print_cell(cell: Any) -> Markup:
    """Print ``_cell.html`` for one cell: the bytes Jinja would print (see ``_join_table``)."""
    # ``_wbr`` without its cache and markup: a cell is printed once per distinct cell.
    note = f'<span class="note">{_breaks(_printed(cell.note))}</span>' if cell.note else ""
    return Markup(
        f'<td class="{_printed(cell.css)}"><span class="cell-main">{_printed(cell.text)}</span>'
        f"{note}</td>"
    )


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
        cell = self._cell if self._overridden("_cell.html") else _print_cell
        self.env.filters["cell"] = functools.lru_cache(maxsize=8192)(cell)
        # The two partials a large run prints hundreds of thousands of rows of: printed in
        # Python unless a user folder overrides them (see ``_join_table``).
        self.printers: dict[str, Callable[[Any], str]] = {}
        if not self._overridden("_joins.html"):
            self.printers["join"] = self._join_table
        if not self._overridden("_spans.html"):
            self.printers["trace"] = self._span_table

    def _overridden(self, name: str) -> bool:
        """Say whether the user folder holds template ``name`` (it is then searched first)."""
        return self.override is not None and (self.override / name).is_file()

    def _frame(self, name: str, **empty: Any) -> tuple[str, str]:
        """Return what partial ``name`` prints before and after its rows (its table frame)."""
        frame = self.env.get_template(name).render(**empty)
        cut = frame.index("</tbody>")
        return frame[:cut], frame[cut:]

    def _join_table(self, view: Any) -> str:
        """Print ``_joins.html`` for ``view.join_rows``: the bytes Jinja would print.

        Jinja spends about 5 µs on each value it prints (attribute lookup, finalize, escape,
        a ``Markup`` made and joined), so a 600,000-request run's join table took about 30
        s; this loop prints the same row in one f-string. The frame comes from the template
        itself; the row is the template's row written out (``tests/test_site_scale.py``
        renders varied and hostile rows both ways and compares them).
        """
        head, tail = self._frame("_joins.html", rows=())
        cell = self.env.filters["cell"]
        rows = view.join_rows
        hrefs = [link.href for row in rows for link in row.finding_links]
        as_is = _print_as_is(chain(chain.from_iterable(map(_JOIN_TEXTS, rows)), hrefs))
        p = str if as_is else _printed
        printed = [head]
        for row in rows:
            if row.request_href:
                # ``_wbr`` without its cache and markup: a request id is printed once.
                rid = _breaks(p(row.request_id))
                request = f'<a href="{p(row.request_href)}">{rid}</a>'
            else:
                request = p(row.request_id)
            links = row.finding_links and "".join(
                [f'<a href="{p(link.href)}">{_wbr(link.label)}</a>' for link in row.finding_links]
            )
            printed.append(
                f'<tr id="{p(row.anchor)}" class="{p(row.css)}">\n'
                f'<th scope="row"><span class="req-id">{request}</span>'
                f'<span class="note">{_wbr(row.risk_class)}</span>'
                f'<span class="note">{_wbr(row.shape)}</span></th>\n'
                f"{cell(row.declared)}\n{cell(row.derived)}\n{cell(row.side_effect)}\n"
                f"{cell(row.rollback)}\n{cell(row.cold_replay)}\n{cell(row.trace)}\n"
                f'<td class="finding-links">{links or _NO_LINKS}</td>\n'
                "</tr>\n"
            )
        printed.append(tail)
        return "".join(printed)

    def _span_table(self, view: Any) -> str:
        """Print ``_spans.html`` for ``view.spans``, as ``_join_table`` prints the joins."""
        head, tail = self._frame("_spans.html", spans=())
        spans = view.spans
        outcomes = [s.outcome for s in spans]
        texts = chain.from_iterable(map(_SPAN_TEXTS, spans))
        as_is = _print_as_is(chain(texts, chain.from_iterable(outcomes)))
        p = str if as_is else _printed
        printed = [head]
        for s in spans:
            span = p(s.span_id)
            if s.request_href:
                span = f'<a href="{p(s.request_href)}">{span}</a>'
            printed.append(
                f'<tr>\n<td class="num">{p(s.sequence)}</td>\n<td>{span}</td>\n'
                f"<td>{p(s.episode)}</td>\n<td>{p(s.action_kind)}</td>\n"
                f'<td class="{p(s.outcome.css)}">{p(s.outcome.text)}</td>\n'
                f"<td>{p(s.verdict_id)}</td>\n<td>{p(s.state_ref)}</td>\n"
                f"<td>{p(s.recovery_ref)}</td>\n"
                f'<td><code class="digest" title="{p(s.input_digest)}">'
                f"{p(s.input_digest_short)}…</code></td>\n</tr>\n"
            )
        printed.append(tail)
        return "".join(printed)

    def _cell(self, cell: Any) -> Markup:
        return Markup(self.env.get_template("_cell.html").render(cell=cell))

    def render(self, template: str, **context: Any) -> bytes:
        """Render one page to UTF-8 bytes."""
        return self.env.get_template(template).render(**context).encode("utf-8")

    def render_listing(self, view: Any) -> bytes:
        """Render one listing sub-page: its table first, then the page around it.

        The table partial is rendered on its own and handed to the page as markup, so its
        tens of thousands of pieces are joined once instead of being passed up through the
        include, block and layout generators one at a time. The join table and the trace,
        unless a user folder overrides their partial, are printed by ``_join_table`` and
        ``_span_table`` instead (see ``TablePrinter``).
        """
        partial = {"join": "_joins.html", "findings": "_findings.html", "trace": "_spans.html"}
        if view.kind in self.printers:
            table = Markup(self.printers[view.kind](view))
        else:
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
