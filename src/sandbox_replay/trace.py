"""The public agent-execution trace: one span per request, and its audit.

Spans are ordered by (episode_id, request_id). The trace digest is the sha256 of the
spans' canonical JSON (sorted keys, no whitespace), so it changes exactly when a span does.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import methodcaller
from typing import Any

import orjson

from sandbox_replay import codes
from sandbox_replay.codes import Layer
from sandbox_replay.inputs import RowRef, RunInputs
from sandbox_replay.layers.base import LayerResult
from sandbox_replay.layers.rollbacks import rollback_covers
from sandbox_replay.lazyrows import ROWS_PER_CHUNK, LazyRows

FLOOR = "public_trace_floor"


@dataclass
class Trace:
    """The spans, their summary and the audit layer's result."""

    spans: Sequence[dict[str, Any]]
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
    """Return ``canonical_digest(list(values))``, spelling out the all-string case."""
    if all(type(v) is str for v in values):
        text = "[" + ",".join(map(_encode_string, values)) + "]"
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    return canonical_digest(list(values))


_DIGESTED = ("normalized_action_ref", "requested_capability", "risk_class")


def _input_digests(rows: list[Any]) -> list[str]:
    """Return ``_input_digest`` of each row's digested fields, in C when all are strings.

    For three strings the canonical JSON is ``[a,b,c]`` with each one as the standard
    encoder writes it, which ``"[{},{},{}]".format`` spells out a column at a time.
    """
    columns: list[list[Any]] = [list(map(dict.get, rows, repeat(name))) for name in _DIGESTED]
    if not all(set(map(type, column)) <= {str} for column in columns):
        return [_input_digest(values) for values in zip(*columns, strict=True)]
    encoded = (map(_encode_string, column) for column in columns)
    texts = map("[{},{},{}]".format, *encoded)
    digests = map(methodcaller("hexdigest"), map(hashlib.sha256, map(str.encode, texts)))
    return list(map("sha256:".__add__, digests))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _span(
    request_id: str,
    session_id: str,
    row: Any,
    sequence_index: int,
    policy_version: Any,
    state_transition_ref: str | None,
    outcome: str,
    input_digest: str,
    recovery_ref: str | None,
) -> dict[str, Any]:
    return {
        "span_id": f"span:{request_id}",
        "session_id": session_id,
        "action_kind": row.get("action_kind"),
        "sequence_index": sequence_index,
        "episode_id": row.get("episode_id"),
        "observation_ref": row.get("untrusted_tool_output_ref"),
        "authority_verdict_id": (
            f"{request_id}:{policy_version}" if isinstance(policy_version, str) else None
        ),
        "state_transition_ref": state_transition_ref,
        "outcome": outcome,
        "target_ref": row.get("requested_capability"),
        "input_digest": input_digest,
        "recovery_ref": recovery_ref,
    }


class Spans(LazyRows):
    """The trace's spans, built when read from the ordered requests and what the audit found.

    A span copies some of its request row's fields, and holds ``span:<request id>``, its
    sequence index and, where the verdict row names a policy version (a string),
    ``<request id>:<policy version>`` as its authority verdict id.
    """

    def __init__(
        self,
        session_id: str,
        request_ids: list[str],
        rows: list[Any],
        policy_versions: list[Any],
        outcomes: list[str],
        state_refs: list[str | None],
        recovery_refs: list[str | None],
        digests: list[str],
    ) -> None:
        self.session_id = session_id
        self.request_ids = request_ids
        self.rows = rows
        self.policy_versions = policy_versions
        self.outcomes = outcomes
        self.state_refs = state_refs
        self.recovery_refs = recovery_refs
        self.digests = digests

    def __len__(self) -> int:
        return len(self.request_ids)

    def build(self, start: int, stop: int) -> list[dict[str, Any]]:
        return list(
            map(
                _span,
                self.request_ids[start:stop],
                repeat(self.session_id, stop - start),
                self.rows[start:stop],
                range(start, stop),
                self.policy_versions[start:stop],
                self.state_refs[start:stop],
                self.outcomes[start:stop],
                self.digests[start:stop],
                self.recovery_refs[start:stop],
            )
        )


def spans_digest(spans: Sequence[dict[str, Any]], *, may_hold_floats: bool) -> str:
    """Return ``canonical_digest(list(spans))``, hashing the spans a chunk at a time.

    Compact JSON of a list is ``[`` and its items' JSON joined by ``,`` and ``]``, so the
    items of each chunk's dump (cut out of its brackets) join to the whole dump's bytes.
    """
    if not may_hold_floats:
        digest = hashlib.sha256(b"[")
        try:
            for start in range(0, len(spans), ROWS_PER_CHUNK):
                chunk = orjson.dumps(spans[start : start + ROWS_PER_CHUNK], option=_SORTED)
                digest.update(chunk[1:-1] if start == 0 else b"," + chunk[1:-1])
        except TypeError:  # orjson.JSONEncodeError included
            pass
        else:
            digest.update(b"]")
            return "sha256:" + digest.hexdigest()
    return canonical_digest(list(spans))


def build_trace(run: RunInputs, session_id: str) -> Trace:
    """Build one span per joined request and audit each span's references."""
    audit = LayerResult(Layer.PUBLIC_TRACE)
    request_ids = list(run.request_by_id)
    requests = list(run.request_by_id.values())
    episodes = [ref.row.get("episode_id") for ref in requests]
    if not all(type(e) is str for e in episodes):
        episodes = list(map(_text, episodes))
    # Request ids are distinct, so the sort never compares two refs.
    ordered = sorted(zip(episodes, request_ids, requests, strict=True))
    request_ids = [item[1] for item in ordered]
    requests = [item[2] for item in ordered]
    del ordered

    def flag(code: str, message: str, request_id: str, request: RowRef) -> None:
        span_id = f"span:{request_id}"
        audit.add(
            code, f"{span_id}: {message}", FLOOR, span_id, "trace_span", request.file, request.line
        )

    no_row: dict[str, Any] = {}
    verdict_of = run.verdict_by_request.get
    effect_of = run.effect_by_request.get
    replayed = run.replay_by_request
    versions: list[Any] = []
    outcomes: list[str] = []
    state_refs: list[str | None] = []
    recovery_refs: list[str | None] = []
    for request_id, request in zip(request_ids, requests, strict=True):
        # Plain dict lookups on the rows: this loop runs once per request.
        verdict = verdict_of(request_id)
        effect = effect_of(request_id)
        verdict_row = verdict.row if verdict is not None else no_row
        effect_row = effect.row if effect is not None else no_row
        declared = verdict_row.get("verdict")
        executed = effect_row.get("execution_attempted") is True
        rollback_ref = effect_row.get("rollback_receipt_ref")
        if declared == "block":
            outcome = "blocked"
        elif executed:
            outcome = "executed"
        else:
            outcome = declared if isinstance(declared, str) else "unverified"
        if verdict is None:
            flag(
                codes.TRACE_VERDICT_REF_MISSING,
                "no verdict row to use as authority",
                request_id,
                request,
            )
        elif verdict_row.get("pre_execution") is not True:
            flag(
                codes.TRACE_VERDICT_NOT_PRE_EXECUTION,
                "verdict not recorded before execution",
                request_id,
                request,
            )
        if effect is None:
            flag(codes.TRACE_SIDE_EFFECT_REF_MISSING, "no side-effect receipt", request_id, request)
        elif declared == "block" and (
            executed or effect_row.get("side_effect_diff_count") not in (0, None)
        ):
            flag(
                codes.TRACE_BLOCKED_ACTION_EXECUTED,
                "block verdict but the action executed",
                request_id,
                request,
            )
        elif declared in ("allow", "review") and not executed:
            flag(
                codes.TRACE_ALLOWED_ACTION_NOT_EXECUTED,
                f"{declared} verdict but no execution",
                request_id,
                request,
            )
        if executed and not rollback_covers(run, request_id, rollback_ref):
            flag(
                codes.TRACE_ROLLBACK_REF_MISSING,
                "executed with no rollback receipt",
                request_id,
                request,
            )
        if request_id not in replayed:
            flag(codes.TRACE_COLD_REPLAY_REF_MISSING, "no cold-replay row", request_id, request)
        state_ref = rollback_ref if isinstance(rollback_ref, str) else None
        versions.append(verdict_row.get("policy_version"))
        outcomes.append(outcome)
        state_refs.append(state_ref)
        recovery_refs.append(state_ref if declared in ("allow", "review") else None)
    rows: list[Any] = [ref.row for ref in requests]
    spans = Spans(
        session_id,
        request_ids,
        rows,
        versions,
        outcomes,
        state_refs,
        recovery_refs,
        _input_digests(rows),
    )
    action_kinds = map(_text, map(dict.get, rows, repeat("action_kind")))
    summary = {
        "action_kind_counts": dict(sorted(Counter(action_kinds).items())),
        "outcome_counts": dict(sorted(Counter(outcomes).items())),
        "finding_count": len(audit.findings),
        # Span values are the tool's own or copied from the request and receipt rows.
        "trace_digest": spans_digest(
            spans, may_hold_floats=any(f.may_hold_floats for f in run.all_files())
        ),
    }
    audit.counts = {"span_count": len(spans), "audit_finding_count": len(audit.findings)}
    return Trace(spans, summary, audit)
