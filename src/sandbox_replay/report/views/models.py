"""The view-models a run page's templates read: plain frozen values, decided in Python."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from markupsafe import Markup

from sandbox_replay.exports import SeededCount
from sandbox_replay.model.policy_coverage import PolicyCoverage
from sandbox_replay.records.benchmark import BenchmarkFacts
from sandbox_replay.records.headline import GapHeadline
from sandbox_replay.report.views.common import Badge, Cell, Chrome, PageNav, breakable


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
    # The worst severity of its findings ("" when it has none).
    severity: str = ""
    # The mark beside its id (``exports.text.id_mark``; "" for most).
    id_mark: str = ""


@dataclass(frozen=True)
class FindingView:
    anchor: str
    code: str
    code_href: str
    severity: str
    subject: str
    subject_kind: str
    # The mark beside the subject id (``exports.text.id_mark``; "" for most).
    subject_mark: str
    message: str
    location: str
    location_href: str
    request_href: str
    # Its position in the result record's findings, counted from 1: what an old
    # permalink (``#finding-N``) names.
    position: int


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
class CoverageRow:
    """One rule of the policy in force and how many of this run's requests it determined."""

    rule_ref: str
    verdict: str
    verdict_css: str
    request_count: int
    never: bool
    css: str
    anchor: str = ""


@dataclass(frozen=True)
class CoverageView:
    """The run page's policy coverage table: every rule in force, never-exercised marked."""

    summary: str
    rows: tuple[CoverageRow, ...]
    policy_href: str


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
    # The mark beside its request's id (``exports.text.subject_mark``; "" for most).
    id_mark: str = ""


@dataclass(frozen=True)
class TraceView:
    status: Badge
    spans: tuple[SpanRow, ...]
    span_count: int
    digest: str
    outcome_counts: str
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
    result_size: str
    result_download: bool
    digests: tuple[DigestRow, ...]
    build_time: str
    policy_kind: str
    policy_id: str
    policy_rules: str
    policy_sha256: str


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
class CodeDoc:
    """The explanation of one finding code, as a single file carries it (and the catalog)."""

    code: str
    anchor: str
    severity: str
    summary: str
    doc: Markup


@dataclass(frozen=True)
class SingleFileView:
    """What a run's single file adds to its run page: the explanation of each code its
    findings raise, and what of the run it holds and leaves out, said in words."""

    holds: str
    left_out: tuple[str, ...]
    joins_note: str
    codes: tuple[CodeDoc, ...]


@dataclass(frozen=True)
class UnmappedTool:
    """A tool no map rule matched: its name, its calls, and its first call's join row."""

    name: str
    calls: int
    first_href: str


@dataclass(frozen=True)
class BenchmarkView:
    said: tuple[tuple[str, str], ...]  # (label, value) as the benchmark recorded them
    replayed: str  # what the replay saw executed after untrusted tool output
    attacked: bool  # an injection task ran
    facts: BenchmarkFacts  # what the index counts of the run


@dataclass(frozen=True)
class UnmappedView:
    tools: tuple[UnmappedTool, ...]
    snippet: str  # a map file of one rule per tool, its classification left to fill in
    doc: str  # the docs page of the map file: ``docs/inspect.md``
    command: str  # that takes ``--map``: ``import inspect``


@dataclass(frozen=True)
class SeededTarget:
    """A row a seeded escape was planted in: its id as shown, its mark, its join row's
    link ("" for a copied body, or a row the page does not hold) and its outcome if not
    caught ("" when it was)."""

    label: str
    mark: str
    href: str
    note: str


@dataclass(frozen=True)
class SeededRow:
    """One seeded escape and what the replay saw of it on this run's rows."""

    anchor: str
    escape_id: str
    fakes: str
    codes: tuple[FindingLink, ...]
    outcome: Badge
    rows_tried: int
    caught: int
    otherwise: int
    missed: int
    targets: tuple[SeededTarget, ...]
    reason: str  # why it is not applicable ("" when it is)


@dataclass(frozen=True)
class SeededView:
    """The run page's "Would this audit have caught it?" table (``--sensitivity``)."""

    summary: str
    rows: tuple[SeededRow, ...]
    count: SeededCount
    # The escapes missed on a passing run: the warning at the top of its page.
    notice: tuple[SeededRow, ...]


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
    # The position of its first join row among the run's requests, counted from 1 (0
    # when the rows are not in request order, or not here): what an old permalink names.
    join_first_position: int
    join_nav: PageNav | None
    gaps_href: str
    gaps_summary: str
    finding_groups: tuple[FindingGroup, ...]
    findings_nav: PageNav | None
    gap_finding_count: int
    matrix: MatrixView
    negative_rows: tuple[NegativeRow, ...] | None
    coverage: CoverageView
    layer_rows: tuple[LayerRow, ...]
    scan: ScanView
    trace: TraceView
    trace_nav: PageNav | None
    inputs: tuple[InputView, ...]
    modules: tuple[ModuleView, ...]
    provenance: ProvenanceView
    # For the run's summary (``site_views.summarize_run``).
    input_digests: tuple[tuple[str, str], ...]
    policy: PolicyCoverage
    counts: RunCounts
    error_codes: tuple[str, ...]
    expected_codes: tuple[str, ...]
    findings_by_layer: tuple[tuple[str, int], ...]
    # "Changes since baseline", only in a build given ``--baseline``.
    changes: RunChangesView | None = None
    # Each code's first finding, linked from the run's folder (for the catalog).
    first_findings: tuple[tuple[str, str], ...] = ()
    # For a run whose findings are on sub-pages: the first few, printed with the run page.
    print_findings: tuple[FindingGroup, ...] = ()
    print_findings_note: str = ""
    # Its findings (expected alarms aside) by severity, worst first, none left out.
    findings_by_severity: tuple[tuple[str, int], ...] = ()
    # Only in the view of a single file (``build --single-file``).
    single: SingleFileView | None = None
    # Only for a run imported from an Inspect log with calls no map rule matched.
    unmapped: UnmappedView | None = None
    # Only for a run whose bundle carries a benchmark's verdict (AgentDojo).
    benchmark: BenchmarkView | None = None
    # Only for a run replayed with ``--sensitivity``.
    seeded: SeededView | None = None


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
    gaps_href: str = ""
    note: str = ""
    # As ``RunView.join_first_position``, for a page of the join table.
    first_position: int = 0


@dataclass(frozen=True)
class ChangedFinding:
    """A finding new or fixed since the baseline, as the changes sections list it."""

    code: str
    code_href: str
    run: str
    run_href: str
    subject: str
    message: str
    location: str


@dataclass(frozen=True)
class RunChangesView:
    """A run page's "Changes since baseline": its status change, findings and inputs."""

    css: str
    summary: str
    moved_note: str
    new: tuple[ChangedFinding, ...]
    fixed: tuple[ChangedFinding, ...]
    inputs: tuple[tuple[str, str], ...]
