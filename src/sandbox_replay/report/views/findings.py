"""The run page's findings, grouped by layer and paged."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from sandbox_replay.exports.text import subject_mark
from sandbox_replay.model.codes import REGISTRY, Layer, Severity
from sandbox_replay.report.views.common import MAIN_PAGE, code_href, expected_alarm, plural, text
from sandbox_replay.report.views.index import RunIndex, from_run_folder, location
from sandbox_replay.report.views.models import FindingGroup, FindingView


def finding_groups(ix: RunIndex, start: int, end: int, from_page: str) -> tuple[FindingGroup, ...]:
    """Return the findings at display positions ``[start, end)``, grouped by layer."""
    groups = []
    position = 0
    for layer, members in ix.layer_groups:
        first, position = position, position + len(members)
        shown = members[max(start - first, 0) : max(end - first, 0)]
        if shown:
            views = tuple(_finding_view(ix, i, from_page) for i in shown)
            groups.append(_group(ix, layer, members, views, from_page))
    return tuple(groups)


def group_summaries(ix: RunIndex) -> tuple[FindingGroup, ...]:
    """Return every layer's group without its findings, for a run page that splits them."""
    return tuple(_group(ix, layer, members, (), MAIN_PAGE) for layer, members in ix.layer_groups)


def findings_by_severity(ix: RunIndex) -> tuple[tuple[str, int], ...]:
    """Return how many findings (expected alarms aside) each severity has, worst first."""
    counts = Counter(
        REGISTRY[f.error_code].severity.value
        for f in ix.findings
        if not expected_alarm(f.error_code)
    )
    return tuple((s.value, counts[s.value]) for s in Severity if counts[s.value])


def first_finding_hrefs(ix: RunIndex) -> tuple[tuple[str, str], ...]:
    """Return each code's first finding (in page order), linked from the run's folder."""
    first: dict[str, str] = {}
    for i in ix.finding_order:
        code = ix.findings[i].error_code
        if code not in first:
            first[code] = from_run_folder(ix.finding_href(i, MAIN_PAGE))
    return tuple(first.items())


def findings_by_layer(ix: RunIndex) -> tuple[tuple[str, int], ...]:
    """Return each layer's count of findings; a layer of expected alarms only is left out,
    as on the index chart."""
    return tuple(
        (layer.label, len(members))
        for layer, members in ix.layer_groups
        if not _all_expected(ix, members)
    )


def _all_expected(ix: RunIndex, members: Sequence[int]) -> bool:
    return all(expected_alarm(ix.findings[i].error_code) for i in members)


def _finding_view(ix: RunIndex, index: int, from_page: str) -> FindingView:
    f = ix.findings[index]
    rid = f.subject_id.removeprefix("span:") if isinstance(f.subject_id, str) else ""
    return FindingView(
        anchor=ix.finding_anchor[index],
        code=f.error_code,
        code_href=code_href(f.error_code, ix.root_of(from_page)),
        severity=REGISTRY[f.error_code].severity.value,
        subject=text(f.subject_id),
        subject_kind=text(f.subject_kind).replace("_", " "),
        subject_mark=subject_mark(f.subject_id, ix.look_alikes),
        message=text(f.message),
        location=location(f.path, f.line),
        location_href=ix.line_href(f.path, f.line, from_page),
        request_href=ix.request_hrefs([rid], from_page)[0],
        position=index + 1,
    )


def _group(
    ix: RunIndex,
    layer: Layer,
    members: Sequence[int],
    views: tuple[FindingView, ...],
    from_page: str,
) -> FindingGroup:
    """Return one layer's group of ``members`` (finding positions), showing ``views``."""
    expected = _all_expected(ix, members)
    note = (
        "Expected: each planted negative case raised its code, proving that alarm works."
        if expected
        else plural(len(members), "finding")
    )
    return FindingGroup(
        layer.value,
        layer.label,
        note,
        expected,
        views,
        len(members),
        ix.finding_href(members[0], from_page),
    )
