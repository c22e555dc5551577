"""Cold replay: later replays, held to the derivation; their own pass label rescues nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from itertools import compress, repeat
from operator import attrgetter, is_, not_
from typing import Any

from sandbox_replay import codes
from sandbox_replay.codes import Layer
from sandbox_replay.inputs import RunInputs
from sandbox_replay.layers import harness
from sandbox_replay.layers.base import (
    NO_ROW,
    LayerResult,
    column,
    describe,
    join,
    missing_fields,
    not_text,
    positions,
    row_dicts,
    scan_floor,
    shared,
    wrong_flags,
)
from sandbox_replay.layers.rows import REPLAY_FIELDS, REPLAY_FLAGS
from sandbox_replay.layers.side_effects import effect_matches, receipt_outcomes
from sandbox_replay.layers.verdicts import derivation_passes, failing_requests

FLOOR = "cold_replay_floor"
CLAIMS = ("verdict_reproduced", "side_effect_state_reproduced", "pass_label")


def check(run: RunInputs) -> LayerResult:
    """Check each replay row's floor and that what it claims to reproduce re-derives."""
    result = LayerResult(Layer.COLD_REPLAY)
    if not run.files["cold_replay.json"].ok:
        result.ran = False
        return result
    scan = scan_floor(run.replays, REPLAY_FIELDS, REPLAY_FLAGS, run.replay_by_request, "request_id")
    # A cleared row claims every pass, so it is a finding when its request's verdict or
    # receipt does not re-derive, or when it names no request.
    outcomes = shared(run, receipt_outcomes)
    unmatched = compress(run.derivations, map(not_, map(attrgetter("matches"), outcomes)))
    unfounded = set(shared(run, failing_requests)).union(unmatched)
    request_ids = scan.columns["request_id"]
    replays = join(run.replay_by_request, run.derivations, ())
    replay_ids = column(row_dicts(run.replays), "replay_id")
    suspects = scan.suspects.union(
        replays.unknown(request_ids, run.request_by_id),
        positions(map(unfounded.__contains__, request_ids)),
        _repeats(replay_ids),
    )
    seen: set[str] = set()
    seen_replays: set[str] = set()
    failing = 0
    for ref in map(run.replays.__getitem__, sorted(suspects)):
        row = ref.row
        problems = []
        missing = missing_fields(row, REPLAY_FIELDS)
        if missing:
            problems.append(f"missing or empty: {describe(missing)}")
        wrong_type = not_text(row, REPLAY_FIELDS, missing)
        if wrong_type:
            problems.append(f"not a string: {describe(wrong_type)}")
        flags = wrong_flags(row, REPLAY_FLAGS)
        if flags:
            problems.append(f"not true: {describe(flags)}")
        replay_id = row.get("replay_id")
        if isinstance(replay_id, str):  # any other value is the floor's finding above
            if replay_id in seen_replays:
                problems.append(f"replay id {replay_id} appears on more than one row")
            seen_replays.add(replay_id)
        request_id = row.get("request_id")
        if isinstance(request_id, str):
            if request_id not in run.request_by_id:
                problems.append(f"names request {request_id}, which no action request declares")
            elif request_id in seen:
                problems.append(f"second replay for {request_id}; only the first is joined")
            else:
                problems.extend(_unfounded_claims(run, request_id, row))
            seen.add(request_id)
        if problems:
            result.add_for_row(
                codes.COLD_REPLAY_INVALID,
                "cold replay " + "; ".join(problems),
                FLOOR,
                ref,
                "replay_id",
                "cold_replay",
            )
            failing += 1
    for request_id in compress(run.derivations, map(is_, replays.refs, repeat(NO_ROW))):
        result.add_for_row(
            codes.COLD_REPLAY_MISSING,
            f"{request_id} has no cold-replay row",
            FLOOR,
            run.request_by_id[request_id],
            "request_id",
            "action_request",
        )
    harness.add_cold_replay_gap(run, result)
    result.counts = {
        "cold_replay_count": len(run.replays),
        "cold_replay_pass_count": labelled_pass_count(run),
        "cold_replay_confirmed_count": len(run.replays) - failing,
    }
    return result


def _repeats(values: list[Any]) -> list[int]:
    """Return the positions of each string value's occurrences, where any string repeats.

    Every occurrence, not only the later ones: the loop above reads them in order, so
    the first is seen before its repeats.
    """
    texts = [v for v in values if type(v) is str]
    if len(set(texts)) == len(texts):
        return []
    counts = Counter(texts)
    return [i for i, v in enumerate(values) if type(v) is str and counts[v] > 1]


def labelled_pass_count(run: RunInputs) -> int:
    """Count the replay rows whose own three labels all claim a pass (FORMAT 7.5).

    The labels, not what the replay confirmed: a stale label counts here and is still a
    finding above.
    """
    rows = [ref.row for ref in run.replays]
    labels = [[row.get(claim) for row in rows] for claim in CLAIMS]
    return sum(1 for claims in zip(*labels, strict=True) if all(c is True for c in claims))


def _unfounded_claims(run: RunInputs, request_id: str, row: Mapping[str, Any]) -> list[str]:
    """Return what the replay claims to reproduce that the derivation does not support."""
    if not any(row.get(claim) is True for claim in CLAIMS):
        return []
    derivation = run.derivations[request_id]
    problems = []
    verdict = run.verdict_by_request.get(request_id)
    if not derivation_passes(derivation, verdict.row if verdict else None):
        problems.append(
            f"claims a reproduced pass but the verdict of {request_id} does not re-derive "
            f"(derived {derivation.verdict})"
        )
    effect = run.effect_by_request.get(request_id)
    if not effect_matches(derivation.verdict, effect.row if effect else None):
        problems.append(
            f"claims a reproduced pass but the side-effect state of {request_id} contradicts "
            f"the derived {derivation.verdict}"
        )
    return problems
