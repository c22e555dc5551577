"""The run page's findings, grouped by layer and paged."""

from __future__ import annotations

from collections import Counter

from sandbox_replay.model.codes import REGISTRY, Layer, Severity
from sandbox_replay.report.views.base import RunBase
from sandbox_replay.report.views.cells import _expected_alarm
from sandbox_replay.report.views.common import MAIN_PAGE, code_href, plural, text
from sandbox_replay.report.views.models import FindingGroup, FindingView


class Findings(RunBase):
    def finding_view(self, index: int, from_page: str) -> FindingView:
        f = self.findings[index]
        subject = f["subject_id"]
        rid = subject.removeprefix("span:") if isinstance(subject, str) else ""
        return FindingView(
            anchor=self.finding_anchor[index],
            code=f["error_code"],
            code_href=code_href(f["error_code"], self.root_of(from_page)),
            severity=REGISTRY[f["error_code"]].severity.value,
            subject=text(subject),
            subject_kind=text(f["subject_kind"]).replace("_", " "),
            message=text(f["message"]),
            location=self.location(f["path"], f["line"]),
            location_href=self.line_href(f["path"], f["line"], from_page),
            request_href=self.request_href(rid, from_page),
            position=index + 1,
        )

    def findings_by_severity(self) -> tuple[tuple[str, int], ...]:
        """Return how many findings (expected alarms aside) each severity has, worst first."""
        counts = Counter(
            REGISTRY[f["error_code"]].severity.value
            for f in self.findings
            if not _expected_alarm(f)
        )
        return tuple((s.value, counts[s.value]) for s in Severity if counts[s.value])

    def first_finding_hrefs(self) -> tuple[tuple[str, str], ...]:
        """Return each code's first finding (in page order), linked from the run's folder."""
        first: dict[str, str] = {}
        for i in self.finding_order:
            code = self.findings[i]["error_code"]
            if code not in first:
                href = self.finding_href(i, MAIN_PAGE)
                first[code] = MAIN_PAGE + href if href.startswith("#") else href
        return tuple(first.items())

    def finding_groups(self, start: int, end: int, from_page: str) -> tuple[FindingGroup, ...]:
        """Return the findings at display positions ``[start, end)``, grouped by layer."""
        groups = []
        position = 0
        for layer, members in self.layer_groups:
            first, position = position, position + len(members)
            shown = members[max(start - first, 0) : max(end - first, 0)]
            if shown:
                views = tuple(self.finding_view(i, from_page) for i in shown)
                groups.append(self._group(layer, members, views, from_page))
        return tuple(groups)

    def group_summaries(self) -> tuple[FindingGroup, ...]:
        """Return every layer's group without its findings, for a run page that splits them."""
        return tuple(
            self._group(layer, members, (), MAIN_PAGE) for layer, members in self.layer_groups
        )

    def _group(
        self,
        layer: Layer,
        members: list[int],
        views: tuple[FindingView, ...],
        from_page: str,
    ) -> FindingGroup:
        """Return one layer's group of ``members`` (finding positions), showing ``views``."""
        expected = all(_expected_alarm(self.findings[i]) for i in members)
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
            self.finding_href(members[0], from_page),
        )
