"""What a run's search finds: every request, finding, code, rule and cited input line."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from sandbox_replay.exports.text import visible
from sandbox_replay.model.policy_coverage import PolicyCoverage
from sandbox_replay.report.search_index import SearchEntry
from sandbox_replay.report.views.common import (
    MAIN_PAGE,
    plural,
    request_anchor,
    rule_anchor,
    text,
)
from sandbox_replay.report.views.findings import Findings
from sandbox_replay.report.views.joins import JoinTable


def _from_run_page(href: str) -> str:
    """Return a link made from the run page as one relative to the run's folder."""
    return MAIN_PAGE + href if href.startswith("#") else href


class SearchEntries(JoinTable, Findings):
    def search_entries(self) -> Iterator[SearchEntry]:
        """Yield what the run's search finds, with links relative to the run's folder.

        Keys are shown as the pages show them (hidden characters made visible); a request
        whose id holds one is also found by its row's anchor, which is what a permalink
        to it names.
        """
        gap_severity = self.gap_severity
        hrefs = self.request_hrefs(self.request_index, MAIN_PAGE)
        for (rid, index), href in zip(
            self.request_index.items(), map(_from_run_page, hrefs), strict=True
        ):
            # Only a row with a gap gets a note: most rows have none, and the index of a
            # large run stays small.
            note = f"gap: {gap_severity[index]}" if index in gap_severity else ""
            shown = visible(rid)
            yield SearchEntry(shown, "request", href, note)
            if shown != rid:
                yield SearchEntry(request_anchor(rid), "request", href, note)
        code_counts: Counter[str] = Counter()
        for i in self.finding_order:
            f = self.findings[i]
            code = f["error_code"]
            code_counts[code] += 1
            href = _from_run_page(self.finding_href(i, MAIN_PAGE))
            yield SearchEntry(
                self.finding_anchor[i].removeprefix("f-"),
                "finding",
                href,
                f"{code} · {visible(text(f['subject_id']))}",
            )
        for code, href in self.first_finding_hrefs():
            yield SearchEntry(code, "code", href, plural(code_counts[code], "finding"))
        for rule in PolicyCoverage.of_record(self.result).rules:
            yield SearchEntry(
                visible(rule.rule_ref),
                "rule",
                MAIN_PAGE + "#" + rule_anchor(rule.rule_ref),
                f"{rule.verdict} · {plural(rule.request_count, 'request')}",
            )
        for view in self.input_views:
            yield SearchEntry(view.path, "input", f"{MAIN_PAGE}#{view.anchor}", view.size)
        for path, line in self.by_line:
            location = self.location(path, line)
            href = self.line_href(path, line, MAIN_PAGE)
            if location and href:
                yield SearchEntry(
                    visible(location),
                    "line",
                    _from_run_page(href),
                    plural(len(self.by_line[(path, line)]), "finding"),
                )
