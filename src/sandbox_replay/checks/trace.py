"""The public agent-execution trace: one span per request, and its audit.

Spans are ordered by (episode_id, request_id). The trace digest is the sha256 of the
spans' canonical JSON (sorted keys, no whitespace), so it changes exactly when a span does.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import msgspec
import orjson

from sandbox_replay.atomic import struct_fields
from sandbox_replay.checks.base import LayerResult, shared
from sandbox_replay.checks.rollbacks import uncovered_requests
from sandbox_replay.load.run import RunInputs
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.rows import (
    ActionRequest,
    ColdReplay,
    PolicyVerdict,
    SideEffect,
    value_of,
)

FLOOR = "public_trace_floor"


@dataclass
class Trace:
    """The spans, their summary and the audit layer's result."""

    spans: list[Span]
    summary: dict[str, Any]
    audit: LayerResult
    # Where each joined request's span stands in ``spans``, by the request's position in
    # ``Joined.ids``: the pages join the record's spans by it.
    span_at: list[int]

    def to_record(self) -> dict[str, Any]:
        return {
            "status": self.audit.status,
            "span_count": len(self.spans),
            "spans": self.spans,
            "summary": self.summary,
            "audit": [f.to_record() for f in self.audit.findings],
        }


_SORTED = orjson.OPT_SORT_KEYS
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_encode_string = json.encoder.encode_basestring  # the one _CANONICAL uses for strings


def canonical_digest(value: Any, *, may_hold_floats: bool = True) -> str:
    """Return ``sha256:<hex>`` of ``value``'s canonical JSON.

    orjson writes the standard library's bytes but for floats, so it serves a value known
    to hold none; what it refuses (big integers, lone surrogates) goes the standard way.
    """
    if not may_hold_floats:
        try:
            return "sha256:" + hashlib.sha256(orjson.dumps(value, option=_SORTED)).hexdigest()
        except TypeError:  # orjson.JSONEncodeError included
            pass
    text = _CANONICAL.encode(value)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def input_digest(request: ActionRequest) -> str:
    """Return the digest of what a span's request asked: its action ref, capability, risk."""
    values = _digested(request)
    if set(map(type, values)) == {str}:  # msgspec writes strings as the canonical form does
        return "sha256:" + hashlib.sha256(msgspec.json.encode(values)).hexdigest()
    return canonical_digest(list(map(value_of, values)))


# The request fields a span's input digest is made of, in its order.
DIGESTED_FIELDS = ("normalized_action_ref", "requested_capability", "risk_class")
_digested = attrgetter(*DIGESTED_FIELDS)


def _outcome(declared: Any, executed: bool) -> str:
    """Return what became of a request: blocked, executed, or else its declared verdict."""
    if declared == "block":
        return "blocked"
    if executed:
        return "executed"
    return declared if isinstance(declared, str) else "unverified"


_episode = attrgetter("episode_id")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _text_counts(values: list[Any]) -> dict[str, int]:
    """Return how often each ``_text(value)`` occurs, sorted."""
    return dict(sorted(Counter(map(_text, values)).items()))


class Span(msgspec.Struct, gc=False):
    """One request as the public trace shows it, in the record's field order.

    ``authority_verdict_id`` is ``<request id>:<policy version>`` where the verdict row
    names a policy version (a string).
    """

    span_id: str
    session_id: str
    action_kind: Any
    sequence_index: int
    episode_id: Any
    observation_ref: Any
    authority_verdict_id: str | None
    state_transition_ref: str | None
    outcome: str
    target_ref: Any
    input_digest: str
    recovery_ref: str | None

    def get(self, name: str) -> Any:
        return getattr(self, name, None)


def spans_digest(spans: list[Span], *, may_hold_floats: bool) -> str:
    """Return ``canonical_digest`` of the spans as the record lists them.

    Without floats msgspec writes the standard library's bytes; it writes the spans
    ``_SPANS_PER_PIECE`` at a time, so that their whole JSON is never held at once.
    """
    if not may_hold_floats:
        digest = hashlib.sha256(b"[")
        try:
            for start in range(0, len(spans), _SPANS_PER_PIECE):
                piece = msgspec.json.encode(spans[start : start + _SPANS_PER_PIECE], order="sorted")
                digest.update(b"," if start else b"")
                digest.update(memoryview(piece)[1:-1])  # the items, without the brackets
        except (TypeError, UnicodeEncodeError):  # a value msgspec cannot write
            pass
        else:
            digest.update(b"]")
            return "sha256:" + digest.hexdigest()
    return canonical_digest([struct_fields(span) for span in spans])


_SPANS_PER_PIECE = 4096


def _gaps(
    uncovered: set[str],
    request_id: str,
    verdict: PolicyVerdict | None,
    effect: SideEffect | None,
    declared: Any,
    executed: bool,
    replay: ColdReplay | None,
) -> list[tuple[str, str]]:
    """Return the audit's finding codes about a request's span, each with its message."""
    gaps = []
    if verdict is None:
        gaps.append((codes.TRACE_VERDICT_REF_MISSING, "no verdict row to use as authority"))
    elif verdict.pre_execution is not True:
        gaps.append(
            (codes.TRACE_VERDICT_NOT_PRE_EXECUTION, "verdict not recorded before execution")
        )
    if effect is None:
        gaps.append((codes.TRACE_SIDE_EFFECT_REF_MISSING, "no side-effect receipt"))
    elif declared == "block" and (
        executed or value_of(effect.side_effect_diff_count) not in (0, None)
    ):
        gaps.append((codes.TRACE_BLOCKED_ACTION_EXECUTED, "block verdict but the action executed"))
    elif declared in ("allow", "review") and not executed:
        gaps.append(
            (codes.TRACE_ALLOWED_ACTION_NOT_EXECUTED, f"{declared} verdict but no execution")
        )
    if executed and request_id in uncovered:
        gaps.append((codes.TRACE_ROLLBACK_REF_MISSING, "executed with no rollback receipt"))
    if replay is None:
        gaps.append((codes.TRACE_COLD_REPLAY_REF_MISSING, "no cold-replay row"))
    return gaps


def build_trace(run: RunInputs, session_id: str) -> Trace:
    """Build one span per joined request and audit each span's references.

    Spans are in (episode id, request id) order. Each request needs a verdict row that
    was recorded before execution, a receipt that agrees with the declared verdict, a
    verified rollback where it executed, and a cold-replay row.
    """
    audit = LayerResult(Layer.PUBLIC_TRACE)
    joined = run.joined
    uncovered = shared(run, uncovered_requests)
    episodes = list(map(_text, map(_episode, joined.requests)))  # not text: ""
    # Sorted on the episode and the request id alone: request ids differ, so the rows'
    # positions are never reached by the sort.
    ordered = sorted(zip(episodes, joined.ids, range(len(joined.ids)), strict=True))
    spans = []
    span_at = [0] * len(ordered)
    for sequence_index, (_, request_id, at) in enumerate(ordered):
        span_at[at] = sequence_index
        span_id = f"span:{request_id}"
        request, verdict, effect = joined.requests[at], joined.verdicts[at], joined.effects[at]
        declared = value_of(verdict.verdict) if verdict is not None else None
        executed = effect is not None and effect.execution_attempted is True
        found = _gaps(
            uncovered, request_id, verdict, effect, declared, executed, joined.replays[at]
        )
        for code, message in found:
            message = f"{span_id}: {message}"
            audit.add(code, message, FLOOR, span_id, "trace_span", run.requests.file, request.line)
        spans.append(_span(request_id, session_id, sequence_index, request, verdict, effect))
    summary = {
        "action_kind_counts": _text_counts([span.action_kind for span in spans]),
        "outcome_counts": dict(sorted(Counter(span.outcome for span in spans).items())),
        "finding_count": len(audit.findings),
        # Span values are the tool's own or copied from the request and receipt rows.
        "trace_digest": spans_digest(
            spans, may_hold_floats=any(f.may_hold_floats for f in run.all_files())
        ),
    }
    audit.counts = {"span_count": len(spans), "audit_finding_count": len(audit.findings)}
    return Trace(spans, summary, audit, span_at)


def _span(
    request_id: str,
    session_id: str,
    sequence_index: int,
    request: ActionRequest,
    verdict: PolicyVerdict | None,
    effect: SideEffect | None,
) -> Span:
    """Return a request's span: its fields as the request holds them, and what became of it."""
    declared = value_of(verdict.verdict) if verdict is not None else None
    executed = effect is not None and effect.execution_attempted is True
    rollback_ref = effect.rollback_receipt_ref if effect is not None else None
    state_ref = rollback_ref if isinstance(rollback_ref, str) else None
    policy_version = verdict.policy_version if verdict is not None else None
    return Span(
        f"span:{request_id}",
        session_id,
        value_of(request.action_kind),
        sequence_index,
        value_of(request.episode_id),
        value_of(request.untrusted_tool_output_ref),
        f"{request_id}:{policy_version}" if isinstance(policy_version, str) else None,
        state_ref,
        _outcome(declared, executed),
        value_of(request.requested_capability),
        input_digest(request),
        state_ref if declared in ("allow", "review") else None,
    )
