"""A run page and its listing sub-pages, each part built from the run's one index."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import cached_property

from sandbox_replay.checks.confusables import id_mark
from sandbox_replay.checks.pipeline import Replay
from sandbox_replay.load.run import InputMode
from sandbox_replay.records.build import RunRecords
from sandbox_replay.records.headline import gap_headline
from sandbox_replay.report.discover import DiscoveredRun
from sandbox_replay.report.search_index import SEARCH_DIR, search_files
from sandbox_replay.report.views import calibration, findings, input_files, layer_tables, summary
from sandbox_replay.report.views.benchmark import benchmark
from sandbox_replay.report.views.common import (
    CHANGES_PAGE,
    MAIN_PAGE,
    MODE_LABELS,
    Chrome,
    Pager,
    badge,
    byte_size,
    chrome,
    expected_alarm,
    page_nav,
    plural,
    policy_kind_label,
    relative_href,
    text,
)
from sandbox_replay.report.views.index import RunIndex, index_run, pagers
from sandbox_replay.report.views.joins import Gaps, find_gaps, join_rows
from sandbox_replay.report.views.models import (
    DigestRow,
    ListingPageView,
    ProvenanceView,
    RunChangesView,
    RunView,
)
from sandbox_replay.report.views.search import search_entries
from sandbox_replay.report.views.seeded import seeded
from sandbox_replay.report.views.single import single_view
from sandbox_replay.report.views.trace_table import span_rows, trace
from sandbox_replay.report.views.unmapped import unmapped
from sandbox_replay.version import TOOL_NAME, __version__

# A result record larger than this is linked to download, not to open.
OPEN_RESULT_BYTES = 8 * 1024 * 1024

# How many of a split run's findings its run page prints (only when printed).
PRINTED_FINDINGS = 100

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


@dataclass(frozen=True)
class RunPages:
    """How to build a run's pages from its index, one page at a time.

    ``run_view`` and ``single_view`` take the result record's digest (None: serialise the
    record again to take it) and its size (None with a digest: not shown). ``subpages``
    builds those at the given positions of ``subpage_paths`` (None: all) one at a time,
    so that a large run's rows never sit in memory together (``page_forks``).
    """

    ix: RunIndex
    # In a build given a baseline (``changes_views.with_changes``): the run's "Changes
    # since baseline", made for the way to the site root.
    changes: Callable[[str], RunChangesView] | None = None

    @cached_property
    def gaps(self) -> Gaps:
        return find_gaps(self.ix)

    @cached_property
    def gaps_pager(self) -> Pager:
        """The gaps listing: always on sub-pages of its own, linked first from the run page."""
        return Pager("gaps", len(self.gaps.order), own_pages=True)

    @property
    def subpage_paths(self) -> tuple[str, ...]:
        return subpage_paths(self.ix.records)

    def run_view(self, result_sha256: str | None, result_size: int | None) -> RunView:
        view = run_view(self.ix, self.gaps, self.gaps_pager, result_sha256, result_size)
        return self._linked(view)

    def single_view(self, result_sha256: str | None, result_size: int | None) -> RunView:
        view = run_view(self.ix, self.gaps, self.gaps_pager, result_sha256, result_size)
        return self._linked(single_view(self.ix, self.gaps, view))

    def subpages(self, numbers: Iterable[int] | None) -> Iterator[tuple[str, ListingPageView]]:
        """Yield the sub-pages at ``numbers`` in the order given (pulled as they are built)."""
        ix = self.ix
        plan = [
            (pager, page)
            for pager in (ix.join_pager, ix.findings_pager, ix.trace_pager)
            if pager.split
            for page in range(pager.page_count)
        ]
        for number in range(len(plan)) if numbers is None else numbers:
            yield self._listing_page(*plan[number])

    def gap_pages(self) -> Iterator[tuple[str, ListingPageView]]:
        """Yield the gaps listing's sub-pages (by the process that builds the run page)."""
        for page in range(self.gaps_pager.page_count):
            yield self._listing_page(self.gaps_pager, page)

    def search_files(self) -> list[tuple[str, bytes]]:
        return search_files(search_entries(self.ix, self.gaps))

    def _linked(self, view: RunView) -> RunView:
        """Return the run page's view with its changes, in a build given a baseline."""
        if self.changes is None:
            return view
        return replace(
            view, chrome=self._frame(view.chrome), changes=self.changes(view.chrome.root)
        )

    def _frame(self, frame: Chrome) -> Chrome:
        """Return a page's frame with the "Changes" link, in a build given a baseline."""
        if self.changes is None:
            return frame
        return replace(frame, changes_href=f"{frame.root}{CHANGES_PAGE}")

    def _listing_page(self, pager: Pager, page: int) -> tuple[str, ListingPageView]:
        ix, kind = self.ix, pager.section
        noun, title, section_id = _LISTINGS[kind]
        path = pager.path(page)
        start, end = pager.bounds(page)
        if kind == "join":
            rows = join_rows(ix, self.gaps, range(start, end), path)
        elif kind == "gaps":
            rows = join_rows(ix, self.gaps, self.gaps.order[start:end], path)
        else:
            rows = ()
        view = ListingPageView(
            chrome=self._frame(
                run_chrome(ix, f"{ix.run.name} — {title} page {page + 1} — sandbox-replay", path)
            ),
            name=ix.run.name,
            status_badge=badge(ix.status),
            kind=kind,
            title=title,
            nav=page_nav(pager, noun, page, _join_range(ix) if kind == "join" else None),
            run_href=relative_href(MAIN_PAGE, section_id, path),
            join_rows=rows,
            finding_groups=(
                findings.finding_groups(ix, start, end, path) if kind == "findings" else ()
            ),
            spans=span_rows(ix, start, end, path) if kind == "trace" else (),
            gaps_href=relative_href(self.gaps_pager.path(0), "gaps-list", path),
            note=_GAPS_NOTE if kind == "gaps" else "",
            # The join pages hold the rows in request order; the gaps listing does not.
            first_position=start + 1 if kind == "join" else 0,
        )
        return path, view


def subpage_paths(records: RunRecords) -> tuple[str, ...]:
    """Return the run's sub-pages, in ``RunPages.subpages`` order, without building them."""
    return tuple(p.path(n) for p in pagers(records) if p.split for n in range(p.page_count))


def build_run_pages(
    run: DiscoveredRun, replay: Replay, records: RunRecords, build_time: str, version: str
) -> RunPages:
    """Return how to build the run page and its sub-pages (run-relative paths)."""
    return RunPages(index_run(run, replay, records, build_time, version))


def run_view(
    ix: RunIndex,
    gaps: Gaps,
    gaps_pager: Pager,
    result_sha256: str | None,
    result_size: int | None,
) -> RunView:
    """Return the run page's view-model, every part built from the run's index."""
    counts = summary.counts(ix)
    svg, print_svg, mermaid = summary.flowchart(ix)
    join, found, spans = ix.join_pager, ix.findings_pager, ix.trace_pager
    return RunView(
        chrome=run_chrome(ix, f"{ix.run.name} — sandbox-replay", MAIN_PAGE),
        name=ix.run.name,
        mode=ix.run.mode.value,
        mode_label=MODE_LABELS[ix.run.mode],
        status=ix.status,
        status_badge=badge(ix.status),
        source_path=ix.run.display_path,
        bundle_id=text(ix.bundle_id),
        headline=gap_headline(ix.records.result),
        facts=summary.facts(ix, counts),
        flowchart_svg=svg,
        flowchart_print_svg=print_svg,
        mermaid=mermaid,
        join_rows=() if join.split else join_rows(ix, gaps, range(join.total), MAIN_PAGE),
        join_first_position=0 if join.split else 1,
        join_nav=page_nav(join, "requests", None, _join_range(ix)) if join.split else None,
        gaps_href=relative_href(gaps_pager.path(0), "gaps-list", MAIN_PAGE),
        gaps_summary=_gaps_summary(gaps),
        finding_groups=(
            findings.group_summaries(ix)
            if found.split
            else findings.finding_groups(ix, 0, found.total, MAIN_PAGE)
        ),
        findings_nav=page_nav(found, "findings", None) if found.split else None,
        gap_finding_count=counts.findings,
        matrix=calibration.matrix(ix),
        negative_rows=calibration.negative_rows(ix),
        coverage=calibration.coverage(ix),
        layer_rows=layer_tables.layer_rows(ix),
        scan=layer_tables.scan(ix),
        trace=trace(ix),
        trace_nav=page_nav(spans, "spans", None) if spans.split else None,
        inputs=input_files.shown_inputs(ix),
        modules=input_files.modules(ix),
        provenance=_provenance(ix, result_sha256, result_size),
        input_digests=ix.input_digests,
        policy=ix.policy,
        counts=counts,
        error_codes=tuple(sorted({f.error_code for f in ix.findings})),
        expected_codes=tuple(
            sorted({f.error_code for f in ix.findings if expected_alarm(f.error_code)})
        ),
        findings_by_layer=findings.findings_by_layer(ix),
        first_findings=findings.first_finding_hrefs(ix),
        findings_by_severity=findings.findings_by_severity(ix),
        print_findings=(
            findings.finding_groups(ix, 0, PRINTED_FINDINGS, MAIN_PAGE) if found.split else ()
        ),
        print_findings_note=(
            f"Printed here: the first {PRINTED_FINDINGS} of {found.total:,} findings, "
            f"in page order; the other {found.total - PRINTED_FINDINGS:,} are on the "
            "findings pages."
            if found.split
            else ""
        ),
        unmapped=unmapped(ix),
        benchmark=benchmark(ix),
        seeded=seeded(ix),
    )


def run_chrome(ix: RunIndex, title: str, from_page: str) -> Chrome:
    """Return the frame of one of the run's pages: the site's, with the run's search."""
    frame = chrome(title, ix.root_of(from_page), "run", ix.build_time, ix.version)
    up = "../" if "/" in from_page else ""
    join = ix.join_pager
    return replace(
        frame,
        search_index=f"{up}{SEARCH_DIR}/index.js",
        run_page=up + MAIN_PAGE,
        requests=join.total,
        join_page_rows=join.page_rows if join.split else 0,
    )


def _join_range(ix: RunIndex) -> Callable[[int], str]:
    """Return what says which request ids a join-table page holds: its first and last."""

    def held(page: int) -> str:
        start, end = ix.join_pager.bounds(page)
        first, last = (text(ix.requests[i].get("request_id")) for i in (start, end - 1))
        return " – ".join(
            f"{rid} [{mark}]" if (mark := id_mark(rid, ix.look_alikes)) else rid
            for rid in (first, last)
        )

    return held


def _gaps_summary(gaps: Gaps) -> str:
    if not gaps.order:
        return "no request row has a gap"
    worst = gaps.severity[gaps.order[0]]
    return f"{plural(len(gaps.order), 'request row')} with a gap, worst first (worst: {worst})"


def _provenance(ix: RunIndex, result_sha256: str | None, result_size: int | None) -> ProvenanceView:
    """Return where the run came from, its record's digest, and how to replay it again."""
    run, policy = ix.run, ix.policy
    if result_sha256 is None:  # else the digest the build took as it wrote the record
        result_sha256 = ix.records.receipt["result_record_sha256"]
        result_size = len(ix.records.result_bytes)
    digests = dict(ix.input_digests)  # by path, as the receipt lists them
    # A run derived with a policy of its own is reproduced only with that policy.
    policy_path = ix.replay.run.policy.source.path
    policy_option = f" --policy {_shell_word(policy_path)}" if policy_path is not None else ""
    folder, imported = run.display_path, ""
    if run.source_sha256 is not None:  # imported from an Inspect AI log by build
        folder = f"imported/{run.path.name}"
        imported = (
            f"sandbox-replay import inspect {_shell_word(run.display_path)} --out imported && "
        )
    command = "run" if run.mode is InputMode.FIXTURE else "run-sandbox-bundle"
    return ProvenanceView(
        tool=TOOL_NAME,
        version=__version__,
        command=(
            f"{imported}sandbox-replay {command} --input {_shell_word(folder)} "
            f"--out {_shell_word('out/' + run.name)}{policy_option}"
        ),
        source_path=run.display_path,
        bundle_id=text(ix.bundle_id),
        result_href="result.json",
        result_sha256=result_sha256,
        result_size=byte_size(result_size) if result_size is not None else "",
        # A browser opening a record this large as text hangs its tab: download it.
        result_download=result_size is not None and result_size > OPEN_RESULT_BYTES,
        digests=tuple(DigestRow(path, sha256) for path, sha256 in digests.items()),
        build_time=ix.build_time,
        policy_kind=policy_kind_label(policy.kind),
        policy_id=policy.policy_id,
        policy_rules=plural(policy.rule_count, "rule"),
        policy_sha256=policy.sha256,
    )


def _shell_word(value: str) -> str:
    """Quote a path for a POSIX shell only when it needs it."""
    safe = all(c.isalnum() or c in "-_./:@%+=," for c in value)
    return value if value and safe else "'" + value.replace("'", "'\\''") + "'"
