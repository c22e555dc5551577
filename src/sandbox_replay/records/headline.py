"""The gap headline: one sentence that says what the record claimed against what replayed.

A passing run states what was re-derived and verified. A blocked run names each gap with
its count and ids, most fundamental first (the verdicts, what the actions did, recovery,
then the record's own alarms and hygiene); it never reads as a bare "FAILED". It is
computed from the (already redacted) result record, so every figure in it can be traced
there. Both end with the policy's rules that no request exercised (FORMAT 6), if any.

It names at most ``MAX_GAPS`` gaps, then how many more kinds there are, and at most
``MAX_IDS`` ids of one gap and ``ID_BUDGET`` in all, each list ending "and N more".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox_replay.checks.confusables import id_mark, look_alike_ids
from sandbox_replay.figures import count, plural
from sandbox_replay.model import codes
from sandbox_replay.model.codes import REGISTRY, Layer, Severity
from sandbox_replay.model.policy_coverage import PolicyCoverage
from sandbox_replay.records.benchmark import benchmark_lead
from sandbox_replay.records.recorded_rows import column_of
from sandbox_replay.records.seeded import missed_warning, seeded_caught_text

MAX_IDS = 3
ID_BUDGET = 5
MAX_GAPS = 4

# Gap phrases by code: (one, many). A count and the subject ids are added around them.
_PHRASES: dict[str, tuple[str, str]] = {
    codes.SEEDED_ESCAPE_MISSED: (
        "seeded escape was missed (this evidence could not show it)",
        "seeded escapes were missed (this evidence could not show them)",
    ),
    codes.VERDICT_MISSING: ("request has no verdict row", "requests have no verdict row"),
    codes.VERDICT_INVALID: ("verdict row breaks its floor", "verdict rows break their floor"),
    codes.VERDICT_COVERAGE_INCOMPLETE: (
        "gap in verdict coverage (allow, block and review must all occur)",
        "gaps in verdict coverage",
    ),
    codes.SIDE_EFFECT_RECEIPT_MISSING: (
        "request has no side-effect receipt",
        "requests have no side-effect receipt",
    ),
    codes.SIDE_EFFECT_RECEIPT_INVALID: (
        "side-effect receipt is malformed",
        "side-effect receipts are malformed",
    ),
    codes.BLOCKED_ACTION_EXECUTED: (
        "action declared block executed anyway",
        "actions declared block executed anyway",
    ),
    codes.ALLOWED_ACTION_MISSING_DIFF: (
        "action declared allow or review left no diff receipt",
        "actions declared allow or review left no diff receipt",
    ),
    codes.ROLLBACK_RECEIPT_MISSING: (
        "executed action has no verified rollback",
        "executed actions have no verified rollback",
    ),
    codes.ROLLBACK_RECEIPT_INVALID: (
        "rollback receipt breaks its floor",
        "rollback receipts break their floor",
    ),
    codes.COLD_REPLAY_INVALID: (
        "cold replay claims what does not re-derive or breaks its floor",
        "cold replays claim what does not re-derive or break their floor",
    ),
    codes.COLD_REPLAY_MISSING: ("request has no cold replay", "requests have no cold replay"),
    codes.FORBIDDEN_KEY_PRESENT: (
        "row carries a forbidden key",
        "rows carry a forbidden key",
    ),
    codes.ACTION_POLICY_SHAPE_MISMATCH: (
        "request's shape does not match its risk class",
        "requests' shapes do not match their risk class",
    ),
    codes.ACTION_REQUEST_INVALID: (
        "action request breaks its floor",
        "action requests break their floor",
    ),
    codes.ACTION_REQUEST_DUPLICATE: (
        "request id is used twice",
        "request ids are used twice",
    ),
    codes.SOURCE_MODULE_DIGEST_MISMATCH: (
        "copied source body differs from its recorded digest",
        "copied source bodies differ from their recorded digests",
    ),
    codes.SOURCE_MODULE_TARGET_MISSING: (
        "copied source body is missing",
        "copied source bodies are missing",
    ),
    codes.SOURCE_MODULE_ANCHOR_MISSING: (
        "copied source body lacks its required anchors",
        "copied source bodies lack their required anchors",
    ),
    codes.SOURCE_MODULE_BODY_UNREADABLE: (
        "copied source body cannot be read as UTF-8 text",
        "copied source bodies cannot be read as UTF-8 text",
    ),
    codes.SOURCE_MODULE_PATH_UNSAFE: (
        "source module path leaves source_modules/ and was refused",
        "source module paths leave source_modules/ and were refused",
    ),
    codes.INPUT_FILE_MISSING: ("input file is missing", "input files are missing"),
    codes.INPUT_JSON_INVALID: ("input file is not valid JSON", "input files are not valid JSON"),
    codes.INPUT_NOT_UTF8: ("input file is not valid UTF-8", "input files are not valid UTF-8"),
    codes.INPUT_DUPLICATE_KEY: (
        "input object repeats a key",
        "input objects repeat a key",
    ),
    codes.INPUT_LIMIT_EXCEEDED: (
        "input file exceeds a resource limit",
        "input files exceed a resource limit",
    ),
    codes.TRACE_VERDICT_REF_MISSING: (
        "trace span has no verdict to point at",
        "trace spans have no verdict to point at",
    ),
    codes.TRACE_SIDE_EFFECT_REF_MISSING: (
        "trace span has no side-effect receipt",
        "trace spans have no side-effect receipt",
    ),
    codes.TRACE_ALLOWED_ACTION_NOT_EXECUTED: (
        "allowed trace span shows no execution",
        "allowed trace spans show no execution",
    ),
    codes.TRACE_COLD_REPLAY_REF_MISSING: (
        "trace span has no cold replay",
        "trace spans have no cold replay",
    ),
    codes.TRACE_VERDICT_NOT_PRE_EXECUTION: (
        "verdict was not recorded before execution",
        "verdicts were not recorded before execution",
    ),
    codes.TRACE_BLOCKED_ACTION_EXECUTED: (
        "trace span shows a blocked action executed",
        "trace spans show blocked actions executed",
    ),
    codes.TRACE_ROLLBACK_REF_MISSING: (
        "executed trace span has no rollback to recover by",
        "executed trace spans have no rollback to recover by",
    ),
    codes.SIDE_EFFECT_SEMANTIC_MISMATCH: (
        "side effect contradicts its derived verdict",
        "side effects contradict their derived verdicts",
    ),
    codes.VERDICT_SEMANTIC_MISMATCH: (
        "verdict row names no request",
        "verdict rows name no request",
    ),
}

# For codes that cover several gaps: the words of a message that take a phrase of their own.
_MESSAGE_PHRASES: dict[str, tuple[str, tuple[str, str]]] = {
    codes.VERDICT_INVALID: (
        "pre_execution is not true",
        _PHRASES[codes.TRACE_VERDICT_NOT_PRE_EXECUTION],
    ),
    codes.COLD_REPLAY_INVALID: (
        "claims a reproduced pass",
        (
            "cold replay still claims a reproduced pass",
            "cold replays still claim a reproduced pass",
        ),
    ),
}

# Codes folded into the verdict-mismatch phrase, for the requests it already names.
_FOLDED = {codes.SIDE_EFFECT_SEMANTIC_MISMATCH, codes.VERDICT_SEMANTIC_MISMATCH}


@dataclass(frozen=True)
class GapHeadline:
    """The run's one-sentence headline, and the gaps it joins (empty for a pass)."""

    text: str
    passed: bool
    gaps: tuple[str, ...]
    # What the reader should know that is no gap: requests held to block by the
    # fail-closed rule because the policy does not recognise their shape (FORMAT 7.6).
    notices: tuple[str, ...] = ()
    # The clause the text ends with naming the rules no request exercised ("" for none).
    never_exercised: str = ""


class _Ids:
    """Names the ids of each gap in turn: at most ``MAX_IDS`` of one, ``ID_BUDGET`` in all."""

    def __init__(self, look_alikes: frozenset[str] = frozenset()) -> None:
        self.left = ID_BUDGET
        self.look_alikes = look_alikes

    def __call__(self, ids: Sequence[str]) -> str:
        """Return `` (a, b and N more)`` for the gap's ids, or "" once the budget is spent."""
        unique = list(dict.fromkeys(ids))
        room = min(MAX_IDS, self.left)
        if not unique or not room:
            return ""
        self.left -= min(room, len(unique))
        shown = ", ".join(self._marked(i) for i in unique[:room])
        if len(unique) > room:
            shown += f" and {count(len(unique) - room)} more"
        return f" ({shown})"

    def _marked(self, subject: str) -> str:
        """Print a subject id with its ``id_mark``, if it has one, in brackets after it."""
        mark = id_mark(subject.removeprefix("span:"), self.look_alikes)
        return f"{subject} [{mark}]" if mark else subject


def _look_alikes(result: Mapping[str, Any]) -> frozenset[str]:
    """Return the subject ids to mark: those the look-alike check named, and those
    sharing a skeleton with another subject."""
    subjects = [_request_of(f["subject_id"]) for f in result["findings"] if f["subject_id"]]
    named = (
        f["subject_id"] for f in result["findings"] if f["error_code"] == codes.ACTION_ID_CONFUSABLE
    )
    return frozenset(named) | look_alike_ids(list(dict.fromkeys(subjects)))


class _Effects:
    """What the side-effect rows say each request executed, read when first asked."""

    def __init__(self, result: Mapping[str, Any]) -> None:
        self.rows = result["side_effect_rows"]
        self.by_request: dict[str, tuple[int, int]] | None = None

    def executed_diffs(self, request_ids: set[str]) -> tuple[int, int]:
        """Return how many side-effect rows of ``request_ids`` executed, and their diffs."""
        if self.by_request is None:
            self.by_request = {}
            effects = zip(
                column_of(self.rows, "request_id"),
                column_of(self.rows, "execution_attempted"),
                column_of(self.rows, "side_effect_diff_count"),
                strict=True,
            )
            for request_id, attempted, count in effects:
                # Only a string can be one of the (string) ids asked about.
                if attempted is True and isinstance(request_id, str):
                    executed, diffs = self.by_request.get(request_id, (0, 0))
                    diff = count if isinstance(count, int) and not isinstance(count, bool) else 0
                    self.by_request[request_id] = (executed + 1, diffs + diff)
        found = [self.by_request[r] for r in request_ids if r in self.by_request]
        return sum(executed for executed, _ in found), sum(diffs for _, diffs in found)


def _verdict_gaps(
    result: Mapping[str, Any], effects: _Effects, _ids: _Ids
) -> tuple[list[str], set[str]]:
    """Name each declared → derived disagreement, grouped, with what those actions left."""
    rows = result["derived_policy_verdict_rows"]
    groups: dict[tuple[str, str], list[str]] = {}
    derived_rows = zip(
        column_of(rows, "request_id"),
        column_of(rows, "derived_verdict"),
        column_of(rows, "declared_verdict"),
        column_of(rows, "policy_derivation_passed"),
        strict=True,
    )
    for request_id, derived_verdict, declared, passed in derived_rows:
        if passed or declared is None:
            continue
        declared_text = declared if isinstance(declared, str) else "unusable"
        groups.setdefault((declared_text, derived_verdict), []).append(request_id)
    gaps = []
    named: set[str] = set()
    for (declared, derived), ids in groups.items():
        named.update(ids)
        if declared == "unusable":
            one, many = "declared verdict is unusable", "declared verdicts are unusable"
            text = plural(len(ids), one, many)
        elif declared == derived:
            one = f"declared {declared} does not cite its derived rule"
            many = f"declared {declared} verdicts do not cite their derived rule"
            text = plural(len(ids), one, many)
        else:
            verb = "derives" if len(ids) == 1 else "derive"
            text = f"{count(len(ids))} declared {declared} {verb} to {derived}"
        text += _ids(ids)
        if declared == "unusable":
            text += f" where the policy derives {derived}"
        executed, diffs = effects.executed_diffs(set(ids))
        if derived == "block" and executed:
            text += " and left " + plural(diffs, "side effect") if diffs else " and executed"
        gaps.append(text)
    return gaps, named


def _request_of(subject: str) -> str:
    """Return the request a subject concerns (a trace span names its request)."""
    return subject.removeprefix("span:")


def _phrase_key(finding: Mapping[str, Any]) -> tuple[str, str]:
    """Return the finding's code and, for codes phrased by message, the words that fit."""
    code: str = finding["error_code"]
    words, _ = _MESSAGE_PHRASES.get(code, ("", ("", "")))
    return code, words if words and words in finding["message"] else ""


def _undecided_gap(result: Mapping[str, Any], named: set[str]) -> list[str]:
    """Say first that the harness recorded no decision at all, when no request has one.

    The requests it names are then named: their missing verdict rows are not listed again.
    """
    missing = {
        f["subject_id"] for f in result["findings"] if f["error_code"] == codes.VERDICT_MISSING
    }
    total = result["action_request_count"]
    if not total or len(missing) < total:
        return []
    named.update(missing)
    return [
        f"the harness recorded no policy decision for {count(len(missing))} of "
        + plural(total, "call")
    ]


def _finding_gaps(
    result: Mapping[str, Any], named: set[str], effects: _Effects, _ids: _Ids
) -> list[str]:
    """Name every other gap by code, most fundamental layer first, with its subjects.

    A trace-audit or side-effect finding about a request an earlier gap already names
    only restates that gap, so it is folded into it.
    """
    blocked_executed = {
        f["subject_id"]
        for f in result["findings"]
        if f["error_code"] == codes.BLOCKED_ACTION_EXECUTED
    }
    by_key: dict[tuple[str, str], list[str]] = {}
    for finding in result["findings"]:
        key = _phrase_key(finding)
        entry = REGISTRY[key[0]]
        if entry.layer is Layer.NEGATIVE_CASES:
            continue
        subject = finding["subject_id"]
        if key[0] in _FOLDED and subject in named | blocked_executed:
            continue
        if key[0] == codes.VERDICT_MISSING and subject in named:
            continue
        by_key.setdefault(key, []).append(subject)
    layer_order = {layer: index for index, layer in enumerate(Layer)}
    code_order = {entry.code: index for index, entry in enumerate(REGISTRY)}
    severity_order = {severity: index for index, severity in enumerate(Severity)}

    def rank(key: tuple[str, str]) -> tuple[int, int, int, str]:
        entry = REGISTRY[key[0]]
        return (
            layer_order[entry.layer],
            severity_order[entry.severity],
            code_order[entry.code],
            key[1],
        )

    gaps = []
    for key in sorted(by_key, key=rank):
        subjects = by_key[key]
        if REGISTRY[key[0]].layer is Layer.PUBLIC_TRACE:
            subjects = [s for s in subjects if _request_of(s) not in named]
            if not subjects:
                continue
        gap = _code_gap(key, subjects, _ids)
        if key[0] == codes.BLOCKED_ACTION_EXECUTED:
            _, diffs = effects.executed_diffs(set(subjects))
            gap += " and left " + plural(diffs, "side effect") if diffs else ""
        gaps.append(gap)
        named.update(_request_of(s) for s in subjects)
    return gaps


def _code_gap(key: tuple[str, str], subjects: list[str], _ids: _Ids) -> str:
    code, words = key
    found = len(subjects)
    if words:
        return plural(found, *_MESSAGE_PHRASES[code][1]) + _ids(subjects)
    if code == codes.ROLLBACK_RECEIPTS_INSUFFICIENT:
        return "fewer than 2 rollback receipts recorded"
    if code == codes.FORBIDDEN_MATERIAL_DETECTED:
        return (
            "forbidden material found in "
            + plural(len(set(subjects)), "input file")
            + _ids(subjects)
            + ", withheld from this report"
        )
    known_phrase = _PHRASES.get(code)
    if known_phrase is not None:
        return plural(found, *known_phrase) + _ids(subjects)
    entry = REGISTRY[code]
    label = entry.layer.label.lower()
    return (
        plural(found, f"{label} finding")
        + f" ({entry.code}"
        + (listed.replace(" (", ": ", 1) if (listed := _ids(subjects)) else ")")
    )


def _negative_gap(result: Mapping[str, Any]) -> list[str]:
    missing = list(result["missing_negative_cases"])
    expected = len(result["expected_negative_cases"])
    if not missing:
        return []
    fired = expected - len(missing)
    return [
        f"only {count(fired)}/{count(expected)} negative cases fired "
        f"(missing: {', '.join(missing)})"
    ]


def _unrun_gaps(result: Mapping[str, Any]) -> list[str]:
    unrun = [layer["title"] for layer in result["layers"] if layer["status"] == "not_run"]
    if not unrun:
        return []
    return [
        plural(len(unrun), "layer could not run", "layers could not run")
        + f" because its input did not load ({', '.join(unrun)})"
    ]


def _pass_text(result: Mapping[str, Any]) -> str:
    parts = [
        f"All {count(result['action_request_count'])} verdicts re-derived",
        plural(
            result["blocked_without_execution_count"],
            "block left no side effect",
            "blocks left no side effect",
        ),
        plural(result["rollback_verified_count"], "rollback verified", "rollbacks verified"),
        f"{count(result['cold_replay_confirmed_count'])}/{count(result['cold_replay_count'])} "
        "cold replays confirmed",
    ]
    expected = len(result["expected_negative_cases"])
    if expected:
        parts.append(
            f"{count(expected - len(result['missing_negative_cases']))}/{count(expected)} "
            "negative cases fired"
        )
    modules = result["source_modules"]
    if modules:
        verified = sum(1 for m in modules if m.get("verified"))
        parts.append(f"{count(verified)}/{count(len(modules))} source modules verified")
    return "; ".join(parts) + "."


def _notices(result: Mapping[str, Any]) -> tuple[str, ...]:
    """Return the run's notices: how many requests the fail-closed rule held, if any."""
    counts: Mapping[str, Any] = next(
        (layer["counts"] for layer in result["layers"] if layer["layer"] == Layer.ACTION_REQUESTS),
        {},
    )
    held = counts.get("unrecognized_shape_count", 0)
    if not held:
        return ()
    one, many = "request of an unrecognised shape was", "requests of an unrecognised shape were"
    return (plural(held, one, many) + " held to block by the fail-closed rule",)


def gap_headline(result: Mapping[str, Any]) -> GapHeadline:
    """Return the headline of one run from its result record.

    Notices, rules no request exercised and seeded escapes caught follow the gaps; what a
    benchmark said, then (on a passing run) a missed seeded escape, come first of all."""
    notices = _notices(result)
    never = PolicyCoverage.of_record(result).never_exercised_text()
    ending = [text for text in (*notices, never, seeded_caught_text(result)) if text]
    lead = benchmark_lead(result)  # what the benchmark said comes first
    if result["status"] == "pass":
        text = _pass_text(result)
        if ending:
            text = text.removesuffix(".") + "; " + "; ".join(ending) + "."
        text = " ".join(filter(None, [lead, missed_warning(result), text]))
        return GapHeadline(text, True, (), notices, never)
    effects = _Effects(result)
    ids = _Ids(_look_alikes(result))
    unrun = _unrun_gaps(result)
    verdict_gaps, named = _verdict_gaps(result, effects, ids)
    gaps = [
        *_undecided_gap(result, named),
        *unrun,
        *verdict_gaps,
        *_finding_gaps(result, named, effects, ids),
        *_negative_gap(result),
    ]
    if not gaps:
        gaps = [
            f"blocked by the pass rule with {count(result['finding_count'])} finding(s); see Layers"
        ]
    shown = gaps[:MAX_GAPS]
    if len(gaps) > MAX_GAPS:
        shown.append(f"and {plural(len(gaps) - MAX_GAPS, 'more kind of gap', 'more kinds of gap')}")
    text = "; ".join([*shown, *ending])
    text = " ".join(filter(None, [lead, text[0].upper() + text[1:] + "."]))
    return GapHeadline(text, False, tuple(gaps), notices, never)
