"""What a run's search finds: every request, finding, code, rule and cited input line."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from sandbox_replay.exports.text import escaped, id_mark, subject_mark, visible
from sandbox_replay.report.search_index import SearchEntry
from sandbox_replay.report.views.common import MAIN_PAGE, plural, request_anchor, rule_anchor, text
from sandbox_replay.report.views.findings import first_finding_hrefs
from sandbox_replay.report.views.index import RunIndex, from_run_folder, location
from sandbox_replay.report.views.joins import Gaps


def search_entries(ix: RunIndex, gaps: Gaps) -> Iterator[SearchEntry]:
    """Yield what the run's search finds, linked from the run's folder; keys as the pages
    show them, and a request whose id holds a hidden character also by its row's anchor.

    A marked request id (``id_mark``) is also found by its escaped form and by each code
    point outside ASCII (``U+0435``), and its note is its mark.
    """
    hrefs = ix.request_hrefs(ix.request_index, MAIN_PAGE)
    for (rid, index), href in zip(ix.request_index.items(), hrefs, strict=True):
        href = from_run_folder(href)
        # Only a row with a gap gets a note: the index of a large run stays small.
        note = f"gap: {gaps.severity[index]}" if index in gaps.severity else ""
        mark = id_mark(rid, ix.look_alikes)
        if not mark:  # a printable ASCII id that looks like no other
            yield SearchEntry(rid, "request", href, note)
            continue
        note = f"{mark} · {note}" if note else mark
        shown = visible(rid)
        yield SearchEntry(shown, "request", href, note)
        if shown != rid:
            yield SearchEntry(request_anchor(rid), "request", href, note)
        if escaped(rid) != shown:
            yield SearchEntry(escaped(rid), "request", href, note)
        for point in dict.fromkeys(f"U+{ord(c):04X}" for c in rid if not " " <= c <= "~"):
            yield SearchEntry(point, "request", href, note)
    code_counts: Counter[str] = Counter()
    for i in ix.finding_order:
        f = ix.findings[i]
        code_counts[f.error_code] += 1
        subject = text(f.subject_id)
        mark = subject_mark(subject, ix.look_alikes)
        yield SearchEntry(
            ix.finding_anchor[i].removeprefix("f-"),
            "finding",
            from_run_folder(ix.finding_href(i, MAIN_PAGE)),
            f"{f.error_code} · {visible(subject)}" + (f" · {mark}" if mark else ""),
        )
    for code, href in first_finding_hrefs(ix):
        yield SearchEntry(code, "code", href, plural(code_counts[code], "finding"))
    for rule in ix.policy.rules:
        yield SearchEntry(
            visible(rule.rule_ref),
            "rule",
            MAIN_PAGE + "#" + rule_anchor(rule.rule_ref),
            f"{rule.verdict} · {plural(rule.request_count, 'request')}",
        )
    for view in ix.inputs:
        yield SearchEntry(view.path, "input", f"{MAIN_PAGE}#{view.anchor}", view.size)
    for (path, line), hits in ix.by_line.items():
        shown_at = location(path, line)
        href = ix.line_href(path, line, MAIN_PAGE)
        if shown_at and href:
            yield SearchEntry(
                visible(shown_at), "line", from_run_folder(href), plural(len(hits), "finding")
            )
