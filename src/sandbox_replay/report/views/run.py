"""A run page and its listing sub-pages, built by every part together."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from sandbox_replay.checks.pipeline import Replay
from sandbox_replay.load.run import InputMode
from sandbox_replay.model.codes import REGISTRY, Layer
from sandbox_replay.records.build import RunRecords, build_receipt
from sandbox_replay.report.catalog import render_doc
from sandbox_replay.report.discover import DiscoveredRun
from sandbox_replay.report.search_index import SEARCH_DIR, search_files
from sandbox_replay.report.single_file import CODE_PREFIX
from sandbox_replay.report.views.base import _pagers
from sandbox_replay.report.views.calibration import Calibration
from sandbox_replay.report.views.cells import _expected_alarm
from sandbox_replay.report.views.common import (
    MAIN_PAGE,
    MODE_LABELS,
    Chrome,
    Pager,
    badge,
    byte_size,
    chrome,
    page_nav,
    plural,
    policy_kind_label,
    relative_href,
    text,
)
from sandbox_replay.report.views.input_files import InputFiles
from sandbox_replay.report.views.layer_tables import LayerTables
from sandbox_replay.report.views.models import (
    CodeDoc,
    DigestRow,
    ListingPageView,
    ProvenanceView,
    RunView,
    SingleFileView,
)
from sandbox_replay.report.views.search import SearchEntries
from sandbox_replay.report.views.summary import Summary
from sandbox_replay.report.views.trace_table import TraceTable


class _RunBuilder(Summary, SearchEntries, Calibration, LayerTables, TraceTable, InputFiles):
    """Build one run page's view-model from its replay and records."""

    @functools.cached_property
    def gaps_pager(self) -> Pager:
        """The gaps listing: always on sub-pages of its own, linked first from the run page."""
        return Pager("gaps", len(self.gap_order), own_pages=True)

    def join_range(self, page: int) -> str:
        """Say which request ids join-table page ``page`` holds: its first and last."""
        rows = self.result["request_rows"]
        start, end = self.join_pager.bounds(page)
        first, last = text(rows[start].get("request_id")), text(rows[end - 1].get("request_id"))
        return f"{first} – {last}"

    def provenance(self, result_sha256: str | None, result_size: int | None) -> ProvenanceView:
        command = "run" if self.run.mode is InputMode.FIXTURE else "run-sandbox-bundle"
        if result_sha256 is None:
            receipt = self.records.receipt
            result_size = len(self.records.result_bytes)
        else:  # the digest the build took as it wrote the record: no second pass over it
            receipt = build_receipt(self.records.result, result_sha256)
        source = self.result["policy_source"]
        # A run derived with a policy of its own is reproduced only with that policy.
        policy_path = self.replay.run.policy.source.path
        policy = f" --policy {_shell_word(policy_path)}" if policy_path is not None else ""
        folder = self.run.display_path
        imported = ""
        if self.run.source_sha256 is not None:  # imported from an Inspect AI log by build
            folder = f"imported/{self.run.path.name}"
            imported = (
                f"sandbox-replay import inspect {_shell_word(self.run.display_path)} "
                "--out imported && "
            )
        return ProvenanceView(
            tool=self.result["tool"]["name"],
            version=self.result["tool"]["version"],
            command=(
                f"{imported}sandbox-replay {command} --input {_shell_word(folder)} "
                f"--out {_shell_word('out/' + self.run.name)}{policy}"
            ),
            source_path=self.run.display_path,
            bundle_id=text(self.result["bundle_id"]),
            result_href="result.json",
            result_sha256=receipt["result_record_sha256"],
            result_size=byte_size(result_size) if result_size is not None else "",
            # A browser opening a record this large as text hangs its tab: download it.
            result_download=result_size is not None and result_size > OPEN_RESULT_BYTES,
            digests=tuple(DigestRow(p, d) for p, d in receipt["input_digests"].items()),
            build_time=self.build_time,
            policy_kind=policy_kind_label(source["kind"]),
            policy_id=source["id"],
            policy_rules=plural(source["rule_count"], "rule"),
            policy_sha256=source["sha256"],
        )

    def chrome(self, title: str, from_page: str) -> Chrome:
        frame = chrome(title, self.root_of(from_page), "run", self.build_time, self.version)
        up = "../" if "/" in from_page else ""
        join = self.join_pager
        return replace(
            frame,
            search_index=f"{up}{SEARCH_DIR}/index.js",
            run_page=up + MAIN_PAGE,
            requests=join.total,
            join_page_rows=join.page_rows if join.split else 0,
        )

    def build(self, result_sha256: str | None = None, result_size: int | None = None) -> RunView:
        """Return the run page's view-model (``result_sha256``, ``result_size`` as for
        ``RunPages``)."""
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
            join_first_position=0 if join.split else 1,
            join_nav=page_nav(join, "requests", None, self.join_range) if join.split else None,
            gaps_href=relative_href(self.gaps_pager.path(0), "gaps-list", MAIN_PAGE),
            gaps_summary=self.gaps_summary(),
            finding_groups=(
                self.group_summaries()
                if findings.split
                else self.finding_groups(0, findings.total, MAIN_PAGE)
            ),
            findings_nav=page_nav(findings, "findings", None) if findings.split else None,
            gap_finding_count=counts.findings,
            matrix=self.matrix(),
            negative_rows=self.negative_rows(),
            coverage=self.coverage(),
            layer_rows=self.layer_rows(),
            scan=self.scan(),
            trace=self.trace(),
            trace_nav=page_nav(self.trace_pager, "spans", None) if self.trace_pager.split else None,
            inputs=self.shown_inputs(),
            modules=self.modules(),
            provenance=self.provenance(result_sha256, result_size),
            counts=counts,
            error_codes=tuple(r["error_codes"]),
            expected_codes=tuple(
                sorted({f["error_code"] for f in self.findings if _expected_alarm(f)})
            ),
            findings_by_layer=tuple((label, n) for label, n in by_layer if n),
            first_findings=self.first_finding_hrefs(),
            findings_by_severity=self.findings_by_severity(),
            print_findings=(
                self.finding_groups(0, PRINTED_FINDINGS, MAIN_PAGE) if findings.split else ()
            ),
            print_findings_note=(
                f"Printed here: the first {PRINTED_FINDINGS} of {findings.total:,} findings, "
                f"in page order; the other {findings.total - PRINTED_FINDINGS:,} are on the "
                "findings pages."
                if findings.split
                else ""
            ),
        )

    def single_view(self, result_sha256: str | None, result_size: int | None) -> RunView:
        """Return the view-model of the run's single file (``build --single-file``).

        The run page, with every finding and the explanation of each code they raise, and
        every link within the one page. The join table and the trace are there whole up
        to ``SINGLE_FILE_ROWS`` rows each; past that, the join table keeps the rows with a
        gap (worst first, at most that many) and the trace none, and the file says so.
        """
        view = self.build(result_sha256, result_size)
        one = self._in_one_page()
        requests, spans = self.join_pager.total, self.trace_pager.total
        left_out = []
        if requests <= SINGLE_FILE_ROWS:
            join_rows = one.join_rows(0, requests, MAIN_PAGE)
            joins_note = ""
            rows_held = f"all {requests:,} request rows"
        else:
            gaps = len(self.gap_order)
            shown = min(gaps, SINGLE_FILE_ROWS)
            join_rows = one.gap_rows(0, shown, MAIN_PAGE)
            joins_note = (
                f"This file holds the {shown:,} request rows with a gap, worst first, of the "
                f"run's {requests:,} requests."
            )
            rows_held = f"the {shown:,} request rows with a gap"
            if requests > gaps:
                left_out.append(f"{requests - gaps:,} request rows without a gap")
            if gaps > shown:
                left_out.append(
                    f"{gaps - shown:,} request rows with a gap, past the first {shown:,}"
                )
        if spans <= SINGLE_FILE_ROWS:
            trace = replace(view.trace, spans=one.span_rows(0, spans, MAIN_PAGE))
            spans_held = f"all {spans:,} trace spans"
        else:
            trace = replace(view.trace, spans=())
            spans_held = "no trace span"
            left_out.append(f"all {spans:,} trace spans")
        findings = self.findings_pager.total
        codes = self._code_docs()
        holds = (
            f"This single file holds every finding ({findings:,}), the explanation of each of "
            f"the {len(codes):,} codes they raise, {rows_held}, and {spans_held}."
            if findings
            else f"This single file holds the run: no finding, {rows_held}, and {spans_held}."
        )
        return replace(
            view,
            join_rows=join_rows,
            join_first_position=1 if requests <= SINGLE_FILE_ROWS else 0,
            join_nav=None,
            gaps_href="#joins",
            finding_groups=one.finding_groups(0, findings, MAIN_PAGE),
            findings_nav=None,
            print_findings=(),
            print_findings_note="",
            trace=trace,
            trace_nav=None,
            single=SingleFileView(holds, tuple(left_out), joins_note, codes),
        )

    def _in_one_page(self) -> _RunBuilder:
        """Return this builder with every listing on the run page, as in a single file."""
        one = copy.copy(self)
        one.join_pager, one.findings_pager, one.trace_pager = (
            replace(pager, page_rows=max(pager.total, 1))
            for pager in (self.join_pager, self.findings_pager, self.trace_pager)
        )
        return one

    def _code_docs(self) -> tuple[CodeDoc, ...]:
        """Return the explanation of each code the run's findings raise, in catalog order."""
        raised = {f["error_code"] for f in self.findings}
        return tuple(
            CodeDoc(
                entry.code,
                single_code_anchor(entry.code),
                entry.severity.value,
                entry.summary,
                render_doc(entry.doc),
            )
            for layer in Layer
            for entry in REGISTRY.by_layer(layer)
            if entry.code in raised
        )

    def listing_paths(self) -> list[str]:
        """Return the run-relative path of every sub-page, in the order they are built."""
        pagers = (self.join_pager, self.findings_pager, self.trace_pager)
        return [p.path(n) for p in pagers if p.split for n in range(p.page_count)]

    def gaps_summary(self) -> str:
        gaps = len(self.gap_order)
        if not gaps:
            return "no request row has a gap"
        worst = self.gap_severity[self.gap_order[0]]
        return f"{plural(gaps, 'request row')} with a gap, worst first (worst: {worst})"

    def listing_pages(
        self, numbers: Iterable[int] | None = None
    ) -> Iterator[tuple[str, ListingPageView]]:
        """Yield each sub-page of the listings this run splits, built one at a time.

        Sub-pages are numbered in ``listing_paths`` order. With ``numbers``, only those are
        built, in the order given (which may be pulled as the pages are built): that is
        how processes share a large run's pages (``parallel._render_shared``).
        """
        plan = [
            (pager, page)
            for pager in (self.join_pager, self.findings_pager, self.trace_pager)
            if pager.split
            for page in range(pager.page_count)
        ]
        for number in range(len(plan)) if numbers is None else numbers:
            yield self._listing_page(*plan[number])

    def gap_pages(self) -> Iterator[tuple[str, ListingPageView]]:
        """Yield the gaps listing's sub-pages (built by the process that builds the run page)."""
        for page in range(self.gaps_pager.page_count):
            yield self._listing_page(self.gaps_pager, page)

    def _listing_page(self, pager: Pager, page: int) -> tuple[str, ListingPageView]:
        noun, title, section_id = _LISTINGS[pager.section]
        path = pager.path(page)
        start, end = pager.bounds(page)
        ranges = self.join_range if pager.section == "join" else None
        view = ListingPageView(
            chrome=self.chrome(f"{self.run.name} — {title} page {page + 1} — sandbox-replay", path),
            name=self.run.name,
            status_badge=badge(self.result["status"]),
            kind=pager.section,
            title=title,
            nav=page_nav(pager, noun, page, ranges),
            run_href=relative_href(MAIN_PAGE, section_id, path),
            join_rows=(
                self.join_rows(start, end, path)
                if pager.section == "join"
                else self.gap_rows(start, end, path)
                if pager.section == "gaps"
                else ()
            ),
            finding_groups=(
                self.finding_groups(start, end, path) if pager.section == "findings" else ()
            ),
            spans=self.span_rows(start, end, path) if pager.section == "trace" else (),
            gaps_href=relative_href(self.gaps_pager.path(0), "gaps-list", path),
            note=_GAPS_NOTE if pager.section == "gaps" else "",
            # The join pages hold the rows in request order; the gaps listing does not.
            first_position=start + 1 if pager.section == "join" else 0,
        )
        return path, view

    def search_files(self) -> list[tuple[str, bytes]]:
        """Return the run's search index files (``search_index``), run-relative."""
        return search_files(self.search_entries())


# A result record larger than this is linked to download, not to open.
OPEN_RESULT_BYTES = 8 * 1024 * 1024

# How many of a split run's findings its run page prints (only when printed).
PRINTED_FINDINGS = 100

# A single file holds a run's whole join table and trace up to this many rows each. A
# join row renders to about 1.5 KB, so that is at most about 3 MB of rows, which a browser
# opens from an attachment at once; past it, the file keeps the rows a reviewer needs,
# those with a gap (``single_view``), and says how many it left out.
SINGLE_FILE_ROWS = 2000


def single_code_anchor(code: str) -> str:
    """Return the id of a code's explanation in a single file.

    The catalog's anchor behind ``code_``: no other id of a run page has an underscore
    after a lower-case word (input files' are ``[a-z0-9-]``, rows' start ``req-``, ``f-``).
    """
    return CODE_PREFIX.decode() + REGISTRY[code].anchor


# Each listing's noun (for its page counts), title and section of the run page.
_LISTINGS = {
    "join": ("requests", "Join table", "joins"),
    "gaps": ("gaps", "Gaps only", "joins"),
    "findings": ("findings", "Findings", "findings"),
    "trace": ("spans", "Trace", "trace"),
}
_GAPS_NOTE = (
    "Only the request rows with a gap: a contradiction between records, a missing join, or "
    "a finding about the request or a row it joins. Worst first: by the worst severity of "
    "the row's findings, then by how many it has, then in request order."
)


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

    ``run_view(result_sha256, result_size)`` builds the run page, which shows the result
    record's digest (``sha256:<hex>``; None: serialise the record once more to take it)
    and its size in bytes (None with a digest: not shown).
    ``subpages(numbers)`` builds the sub-pages lazily, one page at a time, so that the
    view-models of 600,000 rows never sit in memory together: all of them (None), or those
    at the given positions of ``subpage_paths``, which lists them.
    """

    run_view: Callable[[str | None, int | None], RunView]
    subpages: Callable[[Iterable[int] | None], Iterator[tuple[str, ListingPageView]]]
    subpage_paths: tuple[str, ...]
    # The gaps listing's sub-pages and the search index, whose count is known only once
    # the view-models are built: made by the process that builds the run page.
    gap_pages: Callable[[], Iterator[tuple[str, ListingPageView]]]
    search_files: Callable[[], list[tuple[str, bytes]]]
    # The view of the run's single file, with the same arguments as ``run_view``.
    single_view: Callable[[str | None, int | None], RunView]


def subpage_paths(records: RunRecords) -> tuple[str, ...]:
    """Return ``build_run_pages(...).subpage_paths`` without building the view-models."""
    pagers = _pagers(records.result)
    return tuple(p.path(n) for p in pagers if p.split for n in range(p.page_count))


def build_run_pages(
    run: DiscoveredRun, replay: Replay, records: RunRecords, build_time: str, version: str
) -> RunPages:
    """Return how to build the run page and its sub-pages (run-relative paths)."""
    builder = _RunBuilder(run, replay, records, build_time, version)
    return RunPages(
        builder.build,
        builder.listing_pages,
        tuple(builder.listing_paths()),
        builder.gap_pages,
        builder.search_files,
        builder.single_view,
    )
