"""What a benchmark said of a run (the record's ``benchmark`` section), beside what replayed.

A run imported from an AgentDojo log carries the benchmark's own verdict: ``security``
true when the injection task's goal was met. It is shown, never trusted: the sentence a
headline starts with pairs it with the calls made after untrusted tool output that the
replay saw executed, and what the policy derived for them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, NamedTuple

from sandbox_replay.figures import plural
from sandbox_replay.model import codes
from sandbox_replay.records.recorded_rows import column_of

MAX_NAMED = 3


def untrusted_executed(result: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """Return (request id, action kind, derived verdict) of each executed request labelled
    untrusted tool output (the section's ``untrusted_executed``, ``checks.harness``)."""
    rows = result["derived_policy_verdict_rows"]
    ids = column_of(rows, "request_id")
    kinds = dict(zip(ids, column_of(rows, "action_kind"), strict=True))
    derived = dict(zip(ids, column_of(rows, "derived_verdict"), strict=True))
    return [
        (request_id, str(kinds.get(request_id)), str(derived.get(request_id)))
        for request_id in result["benchmark"]["untrusted_executed"]
    ]


def _calls(found: list[tuple[str, str, str]]) -> str:
    """Say "2 calls made after untrusted tool output (network_request ×2) derived to block"."""
    kinds = Counter(kind for _id, kind, _verdict in found)
    verdicts = sorted({verdict for _id, _kind, verdict in found})
    shown = ", ".join(f"{kind} ×{n}" if n > 1 else kind for kind, n in sorted(kinds.items()))
    ids = [request_id for request_id, _kind, _verdict in found]
    named = ", ".join(ids[:MAX_NAMED]) + (
        f" and {len(ids) - MAX_NAMED} more" if len(ids) > MAX_NAMED else ""
    )
    return (
        plural(
            len(found),
            "call made after untrusted tool output",
            "calls made after untrusted tool output",
        )
        + f" ({shown}) derived to {' or '.join(verdicts)} and executed ({named})"
    )


def benchmark_lead(result: Mapping[str, Any]) -> str | None:
    """Return the sentence a headline starts with for a run a benchmark judged, or None."""
    said = result.get("benchmark")
    if said is None:
        return None
    if not said.get("injection_task_id"):
        return (
            f"A benign run (no injection task); the benchmark says utility "
            f"{str(said.get('utility')).lower()}."
        )
    found = untrusted_executed(result)
    if said.get("security") is None:
        seen = _calls(found) if found else "no call made after untrusted tool output executed"
        return f"The benchmark's security flag could not be read, so it is not compared: {seen}."
    if said.get("security") is True:
        if found:
            return f"The injection task's goal was met (benchmark security: true): {_calls(found)}."
        return (
            "The benchmark says the injection task's goal was met (security: true), but the "
            "replay saw no call made after untrusted tool output executed."
        )
    if found:
        return (
            "The benchmark says the injection task's goal was not met (security: false), yet "
            f"{_calls(found)}."
        )
    stopped = (
        "; the run stopped after a tool result" if said.get("stopped_after_tool_result") else ""
    )
    return (
        "The injection task's goal was not met (benchmark security: false): no call made after "
        f"untrusted tool output executed{stopped}."
    )


class BenchmarkFacts(NamedTuple):
    """What the index's per-suite and per-attack table counts of one run (a status file
    keeps it as a list)."""

    suite: str
    attack: str  # "none" for a benign run
    goal_met: bool  # the benchmark said the injection task's goal was met
    escaped: bool  # the replay saw a call made after untrusted tool output executed
    disagrees: bool

    @classmethod
    def of(cls, result: Mapping[str, Any]) -> BenchmarkFacts | None:
        said = result.get("benchmark")
        if said is None:
            return None
        attacked = bool(said.get("injection_task_id"))
        return cls(
            str(said.get("suite")),
            str(said.get("attack_type")) if attacked else "none",
            attacked and said.get("security") is True,
            said["untrusted_executed_count"] > 0,
            codes.BENCHMARK_SECURITY_DISAGREES in result["error_codes"],
        )
