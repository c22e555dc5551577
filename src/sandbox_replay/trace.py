"""The public agent-execution trace: one span per request, and its audit.

Spans are ordered by (episode_id, request_id). The trace digest is the sha256 of the
spans' canonical JSON (sorted keys, no whitespace), so it changes exactly when a span does.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import orjson

from sandbox_replay import codes
from sandbox_replay.codes import Layer
from sandbox_replay.inputs import RowRef, RunInputs
from sandbox_replay.layers.base import LayerResult
from sandbox_replay.layers.rollbacks import rollback_covers

FLOOR = "public_trace_floor"


@dataclass
class Trace:
    """The spans, their summary and the audit layer's result."""

    spans: list[dict[str, Any]]
    summary: dict[str, Any]
    audit: LayerResult

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

    orjson with sorted keys writes the same UTF-8 bytes as the standard library here,
    except for floats (``1e-05`` against ``0.00001``) and what it refuses (integers
    beyond 64 bits, lone surrogates); so it is used only for a value known to hold no
    float, and anything it refuses goes the standard way.
    """
    if not may_hold_floats:
        try:
            return "sha256:" + hashlib.sha256(orjson.dumps(value, option=_SORTED)).hexdigest()
        except TypeError:  # orjson.JSONEncodeError included
            pass
    text = _CANONICAL.encode(value)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _input_digest(values: tuple[Any, ...]) -> str:
    """Return ``canonical_digest(list(values))``, spelling out the all-string case (once a span)."""
    if all(type(v) is str for v in values):
        text = "[" + ",".join(map(_encode_string, values)) + "]"
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    return canonical_digest(list(values))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def build_trace(run: RunInputs, session_id: str) -> Trace:
    """Build one span per joined request and audit each span's references."""
    audit = LayerResult(Layer.PUBLIC_TRACE)
    ordered = sorted(
        run.request_by_id.items(), key=lambda item: (_text(item[1].get("episode_id")), item[0])
    )
    spans: list[dict[str, Any]] = []

    def flag(code: str, message: str, span_id: str, request: RowRef) -> None:
        audit.add(
            code, f"{span_id}: {message}", FLOOR, span_id, "trace_span", request.file, request.line
        )

    no_row: dict[str, Any] = {}
    for sequence, (request_id, request) in enumerate(ordered):
        # Plain dict lookups on the rows: this loop runs once per request.
        verdict = run.verdict_by_request.get(request_id)
        effect = run.effect_by_request.get(request_id)
        row = request.row
        verdict_row = verdict.row if verdict is not None else no_row
        effect_row = effect.row if effect is not None else no_row
        declared = verdict_row.get("verdict")
        executed = effect_row.get("execution_attempted") is True
        diff_count = effect_row.get("side_effect_diff_count")
        rollback_ref = effect_row.get("rollback_receipt_ref")
        if declared == "block":
            outcome = "blocked"
        elif executed:
            outcome = "executed"
        else:
            outcome = declared if isinstance(declared, str) else "unverified"
        span_id = f"span:{request_id}"
        if verdict is None:
            flag(
                codes.TRACE_VERDICT_REF_MISSING,
                "no verdict row to use as authority",
                span_id,
                request,
            )
        elif verdict_row.get("pre_execution") is not True:
            flag(
                codes.TRACE_VERDICT_NOT_PRE_EXECUTION,
                "verdict not recorded before execution",
                span_id,
                request,
            )
        if effect is None:
            flag(codes.TRACE_SIDE_EFFECT_REF_MISSING, "no side-effect receipt", span_id, request)
        elif declared == "block" and (executed or diff_count not in (0, None)):
            flag(
                codes.TRACE_BLOCKED_ACTION_EXECUTED,
                "block verdict but the action executed",
                span_id,
                request,
            )
        elif declared in ("allow", "review") and not executed:
            flag(
                codes.TRACE_ALLOWED_ACTION_NOT_EXECUTED,
                f"{declared} verdict but no execution",
                span_id,
                request,
            )
        if executed and not rollback_covers(run, request_id, rollback_ref):
            flag(
                codes.TRACE_ROLLBACK_REF_MISSING,
                "executed with no rollback receipt",
                span_id,
                request,
            )
        if request_id not in run.replay_by_request:
            flag(codes.TRACE_COLD_REPLAY_REF_MISSING, "no cold-replay row", span_id, request)
        policy_version = verdict_row.get("policy_version")
        capability = row.get("requested_capability")
        spans.append(
            {
                "span_id": span_id,
                "session_id": session_id,
                "action_kind": row.get("action_kind"),
                "sequence_index": sequence,
                "episode_id": row.get("episode_id"),
                "observation_ref": row.get("untrusted_tool_output_ref"),
                "authority_verdict_id": (
                    f"{request_id}:{policy_version}" if isinstance(policy_version, str) else None
                ),
                "state_transition_ref": rollback_ref if isinstance(rollback_ref, str) else None,
                "outcome": outcome,
                "target_ref": capability,
                "input_digest": _input_digest(
                    (row.get("normalized_action_ref"), capability, row.get("risk_class"))
                ),
                "recovery_ref": (
                    rollback_ref
                    if declared in ("allow", "review") and isinstance(rollback_ref, str)
                    else None
                ),
            }
        )
    summary = {
        "action_kind_counts": dict(sorted(Counter(_text(s["action_kind"]) for s in spans).items())),
        "outcome_counts": dict(sorted(Counter(s["outcome"] for s in spans).items())),
        "finding_count": len(audit.findings),
        # Span values are the tool's own or copied from the request and receipt rows.
        "trace_digest": canonical_digest(
            spans, may_hold_floats=any(f.may_hold_floats for f in run.all_files())
        ),
    }
    audit.counts = {"span_count": len(spans), "audit_finding_count": len(audit.findings)}
    return Trace(spans, summary, audit)
