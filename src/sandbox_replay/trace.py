"""The public agent-execution trace: one span per request, and its audit.

Spans are ordered by (episode_id, request_id). The trace digest is the sha256 of the
spans' canonical JSON (sorted keys, no whitespace), so it changes exactly when a span does.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from operator import is_, methodcaller
from typing import Any, overload

import orjson

from sandbox_replay import codes
from sandbox_replay.codes import Layer
from sandbox_replay.inputs import RowRef, RunInputs
from sandbox_replay.layers.base import NO_ROW, LayerResult, column, joined, positions, row_dicts
from sandbox_replay.layers.rollbacks import covered_each
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


DIGEST_SIZE = 32  # bytes of a packed sha256 digest
# The request fields a span's input digest is made of, in its order.
DIGESTED_FIELDS = ("normalized_action_ref", "requested_capability", "risk_class")


class PackedDigests(Sequence[str]):
    """sha256 digests held as one buffer of 32-byte digests, read as ``sha256:<hex>``.

    Spelled out, 600,000 digests take 72 MB for as long as the trace lives; packed, 19 MB.
    They are read only a chunk of spans at a time, when the spans are built.
    """

    def __init__(self, packed: bytes | bytearray) -> None:
        self.packed = packed

    def __len__(self) -> int:
        return len(self.packed) // DIGEST_SIZE

    @overload
    def __getitem__(self, item: int) -> str: ...
    @overload
    def __getitem__(self, item: slice) -> list[str]: ...
    def __getitem__(self, item: int | slice) -> str | list[str]:
        if isinstance(item, slice):
            start, stop, step = item.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            data = self.packed[start * DIGEST_SIZE : stop * DIGEST_SIZE]
            size = DIGEST_SIZE
            return ["sha256:" + data[i : i + size].hex() for i in range(0, len(data), size)]
        position = range(len(self))[item]  # IndexError as a list raises it
        at = position * DIGEST_SIZE
        return "sha256:" + self.packed[at : at + DIGEST_SIZE].hex()


def packed_input_digests(
    actions: list[Any], capabilities: list[Any], risks: list[Any]
) -> PackedDigests:
    """Return ``_input_digest`` of each (action, capability, risk) triple, in C for strings.

    For three strings the canonical JSON is ``[a,b,c]`` with each one as the standard
    encoder writes it, put together here a column at a time. Capabilities and risk
    classes are few, so each one's JSON is written once. An action's is cut out of the
    actions' orjson dump when no string there needs escaping (no backslash in it): then
    both encoders write each string as it is, between quotes.
    """
    columns = (actions, capabilities, risks)
    if not all(set(map(type, column)) <= {str} for column in columns):
        spelled = (_input_digest(values) for values in zip(*columns, strict=True))
        return PackedDigests(b"".join(bytes.fromhex(d.removeprefix("sha256:")) for d in spelled))
    capability_parts = {c: ('",' + _encode_string(c)).encode() for c in set(capabilities)}
    risk_parts = {r: ("," + _encode_string(r) + "]").encode() for r in set(risks)}
    texts = map(
        b"".join,
        zip(
            repeat(b'["'),
            chain.from_iterable(map(_string_contents, _chunks(actions))),
            map(capability_parts.__getitem__, capabilities),
            map(risk_parts.__getitem__, risks),
        ),
    )
    packed = bytearray()
    # Each digest is appended as it is made: joining them would first hold them all.
    digests = map(methodcaller("digest"), map(hashlib.sha256, texts))
    deque(map(packed.extend, digests), maxlen=0)
    return PackedDigests(packed)  # not copied into bytes: 19 MB less at 600,000


def _chunks(values: list[str]) -> Iterator[list[str]]:
    """Yield ``values`` ``ROWS_PER_CHUNK`` at a time (so that only a chunk's dump is held)."""
    return (values[i : i + ROWS_PER_CHUNK] for i in range(0, len(values), ROWS_PER_CHUNK))


def _string_contents(texts: list[str]) -> Iterable[bytes]:
    """Return each string's JSON as ``_encode_string`` writes it, without its quotes, UTF-8."""
    try:
        dumped = orjson.dumps(texts)
    except TypeError:  # orjson.JSONEncodeError included: a lone surrogate
        dumped = b"\\"
    if b"\\" in dumped:
        return (_encode_string(text)[1:-1].encode() for text in texts)
    # With nothing escaped, every quote in the dump opens or closes a string.
    return dumped.split(b'"')[1::2]


def _outcome(declared: Any, executed: bool) -> str:
    """Return what became of a request: blocked, executed, or else its declared verdict."""
    if declared == "block":
        return "blocked"
    if executed:
        return "executed"
    return declared if isinstance(declared, str) else "unverified"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _text_counts(values: list[Any]) -> dict[str, int]:
    """Return how often each ``_text(value)`` occurs, sorted (counted in C if all are text)."""
    texts = values if set(map(type, values)) <= {str} else map(_text, values)
    return dict(sorted(Counter(texts).items()))


def _span(
    request_id: str,
    session_id: str,
    action_kind: Any,
    sequence_index: int,
    episode_id: Any,
    observation_ref: Any,
    policy_version: Any,
    state_transition_ref: str | None,
    outcome: str,
    target_ref: Any,
    input_digest: str,
    recovery_ref: str | None,
) -> dict[str, Any]:
    return {
        "span_id": f"span:{request_id}",
        "session_id": session_id,
        "action_kind": action_kind,
        "sequence_index": sequence_index,
        "episode_id": episode_id,
        "observation_ref": observation_ref,
        "authority_verdict_id": (
            f"{request_id}:{policy_version}" if isinstance(policy_version, str) else None
        ),
        "state_transition_ref": state_transition_ref,
        "outcome": outcome,
        "target_ref": target_ref,
        "input_digest": input_digest,
        "recovery_ref": recovery_ref,
    }


def _sorted_span(
    request_id: str,
    session_id: str,
    action_kind: Any,
    sequence_index: int,
    episode_id: Any,
    observation_ref: Any,
    policy_version: Any,
    state_transition_ref: str | None,
    outcome: str,
    target_ref: Any,
    input_digest: str,
    recovery_ref: str | None,
) -> dict[str, Any]:
    """Return ``_span``'s dict with its keys in sorted order, as the trace digest reads them.

    orjson sorts the keys of a dict that has them in order already at a fraction of the
    cost; the digest's dump is the same (a test holds the two functions to each other).
    """
    return {
        "action_kind": action_kind,
        "authority_verdict_id": (
            f"{request_id}:{policy_version}" if isinstance(policy_version, str) else None
        ),
        "episode_id": episode_id,
        "input_digest": input_digest,
        "observation_ref": observation_ref,
        "outcome": outcome,
        "recovery_ref": recovery_ref,
        "sequence_index": sequence_index,
        "session_id": session_id,
        "span_id": f"span:{request_id}",
        "state_transition_ref": state_transition_ref,
        "target_ref": target_ref,
    }


@dataclass(eq=False, repr=False)  # compared and shown as the list of rows it is
class Spans(LazyRows):
    """The trace's spans, built when read from one list per field, in span order.

    A span holds ``span:<request id>``, its sequence index and, where the verdict row
    names a policy version (a string), ``<request id>:<policy version>`` as its authority
    verdict id; its other values are its request's fields and what the audit found.
    """

    session_id: str
    request_ids: list[str]
    action_kinds: list[Any]
    episode_ids: list[Any]
    observation_refs: list[Any]
    policy_versions: list[Any]
    state_refs: list[str | None]
    outcomes: list[str]
    target_refs: list[Any]
    input_digests: Sequence[str]
    recovery_refs: list[str | None]

    def __len__(self) -> int:
        return len(self.request_ids)

    def build(self, start: int, stop: int) -> list[dict[str, Any]]:
        return self._make(_span, start, stop)

    def rows_at(self, positions: Sequence[int]) -> list[dict[str, Any]]:
        def at(values: Sequence[Any]) -> list[Any]:
            return list(map(values.__getitem__, positions))

        return list(
            map(
                _span,
                at(self.request_ids),
                repeat(self.session_id, len(positions)),
                at(self.action_kinds),
                positions,
                at(self.episode_ids),
                at(self.observation_refs),
                at(self.policy_versions),
                at(self.state_refs),
                at(self.outcomes),
                at(self.target_refs),
                at(self.input_digests),
                at(self.recovery_refs),
            )
        )

    def column(self, name: str) -> list[Any]:
        if name == "span_id":  # as ``_span`` writes it, without the other fields
            return list(map("span:{}".format, self.request_ids))
        return super().column(name)

    def column_at(self, positions: Sequence[int], name: str) -> list[Any]:
        if name == "outcome":  # what a join-table row shows of its span
            return list(map(self.outcomes.__getitem__, positions))
        return super().column_at(positions, name)

    def build_sorted(self, start: int, stop: int) -> list[dict[str, Any]]:
        """Return ``build(start, stop)`` with each span's keys in sorted order."""
        return self._make(_sorted_span, start, stop)

    def _make(
        self, make_span: Callable[..., dict[str, Any]], start: int, stop: int
    ) -> list[dict[str, Any]]:
        return list(
            map(
                make_span,
                self.request_ids[start:stop],
                repeat(self.session_id, stop - start),
                self.action_kinds[start:stop],
                range(start, stop),
                self.episode_ids[start:stop],
                self.observation_refs[start:stop],
                self.policy_versions[start:stop],
                self.state_refs[start:stop],
                self.outcomes[start:stop],
                self.target_refs[start:stop],
                self.input_digests[start:stop],
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
                stop = min(start + ROWS_PER_CHUNK, len(spans))
                if isinstance(spans, Spans):
                    chunk = orjson.dumps(spans.build_sorted(start, stop), option=_SORTED)
                else:
                    chunk = orjson.dumps(spans[start:stop], option=_SORTED)
                digest.update(chunk[1:-1] if start == 0 else b"," + chunk[1:-1])
        except TypeError:  # orjson.JSONEncodeError included
            pass
        else:
            digest.update(b"]")
            return "sha256:" + digest.hexdigest()
    return canonical_digest(list(spans))


# The request fields a span copies.
_SPAN_FIELDS = ("action_kind", "episode_id", "untrusted_tool_output_ref", "requested_capability")


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

    # Each request's verdict row, receipt and cold-replay row (``NO_ROW`` where none, whose
    # fields all read as absent), found by position where the files list them in span
    # order, as exporters write them (``joined``); then their fields, a column at a time.
    verdicts = joined(run.verdict_by_request, request_ids)
    effects = joined(run.effect_by_request, request_ids)
    replays = joined(run.replay_by_request, request_ids)
    verdict_rows: list[Any] = row_dicts(verdicts)
    effect_rows: list[Any] = row_dicts(effects)
    declared_verdicts = list(map(dict.get, verdict_rows, repeat("verdict")))
    attempted = map(dict.get, effect_rows, repeat("execution_attempted"))
    executions = list(map(is_, attempted, repeat(True)))
    rollback_refs = list(map(dict.get, effect_rows, repeat("rollback_receipt_ref")))
    pre_execution = map(is_, map(dict.get, verdict_rows, repeat("pre_execution")), repeat(True))
    # Whether each executed request's rollback ref finds a verified rollback naming it.
    executed_at = list(positions(executions))
    covered = [True] * len(request_ids)  # only an executed request needs a rollback
    executed_ids = list(map(request_ids.__getitem__, executed_at))
    executed_refs = list(map(rollback_refs.__getitem__, executed_at))
    deque(map(covered.__setitem__, executed_at, covered_each(run, executed_ids, executed_refs)), 0)
    del executed_at, executed_ids, executed_refs
    audited = zip(
        request_ids,
        requests,
        verdicts,
        effects,
        replays,
        declared_verdicts,
        executions,
        covered,
        pre_execution,
        strict=True,
    )
    for request_id, request, verdict, effect, replay, declared, executed, ok, pre in audited:
        if verdict is NO_ROW:
            flag(
                codes.TRACE_VERDICT_REF_MISSING,
                "no verdict row to use as authority",
                request_id,
                request,
            )
        elif not pre:
            flag(
                codes.TRACE_VERDICT_NOT_PRE_EXECUTION,
                "verdict not recorded before execution",
                request_id,
                request,
            )
        if effect is NO_ROW:
            flag(codes.TRACE_SIDE_EFFECT_REF_MISSING, "no side-effect receipt", request_id, request)
        elif declared == "block" and (
            executed or effect.row.get("side_effect_diff_count") not in (0, None)
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
        if not ok:
            flag(
                codes.TRACE_ROLLBACK_REF_MISSING,
                "executed with no rollback receipt",
                request_id,
                request,
            )
        if replay is NO_ROW:
            flag(codes.TRACE_COLD_REPLAY_REF_MISSING, "no cold-replay row", request_id, request)
    outcomes = list(map(_outcome, declared_verdicts, executions))
    state_refs = [ref if isinstance(ref, str) else None for ref in rollback_refs]
    recovery_refs = [
        ref if declared in ("allow", "review") else None
        for declared, ref in zip(declared_verdicts, state_refs, strict=True)
    ]
    versions = list(map(dict.get, verdict_rows, repeat("policy_version")))
    del verdicts, effects, replays, verdict_rows, effect_rows, declared_verdicts, executions
    rows = row_dicts(requests)
    field = {name: column(rows, name) for name in _SPAN_FIELDS}
    capabilities = field["requested_capability"]
    digested = (field[name] if name in field else column(rows, name) for name in DIGESTED_FIELDS)
    digests = packed_input_digests(*digested)
    spans = Spans(
        session_id,
        request_ids,
        field["action_kind"],
        field["episode_id"],
        field["untrusted_tool_output_ref"],
        versions,
        state_refs,
        outcomes,
        capabilities,
        digests,
        recovery_refs,
    )
    del rows, field
    summary = {
        "action_kind_counts": _text_counts(spans.action_kinds),
        "outcome_counts": dict(sorted(Counter(outcomes).items())),
        "finding_count": len(audit.findings),
        # Span values are the tool's own or copied from the request and receipt rows.
        "trace_digest": spans_digest(
            spans, may_hold_floats=any(f.may_hold_floats for f in run.all_files())
        ),
    }
    audit.counts = {"span_count": len(spans), "audit_finding_count": len(audit.findings)}
    return Trace(spans, summary, audit)
