"""The one typed index of a run that every part of its pages is built from (``index_run``).

Figures the tool worked out (counts, statuses, sizes, digests, codes) come from the typed
replay. Text copied from the inputs is shown redacted, as the result record shows it: the
rows of the list files are the record's, the rest passes through ``RunIndex.shown``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sandbox_replay.checks.pipeline import InputFileInfo, Replay
from sandbox_replay.exports.text import look_alike_ids
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.findings import Finding
from sandbox_replay.model.policy_coverage import PolicyCoverage
from sandbox_replay.model.rows import first_of_each
from sandbox_replay.records.build import RunRecords, column_of, merged_counts, redact
from sandbox_replay.report.discover import DiscoveredRun
from sandbox_replay.report.highlight import file_slug, line_id
from sandbox_replay.report.views.common import (
    ACTIONS_FILE,
    MAIN_PAGE,
    MAX_EXCERPTS,
    MAX_SHOWN_BYTES,
    Pager,
    expected_alarm,
    finding_anchors,
    is_count,
    relative_href,
    request_anchor,
    text,
)
from sandbox_replay.report.views.input_files import input_views
from sandbox_replay.report.views.models import InputView


@dataclass(frozen=True)
class RunIndex:
    """One run's replay, its record's rows and the indexes the page parts share."""

    run: DiscoveredRun
    replay: Replay
    records: RunRecords
    build_time: str
    version: str
    status: str
    # The layers' counts, merged (``records.build.merged_counts``).
    counts: Mapping[str, int]
    # The findings in record order, redacted.
    findings: tuple[Finding, ...]
    # The status each layer shows: fired negative-case alarms are a pass.
    layer_status: Mapping[str, str]
    policy: PolicyCoverage
    # The record's rows (typed rows, or dicts where redaction rewrote them).
    requests: Sequence[Any]
    derived: Sequence[Any]
    verdicts: Sequence[Any]
    effects: Sequence[Any]
    replays: Sequence[Any]
    spans: Sequence[Any]
    # The position of each request id's first row; the first rollback row of each id.
    request_index: Mapping[str, int]
    rollback_index: Mapping[str, Any]
    # The request and rollback ids another id of their kind looks like (``id_mark``).
    look_alikes: frozenset[str]
    # Each input file's fragment-id stem, its view, and which are shown whole or withheld.
    slugs: Mapping[str, str]
    inputs: tuple[InputView, ...]
    highlighted: frozenset[str]
    withheld: frozenset[str]
    # The cited lines a file too large to show whole shows excerpts of.
    excerpted: Mapping[str, frozenset[int]]
    # Findings (positions in ``findings``) by layer, in page order, with their anchors.
    layer_groups: tuple[tuple[Layer, tuple[int, ...]], ...]
    finding_order: tuple[int, ...]
    finding_anchor: Sequence[str]
    finding_position: Mapping[int, int]
    # Which findings (expected alarms aside) are about each subject and each input line.
    by_subject: Mapping[Any, list[int]]
    by_line: Mapping[tuple[Any, Any], list[int]]
    finding_lines: Mapping[Any, set[Any]]
    flagged_spans: frozenset[Any]
    flagged_replays: frozenset[Any]
    join_pager: Pager
    findings_pager: Pager
    trace_pager: Pager

    def on_one_page(self) -> RunIndex:
        """Return the index with every listing on the run page, as in a single file."""
        return replace(
            self,
            join_pager=_whole(self.join_pager),
            findings_pager=_whole(self.findings_pager),
            trace_pager=_whole(self.trace_pager),
        )

    def shown(self, value: Any) -> Any:
        """Return ``value`` as the record shows text copied from an input (redacted)."""
        return redact(value, self.replay.scan.matched_texts)

    @property
    def bundle_id(self) -> str:
        return text(self.shown(self.replay.bundle_id))

    @property
    def input_digests(self) -> tuple[tuple[str, str], ...]:
        """Each input file's path, as the record shows it, and its digest."""
        return tuple((text(self.shown(f.path)), f.sha256) for f in self.replay.inputs)

    @staticmethod
    def root_of(from_page: str) -> str:
        """Return the site root seen from a run-relative page."""
        return "../../../" if "/" in from_page else "../../"

    def line_href(self, path: Any, line: Any, from_page: str) -> str:
        """Link an input line where it is shown, else the file's entry; "" if withheld."""
        if not isinstance(path, str) or path not in self.slugs or path in self.withheld:
            return ""
        slug = self.slugs[path]
        if is_count(line) and (
            (path in self.highlighted and line >= 1) or line in self.excerpted.get(path, ())
        ):
            return relative_href(MAIN_PAGE, line_id(slug, line), from_page)
        return relative_href(MAIN_PAGE, "file-" + slug, from_page)

    def request_hrefs(self, rids: Iterable[str], from_page: str) -> list[str]:
        """Link each request's join row ("" for an id no row holds), as seen from one page."""
        pager = self.join_pager
        prefixes: dict[int, str] = {}  # the link to each page, the anchor left off
        hrefs = []
        for rid in rids:
            index = self.request_index.get(rid)
            if index is None:
                hrefs.append("")
                continue
            page = index // pager.page_rows
            prefix = prefixes.get(page)
            if prefix is None:
                prefix = prefixes[page] = relative_href(pager.page_of(index), "", from_page)
            hrefs.append(prefix + request_anchor(rid))
        return hrefs

    def finding_href(self, index: int, from_page: str) -> str:
        page = self.findings_pager.page_of(self.finding_position[index])
        return relative_href(page, self.finding_anchor[index], from_page)


def location(path: Any, line: Any) -> str:
    """Return ``path:line`` as the pages show an input location ("" for no path)."""
    if not isinstance(path, str):
        return ""
    return f"{path}:{line}" if is_count(line) else path


def from_run_folder(href: str) -> str:
    """Return a link made from the run page as one relative to the run's folder."""
    return MAIN_PAGE + href if href.startswith("#") else href


def _whole(pager: Pager) -> Pager:
    return replace(pager, page_rows=max(pager.total, 1))


def pagers(records: RunRecords) -> tuple[Pager, Pager, Pager]:
    """Return the pagers of a run's join table, findings and trace (from its records alone,
    for ``subpage_paths``)."""
    result = records.result
    return (
        Pager("join", len(result["request_rows"])),
        Pager("findings", result["finding_count"]),
        Pager("trace", len(result["public_agent_execution_trace"]["spans"])),
    )


def index_run(
    run: DiscoveredRun, replay: Replay, records: RunRecords, build_time: str, version: str
) -> RunIndex:
    """Return the index of one run (its input files are read and highlighted here)."""
    result = records.result
    findings = _shown_findings(replay)
    requests = result["request_rows"]
    trace, rollbacks = result["public_agent_execution_trace"], result["rollback_rows"]
    inputs = [info for info in replay.inputs if info.kind == "input"]
    slugs = _unique_slugs([info.path for info in inputs])
    by_subject, by_line = _finding_lookups(findings)
    finding_lines: dict[Any, set[Any]] = {}
    for path, line in by_line:
        finding_lines.setdefault(path, set()).add(line)
    # The opening lines of the rows the pages link to, marked in the highlighted files.
    linked: dict[Any, set[Any]] = {ACTIONS_FILE: set(column_of(requests, "line"))}
    for finding in findings:
        linked.setdefault(finding.path, set()).add(finding.line)
    views = input_views(run.path, inputs, slugs, linked, replay.scan)
    highlighted = frozenset(v.path for v in views if v.html is not None)
    layer_groups = tuple(
        (layer, members)
        for layer in Layer
        if (members := tuple(i for i, f in enumerate(findings) if f.layer is layer))
    )
    order = tuple(i for _, members in layer_groups for i in members)
    join_pager, findings_pager, trace_pager = pagers(records)
    request_index = first_of_each(column_of(requests, "request_id"), range(len(requests)))
    rollback_index = first_of_each(column_of(rollbacks, "rollback_id"), rollbacks)
    return RunIndex(
        run=run,
        replay=replay,
        records=records,
        build_time=build_time,
        version=version,
        status=replay.status,
        counts=merged_counts(replay),
        findings=findings,
        layer_status=_layer_status(replay),
        policy=PolicyCoverage.of_record(result),
        requests=requests,
        derived=result["derived_policy_verdict_rows"],
        verdicts=result["policy_verdict_rows"],
        effects=result["side_effect_rows"],
        replays=result["cold_replay_rows"],
        spans=trace["spans"],
        request_index=request_index,
        rollback_index=rollback_index,
        look_alikes=_look_alikes(request_index, rollback_index),
        slugs=slugs,
        inputs=views,
        highlighted=highlighted,
        withheld=frozenset(info.path for info in inputs if info.withheld),
        excerpted=_excerpted(inputs, highlighted, finding_lines),
        layer_groups=layer_groups,
        finding_order=order,
        finding_anchor=finding_anchors(f.to_record() for f in findings),
        finding_position={i: n for n, i in enumerate(order)},
        by_subject=by_subject,
        by_line=by_line,
        finding_lines=finding_lines,
        flagged_spans=frozenset(f.subject_id for f in findings if f.layer is Layer.PUBLIC_TRACE),
        flagged_replays=frozenset(
            f.subject_id for f in findings if f.error_code == codes.COLD_REPLAY_INVALID
        ),
        join_pager=join_pager,
        findings_pager=findings_pager,
        trace_pager=trace_pager,
    )


def _look_alikes(*indexes: Mapping[Any, Any]) -> frozenset[str]:
    """Return the ids ``id_mark`` marks as look-alikes, each index's ids compared apart."""
    return look_alike_ids(*([i for i in index if isinstance(i, str)] for index in indexes))


def _excerpted(
    inputs: Sequence[InputFileInfo],
    highlighted: frozenset[str],
    finding_lines: Mapping[Any, set[Any]],
) -> dict[str, frozenset[int]]:
    """Return the first ``MAX_EXCERPTS`` cited lines of each file too large to show whole."""
    excerpted = {}
    for info in inputs:
        if info.size > MAX_SHOWN_BYTES and not info.withheld and info.path not in highlighted:
            cited = sorted(n for n in finding_lines.get(info.path, ()) if is_count(n) and n >= 1)
            if cited:
                excerpted[info.path] = frozenset(cited[:MAX_EXCERPTS])
    return excerpted


def _shown_findings(replay: Replay) -> tuple[Finding, ...]:
    """Return the replay's findings with their text as the record shows it (redacted)."""
    findings = replay.findings
    matched = replay.scan.matched_texts
    if not matched:
        return tuple(findings)
    texts = redact(
        [[f.message, f.negative_case_id, f.subject_id, f.subject_kind, f.path] for f in findings],
        matched,
    )
    return tuple(
        replace(f, message=m, negative_case_id=n, subject_id=s, subject_kind=k, path=p)
        for f, (m, n, s, k, p) in zip(findings, texts, strict=True)
    )


def _finding_lookups(
    findings: Sequence[Finding],
) -> tuple[dict[Any, list[int]], dict[tuple[Any, Any], list[int]]]:
    """Return the findings (expected alarms aside) about each subject and each input line."""
    by_subject: dict[Any, list[int]] = {}
    by_line: dict[tuple[Any, Any], list[int]] = {}
    for i, f in enumerate(findings):
        if not expected_alarm(f.error_code):
            by_subject.setdefault(f.subject_id, []).append(i)
            by_line.setdefault((f.path, f.line), []).append(i)
    return by_subject, by_line


def _layer_status(replay: Replay) -> dict[str, str]:
    missing = replay.negative is not None and bool(replay.negative.missing)
    shown = {}
    for layer in replay.layers:
        status = layer.status
        if layer.layer is Layer.NEGATIVE_CASES and status == "blocked" and not missing:
            status = "pass"
        shown[layer.layer.value] = status
    return shown


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
