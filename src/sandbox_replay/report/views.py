"""View-models of a run's pages: everything a template shows, decided here.

The site-wide pages (the index and the finding-code catalog) are ``site_views``.

Templates only loop, branch and escape; every URL, CSS class, sort key, percentage and
sentence is computed in this module. Figures come from each run's result record, which
is already redacted (see ``records``), so a page can only show what the record shows;
the few values taken from the replay itself (module anchors, input bytes) are redacted
or scan-checked here too.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import is_
from typing import Any, NamedTuple, TypeGuard, cast

from markupsafe import Markup

from sandbox_replay import codes
from sandbox_replay.codes import REGISTRY, Layer
from sandbox_replay.drawing.flowchart import FlowEdge, FlowNode, draw_flowchart
from sandbox_replay.headline import GapHeadline, gap_headline
from sandbox_replay.inputs import InputMode, rollback_id_of
from sandbox_replay.layers.negative_cases import NEGATIVE_CASES
from sandbox_replay.lazyrows import LazyRows, PickedRows, column_of
from sandbox_replay.loader import FileChangedError, read_same_file
from sandbox_replay.pipeline import Replay
from sandbox_replay.policy import VERDICTS
from sandbox_replay.records import RunRecords, build_receipt, redact
from sandbox_replay.report import charts
from sandbox_replay.report.discover import DiscoveredRun
from sandbox_replay.report.highlight import file_slug, highlight_json, line_id

GAP = "— missing"
MAX_SHOWN_BYTES = 256 * 1024
# Rows per listing page. A run with more join rows, findings or spans than this shows that
# listing on numbered sub-pages instead (a join row renders to about 1.5 KB, so a page stays
# near 1 MB); the fixtures' six requests stay on the run page.
PAGE_ROWS = 500
MAIN_PAGE = "index.html"
ACTIONS_FILE = "action_requests.json"
CORE_VERDICTS = ("allow", "block", "review")
TRACE_OUTCOMES = frozenset({"blocked", "executed", "unverified", *VERDICTS})
MODE_LABELS = {InputMode.FIXTURE: "fixture", InputMode.BUNDLE: "bundle"}
STATUS_LABELS = {
    "pass": "Pass",
    "blocked": "Blocked",
    "not_run": "Not run",
    "not_applicable": "N/A",
}


# ---------------------------------------------------------------------------------------
# Shared pieces


@dataclass(frozen=True)
class Chrome:
    """What every page's frame needs: title, and links relative to the page."""

    title: str
    root: str
    css_href: str
    js_href: str
    index_href: str
    codes_href: str
    active: str
    build_time: str
    tool_version: str


def chrome(title: str, root: str, active: str, build_time: str, version: str) -> Chrome:
    """Return the frame of a page ``root`` levels below the site root (``""``, ``"../"``)."""
    return Chrome(
        title=title,
        root=root,
        css_href=f"{root}assets/site.css",
        js_href=f"{root}assets/site.js",
        index_href=f"{root}index.html",
        codes_href=f"{root}codes/index.html",
        active=active,
        build_time=build_time,
        tool_version=version,
    )


_BREAK_AFTER = re.compile(r"(?<=[_:/.·])")


def breakable(value: str) -> tuple[str, ...]:
    """Split an identifier after ``_ : / .`` so a narrow cell may wrap it there (``<wbr>``)."""
    return tuple(part for part in _BREAK_AFTER.split(value) if part)


class Cell(NamedTuple):
    """One table cell: its text, an optional second line, and its CSS class.

    The row types of the listings (``Cell``, ``JoinRow``, ``SpanRow``) are named tuples
    rather than frozen dataclasses: a 600,000-request run makes millions of them, a named
    tuple is made and hashed in C, and a cell is looked up by its hash when rendered.
    """

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


def text(value: Any) -> str:
    """Return a record value as display text (``true``/``false`` for booleans, ``""`` for null)."""
    if type(value) is str:  # the common case first: a join table reads millions of values
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


def _column(rows: Iterable[Mapping[str, Any]], key: str) -> list[Any]:
    """Return ``[row.get(key) for row in rows]`` (dicts: looked up in C; picked rows: by column)."""
    if isinstance(rows, PickedRows):
        return rows.column(key)
    return list(map(dict.get, rows, repeat(key)))  # type: ignore[arg-type]


def _texts(values: list[Any]) -> list[str]:
    """Return ``[text(v) for v in values]``, in C for the common columns.

    ``text`` returns a string itself, ``str`` of an int (not of a bool, whose type is not
    ``int``) and ``", ".join`` of a list of strings.
    """
    kinds = set(map(type, values))
    if kinds <= {str}:
        return values
    if kinds == {int}:
        return list(map(str, values))
    if kinds == {list}:
        try:
            return list(map(", ".join, values))
        except TypeError:  # not a list of strings: ``text`` each
            pass
    return [text(v) for v in values]


def _are_true(values: list[Any]) -> list[bool]:
    """Return ``[v is True for v in values]``."""
    return list(map(is_, values, repeat(True)))


def plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def short_code(code: str) -> str:
    """Return a code without its family prefix, for narrow cells (the link names it in full)."""
    for prefix in ("PUBLIC_TRACE_SANDBOX_", "SANDBOX_POLICY_"):
        if code.startswith(prefix):
            return code.removeprefix(prefix)
    return code


def code_href(code: str, root: str) -> str:
    return f"{root}codes/index.html#{REGISTRY[code].anchor}"


def _rows_at(rows: Sequence[Mapping[str, Any]], positions: list[int]) -> list[Mapping[str, Any]]:
    """Return ``[rows[p] for p in positions]``; of a ``LazyRows``, built together."""
    if isinstance(rows, LazyRows):
        return rows.rows_at(positions)  # type: ignore[return-value]
    return list(map(rows.__getitem__, positions))


def _positions_by(rows: Sequence[Mapping[str, Any]], key: str) -> dict[str, int]:
    """Index ``rows`` by their string ``key``: the position of the first row holding each value.

    Positions rather than rows: a large run's rows are built a page at a time when read
    (``LazyRows``), and an index of them would hold every one (``_joined_rows``).
    """
    values = column_of(rows, key)
    return _first_of(values, range(len(values)))


def _joined_rows(
    rows: Sequence[Mapping[str, Any]], positions: list[int | None]
) -> list[Mapping[str, Any] | None]:
    """Return the row at each of ``positions`` (None for None), built in one go."""
    if None not in positions:
        return cast(list[Mapping[str, Any] | None], _rows_at(rows, cast(list[int], positions)))
    found = iter(_rows_at(rows, [p for p in positions if p is not None]))
    return [None if p is None else next(found) for p in positions]


def _first_of(values: list[Any], items: Sequence[Any]) -> dict[str, Any]:
    """Return ``{value: item}`` for each string value, with the item of its first place."""
    if set(map(type, values)) <= {str}:
        return dict(zip(reversed(values), reversed(items), strict=True))
    index: dict[str, Any] = {}
    for item, value in zip(items, values, strict=True):
        if isinstance(value, str) and value not in index:
            index[value] = item
    return index


def _is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------
# Listing pages


def relative_href(target_page: str, anchor: str, from_page: str) -> str:
    """Return a link from ``from_page`` to ``anchor`` on ``target_page`` (both run-relative).

    Sub-pages sit one folder below the run page (``join/page-0001.html``), so a link out
    of one climbs once; a link within its folder names the file, within the page only the
    fragment.
    """
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

    @property
    def split(self) -> bool:
        return self.total > self.page_rows

    @property
    def page_count(self) -> int:
        return -(-self.total // self.page_rows) if self.split else 1

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


@dataclass(frozen=True)
class PageNav:
    """Links between a listing's pages: previous, next, and a list of page numbers.

    On the run page the list names every page; on a sub-page it names the first and last
    pages and the five either side of the current one (the run page has the full list).
    """

    summary: str
    previous: str
    next: str
    pages: tuple[PageLink, ...]


def page_nav(pager: Pager, noun: str, current: int | None) -> PageNav:
    """Return the navigation of ``pager`` seen from page ``current`` (None: the run page)."""
    from_page = MAIN_PAGE if current is None else pager.path(current)
    count = pager.page_count
    if current is None:
        shown = range(count)
    else:
        near = set(range(max(0, current - 5), min(count, current + 6)))
        shown = sorted(near | {0, count - 1})  # type: ignore[assignment]
    links = []
    last = -1
    for page in shown:
        if page > last + 1:
            links.append(PageLink("…", ""))
        start, end = pager.bounds(page)
        links.append(
            PageLink(
                str(page + 1),
                relative_href(pager.path(page), f"{pager.section}-list", from_page),
                page == current,
            )
        )
        last = page
    previous = next_ = ""
    if current is not None:
        if current > 0:
            previous = relative_href(pager.path(current - 1), f"{pager.section}-list", from_page)
        if current + 1 < count:
            next_ = relative_href(pager.path(current + 1), f"{pager.section}-list", from_page)
    summary = f"{pager.total:,} {noun} on {count:,} pages of {pager.page_rows}"
    if current is not None:
        start, end = pager.bounds(current)
        summary = f"{noun.capitalize()} {start + 1:,}–{end:,} of {pager.total:,} (page {current + 1:,} of {count:,})"
    return PageNav(summary, previous, next_, tuple(links))


# ---------------------------------------------------------------------------------------
# Run page


@dataclass(frozen=True)
class Fact:
    label: str
    value: str
    css: str = ""


@dataclass(frozen=True)
class FindingLink:
    label: str
    href: str

    @property
    def label_parts(self) -> tuple[str, ...]:
        return breakable(self.label)


class JoinRow(NamedTuple):
    """One request joined across every record that should mention it."""

    anchor: str
    request_id: str
    request_href: str
    risk_class: str
    shape: str
    declared: Cell
    derived: Cell
    side_effect: Cell
    rollback: Cell
    cold_replay: Cell
    trace: Cell
    finding_links: tuple[FindingLink, ...]
    css: str


@dataclass(frozen=True)
class FindingView:
    anchor: str
    code: str
    code_href: str
    severity: str
    subject: str
    subject_kind: str
    message: str
    location: str
    location_href: str
    request_href: str


@dataclass(frozen=True)
class FindingGroup:
    layer_id: str
    title: str
    note: str
    expected: bool
    findings: tuple[FindingView, ...]
    count: int = 0
    first_href: str = ""


@dataclass(frozen=True)
class MatrixCell:
    value: int
    css: str
    label: str


@dataclass(frozen=True)
class MatrixRow:
    declared: str
    cells: tuple[MatrixCell, ...]
    total: int


@dataclass(frozen=True)
class MatrixView:
    derived: tuple[str, ...]
    rows: tuple[MatrixRow, ...]
    agree: int
    disagree: int
    summary: str


@dataclass(frozen=True)
class NegativeRow:
    case_id: str
    expected_code: str
    expected_href: str
    observed: tuple[FindingLink, ...]
    outcome: Badge
    location: str
    location_href: str

    @property
    def expected_parts(self) -> tuple[str, ...]:
        return breakable(self.expected_code)


@dataclass(frozen=True)
class LayerRow:
    anchor: str
    title: str
    status: Badge
    finding_count: int
    note: str
    counts: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ScanClassRow:
    class_id: str
    label: str
    count: int
    remediation: str


@dataclass(frozen=True)
class ScanView:
    status: Badge
    files_scanned: int
    bytes_scanned: str
    class_count: int
    hit_count: int
    by_class: tuple[ScanClassRow, ...]
    flagged: tuple[tuple[str, str], ...]


class SpanRow(NamedTuple):
    request_href: str
    sequence: str
    span_id: str
    episode: str
    action_kind: str
    outcome: Cell
    verdict_id: str
    state_ref: str
    recovery_ref: str
    input_digest: str
    input_digest_short: str


@dataclass(frozen=True)
class TraceView:
    status: Badge
    spans: tuple[SpanRow, ...]
    span_count: int
    digest: str
    outcome_counts: str
    kind_counts: str
    audit_count: int


@dataclass(frozen=True)
class InputView:
    anchor: str
    path: str
    kind: str
    size: str
    sha256: str
    html: Markup | None
    notice: str


@dataclass(frozen=True)
class ModuleView:
    module_id: str
    path: str
    material_class: str
    sha256: str
    size: str
    anchors: tuple[str, ...]
    verified: Badge


@dataclass(frozen=True)
class DigestRow:
    path: str
    sha256: str


@dataclass(frozen=True)
class ProvenanceView:
    tool: str
    version: str
    command: str
    source_path: str
    bundle_id: str
    result_href: str
    result_sha256: str
    digests: tuple[DigestRow, ...]
    build_time: str


@dataclass(frozen=True)
class RunCounts:
    """The run's figures as the index shows and sorts them."""

    requests: int
    derived_block: int
    derived_allow: int
    derived_review: int
    mismatches: int
    findings: int
    expected_alarms: int


@dataclass(frozen=True)
class RunView:
    """Everything the run page shows, in SITE.md order."""

    chrome: Chrome
    name: str
    mode: str
    mode_label: str
    status: str
    status_badge: Badge
    source_path: str
    bundle_id: str
    headline: GapHeadline
    facts: tuple[Fact, ...]
    flowchart_svg: Markup
    flowchart_print_svg: Markup
    mermaid: str
    join_rows: tuple[JoinRow, ...]
    join_nav: PageNav | None
    finding_groups: tuple[FindingGroup, ...]
    findings_nav: PageNav | None
    gap_finding_count: int
    matrix: MatrixView
    negative_rows: tuple[NegativeRow, ...] | None
    layer_rows: tuple[LayerRow, ...]
    scan: ScanView
    trace: TraceView
    trace_nav: PageNav | None
    inputs: tuple[InputView, ...]
    modules: tuple[ModuleView, ...]
    provenance: ProvenanceView
    counts: RunCounts
    error_codes: tuple[str, ...]
    expected_codes: tuple[str, ...]
    findings_by_layer: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ListingPageView:
    """One sub-page of a large run: a slice of its join table, findings or trace."""

    chrome: Chrome
    name: str
    status_badge: Badge
    kind: str
    title: str
    nav: PageNav
    run_href: str
    join_rows: tuple[JoinRow, ...] = ()
    finding_groups: tuple[FindingGroup, ...] = ()
    spans: tuple[SpanRow, ...] = ()


def _layer_status(layer: Mapping[str, Any], result: Mapping[str, Any]) -> str:
    """Return the status a reader should see: fired negative-case alarms are a pass."""
    if layer["layer"] == Layer.NEGATIVE_CASES.value and layer["status"] == "blocked":
        return "blocked" if result["missing_negative_cases"] else "pass"
    return str(layer["status"])


def _expected_alarm(finding: Mapping[str, Any]) -> bool:
    return (
        REGISTRY[finding["error_code"]].layer is Layer.NEGATIVE_CASES
        and finding["error_code"] != codes.NEGATIVE_CASE_MISSING
    )


# The join table's cells, each a function of the few values it shows: ``_join_row`` reads
# them from one row, ``_plain_join_rows`` from a page of rows at once (through ``_cells``).


def _declared(declared: str, agrees: bool, note: str, pre_execution: bool) -> Cell:
    """The declared-verdict cell: the verdict, and whether the derivation agrees."""
    declared = declared or "(none)"
    css = f"verdict v-{declared}" if declared in VERDICTS else "verdict"
    if not agrees:
        css += " gap"
    if not pre_execution:
        note = (note + " · " if note else "") + "not pre-execution"
        css += " gap" if "gap" not in css else ""
    return Cell(declared + ("" if agrees else " ≠"), note, css)


def _derived(verdict: str, rule_ref: str, fail_closed: bool) -> Cell:
    """The derived-verdict cell: the verdict and the rule that gave it."""
    note = rule_ref + " · fail-closed" if fail_closed else rule_ref
    return Cell(verdict, note, f"verdict v-{verdict}")


def _effect(derived_verdict: Any, executed: bool, count: Any) -> Cell:
    """The side-effect cell: whether it ran and its diff count, held to the verdict."""
    diffs = plural(count, "diff") if _is_count(count) else "diff count unusable"
    if derived_verdict == "block":
        ok = not executed and count == 0
    elif derived_verdict in ("allow", "review"):
        ok = executed and _is_count(count) and count >= 1
    else:
        ok = True
    return Cell("executed" if executed else "not executed", diffs, "" if ok else "gap")


def _rollback(ref: str, executed: bool, found: bool, verified: bool) -> Cell:
    """The rollback cell: whether a rollback was due, found, and verified for this request."""
    if not found:
        return Cell(GAP, ref, "gap") if executed else Cell("not required", "", "muted")
    return Cell("verified", ref) if verified else Cell("not verified", ref, "gap")


def _replay(flagged: bool, claims: bool) -> Cell:
    """The cold-replay cell: whether it claims to reproduce, and whether that was refuted."""
    label = "reproduced" if claims else "not reproduced"
    if flagged:
        return Cell(f"claims {label}", "does not re-derive", "gap")
    return Cell(label, "", "" if claims else "gap")


def _trace(outcome: str, flagged: bool) -> Cell:
    """The trace cell: the span's outcome, and whether its audit found something."""
    # Any other outcome is a recorded verdict label, input text: never a class name.
    css = f"outcome o-{outcome if outcome in TRACE_OUTCOMES else 'other'}"
    if flagged:
        return Cell(outcome, "audit finding", f"{css} gap")
    return Cell(outcome, "", css)


# Cells already made, by cell function and arguments (``_cells``); each table is emptied
# when it reaches this many, so that a run of all-distinct cells cannot grow it further.
_MADE: dict[Callable[..., Cell], dict[tuple[Any, ...], Cell]] = {}
_MADE_MAX = 4096


def _cells(make: Callable[..., Cell], *columns: list[Any]) -> list[Cell]:
    """Return ``list(map(make, *columns))``, calling ``make`` once per distinct arguments.

    Nearly every cell of a large run repeats one made before. A cell is looked up by its
    arguments and their types, so it is reused only for the very same arguments (``True``,
    ``1`` and ``1.0`` are one key of a dict, but not one argument); with an argument that
    cannot be a key (a list), each cell is made.
    """
    made = _MADE.setdefault(make, {})
    keys = list(zip(*columns, *(map(type, column) for column in columns), strict=True))
    try:
        cells = list(map(made.get, keys))
    except TypeError:
        return list(map(make, *columns))
    if None in cells:
        if len(made) > _MADE_MAX:
            made.clear()
        arguments = len(columns)
        for n, cell in enumerate(cells):
            if cell is None:
                key = keys[n]
                cells[n] = made[key] = make(*key[:arguments])
    return cast(list[Cell], cells)  # no None is left


# Read by the view-models and the headline more than once (``_RunBuilder``).
_ROWS_READ_AGAIN = ("findings",)


class _Joined(NamedTuple):
    """The plain rows of a join-table page (see ``_RunBuilder.join_rows``), by column.

    Each row's position in the run, its request and id, and the rows joined to it.
    """

    indexes: list[int]
    requests: Sequence[Mapping[str, Any]]
    rids: list[str]
    derived: Sequence[Mapping[str, Any]]
    verdicts: Sequence[Mapping[str, Any]]
    effects: Sequence[Mapping[str, Any]]
    replays: Sequence[Mapping[str, Any]]
    spans: Sequence[Mapping[str, Any]]


class _RunBuilder:
    """Build one run page's view-model from its replay and records."""

    def __init__(
        self,
        run: DiscoveredRun,
        replay: Replay,
        records: RunRecords,
        build_time: str,
        version: str,
    ) -> None:
        self.run = run
        self.replay = replay
        self.records = records
        # The record's row lists may be built afresh on each read (``records`` makes them
        # lazily): the lists read more than once are read here once and kept; the others
        # are indexed by one column each (``_positions_by``), and a page builds its rows.
        result = records.result
        self.result: Mapping[str, Any] = {
            **result,
            **{name: list(result[name]) for name in _ROWS_READ_AGAIN},
        }
        self.build_time = build_time
        self.version = version
        self.slugs = _unique_slugs(
            [f["path"] for f in self.result["input_files"] if f["kind"] == "input"]
        )
        # Highlight first: a finding links to a line only where that line is on the page.
        self.input_views = self._input_views()
        self.highlighted = {v.path for v in self.input_views if v.html is not None}
        self.withheld = {
            f["path"]
            for f in self.result["input_files"]
            if f["kind"] == "input" and f["forbidden_material_found"]
        }
        self.findings = self.result["findings"]
        self.layer_status = {
            layer["layer"]: _layer_status(layer, self.result) for layer in self.result["layers"]
        }
        # The position of each request id's first row (read without building the rows).
        rids = column_of(self.result["request_rows"], "request_id")
        self.request_index: dict[str, int] = _first_of(rids, range(len(rids)))
        # Findings are shown grouped by layer; a finding's page follows that order.
        self.layer_groups: list[tuple[Layer, list[int]]] = []
        for layer in Layer:
            members = [i for i, f in enumerate(self.findings) if f["layer"] == layer]
            if members:
                self.layer_groups.append((layer, members))
        self.finding_order = [i for _, members in self.layer_groups for i in members]
        self.finding_position = {i: n for n, i in enumerate(self.finding_order)}
        # Which findings each join row links to, by subject and by input line.
        self.by_subject: dict[Any, list[int]] = {}
        self.by_line: dict[tuple[Any, Any], list[int]] = {}
        self.flagged_spans: set[Any] = set()
        self.flagged_replays: set[Any] = set()
        for i, f in enumerate(self.findings):
            if f["layer"] == Layer.PUBLIC_TRACE.value:
                self.flagged_spans.add(f["subject_id"])
            if f["error_code"] == codes.COLD_REPLAY_INVALID:
                self.flagged_replays.add(f["subject_id"])
            if not _expected_alarm(f):
                self.by_subject.setdefault(f["subject_id"], []).append(i)
                self.by_line.setdefault((f["path"], f["line"]), []).append(i)
        # The lines findings are about, by input file (``_hot_rows``).
        self.finding_lines: dict[Any, set[Any]] = {}
        for path, line in self.by_line:
            self.finding_lines.setdefault(path, set()).add(line)
        self.spans = self.result["public_agent_execution_trace"]["spans"]
        r = self.result
        # The lists a join row joins, and where in each the row of each id is: built once
        # per process (each process sharing out the pages builds its own once forked,
        # ``parallel._render_shared``). A page builds only the rows it joins
        # (``_joined_rows``), the whole lists are never held.
        self.joined_lists = (
            r["derived_policy_verdict_rows"],
            r["policy_verdict_rows"],
            r["side_effect_rows"],
            r["rollback_rows"],
            r["cold_replay_rows"],
            self.spans,
        )
        self.join_index = (
            _positions_by(r["derived_policy_verdict_rows"], "request_id"),
            _positions_by(r["policy_verdict_rows"], "request_id"),
            _positions_by(r["side_effect_rows"], "request_id"),
            _positions_by(r["rollback_rows"], "rollback_id"),
            _positions_by(r["cold_replay_rows"], "request_id"),
            _positions_by(self.spans, "span_id"),
        )
        self.join_pager, self.findings_pager, self.trace_pager = _pagers(self.result)

    # -- helpers

    @staticmethod
    def root_of(from_page: str) -> str:
        """Return the site root seen from a run-relative page."""
        return "../../../" if "/" in from_page else "../../"

    def line_href(self, path: Any, line: Any, from_page: str) -> str:
        """Link an input line where it is shown, else the file's entry; "" if withheld."""
        if not isinstance(path, str) or path not in self.slugs or path in self.withheld:
            return ""
        slug = self.slugs[path]
        if path in self.highlighted and _is_count(line) and line >= 1:
            return relative_href(MAIN_PAGE, line_id(slug, line), from_page)
        return relative_href(MAIN_PAGE, "file-" + slug, from_page)

    def request_href(self, rid: str, from_page: str) -> str:
        index = self.request_index.get(rid)
        if index is None:
            return ""
        return relative_href(self.join_pager.page_of(index), f"request-{index + 1}", from_page)

    def request_hrefs(self, rids: Iterable[str], from_page: str) -> list[str]:
        """Return ``request_href`` of each of ``rids``, as seen from one page.

        The link to a page is worked out once per page linked: ``relative_href`` ends with
        the anchor it is given, so the link to any anchor there is that prefix and it.
        """
        pager = self.join_pager
        prefixes: dict[int, str] = {}
        hrefs = []
        for index in map(self.request_index.get, rids):
            if index is None:
                hrefs.append("")
                continue
            page = index // pager.page_rows
            prefix = prefixes.get(page)
            if prefix is None:
                prefix = prefixes[page] = relative_href(pager.page_of(index), "", from_page)
            hrefs.append(f"{prefix}request-{index + 1}")
        return hrefs

    def finding_href(self, index: int, from_page: str) -> str:
        page = self.findings_pager.page_of(self.finding_position[index])
        return relative_href(page, f"finding-{index + 1}", from_page)

    def location(self, path: Any, line: Any) -> str:
        if not isinstance(path, str):
            return ""
        return f"{path}:{line}" if _is_count(line) else path

    # -- sections

    def headline(self) -> GapHeadline:
        return gap_headline(self.result)

    def counts(self) -> RunCounts:
        r = self.result
        expected = sum(1 for f in self.findings if _expected_alarm(f))
        return RunCounts(
            requests=r["action_request_count"],
            derived_block=r["derived_block_count"],
            derived_allow=r["derived_allow_count"],
            derived_review=r["derived_review_count"],
            mismatches=r["derived_policy_verdict_mismatch_count"],
            findings=len(self.findings) - expected,
            expected_alarms=expected,
        )

    def facts(self, counts: RunCounts) -> tuple[Fact, ...]:
        r = self.result
        facts = [
            Fact("Requests", str(counts.requests)),
            Fact(
                "Derived",
                f"{counts.derived_block} block · {counts.derived_allow} allow · "
                f"{counts.derived_review} review",
            ),
            Fact("Mismatches", str(counts.mismatches), "gap" if counts.mismatches else ""),
            Fact(
                "Executed",
                f"{r['executed_action_count']} of {r['side_effect_receipt_count']} receipts",
            ),
            Fact("Rollbacks", f"{r['rollback_verified_count']}/{r['rollback_receipt_count']}"),
            Fact(
                "Cold replays confirmed",
                f"{r['cold_replay_confirmed_count']}/{r['cold_replay_count']}",
            ),
            Fact("Findings", str(counts.findings), "gap" if counts.findings else ""),
        ]
        expected = len(r["expected_negative_cases"])
        if expected:
            fired = expected - len(r["missing_negative_cases"])
            facts.append(
                Fact("Alarms fired", f"{fired}/{expected}", "gap" if fired < expected else "")
            )
        return tuple(facts)

    def flowchart(self) -> tuple[Markup, Markup, str]:
        """Draw the pipeline left to right for the screen and top to bottom for print.

        On A4 the wide left-to-right chart shrinks to about 5pt text; the top-to-bottom copy
        is about three times narrower and prints at full size. The stylesheet shows one.
        """
        r = self.result
        st = self.layer_status

        def node(node_id: str, label: str, count: str, layer: Layer | None) -> FlowNode:
            status = st.get(layer.value, "not_applicable") if layer else r["status"]
            # No links on nodes: the chart is one role="img", which may not hold focusable
            # children (axe: nested-interactive); the Layers table carries the same figures.
            return FlowNode(node_id, label, count, status)

        scan = r["secret_exclusion_scan"]
        policy_status = (
            "blocked"
            if "blocked"
            in (st.get(Layer.SANDBOX_POLICY.value), st.get(Layer.PROJECTION_PROTOCOL.value))
            else st.get(Layer.SANDBOX_POLICY.value, "not_run")
        )
        nodes = [
            node(
                "strict_load",
                "Strict load",
                self._layer_count(Layer.STRICT_LOAD, "files_loaded", "files_expected", "files"),
                Layer.STRICT_LOAD,
            ),
            node(
                "scan",
                "Forbidden-material scan",
                plural(scan["blocking_hit_count"], "hit"),
                Layer.FORBIDDEN_MATERIAL,
            ),
            FlowNode(
                "policy",
                "Sandbox policy and projection",
                "2 contracts",
                policy_status,
            ),
            node(
                "requests",
                "Action requests",
                plural(r["action_request_count"], "request"),
                Layer.ACTION_REQUESTS,
            ),
            node(
                "derived",
                "Derived verdicts",
                f"{r['derived_block_count']} block · {r['derived_allow_count']} allow · "
                f"{r['derived_review_count']} review",
                Layer.ACTION_REQUESTS,
            ),
            node(
                "declared",
                "Declared verdicts checked",
                plural(r["derived_policy_verdict_mismatch_count"], "mismatch", "mismatches"),
                Layer.POLICY_VERDICTS,
            ),
            node(
                "side_effects",
                "Side-effect receipts",
                f"{r['executed_action_count']} executed · "
                f"{r['blocked_without_execution_count']} held",
                Layer.SIDE_EFFECTS,
            ),
            node(
                "rollbacks",
                "Rollbacks",
                f"{r['rollback_verified_count']}/{r['rollback_receipt_count']} verified",
                Layer.ROLLBACKS,
            ),
            node(
                "cold_replay",
                "Cold replay",
                f"{r['cold_replay_confirmed_count']}/{r['cold_replay_count']} confirmed",
                Layer.COLD_REPLAY,
            ),
            node(
                "trace",
                "Public trace",
                plural(r["public_agent_execution_trace"]["span_count"], "span"),
                Layer.PUBLIC_TRACE,
            ),
        ]
        edges = [
            FlowEdge("strict_load", "requests"),
            FlowEdge("requests", "derived"),
            FlowEdge("policy", "declared"),
            FlowEdge("derived", "declared"),
            FlowEdge("declared", "side_effects"),
            FlowEdge("side_effects", "rollbacks"),
            FlowEdge("side_effects", "cold_replay"),
            FlowEdge("rollbacks", "trace"),
            FlowEdge("cold_replay", "trace"),
            FlowEdge("trace", "result"),
            FlowEdge("scan", "result"),
        ]
        if self.run.mode is InputMode.FIXTURE:
            expected = len(r["expected_negative_cases"])
            fired = expected - len(r["missing_negative_cases"])
            nodes.append(
                node(
                    "negative", "Negative cases", f"{fired}/{expected} fired", Layer.NEGATIVE_CASES
                )
            )
            edges.append(FlowEdge("negative", "result"))
        else:
            modules = r["source_modules"]
            verified = sum(1 for m in modules if m.get("verified"))
            nodes.append(
                node(
                    "modules",
                    "Source modules",
                    f"{verified}/{len(modules)} verified",
                    Layer.SOURCE_MODULES,
                )
            )
            edges.append(FlowEdge("modules", "result"))
        nodes.append(
            FlowNode(
                "result",
                "Result",
                STATUS_LABELS[r["status"]].upper(),
                r["status"],
            )
        )
        title = f"Replay pipeline of {self.run.name}"
        chart = draw_flowchart(nodes, edges, title=title, id_prefix="flow")
        printed = draw_flowchart(nodes, edges, title=title, id_prefix="flowprint", direction="TB")
        return chart.svg, printed.svg, chart.mermaid

    def _layer_count(self, layer: Layer, done: str, total: str, noun: str) -> str:
        for entry in self.result["layers"]:
            if entry["layer"] == layer.value:
                counts = entry["counts"]
                return f"{counts.get(done, 0)}/{counts.get(total, 0)} {noun}"
        return "not run"

    def finding_view(self, index: int, from_page: str) -> FindingView:
        f = self.findings[index]
        subject = f["subject_id"]
        rid = subject.removeprefix("span:") if isinstance(subject, str) else ""
        return FindingView(
            anchor=f"finding-{index + 1}",
            code=f["error_code"],
            code_href=code_href(f["error_code"], self.root_of(from_page)),
            severity=REGISTRY[f["error_code"]].severity.value,
            subject=text(subject),
            subject_kind=text(f["subject_kind"]).replace("_", " "),
            message=text(f["message"]),
            location=self.location(f["path"], f["line"]),
            location_href=self.line_href(f["path"], f["line"], from_page),
            request_href=self.request_href(rid, from_page),
        )

    def finding_groups(self, start: int, end: int, from_page: str) -> tuple[FindingGroup, ...]:
        """Return the findings at display positions ``[start, end)``, grouped by layer."""
        groups = []
        position = 0
        for layer, members in self.layer_groups:
            first, position = position, position + len(members)
            shown = members[max(start - first, 0) : max(end - first, 0)]
            if not shown:
                continue
            expected = all(_expected_alarm(self.findings[i]) for i in members)
            note = (
                "Expected: each planted negative case raised its code, proving that alarm works."
                if expected
                else plural(len(members), "finding")
            )
            groups.append(
                FindingGroup(
                    layer.value,
                    layer.label,
                    note,
                    expected,
                    tuple(self.finding_view(i, from_page) for i in shown),
                    len(members),
                    self.finding_href(members[0], from_page),
                )
            )
        return tuple(groups)

    def group_summaries(self) -> tuple[FindingGroup, ...]:
        """Return every layer's group without its findings, for a run page that splits them."""
        groups = []
        for layer, members in self.layer_groups:
            expected = all(_expected_alarm(self.findings[i]) for i in members)
            note = (
                "Expected: each planted negative case raised its code, proving that alarm works."
                if expected
                else plural(len(members), "finding")
            )
            groups.append(
                FindingGroup(
                    layer.value,
                    layer.label,
                    note,
                    expected,
                    (),
                    len(members),
                    self.finding_href(members[0], MAIN_PAGE),
                )
            )
        return tuple(groups)

    def join_rows(self, start: int, end: int, from_page: str) -> tuple[JoinRow, ...]:
        """Return the join rows of requests ``[start, end)`` as seen from ``from_page``.

        Each row is what ``_join_row`` builds for it. Plain rows, nearly all of a run's, are
        built a column at a time instead (``_plain_join_rows``, which gives the same rows
        in a fraction of the time): a row whose request id is a string seen first on that
        row, and which every record that should mention it does (derived and declared
        verdict, side effect, cold replay and span).
        """
        request_rows = self.result["request_rows"]
        count = max(0, min(end, len(request_rows)) - start)
        requests = PickedRows(request_rows, range(start, start + count))
        indexes = list(range(start, start + count))
        derived_at, verdict_at, effect_at, _, replay_at, span_at = self.join_index
        derived_rows, verdict_rows, effect_rows, _, replay_rows, span_rows = self.joined_lists
        first = self.request_index
        # The id each row joins by: None where it is a duplicate or not a string.
        rids: list[Any] = [
            rid if isinstance(rid, str) and first[rid] == index else None
            for index, rid in zip(indexes, _column(requests, "request_id"), strict=True)
        ]
        span_keys: list[Any] = [None if rid is None else "span:" + rid for rid in rids]
        lists = (derived_rows, verdict_rows, effect_rows, replay_rows, span_rows)
        joined_at = (
            list(map(derived_at.get, rids)),
            list(map(verdict_at.get, rids)),
            list(map(effect_at.get, rids)),
            list(map(replay_at.get, rids)),
            list(map(span_at.get, span_keys)),
        )
        plain = [None not in row for row in zip(*joined_at, strict=True)]
        file_href = self._request_file_href(from_page)
        # The plain rows together, read by columns; the others one by one; put in order.
        kept = list(compress(range(count), plain))
        joined = _Joined(
            [indexes[n] for n in kept],
            PickedRows(request_rows, [start + n for n in kept]),
            [rids[n] for n in kept],
            *(
                PickedRows(rows, cast(list[int], [positions[n] for n in kept]))  # no None kept
                for rows, positions in zip(lists, joined_at, strict=True)
            ),
        )
        built = dict(zip(kept, self._plain_join_rows(joined, from_page, file_href), strict=True))
        return tuple(
            built[n]
            if n in built
            else self._join_row(indexes[n], requests[n], from_page, file_href)
            for n in range(count)
        )

    def _request_file_href(self, from_page: str) -> str | None:
        """Return where every request of a page links (its file's entry, or nothing).

        None when the request file is highlighted: each request then links its own line.
        """
        if ACTIONS_FILE in self.highlighted:
            return None
        return self.line_href(ACTIONS_FILE, None, from_page)

    def _join_row(
        self, index: int, request: Mapping[str, Any], from_page: str, file_href: str | None
    ) -> JoinRow:
        """Return the join row of request ``index`` (``file_href`` as ``_request_file_href``)."""
        rid = request.get("request_id")
        anchor = f"request-{index + 1}"
        shape = " · ".join(
            [
                text(request.get("action_kind")),
                text(request.get("requested_capability")),
                text(request.get("source_trust_label")),
            ]
        )
        # A request id seen on an earlier row is a duplicate: only its first row joins.
        joined = isinstance(rid, str) and self.request_index[rid] == index
        request_href = (
            self.line_href(ACTIONS_FILE, request.get("line"), from_page)
            if file_href is None
            else file_href
        )
        if not joined:
            unjoined = Cell("— not joined", "duplicate or unusable request id", "gap")
            return JoinRow(
                anchor,
                text(rid) or "(no id)",
                request_href,
                text(request.get("risk_class")),
                shape,
                unjoined,
                unjoined,
                unjoined,
                unjoined,
                unjoined,
                unjoined,
                self._links((), [(ACTIONS_FILE, request.get("line"))], from_page),
                "row-gap",
            )
        assert isinstance(rid, str)
        derived = self._partner(0, rid)
        verdict = self._partner(1, rid)
        effect = self._partner(2, rid)
        replay_row = self._partner(4, rid)
        span_key = "span:" + rid
        span = self._partner(5, span_key)
        rollback = None
        if effect is not None:
            ref = effect.get("rollback_receipt_ref")
            if isinstance(ref, str):
                rollback = self._partner(3, rollback_id_of(ref, self.join_index[3]))
        links = self._row_links(rid, request, verdict, effect, rollback, replay_row, from_page)
        derived_verdict = derived["derived_verdict"] if derived else ""
        return JoinRow(
            anchor,
            rid,
            request_href,
            text(request.get("risk_class")),
            shape,
            self._declared_cell(derived, verdict),
            self._derived_cell(derived),
            self._effect_cell(derived_verdict, effect),
            self._rollback_cell(effect, rollback, rid),
            self._replay_cell(replay_row),
            self._trace_cell(span, span_key in self.flagged_spans),
            links,
            "row-gap" if links else "",
        )

    def _partner(self, which: int, key: str) -> Mapping[str, Any] | None:
        """Return the row of ``key`` in the ``which``-th joined list, or None."""
        return _joined_rows(self.joined_lists[which], [self.join_index[which].get(key)])[0]

    def _plain_join_rows(
        self, joined: _Joined, from_page: str, file_href: str | None
    ) -> list[JoinRow]:
        """Return ``_join_row`` of each plain row (see ``join_rows``), built by columns.

        Each column reads the values ``_join_row`` reads, with ``text`` applied as it
        applies it (``_texts``), and each cell is the same function of them (``_declared``
        and the others, made once per distinct arguments by ``_cells``). A row links
        findings only if one of its ids or input lines is one a finding is about:
        ``_hot_rows`` finds those rows, whose links ``_row_links`` makes as ``_join_row``
        does. ``tests/test_site_scale.py`` holds the two ways equal on odd values.
        """
        indexes, requests, rids, derived, verdicts, effects, replays, spans = joined
        rollback_at = self.join_index[3]
        rollbacks = _joined_rows(
            self.joined_lists[3],
            [
                rollback_at.get(rollback_id_of(ref, rollback_at)) if isinstance(ref, str) else None
                for ref in _column(effects, "rollback_receipt_ref")
            ],
        )
        span_keys = ["span:" + rid for rid in rids]
        hot = self._hot_rows(joined, span_keys, rollbacks)
        # Only a row that may link a finding is built whole, to find its links.
        links: list[tuple[FindingLink, ...]] = [()] * len(rids)
        for n in hot:
            links[n] = self._row_links(
                rids[n], requests[n], verdicts[n], effects[n], rollbacks[n], replays[n], from_page
            )
        if file_href is None:
            hrefs = [
                self.line_href(ACTIONS_FILE, line, from_page) for line in _column(requests, "line")
            ]
        else:
            hrefs = [file_href] * len(requests)
        shapes = map(
            " · ".join,
            zip(
                _texts(_column(requests, "action_kind")),
                _texts(_column(requests, "requested_capability")),
                _texts(_column(requests, "source_trust_label")),
                strict=True,
            ),
        )
        derived_verdicts = _column(derived, "derived_verdict")
        executed = _are_true(_column(effects, "execution_attempted"))
        cells = (
            _cells(
                _declared,
                _texts(_column(verdicts, "verdict")),
                list(map(bool, _column(derived, "policy_derivation_passed"))),
                _texts(_column(verdicts, "rule_refs")),
                _are_true(_column(verdicts, "pre_execution")),
            ),
            _cells(
                _derived,
                _texts(derived_verdicts),
                _texts(_column(derived, "derived_rule_ref")),
                list(map(bool, _column(derived, "fail_closed"))),
            ),
            _cells(_effect, derived_verdicts, executed, _column(effects, "side_effect_diff_count")),
            list(
                map(
                    _rollback,
                    _texts(_column(effects, "rollback_receipt_ref")),
                    executed,
                    [rollback is not None for rollback in rollbacks],
                    [
                        rollback is not None
                        and rollback.get("request_id") == rid
                        and rollback.get("rollback_verified") is True
                        for rollback, rid in zip(rollbacks, rids, strict=True)
                    ],
                )
            ),
            _cells(
                _replay,
                list(map(self.flagged_replays.__contains__, _texts(_column(replays, "replay_id")))),
                list(
                    map(
                        all,
                        zip(
                            _are_true(_column(replays, "verdict_reproduced")),
                            _are_true(_column(replays, "side_effect_state_reproduced")),
                            _are_true(_column(replays, "pass_label")),
                            strict=True,
                        ),
                    )
                ),
            ),
            _cells(
                _trace,
                _texts(_column(spans, "outcome")),
                list(map(self.flagged_spans.__contains__, span_keys)),
            ),
        )
        # ``JoinRow._make`` of each row without its Python frame: 600,000 rows at most.
        return list(
            map(
                tuple.__new__,
                repeat(JoinRow),
                zip(
                    [f"request-{index + 1}" for index in indexes],
                    rids,
                    hrefs,
                    _texts(_column(requests, "risk_class")),
                    shapes,
                    *cells,
                    links,
                    ["row-gap" if row_links else "" for row_links in links],
                    strict=True,
                ),
            )
        )

    def _hot_rows(
        self,
        joined: _Joined,
        span_keys: list[str],
        rollbacks: list[Mapping[str, Any] | None],
    ) -> set[int]:
        """Return the positions of the rows that may link a finding (see ``_row_links``).

        A row can link a finding only through one of its ids (request, span, replay,
        rollback) or one of its lines in the five input files. Every position is returned
        when a value cannot be looked up (not hashable): each row is then linked exactly.
        """
        _, requests, rids, _, verdicts, effects, replays, _ = joined
        ids: list[list[Any]] = [
            span_keys,
            rids,
            [i if isinstance(i, str) else None for i in _column(replays, "replay_id")],
            [r.get("rollback_id") if r is not None else None for r in rollbacks],
        ]
        lines = [
            (ACTIONS_FILE, _column(requests, "line")),
            ("policy_verdicts.json", _column(verdicts, "line")),
            ("side_effect_receipts.json", _column(effects, "line")),
            ("cold_replay.json", _column(replays, "line")),
            (
                "rollback_receipts.json",
                [r.get("line") if r is not None else None for r in rollbacks],
            ),
        ]
        positions = range(len(rids))
        hot: set[int] = set()
        try:
            for values in ids:
                hot.update(compress(positions, map(self.by_subject.__contains__, values)))
            for path, values in lines:
                if path in self.finding_lines:
                    found = self.finding_lines[path].__contains__
                    hot.update(compress(positions, map(found, values)))
        except TypeError:
            return set(positions)
        return hot

    def _row_links(
        self,
        rid: str,
        request: Mapping[str, Any],
        verdict: Mapping[str, Any] | None,
        effect: Mapping[str, Any] | None,
        rollback: Mapping[str, Any] | None,
        replay_row: Mapping[str, Any] | None,
        from_page: str,
    ) -> tuple[FindingLink, ...]:
        """Link the findings about a joined request: its ids, and its lines in the inputs."""
        subjects = [rid, "span:" + rid]
        lines = [(ACTIONS_FILE, request.get("line"))]
        if verdict is not None:
            lines.append(("policy_verdicts.json", verdict.get("line")))
        if effect is not None:
            lines.append(("side_effect_receipts.json", effect.get("line")))
        if replay_row is not None:
            lines.append(("cold_replay.json", replay_row.get("line")))
            if isinstance(replay_row.get("replay_id"), str):
                subjects.append(replay_row["replay_id"])
        if rollback is not None:
            lines.append(("rollback_receipts.json", rollback.get("line")))
            if isinstance(rollback.get("rollback_id"), str):
                subjects.append(rollback["rollback_id"])
        return self._links(subjects, lines, from_page)

    def _links(
        self, subjects: Sequence[str], lines: Sequence[tuple[str, Any]], from_page: str
    ) -> tuple[FindingLink, ...]:
        """Link the findings about these subjects or input lines (expected alarms aside)."""
        by_subject, by_line = self.by_subject, self.by_line
        hits: set[int] = set()
        for subject in subjects:
            if subject in by_subject:
                hits.update(by_subject[subject])
        for line in lines:
            if line in by_line:
                hits.update(by_line[line])
        if not hits:
            return ()
        return tuple(
            FindingLink(short_code(self.findings[i]["error_code"]), self.finding_href(i, from_page))
            for i in sorted(hits)
        )

    @staticmethod
    def _declared_cell(
        derived: Mapping[str, Any] | None, verdict: Mapping[str, Any] | None
    ) -> Cell:
        if verdict is None:
            return Cell(GAP, "no verdict row", "gap")
        return _declared(
            text(verdict.get("verdict")),
            bool(derived and derived.get("policy_derivation_passed")),
            text(verdict.get("rule_refs")),
            verdict.get("pre_execution") is True,
        )

    @staticmethod
    def _derived_cell(derived: Mapping[str, Any] | None) -> Cell:
        if derived is None:
            return Cell(GAP, "", "gap")
        return _derived(
            text(derived["derived_verdict"]),
            text(derived["derived_rule_ref"]),
            bool(derived.get("fail_closed")),
        )

    @staticmethod
    def _effect_cell(derived_verdict: str, effect: Mapping[str, Any] | None) -> Cell:
        if effect is None:
            return Cell(GAP, "no side-effect receipt", "gap")
        return _effect(
            derived_verdict,
            effect.get("execution_attempted") is True,
            effect.get("side_effect_diff_count"),
        )

    @staticmethod
    def _rollback_cell(
        effect: Mapping[str, Any] | None, rollback: Mapping[str, Any] | None, rid: str
    ) -> Cell:
        if effect is None:
            return Cell(GAP, "no receipt to recover from", "gap")
        return _rollback(
            text(effect.get("rollback_receipt_ref")),
            effect.get("execution_attempted") is True,
            rollback is not None,
            rollback is not None
            and rollback.get("request_id") == rid
            and rollback.get("rollback_verified") is True,
        )

    def _replay_cell(self, replay_row: Mapping[str, Any] | None) -> Cell:
        if replay_row is None:
            return Cell(GAP, "no cold-replay row", "gap")
        claims = (
            replay_row.get("verdict_reproduced") is True
            and replay_row.get("side_effect_state_reproduced") is True
            and replay_row.get("pass_label") is True
        )
        return _replay(text(replay_row.get("replay_id")) in self.flagged_replays, claims)

    @staticmethod
    def _trace_cell(span: Mapping[str, Any] | None, flagged: bool = False) -> Cell:
        if span is None:
            return Cell(GAP, "", "gap")
        return _trace(text(span.get("outcome")), flagged)

    def matrix(self) -> MatrixView:
        rows = self.result["derived_policy_verdict_rows"]
        # A policy verdict: a string.
        derived_values: list[str] = column_of(rows, "derived_verdict")
        derived_seen = set(derived_values)
        derived_axis = [v for v in VERDICTS if v in CORE_VERDICTS or v in derived_seen]
        declared_values: list[str] = []
        for value in column_of(rows, "declared_verdict"):
            label = (
                value if value in VERDICTS else ("(no verdict row)" if value is None else "(other)")
            )
            declared_values.append(label)
        declared_seen = set(declared_values)
        declared_axis = [v for v in VERDICTS if v in CORE_VERDICTS or v in declared_seen]
        declared_axis += [v for v in ("(other)", "(no verdict row)") if v in declared_seen]
        counts = Counter(zip(declared_values, derived_values, strict=True))
        maximum = max(counts.values(), default=0)
        matrix_rows = []
        agree = disagree = 0
        for declared in declared_axis:
            cells = []
            for derived in derived_axis:
                value = counts.get((declared, derived), 0)
                diagonal = declared == derived
                level = charts.heat_level(value, maximum)
                kind = "agree" if diagonal else "disagree"
                if diagonal:
                    agree += value
                else:
                    disagree += value
                label = f"{plural(value, 'request')} declared {declared}, derived {derived}" + (
                    " (agree)" if diagonal else " (disagree)" if value else ""
                )
                cells.append(MatrixCell(value, f"heat-{level} {kind}", label))
            matrix_rows.append(
                MatrixRow(
                    declared, tuple(cells), sum(counts.get((declared, d), 0) for d in derived_axis)
                )
            )
        summary = (
            f"{agree} of {len(rows)} declared verdicts agree with the derived verdict"
            + (f"; {disagree} disagree" if disagree else "")
            + "."
        )
        return MatrixView(tuple(derived_axis), tuple(matrix_rows), agree, disagree, summary)

    def negative_rows(self) -> tuple[NegativeRow, ...] | None:
        if self.run.mode is not InputMode.FIXTURE:
            return None
        observed = self.result["observed_negative_cases"]
        rows = []
        for case in NEGATIVE_CASES:
            seen = observed.get(case.case_id, [])
            finding = next(
                (
                    f
                    for f in self.findings
                    if f["layer"] == Layer.NEGATIVE_CASES.value and f["subject_id"] == case.case_id
                ),
                None,
            )
            path = finding["path"] if finding else case.file_name
            line = finding["line"] if finding else None
            fired = case.code in seen
            rows.append(
                NegativeRow(
                    case_id=case.case_id,
                    expected_code=case.code,
                    expected_href=code_href(case.code, "../../"),
                    observed=tuple(
                        FindingLink(c, code_href(c, "../../")) for c in seen if c in REGISTRY
                    ),
                    outcome=Badge("fired", "badge status-pass")
                    if fired
                    else Badge("missing", "badge status-blocked"),
                    location=self.location(path, line),
                    location_href=self.line_href(path, line, MAIN_PAGE),
                )
            )
        return tuple(rows)

    def layer_rows(self) -> tuple[LayerRow, ...]:
        rows = []
        for layer in self.result["layers"]:
            status = self.layer_status[layer["layer"]]
            note = ""
            if layer["layer"] == Layer.NEGATIVE_CASES.value and status == "pass":
                note = f"{layer['finding_count']} expected alarms fired"
            elif layer["status"] == "not_run":
                note = "its input did not load"
            rows.append(
                LayerRow(
                    anchor=f"layer-{layer['layer']}",
                    title=text(layer["title"]),
                    status=badge(status),
                    finding_count=layer["finding_count"],
                    note=note,
                    counts=tuple(
                        (k.replace("_", " ").removesuffix(" count"), str(v))
                        for k, v in layer["counts"].items()
                    ),
                )
            )
        return tuple(rows)

    def scan(self) -> ScanView:
        scan = self.result["secret_exclusion_scan"]
        labels = {c["class_id"]: c for c in scan["classes_hit"]}
        by_class = tuple(
            ScanClassRow(
                class_id,
                text(labels.get(class_id, {}).get("label", "")),
                count,
                text(labels.get(class_id, {}).get("remediation", "")),
            )
            for class_id, count in scan["hits_by_class"].items()
        )
        flagged: dict[str, list[str]] = {}
        for hit in scan["hits"]:
            flagged.setdefault(hit["path"], []).append(f"{hit['class_id']} × {hit['count']}")
        return ScanView(
            status=badge(scan["status"]),
            files_scanned=scan["files_scanned"],
            bytes_scanned=f"{scan['bytes_scanned']:,}",
            class_count=scan["class_count"],
            hit_count=scan["blocking_hit_count"],
            by_class=by_class,
            flagged=tuple((path, ", ".join(hits)) for path, hits in sorted(flagged.items())),
        )

    def span_rows(self, start: int, end: int, from_page: str) -> tuple[SpanRow, ...]:
        """Return the trace spans ``[start, end)`` as seen from ``from_page``.

        Built a column at a time: ``text`` of one field of every span (``_texts``).
        """
        spans = self.spans[start:end]
        span_ids = _texts(_column(spans, "span_id"))
        digests = _texts(_column(spans, "input_digest"))
        # ``SpanRow._make`` of each row without its Python frame, as in ``_plain_join_rows``.
        return tuple(
            map(
                tuple.__new__,
                repeat(SpanRow),
                zip(
                    self.request_hrefs([s.removeprefix("span:") for s in span_ids], from_page),
                    _texts(_column(spans, "sequence_index")),
                    span_ids,
                    _texts(_column(spans, "episode_id")),
                    _texts(_column(spans, "action_kind")),
                    _cells(_trace, _texts(_column(spans, "outcome")), [False] * len(spans)),
                    [t or GAP for t in _texts(_column(spans, "authority_verdict_id"))],
                    [t or "—" for t in _texts(_column(spans, "state_transition_ref"))],
                    [t or "—" for t in _texts(_column(spans, "recovery_ref"))],
                    digests,
                    [digest.removeprefix("sha256:")[:12] for digest in digests],
                    strict=True,
                ),
            )
        )

    def trace(self) -> TraceView:
        trace = self.result["public_agent_execution_trace"]
        pager = self.trace_pager
        summary = trace["summary"]
        return TraceView(
            status=badge(trace["status"]),
            spans=() if pager.split else self.span_rows(0, pager.total, MAIN_PAGE),
            span_count=len(self.spans),
            digest=text(summary["trace_digest"]),
            outcome_counts=", ".join(f"{n} {k}" for k, n in summary["outcome_counts"].items())
            or "none",
            kind_counts=", ".join(f"{n} {k}" for k, n in summary["action_kind_counts"].items())
            or "none",
            audit_count=summary["finding_count"],
        )

    def _input_views(self) -> tuple[InputView, ...]:
        views = []
        flagged_classes: dict[str, list[str]] = {}
        for hit in self.result["secret_exclusion_scan"]["hits"]:
            flagged_classes.setdefault(hit["path"], []).append(hit["class_id"])
        for info in self.result["input_files"]:
            if info["kind"] != "input":
                continue
            path = info["path"]
            html: Markup | None = None
            if info["forbidden_material_found"]:
                notice = (
                    "Withheld: the forbidden-material scan matched this file ("
                    + ", ".join(flagged_classes.get(path, []))
                    + "), so its text is not reproduced here. Its digest is in Provenance."
                )
            else:
                html, notice = self._highlighted(path, info)
            views.append(
                InputView(
                    anchor="file-" + self.slugs[path],
                    path=path,
                    kind=info["kind"],
                    size=plural(info["size"], "byte"),
                    sha256=info["sha256"],
                    html=html,
                    notice=notice,
                )
            )
        return tuple(views)

    def _highlighted(self, path: str, info: Mapping[str, Any]) -> tuple[Markup | None, str]:
        """Return the file highlighted, if its bytes are still the ones replayed and scanned."""
        if info["size"] > MAX_SHOWN_BYTES:
            return None, f"Not shown: larger than {MAX_SHOWN_BYTES // 1024} KB; see its digest."
        try:  # no symlink followed, no FIFO waited on, nothing read past the limit
            raw = read_same_file(self.run.path / path, None, MAX_SHOWN_BYTES)
        except FileChangedError:
            return None, "Not shown: the file changed after it was replayed."
        except OSError:
            return None, "Not shown: the file could not be read again."
        if "sha256:" + hashlib.sha256(raw).hexdigest() != info["sha256"]:
            return None, "Not shown: the file changed after it was replayed."
        try:
            body = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None, "Not shown: the file is not valid UTF-8 (see Strict load)."
        notice = "" if info["loaded"] else "This file did not load; see its strict-load finding."
        return highlight_json(body, self.slugs[path]), notice

    def modules(self) -> tuple[ModuleView, ...]:
        anchors: dict[str, tuple[str, ...]] = {}
        if self.replay.modules is not None:
            for body in self.replay.modules.bodies:
                shown = redact(list(body.anchors), self.replay.scan.matched_texts)
                anchors[body.module_id] = tuple(shown)
        return tuple(
            ModuleView(
                module_id=text(m["module_id"]),
                path=text(m["path"]),
                material_class=text(m["material_class"]),
                sha256=text(m["sha256"]),
                size=plural(m["size"], "byte"),
                anchors=anchors.get(m["module_id"], ()),
                verified=Badge("verified", "badge status-pass")
                if m["verified"]
                else Badge("not verified", "badge status-blocked"),
            )
            for m in self.result["source_modules"]
        )

    def provenance(self, result_sha256: str | None) -> ProvenanceView:
        command = "run" if self.run.mode is InputMode.FIXTURE else "run-sandbox-bundle"
        if result_sha256 is None:
            receipt = self.records.receipt
        else:  # the digest the build took as it wrote the record: no second pass over it
            receipt = build_receipt(self.records.result, result_sha256)
        return ProvenanceView(
            tool=self.result["tool"]["name"],
            version=self.result["tool"]["version"],
            command=(
                f"sandbox-replay {command} --input {_shell_word(self.run.display_path)} "
                f"--out {_shell_word('out/' + self.run.name)}"
            ),
            source_path=self.run.display_path,
            bundle_id=text(self.result["bundle_id"]),
            result_href="result.json",
            result_sha256=receipt["result_record_sha256"],
            digests=tuple(DigestRow(p, d) for p, d in receipt["input_digests"].items()),
            build_time=self.build_time,
        )

    def chrome(self, title: str, from_page: str) -> Chrome:
        return chrome(title, self.root_of(from_page), "run", self.build_time, self.version)

    def build(self, result_sha256: str | None = None) -> RunView:
        """Return the run page's view-model (``result_sha256`` as for ``RunPages``)."""
        r = self.result
        counts = self.counts()
        svg, print_svg, mermaid = self.flowchart()
        join, findings = self.join_pager, self.findings_pager
        # A layer whose findings are all expected alarms is left out, as on the index chart.
        by_layer = tuple(
            (
                layer.label,
                0 if all(_expected_alarm(self.findings[i]) for i in members) else len(members),
            )
            for layer, members in self.layer_groups
        )
        return RunView(
            chrome=self.chrome(f"{self.run.name} — sandbox-replay", MAIN_PAGE),
            name=self.run.name,
            mode=self.run.mode.value,
            mode_label=MODE_LABELS[self.run.mode],
            status=r["status"],
            status_badge=badge(r["status"]),
            source_path=self.run.display_path,
            bundle_id=text(r["bundle_id"]),
            headline=self.headline(),
            facts=self.facts(counts),
            flowchart_svg=svg,
            flowchart_print_svg=print_svg,
            mermaid=mermaid,
            join_rows=() if join.split else self.join_rows(0, join.total, MAIN_PAGE),
            join_nav=page_nav(join, "requests", None) if join.split else None,
            finding_groups=(
                self.group_summaries()
                if findings.split
                else self.finding_groups(0, findings.total, MAIN_PAGE)
            ),
            findings_nav=page_nav(findings, "findings", None) if findings.split else None,
            gap_finding_count=counts.findings,
            matrix=self.matrix(),
            negative_rows=self.negative_rows(),
            layer_rows=self.layer_rows(),
            scan=self.scan(),
            trace=self.trace(),
            trace_nav=page_nav(self.trace_pager, "spans", None) if self.trace_pager.split else None,
            inputs=self.input_views,
            modules=self.modules(),
            provenance=self.provenance(result_sha256),
            counts=counts,
            error_codes=tuple(r["error_codes"]),
            expected_codes=tuple(
                sorted({f["error_code"] for f in self.findings if _expected_alarm(f)})
            ),
            findings_by_layer=tuple((label, n) for label, n in by_layer if n),
        )

    def listing_paths(self) -> list[str]:
        """Return the run-relative path of every sub-page, in the order they are built."""
        pagers = (self.join_pager, self.findings_pager, self.trace_pager)
        return [p.path(n) for p in pagers if p.split for n in range(p.page_count)]

    def listing_pages(
        self, numbers: Iterable[int] | None = None
    ) -> Iterator[tuple[str, ListingPageView]]:
        """Yield each sub-page of the listings this run splits, built one at a time.

        Sub-pages are numbered in ``listing_paths`` order. With ``numbers``, only those are
        built, in the order given (which may be pulled as the pages are built): that is
        how processes share a large run's pages (``parallel._render_shared``).
        """
        sections = (
            (self.join_pager, "requests", "Join table", "joins"),
            (self.findings_pager, "findings", "Findings", "findings"),
            (self.trace_pager, "spans", "Trace", "trace"),
        )
        plan = [
            (pager, noun, title, section_id, page)
            for pager, noun, title, section_id in sections
            if pager.split
            for page in range(pager.page_count)
        ]
        status = badge(self.result["status"])
        for number in range(len(plan)) if numbers is None else numbers:
            pager, noun, title, section_id, page = plan[number]
            path = pager.path(page)
            start, end = pager.bounds(page)
            view = ListingPageView(
                chrome=self.chrome(
                    f"{self.run.name} — {title} page {page + 1} — sandbox-replay", path
                ),
                name=self.run.name,
                status_badge=status,
                kind=pager.section,
                title=title,
                nav=page_nav(pager, noun, page),
                run_href=relative_href(MAIN_PAGE, section_id, path),
                join_rows=self.join_rows(start, end, path) if pager.section == "join" else (),
                finding_groups=(
                    self.finding_groups(start, end, path) if pager.section == "findings" else ()
                ),
                spans=self.span_rows(start, end, path) if pager.section == "trace" else (),
            )
            yield path, view


def _unique_slugs(paths: Sequence[str]) -> dict[str, str]:
    """Give each input file a fragment-id stem, numbering any that would repeat."""
    slugs: dict[str, str] = {}
    used: set[str] = set()
    for path in sorted(paths):
        base = file_slug(path)
        slug, n = base, 2
        while slug in used:
            slug, n = f"{base}-{n}", n + 1
        used.add(slug)
        slugs[path] = slug
    return slugs


def _shell_word(value: str) -> str:
    """Quote a path for a POSIX shell only when it needs it."""
    safe = all(c.isalnum() or c in "-_./:@%+=," for c in value)
    return value if value and safe else "'" + value.replace("'", "'\\''") + "'"


def build_run_view(
    run: DiscoveredRun, replay: Replay, records: RunRecords, build_time: str, version: str
) -> RunView:
    """Return the view-model of one run page."""
    return _RunBuilder(run, replay, records, build_time, version).build()


@dataclass(frozen=True)
class RunPages:
    """How to build a run page's view-model and its sub-pages.

    ``run_view(result_sha256)`` builds the run page, which shows the result record's
    digest (``sha256:<hex>``; None: serialise the record once more to take it).
    ``subpages(numbers)`` builds the sub-pages lazily, one page at a time, so that the
    view-models of 600,000 rows never sit in memory together: all of them (None), or those
    at the given positions of ``subpage_paths``, which lists them.
    """

    run_view: Callable[[str | None], RunView]
    subpages: Callable[[Iterable[int] | None], Iterator[tuple[str, ListingPageView]]]
    subpage_paths: tuple[str, ...]


def _pagers(result: Mapping[str, Any]) -> tuple[Pager, Pager, Pager]:
    """Return the pagers of a run's join table, findings and trace."""
    return (
        Pager("join", len(result["request_rows"])),
        Pager("findings", len(result["findings"])),
        Pager("trace", len(result["public_agent_execution_trace"]["spans"])),
    )


def subpage_paths(records: RunRecords) -> tuple[str, ...]:
    """Return ``build_run_pages(...).subpage_paths`` without building the view-models."""
    pagers = _pagers(records.result)
    return tuple(p.path(n) for p in pagers if p.split for n in range(p.page_count))


def build_run_pages(
    run: DiscoveredRun, replay: Replay, records: RunRecords, build_time: str, version: str
) -> RunPages:
    """Return how to build the run page and its sub-pages (run-relative paths)."""
    builder = _RunBuilder(run, replay, records, build_time, version)
    return RunPages(builder.build, builder.listing_pages, tuple(builder.listing_paths()))
