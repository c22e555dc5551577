"""Constants, cells, badges, links and pagers shared by a run's pages and the site pages."""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeGuard

from sandbox_replay import figures
from sandbox_replay.load.run import InputMode
from sandbox_replay.model import codes
from sandbox_replay.model.codes import REGISTRY, Layer
from sandbox_replay.model.policy import VERDICTS

GAP = "— missing"
MAX_SHOWN_BYTES = 256 * 1024
# A larger input file shows at most this many rows its findings cite, each from two lines
# before its opening line to its closing bracket (at most EXCERPT_LINES).
MAX_EXCERPTS = 50
EXCERPT_BEFORE = 2
EXCERPT_LINES = 60
# Rows per listing page: a longer listing is on numbered sub-pages.
PAGE_ROWS = 500
MAIN_PAGE = "index.html"
CHANGES_PAGE = "changes/index.html"
ACTIONS_FILE = "action_requests.json"
CORE_VERDICTS = ("allow", "block", "review")
TRACE_OUTCOMES = frozenset({"blocked", "executed", "unverified", *VERDICTS})
MODE_LABELS = {InputMode.FIXTURE: "fixture", InputMode.BUNDLE: "bundle"}
# How each kind of policy file is named on the pages (FORMAT 6).
POLICY_KINDS = {"table": "policy table", "cedar": "Cedar policy set"}
STATUS_LABELS = {
    "pass": "Pass",
    "blocked": "Blocked",
    "not_run": "Not run",
    "not_applicable": "N/A",
}


@dataclass(frozen=True)
class Chrome:
    """What every page's frame needs: title, and links relative to the page."""

    title: str
    root: str
    css_href: str
    js_href: str
    index_href: str
    codes_href: str
    policy_href: str
    active: str
    build_time: str
    tool_version: str
    # The "Changes" page, only in a build compared with a baseline (``--baseline``).
    changes_href: str | None = None
    # On a run's pages: its search index and run page (relative), its request count, and
    # the rows per join-table page (0: all on the run page).
    search_index: str = ""
    run_page: str = ""
    requests: int = 0
    join_page_rows: int = 0


def chrome(title: str, root: str, active: str, build_time: str, version: str) -> Chrome:
    """Return the frame of a page ``root`` levels below the site root (``""``, ``"../"``)."""
    return Chrome(
        title=title,
        root=root,
        css_href=f"{root}assets/site.css",
        js_href=f"{root}assets/site.js",
        index_href=f"{root}index.html",
        codes_href=f"{root}codes/index.html",
        policy_href=f"{root}policy/index.html",
        active=active,
        build_time=build_time,
        tool_version=version,
    )


BREAK_AFTER = "_:/.·"
_BREAK_AFTER = re.compile(f"(?<=[{re.escape(BREAK_AFTER)}])")


def breakable(value: str) -> tuple[str, ...]:
    """Split an identifier after ``_ : / .`` so a narrow cell may wrap it there (``<wbr>``)."""
    return tuple(part for part in _BREAK_AFTER.split(value) if part)


class Cell(NamedTuple):
    """One table cell: its text, an optional second line, and its CSS class (a named
    tuple, as the listings' rows: a large run makes many, and printing caches by hash)."""

    text: str
    note: str = ""
    css: str = ""


@dataclass(frozen=True)
class Badge:
    """A status shown by word and colour."""

    text: str
    css: str


def badge(status: str) -> Badge:
    return Badge(STATUS_LABELS.get(status, status), f"badge status-{status}")


def check_badge(passed: bool, yes: str, no: str) -> Badge:
    """Return ``yes`` shown as a pass, or ``no`` as blocked."""
    return Badge(yes, "badge status-pass") if passed else Badge(no, "badge status-blocked")


def text(value: Any) -> str:
    """Return a record value as display text (``true``/``false`` for booleans, ``""`` for null)."""
    if type(value) is str:  # the common case first
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        try:  # a list of strings, nearly always: each is its own text
            return ", ".join(value)
        except TypeError:
            return ", ".join(text(v) for v in value)
    return str(value)


def expected_alarm(code: str) -> bool:
    """Say whether a finding of ``code`` is a planted negative case's alarm, as expected."""
    return REGISTRY[code].layer is Layer.NEGATIVE_CASES and code != codes.NEGATIVE_CASE_MISSING


def policy_kind_label(kind: str) -> str:
    return POLICY_KINDS.get(kind, kind)


def verdict_css(verdict: str) -> str:
    """Return the CSS class of a verdict shown with its marker ("" for an unknown one)."""
    return f"v-{verdict}" if verdict in VERDICTS else ""


plural = figures.plural


def byte_size(count: int) -> str:
    """Return a size for reading: ``812 bytes``, ``58.2 KB``, ``2.1 GB`` (powers of 1,000)."""
    if count < 1000:
        return plural(count, "byte")
    for unit, scale in (("KB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if count < scale * 1000 or unit == "GB":
            return f"{count / scale:,.1f} {unit}"
    raise AssertionError("unreachable")


def short_code(code: str) -> str:
    """Return a code without its family prefix, for narrow cells (the link names it in full)."""
    for prefix in ("PUBLIC_TRACE_SANDBOX_", "SANDBOX_POLICY_"):
        if code.startswith(prefix):
            return code.removeprefix(prefix)
    return code


def code_href(code: str, root: str) -> str:
    return f"{root}codes/index.html#{REGISTRY[code].anchor}"


_SAFE_SLUG = re.compile(r"[A-Za-z0-9_.\-]*")


def content_slug(value: str) -> str:
    """Return ``value`` as a fragment id stem: itself when plain, else reversibly encoded.

    Any character but letters, digits and ``_ . -`` becomes ``~`` and the hex of each of
    its UTF-8 bytes: a script reads ``~`` as ``%`` to recover it (``decodeURIComponent``).
    """
    if _SAFE_SLUG.fullmatch(value):
        return value
    return "".join(
        c
        if _SAFE_SLUG.fullmatch(c)
        else "".join(f"~{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
        for c in value
    )


def request_anchor(request_id: str) -> str:
    """Return the permalink anchor of a request's join row, from its id alone."""
    return "req-" + content_slug(request_id)


def rule_anchor(rule_ref: str) -> str:
    """Return the anchor of a policy rule's row in a run's coverage table."""
    return "rule-" + content_slug(rule_ref)


def finding_fingerprint(finding: Any) -> str:
    """Return a finding's position-free fingerprint: 16 hex digits of the sha256 of its
    code, layer, subject, path and line (``finding_anchors`` numbers repeats)."""
    digest = hashlib.sha256()
    for name in ("error_code", "layer", "subject_id", "path", "line"):
        digest.update(text(finding.get(name)).encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()[:16]


def finding_anchors(findings: Iterable[Any]) -> list[str]:
    """Return each finding's permalink anchor: ``f-`` and its fingerprint (``-2``... on repeats)."""
    seen: dict[str, int] = {}
    anchors = []
    for finding in findings:
        fingerprint = finding_fingerprint(finding)
        seen[fingerprint] = seen.get(fingerprint, 0) + 1
        repeat = seen[fingerprint]
        anchors.append(f"f-{fingerprint}" + (f"-{repeat}" if repeat > 1 else ""))
    return anchors


def is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def relative_href(target_page: str, anchor: str, from_page: str) -> str:
    """Return a link from ``from_page`` to ``anchor`` on ``target_page`` (both run-relative;
    sub-pages are one folder down, ``join/page-0001.html``)."""
    if target_page == from_page:
        return "#" + anchor
    folder, _, _ = from_page.rpartition("/")
    if folder and target_page.startswith(folder + "/"):
        return f"{target_page[len(folder) + 1 :]}#{anchor}"
    prefix = "../" if folder else ""
    return f"{prefix}{target_page}#{anchor}"


@dataclass(frozen=True)
class Pager:
    """Where one listing lives: inline on the run page, or on numbered sub-pages."""

    section: str
    total: int
    page_rows: int = PAGE_ROWS
    # On sub-pages however short (the gaps listing): at least one page, maybe empty.
    own_pages: bool = False

    @property
    def split(self) -> bool:
        return self.own_pages or self.total > self.page_rows

    @property
    def page_count(self) -> int:
        return max(1, -(-self.total // self.page_rows)) if self.split else 1

    def path(self, page: int) -> str:
        """Return the run-relative path of page ``page`` (0-based)."""
        return f"{self.section}/page-{page + 1:04d}.html" if self.split else MAIN_PAGE

    @functools.cached_property
    def _paths(self) -> tuple[str, ...]:
        return tuple(self.path(page) for page in range(self.page_count))

    def page_of(self, index: int) -> str:
        """Return the run-relative path of the page that shows item ``index``."""
        return self._paths[index // self.page_rows] if self.split else MAIN_PAGE

    def bounds(self, page: int) -> tuple[int, int]:
        start = page * self.page_rows
        return start, min(start + self.page_rows, self.total)


@dataclass(frozen=True)
class PageLink:
    label: str
    href: str
    current: bool = False
    # What the page holds (the join table's first and last ids).
    range: str = ""


@dataclass(frozen=True)
class PageNav:
    """Links between a listing's pages: previous, next, and the page numbers (on a
    sub-page only the first, the last and five either side of the current one)."""

    summary: str
    previous: str
    next: str
    pages: tuple[PageLink, ...]


def page_nav(
    pager: Pager,
    noun: str,
    current: int | None,
    ranges: Callable[[int], str] | None = None,
) -> PageNav:
    """Return the navigation of ``pager`` seen from page ``current`` (None: the run page);
    ``ranges`` says what each page holds."""
    from_page = MAIN_PAGE if current is None else pager.path(current)
    count = pager.page_count

    def href(page: int) -> str:
        return relative_href(pager.path(page), f"{pager.section}-list", from_page)

    shown: Iterable[int] = range(count)
    if current is not None:
        shown = sorted({*range(max(0, current - 5), min(count, current + 6)), 0, count - 1})
    links = []
    last = -1
    for page in shown:
        if page > last + 1:
            links.append(PageLink("…", ""))
        held = ranges(page) if ranges is not None else ""
        links.append(PageLink(str(page + 1), href(page), page == current, held))
        last = page
    previous = next_ = ""
    summary = f"{pager.total:,} {noun} on {plural(count, 'page')} of {pager.page_rows}"
    if current is not None:
        previous = href(current - 1) if current > 0 else ""
        next_ = href(current + 1) if current + 1 < count else ""
        start, end = pager.bounds(current)
        summary = (
            f"{noun.capitalize()} {start + 1:,}–{end:,} of {pager.total:,} "
            f"(page {current + 1:,} of {count:,})"
            if pager.total
            else f"No {noun}"
        )
    return PageNav(summary, previous, next_, tuple(links))
