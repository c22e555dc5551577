"""Cold replay: later replays, held to the derivation; their own pass label rescues nothing."""

from __future__ import annotations

from operator import attrgetter, is_

from sandbox_replay.checks import harness
from sandbox_replay.checks.base import (
    LayerResult,
    RowFile,
    floor_breaks,
    repeated,
    shared,
    undeclared,
)
from sandbox_replay.checks.side_effects import unmatched_requests
from sandbox_replay.checks.verdicts import failing_request_set
from sandbox_replay.load.run import COLD_REPLAY, RunInputs
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.rows import ColdReplay, rows_below_floor

FLOOR = "cold_replay_floor"
ROWS = RowFile(COLD_REPLAY, FLOOR, "cold_replay", "replay_id")
CLAIMS = ("verdict_reproduced", "side_effect_state_reproduced", "pass_label")


def floor_problems(replay: ColdReplay) -> list[str]:
    """Return what of the row floor a replay row breaks."""
    return floor_breaks(replay)


def check(run: RunInputs) -> LayerResult:
    """Check each replay row's floor and that what it claims to reproduce re-derives.

    Every row meets the floor and has a replay id of its own; it names a declared
    request, once; a claim to have reproduced a pass holds only where that request's
    verdict and side effect re-derive; every request has a replay row.
    """
    if not run.files[COLD_REPLAY].ok:
        return LayerResult(Layer.COLD_REPLAY, ran=False)
    result = LayerResult(Layer.COLD_REPLAY)
    below = rows_below_floor(run.replays.rows)
    failing_verdicts = shared(run, failing_request_set)
    unmatched = shared(run, unmatched_requests)
    naming_undeclared, repeating = undeclared(run, run.replays), repeated(run, run.replays)
    repeated_replay_ids = repeated(run, run.replays, "replay_id")
    failing = 0
    for position, replay in enumerate(run.replays):
        problems = floor_problems(replay) if position in below else []
        if position in repeated_replay_ids:
            problems.append(f"replay id {replay.replay_id} appears on more than one row")
        request_id = replay.request_id
        if position in naming_undeclared:
            problems.append(f"names request {request_id}, which no action request declares")
        elif position in repeating:
            problems.append(f"second replay for {request_id}; only the first is joined")
        elif type(request_id) is str and claims_any(replay):
            verdict_fails = request_id in failing_verdicts
            effect_fails = request_id in unmatched
            if verdict_fails or effect_fails:
                problems.extend(_unfounded(request_id, run, verdict_fails, effect_fails))
        if problems:
            message = "cold replay " + "; ".join(problems)
            ROWS.add(result, codes.COLD_REPLAY_INVALID, message, replay, position)
            failing += 1
    for request_id, joined in zip(run.joined.ids, run.joined.replays, strict=True):
        if joined is None:
            message = f"{request_id} has no cold-replay row"
            result.add_for_request(codes.COLD_REPLAY_MISSING, message, FLOOR, run, request_id)
    harness.add_cold_replay_gap(run, result)
    result.counts = {
        "cold_replay_count": len(run.replays),
        "cold_replay_pass_count": labelled_pass_count(run),
        "cold_replay_confirmed_count": len(run.replays) - failing,
    }
    return result


_claims = attrgetter(*CLAIMS)
_ALL_TRUE = (True,) * len(CLAIMS)


def claims_pass(replay: ColdReplay) -> bool:
    """Say whether a replay row's own three labels all claim a pass."""
    return all(map(is_, _claims(replay), _ALL_TRUE))


def claims_any(replay: ColdReplay) -> bool:
    """Say whether a replay row's labels claim any pass (exactly ``true``, not ``1``)."""
    return any(map(is_, _claims(replay), _ALL_TRUE))


def labelled_pass_count(run: RunInputs) -> int:
    """Count the replay rows whose own three labels all claim a pass (FORMAT 7.5).

    The labels, not what the replay confirmed: a stale label counts here and is still a
    finding above.
    """
    return sum(map(claims_pass, run.replays))


def _unfounded(
    request_id: str, run: RunInputs, verdict_fails: bool, effect_fails: bool
) -> list[str]:
    """Word what a replay claims to reproduce that the derivation does not support."""
    derived = run.derivations[request_id].verdict
    problems = []
    if verdict_fails:
        problems.append(
            f"claims a reproduced pass but the verdict of {request_id} does not re-derive "
            f"(derived {derived})"
        )
    if effect_fails:
        problems.append(
            f"claims a reproduced pass but the side-effect state of {request_id} contradicts "
            f"the derived {derived}"
        )
    return problems
