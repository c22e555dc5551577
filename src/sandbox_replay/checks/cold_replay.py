"""Cold replay: later replays, held to the derivation; their own pass label rescues nothing."""

from __future__ import annotations

from sandbox_replay.checks import harness
from sandbox_replay.checks.base import (
    LayerResult,
    floor_breaks,
    shared,
    subject_of,
)
from sandbox_replay.checks.side_effects import receipt_outcomes
from sandbox_replay.checks.verdicts import failing_request_set
from sandbox_replay.load.run import COLD_REPLAY, RunInputs
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.rows import ColdReplay, meets_plain_floor

FLOOR = "cold_replay_floor"
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
    result = LayerResult(Layer.COLD_REPLAY)
    if not run.files[COLD_REPLAY].ok:
        result.ran = False
        return result
    seen: set[str] = set()
    seen_replays: set[str] = set()
    failing = 0
    for position, replay in enumerate(run.replays):
        problems = [] if meets_plain_floor(replay) else floor_problems(replay)
        replay_id = replay.replay_id
        if isinstance(replay_id, str):  # any other value is the floor's finding above
            if replay_id in seen_replays:
                problems.append(f"replay id {replay_id} appears on more than one row")
            seen_replays.add(replay_id)
        request_id = replay.request_id
        if isinstance(request_id, str):
            if request_id not in run.requests.by_key:
                problems.append(f"names request {request_id}, which no action request declares")
            elif request_id in seen:
                problems.append(f"second replay for {request_id}; only the first is joined")
            else:
                problems.extend(_unfounded_claims(run, request_id, replay))
            seen.add(request_id)
        if problems:
            result.add_for_row(
                codes.COLD_REPLAY_INVALID,
                "cold replay " + "; ".join(problems),
                FLOOR,
                COLD_REPLAY,
                replay,
                subject_of(replay, "replay_id", COLD_REPLAY, position),
                "cold_replay",
            )
            failing += 1
    for request_id in run.derivations:
        if run.replays.get(request_id) is None:
            result.add_for_request(
                codes.COLD_REPLAY_MISSING,
                f"{request_id} has no cold-replay row",
                FLOOR,
                run,
                request_id,
            )
    harness.add_cold_replay_gap(run, result)
    result.counts = {
        "cold_replay_count": len(run.replays),
        "cold_replay_pass_count": labelled_pass_count(run),
        "cold_replay_confirmed_count": len(run.replays) - failing,
    }
    return result


def claims_pass(replay: ColdReplay) -> bool:
    """Say whether a replay row's own three labels all claim a pass."""
    return all(getattr(replay, claim) is True for claim in CLAIMS)


def labelled_pass_count(run: RunInputs) -> int:
    """Count the replay rows whose own three labels all claim a pass (FORMAT 7.5).

    The labels, not what the replay confirmed: a stale label counts here and is still a
    finding above.
    """
    return sum(map(claims_pass, run.replays))


def _unfounded_claims(run: RunInputs, request_id: str, replay: ColdReplay) -> list[str]:
    """Return what the replay claims to reproduce that the derivation does not support."""
    if not any(getattr(replay, claim) is True for claim in CLAIMS):
        return []
    derivation = run.derivations[request_id]
    problems = []
    if request_id in shared(run, failing_request_set):
        problems.append(
            f"claims a reproduced pass but the verdict of {request_id} does not re-derive "
            f"(derived {derivation.verdict})"
        )
    if not shared(run, receipt_outcomes)[request_id].matches:
        problems.append(
            f"claims a reproduced pass but the side-effect state of {request_id} contradicts "
            f"the derived {derivation.verdict}"
        )
    return problems
