"""The run page's "Would this audit have caught it?": each seeded escape planted in the
run's own rows (``checks.sensitivity``) and what the replay saw of it."""

from __future__ import annotations

from sandbox_replay.checks.confusables import id_mark
from sandbox_replay.checks.sensitivity import CAUGHT, MISSED, NOT_APPLICABLE, OTHERWISE, EscapeScore
from sandbox_replay.exports import SeededCount
from sandbox_replay.report.views.common import MAIN_PAGE, Badge, code_href, content_slug, text
from sandbox_replay.report.views.index import RunIndex
from sandbox_replay.report.views.models import FindingLink, SeededRow, SeededTarget, SeededView

OUTCOME_BADGES = {
    CAUGHT: Badge("caught", "badge status-pass"),
    OTHERWISE: Badge("caught otherwise", "badge status-never"),
    MISSED: Badge("missed", "badge status-blocked"),
    NOT_APPLICABLE: Badge("not applicable", "badge status-not_applicable"),
}


def seeded_anchor(escape_id: str) -> str:
    """Return the id of an escape's row in the run page's seeded-escapes table."""
    return "seeded-" + content_slug(escape_id)


def seeded(ix: RunIndex) -> SeededView | None:
    """Return the seeded-escapes table, None for a run replayed without ``--sensitivity``."""
    seen = ix.replay.sensitivity
    if seen is None:
        return None
    rows = tuple(_row(ix, score) for score in seen.scores)
    missed = [row for row, score in zip(rows, seen.scores, strict=True) if score.outcome == MISSED]
    not_applicable = len(seen.escapes(NOT_APPLICABLE))
    summary = (
        f"{seen.caught:,} of {seen.applicable:,} seeded escapes caught"
        + (f", {len(missed):,} missed" if missed else "")
        + (f"; {not_applicable:,} not applicable to this run" if not_applicable else "")
        + "."
    )
    count = SeededCount(seen.caught, seen.applicable)
    return SeededView(summary, rows, count, tuple(missed) if ix.status == "pass" else ())


def _row(ix: RunIndex, score: EscapeScore) -> SeededRow:
    escape = score.escape
    root = ix.root_of(MAIN_PAGE)
    targets = []
    for mutant in score.mutants:
        label = text(ix.shown(mutant.target))
        href = "" if escape.on_modules else ix.request_hrefs([label], MAIN_PAGE)[0]
        note = "" if mutant.outcome == CAUGHT else OUTCOME_BADGES[mutant.outcome].text
        mark = "" if escape.on_modules else id_mark(label, ix.look_alikes)
        targets.append(SeededTarget(label, mark, href, note))
    return SeededRow(
        anchor=seeded_anchor(escape.escape_id),
        escape_id=escape.escape_id,
        fakes=escape.fakes,
        codes=tuple(FindingLink(code, code_href(code, root)) for code in escape.codes),
        outcome=OUTCOME_BADGES[score.outcome],
        rows_tried=len(score.mutants),
        caught=score.count(CAUGHT),
        otherwise=score.count(OTHERWISE),
        missed=score.count(MISSED),
        targets=tuple(targets),
        reason="" if score.mutants else escape.not_applicable,
    )
