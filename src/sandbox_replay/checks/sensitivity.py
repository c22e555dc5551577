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
from typing import Any

from sandbox_replay.checks.base import LayerResult
from sandbox_replay.checks.escapes import ESCAPES, Escape, RequestRows
from sandbox_replay.checks.source_modules import ModuleBody
from sandbox_replay.load.run import RunInputs, rollback_id_of
from sandbox_replay.load.scan import ForbiddenScanner
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.findings import Finding
from sandbox_replay.model.rows import Table

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
            mutants = [_request_mutant(escape, rows, target, judge, sentinel) for target in chosen]
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
    escape: Escape, index: _RowIndex, target: str, judge: Judge, sentinel: str | None
) -> Mutant:
    rows = index.rows_of(target, sentinel)
    before = judge(index.run_of(rows))
    escape.plant(rows)
    outcome, found = _outcome(escape, before, judge(index.run_of(rows)))
    return Mutant(target, outcome, found)


def _module_mutants(escape: Escape, bodies: list[ModuleBody], judge: ModuleJudge) -> list[Mutant]:
    before = judge("", lambda body: body)
    mutants = []
    for body in bodies:
        outcome, found = _outcome(escape, before, judge(body.path, escape.plant))
        mutants.append(Mutant(body.module_id, outcome, found))
    return mutants


def _choose(escape: Escape, index: _RowIndex, sentinel: str | None) -> list[str]:
    """Return up to ``MAX_TRIED`` request ids the escape applies to: the first of each
    request kind in file order, then the second of each, and so on."""
    by_kind: dict[str, list[str]] = {}
    for request_id in index.run.derivations:
        rows = index.rows_of(request_id, sentinel)
        if not escape.applies(rows):
            continue
        picked = by_kind.setdefault(repr(rows.requests[0].action_kind), [])
        if len(picked) < MAX_TRIED:
            picked.append(request_id)
        if len(by_kind) >= MAX_TRIED:  # the first of as many kinds as are tried
            break
    spread = [ids[i] for i in range(MAX_TRIED) for ids in by_kind.values() if i < len(ids)]
    return spread[:MAX_TRIED]


class _RowIndex:
    """Where each request's rows stand in the run's files, found once per run."""

    def __init__(self, run: RunInputs) -> None:
        self.run = run
        self.at = {
            name: _positions(table, "request_id")
            for name, table in (
                ("requests", run.requests),
                ("verdicts", run.verdicts),
                ("effects", run.effects),
                ("rollbacks", run.rollbacks),
                ("replays", run.replays),
            )
        }
        self.rollback_at = _positions(run.rollbacks, "rollback_id")

    def rows_of(self, request_id: str, sentinel: str | None) -> RequestRows:
        """Return the request's rows, as lists an escape may edit (the rows stay shared)."""
        run = self.run

        def of(name: str, table: Table[Any]) -> list[Any]:
            return [table.rows[i] for i in self.at[name].get(request_id, ())]

        effects = of("effects", run.effects)
        rollbacks = of("rollbacks", run.rollbacks)
        for effect in effects:
            rollback_id = rollback_id_of(effect.rollback_receipt_ref, run.rollbacks.by_key)
            for i in self.rollback_at.get(rollback_id, ()) if type(rollback_id) is str else ():
                if run.rollbacks.rows[i] not in rollbacks:
                    rollbacks.append(run.rollbacks.rows[i])
        return RequestRows(
            request_id,
            run.derivations[request_id].verdict,
            of("requests", run.requests),
            of("verdicts", run.verdicts),
            effects,
            rollbacks,
            of("replays", run.replays),
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


def _positions(table: Table[Any], key: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for i, row in enumerate(table.rows):
        value = getattr(row, key)
        if type(value) is str:
            found.setdefault(value, []).append(i)
    return found
