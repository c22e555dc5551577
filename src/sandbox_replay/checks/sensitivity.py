"""Would this audit have caught it? Seeded escapes replayed on the run's own rows.

Each escape of ``escapes.ESCAPES`` is planted in up to ``MAX_TRIED`` of the run's requests
(chosen in file order, one request kind after another, so a run of many kinds is tried on
several), each a mutant of its own. A mutant is judged by the same layers as the run, on
the rows of its request alone (``RequestRows``: its request, verdict, receipt, rollback
and cold-replay rows, re-scanned for forbidden material), beside the same rows unedited:
what the edit changed is what it adds. Only rows of the mutated request can change, so
the rest of the run need not be checked again.

A mutant is *caught* when the replay adds a finding with one of the codes the escape
declares, *caught otherwise* when it adds findings of other codes only, *missed* when it
adds none. On a passing run, a finding added is the run turning blocked; on a run already
blocked, it is the replay seeing this lie besides the others.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

from sandbox_replay.checks.base import LayerResult
from sandbox_replay.checks.escapes import ESCAPES, Escape, RequestRows
from sandbox_replay.checks.source_modules import ModuleBody
from sandbox_replay.load.run import RunInputs, rollback_id_of
from sandbox_replay.load.scan import ForbiddenScanner
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.findings import Finding
from sandbox_replay.model.rows import Rollback, Table

MAX_TRIED = 3
FLOOR = "sensitivity_floor"
CAUGHT, OTHERWISE, MISSED, NOT_APPLICABLE = "caught", "caught_otherwise", "missed", "not_applicable"
# An escape's outcome is its worst mutant's.
_WORST = (MISSED, OTHERWISE, CAUGHT)

# What judges a run of a few rows: its findings, the negative cases' and the manifest's aside.
Judge = Callable[[RunInputs], list[Finding]]
# What judges the copied bodies with one body edited (its path, the edit).
ModuleJudge = Callable[[str, Callable[[bytes], bytes]], list[Finding]]


@dataclass(frozen=True)
class Mutant:
    """One escape planted in one request (or copied body): what the replay added."""

    target: str  # the request id, or the module id
    outcome: str
    codes: tuple[str, ...]  # the codes of the findings it added, sorted

    def to_record(self) -> dict[str, Any]:
        return {"target": self.target, "outcome": self.outcome, "codes": list(self.codes)}


@dataclass(frozen=True)
class EscapeScore:
    escape: Escape
    mutants: tuple[Mutant, ...]

    @property
    def outcome(self) -> str:
        if not self.mutants:
            return NOT_APPLICABLE
        return min((m.outcome for m in self.mutants), key=_WORST.index)

    def count(self, outcome: str) -> int:
        return sum(1 for m in self.mutants if m.outcome == outcome)

    def to_record(self) -> dict[str, Any]:
        escape = self.escape
        return {
            "escape_id": escape.escape_id,
            "fakes": escape.fakes,
            "codes": list(escape.codes),
            "applies_to": escape.applies_to,
            "outcome": self.outcome,
            "rows_tried": len(self.mutants),
            CAUGHT: self.count(CAUGHT),
            OTHERWISE: self.count(OTHERWISE),
            MISSED: self.count(MISSED),
            "not_applicable_reason": escape.not_applicable if not self.mutants else None,
            "mutants": [m.to_record() for m in self.mutants],
        }


@dataclass(frozen=True)
class Sensitivity:
    """Every escape's score on one run, and whether a missed one blocks it."""

    scores: tuple[EscapeScore, ...]
    required: bool

    def escapes(self, outcome: str) -> list[EscapeScore]:
        return [s for s in self.scores if s.outcome == outcome]

    @property
    def applicable(self) -> int:
        return len(self.scores) - len(self.escapes(NOT_APPLICABLE))

    @property
    def caught(self) -> int:
        """The applicable escapes no mutant of which was missed."""
        return self.applicable - len(self.escapes(MISSED))

    def to_record(self) -> dict[str, Any]:
        return {
            "required": self.required,
            "escape_count": len(self.scores),
            "applicable_count": self.applicable,
            "caught_count": self.caught,
            "missed_count": len(self.escapes(MISSED)),
            "not_applicable_count": len(self.escapes(NOT_APPLICABLE)),
            "escapes": [s.to_record() for s in self.scores],
        }


def measure(
    run: RunInputs,
    judge: Judge,
    scanner: ForbiddenScanner,
    modules: Sequence[ModuleBody],
    judge_modules: ModuleJudge | None,
    required: bool,
) -> Sensitivity:
    """Plant every escape in the run's rows (in memory) and score what the replay saw."""
    rows = _RowIndex(run)
    sentinel = next((t for c in scanner.classes for t in c.tokens), None)
    scores = []
    for escape in ESCAPES:
        if escape.on_modules:
            bodies = [b for b in modules if escape.applies(b)][:MAX_TRIED]
            mutants = _module_mutants(escape, bodies, judge_modules) if judge_modules else []
        else:
            chosen = _choose(escape, rows, sentinel)
            mutants = [_request_mutant(escape, rows, at, judge, sentinel) for at in chosen]
        scores.append(EscapeScore(escape, tuple(mutants)))
    return Sensitivity(tuple(scores), required)


def layer(seen: Sensitivity) -> LayerResult:
    """Return the layer ``--require-sensitivity`` adds: a finding per missed escape."""
    result = LayerResult(Layer.SENSITIVITY)
    for score in seen.escapes(MISSED):
        missed = [m.target for m in score.mutants if m.outcome == MISSED]
        message = (
            f"seeded escape {score.escape.escape_id} ({score.escape.fakes}) was missed on "
            f"{len(missed)} of {len(score.mutants)} rows tried: nothing in this run's "
            f"evidence showed it"
        )
        result.add(
            codes.SEEDED_ESCAPE_MISSED, message, FLOOR, score.escape.escape_id, "seeded_escape"
        )
    result.counts = {"escapes_applicable": seen.applicable, "escapes_caught": seen.caught}
    return result


def _outcome(
    escape: Escape, before: list[Finding], after: list[Finding]
) -> tuple[str, tuple[str, ...]]:
    """Return whether ``after`` (the mutant's findings) adds to ``before``, and with which codes."""
    added = Counter(_key(f) for f in after) - Counter(_key(f) for f in before)
    found = tuple(sorted({code for code, _subject, _message in added}))
    if set(found) & set(escape.codes):
        return CAUGHT, found
    return (OTHERWISE if found else MISSED), found


def _key(finding: Finding) -> tuple[str, str, str]:
    """What a finding says: a row already flagged is caught again when its message grows."""
    return finding.error_code, finding.subject_id, finding.message


def _request_mutant(
    escape: Escape, index: _RowIndex, at: int, judge: Judge, sentinel: str | None
) -> Mutant:
    rows = index.rows_of(at, sentinel)
    before = judge(index.run_of(rows))
    escape.plant(rows)
    outcome, found = _outcome(escape, before, judge(index.run_of(rows)))
    return Mutant(rows.request_id, outcome, found)


def _module_mutants(escape: Escape, bodies: list[ModuleBody], judge: ModuleJudge) -> list[Mutant]:
    before = judge("", lambda body: body)
    mutants = []
    for body in bodies:
        outcome, found = _outcome(escape, before, judge(body.path, escape.plant))
        mutants.append(Mutant(body.module_id, outcome, found))
    return mutants


def _choose(escape: Escape, index: _RowIndex, sentinel: str | None) -> list[int]:
    """Return the first ``MAX_TRIED`` requests the escape applies to, in ``index.order``."""
    chosen: list[int] = []
    for at in index.order:
        if escape.applies(index.rows_of(at, sentinel)):
            chosen.append(at)
            if len(chosen) == MAX_TRIED:
                break
    return chosen


class _RowIndex:
    """Each request's rows as the layers join them (``RunInputs.joined``: its first row in
    each file), and the order requests are tried in: the first of each request kind in
    file order, then the second of each, and so on."""

    def __init__(self, run: RunInputs) -> None:
        self.run = run
        self.joined = run.joined
        self.ids = self.joined.ids
        by_kind: dict[str, list[int]] = {}
        for at, request in enumerate(self.joined.requests):
            by_kind.setdefault(repr(request.action_kind), []).append(at)
        rounds = zip_longest(*by_kind.values())
        self.order = [at for row in rounds for at in row if at is not None]
        self.rollbacks_of: dict[str, list[Rollback]] = {}
        for rollback in run.rollbacks:
            if type(rollback.request_id) is str:  # any other value joins no request
                self.rollbacks_of.setdefault(rollback.request_id, []).append(rollback)

    def rows_of(self, at: int, sentinel: str | None) -> RequestRows:
        """Return the rows of the ``at``-th request, as lists an escape may edit."""
        joined, request_id = self.joined, self.ids[at]
        effect = joined.effects[at]
        rollbacks = list(self.rollbacks_of.get(request_id, ()))
        if effect is not None:
            ref = rollback_id_of(effect.rollback_receipt_ref, self.run.rollbacks.by_key)
            by_ref = self.run.rollbacks.get(ref) if type(ref) is str else None
            rollbacks += [by_ref] if by_ref is not None and by_ref not in rollbacks else []
        return RequestRows(
            request_id,
            self.run.derivations[request_id].verdict,
            [joined.requests[at]],
            _listed(joined.verdicts[at]),
            _listed(effect),
            rollbacks,
            _listed(joined.replays[at]),
            sentinel,
        )

    def run_of(self, rows: RequestRows) -> RunInputs:
        """Return a run of the same files holding only ``rows``, derived afresh."""
        run = self.run
        small = RunInputs(run.root, run.mode, run.policy, run.files, run.extra_files)
        small.requests = Table.of(run.requests.file, rows.requests, "request_id")
        small.verdicts = Table.of(run.verdicts.file, rows.verdicts, "request_id")
        small.effects = Table.of(run.effects.file, rows.effects, "request_id")
        small.rollbacks = Table.of(run.rollbacks.file, rows.rollbacks, "rollback_id")
        small.replays = Table.of(run.replays.file, rows.replays, "request_id")
        requests = list(small.requests.by_key.values())
        small.derivations = dict(
            zip(small.requests.by_key, run.policy.derive_each(requests), strict=True)
        )
        return small


def _listed(row: Any) -> list[Any]:
    return [] if row is None else [row]
