"""Render view-models with Jinja2: autoescaped, strict, templates overridable by a user folder.

Templates and assets are package data (``sandbox_replay.templates``); a ``--templates``
folder is searched first. The only ``|safe`` values are ``Markup`` built in this package.
Every plain string printed, in text or attribute, has its invisible characters shown as
``<U+XXXX>`` (``exports.text.visible``) before it is escaped, so an input can neither
break the page's parse nor reorder or hide what a reviewer reads. The rows of the join
table and the trace are printed by Python (the ``join_rows`` and ``span_rows`` filters),
each value as a template would print it (``_printed``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from sandbox_replay.exports.text import visible
from sandbox_replay.figures import count
from sandbox_replay.model.codes import Severity
from sandbox_replay.report.views.common import BREAK_AFTER

TEMPLATE_PACKAGE = "sandbox_replay.templates"
ASSETS = ("assets/site.css", "assets/site.js")


def _shown(value: Any) -> Any:
    """Finalize a printed value: a count as ``figures.count`` writes it, text made visible."""
    if type(value) is int:
        return count(value)
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value)
    return value


def _broken(value: Any) -> str:
    """Print ``value`` with ``<wbr>`` where ``breakable`` splits it (escaping adds no break).

    Five ``str.replace`` calls, not ``breakable``'s pattern: this runs on every id of
    every listing row (docs/performance.md).
    """
    text = _printed(value)
    for char in BREAK_AFTER:
        text = text.replace(char, char + "<wbr>")
    return text[:-5] if text.endswith("<wbr>") else text


@functools.lru_cache(maxsize=4096)
def _wbr(value: str) -> Markup:
    """Print an identifier that repeats (risk classes, rule refs) as ``_broken`` does."""
    return Markup(_broken(value))


def _printed(value: Any) -> str:
    """Return what a template's ``{{ value }}`` prints: finalized, then escaped as
    ``markupsafe.escape`` escapes it."""
    if type(value) is str:
        text = visible(value)
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


def print_id_mark(mark: str) -> Markup:
    """Print an id's mark (``exports.text.id_mark``) as a badge beside it; "" prints nothing."""
    return Markup(f'<span class="id-mark">{_printed(mark)}</span>') if mark else _NO_MARK


_NO_MARK = Markup("")


_NO_LINKS = '<span class="muted">none</span>'
_SEVERITY_BADGES = {s.value: f'<span class="sev sev-{s.value}">{s.value}</span>' for s in Severity}


@functools.lru_cache(maxsize=8192)
def _print_cell(cell: Any) -> str:
    """Print one join-table cell (most repeat): its main text, and its note, which may wrap."""
    note = f'<span class="note">{_broken(cell.note)}</span>' if cell.note else ""
    return (
        f'<td class="{_printed(cell.css)}"><span class="cell-main">{_printed(cell.text)}</span>'
        f"{note}</td>"
    )


def print_join_rows(rows: Iterable[Any]) -> Markup:
    """Print the join table's rows (``JoinRow``), one ``<tr>`` each."""
    p = _printed
    printed = []
    for row in rows:
        if row.request_href:
            rid = _broken(row.request_id)
            request = f'<a href="{p(row.request_href)}">{rid}</a>'
        else:
            request = p(row.request_id)
        request = f"{request}{print_id_mark(row.id_mark)}"
        links = row.finding_links and "".join(
            [f'<a href="{p(link.href)}">{_wbr(link.label)}</a>' for link in row.finding_links]
        )
        if row.severity:
            links = _SEVERITY_BADGES[row.severity] + links
        cell = _print_cell
        printed.append(
            f'<tr id="{p(row.anchor)}" class="{p(row.css)}">\n'
            f'<th scope="row"><span class="req-id">{request}</span>'
            f'<a class="permalink" href="#{p(row.anchor)}" aria-label="Link to this row">#</a>'
            f'<span class="note">{_wbr(row.risk_class)}</span>'
            f'<span class="note">{_wbr(row.shape)}</span></th>\n'
            f"{cell(row.declared)}\n{cell(row.derived)}\n{cell(row.side_effect)}\n"
            f"{cell(row.rollback)}\n{cell(row.cold_replay)}\n{cell(row.trace)}\n"
            f'<td class="finding-links">{links or _NO_LINKS}</td>\n'
            "</tr>\n"
        )
    return Markup("".join(printed))


def print_span_rows(spans: Iterable[Any]) -> Markup:
    """Print the trace's rows (``SpanRow``), one ``<tr>`` each."""
    p = _printed
    printed = []
    for s in spans:
        span = p(s.span_id)
        if s.request_href:
            span = f'<a href="{p(s.request_href)}">{span}</a>'
        span = f"{span}{print_id_mark(s.id_mark)}"
        printed.append(
            f'<tr>\n<td class="num">{p(s.sequence)}</td>\n<td>{span}</td>\n'
            f"<td>{p(s.episode)}</td>\n<td>{p(s.action_kind)}</td>\n"
            f'<td class="{p(s.outcome.css)}">{p(s.outcome.text)}</td>\n'
            f"<td>{p(s.verdict_id)}</td>\n<td>{p(s.state_ref)}</td>\n"
            f"<td>{p(s.recovery_ref)}</td>\n"
            f'<td><code class="digest" title="{p(s.input_digest)}">'
            f"{p(s.input_digest_short)}…</code></td>\n</tr>\n"
        )
    return Markup("".join(printed))


def _package_source(name: str) -> str | None:
    node: Traversable = resources.files(TEMPLATE_PACKAGE)
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
        self.env.filters["join_rows"] = print_join_rows
        self.env.filters["span_rows"] = print_span_rows
        self.env.filters["id_mark"] = print_id_mark

    def render(self, template: str, **context: Any) -> bytes:
        """Render one page to UTF-8 bytes."""
        return self.env.get_template(template).render(**context).encode("utf-8")

    def render_listing(self, view: Any) -> bytes:
        """Render one listing sub-page, its table partial first (joined once, as markup)."""
        partial = {
            "join": "_joins.html",
            "gaps": "_joins.html",
            "findings": "_findings.html",
            "trace": "_spans.html",
        }[view.kind]
        table = self.env.get_template(partial).render(
            rows=view.join_rows,
            first_position=view.first_position,
            groups=view.finding_groups,
            spans=view.spans,
        )
        return self.render("listing.html", view=view, table=Markup(table))

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
