"""Read the tool calls of one Inspect AI sample from its events, bodies only as digests.

A call's tool span (type ``tool``, named after the function) opens right before its tool
event: Inspect records the two with no await between them, even for concurrent calls. The
call's sandbox events are those in that span or below it; its approvals name its call id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox_replay.load.scan import ForbiddenScanner

EXECUTING_ACTIONS = ("exec", "write_file")


@dataclass
class ToolCall:
    """One tool call of a sample as the bundle needs it; bodies only as digests."""

    call_id: str
    function: str
    arguments: dict[str, Any]
    previous_function: str | None
    previous_output_ref: str | None
    decision: str | None
    approver: str
    pre_execution: bool
    executed_count: int
    arguments_sha256: str
    output_sha256: str
    matches: dict[str, int]


@dataclass
class _Events:
    """Where each tool event's span, sandbox events and approvals are, by event position."""

    linked: set[int] = field(default_factory=set)
    sandbox: dict[int, list[Any]] = field(default_factory=dict)
    approvals: dict[str, list[tuple[int, Any]]] = field(default_factory=dict)


def tool_calls(events: Sequence[Any], scanner: ForbiddenScanner) -> Iterator[ToolCall]:
    """Yield each tool call of one sample's events, in log order."""
    from inspect_ai.event import ToolEvent

    found = _index(events)
    previous_function: str | None = None
    previous_output_ref: str | None = None
    for at, event in enumerate(events):
        if not isinstance(event, ToolEvent):
            continue
        # The call starts running when its tool span opens (or, without one, at its event).
        started = at - 1 if at in found.linked else at
        activity = found.sandbox.get(at, [])
        decided = found.approvals.get(event.id, [])
        position, approval = decided[-1] if decided else (None, None)
        output = event.model_dump(mode="json", include={"result", "error"})
        yield ToolCall(
            call_id=event.id,
            function=event.function,
            arguments=dict(event.arguments),
            previous_function=previous_function,
            previous_output_ref=previous_output_ref,
            decision=approval.decision if approval is not None else None,
            approver=approval.approver if approval is not None else "",
            pre_execution=position is not None and position < started,
            executed_count=sum(1 for e in activity if e.action in EXECUTING_ACTIONS),
            arguments_sha256=_digest(event.arguments),
            output_sha256=_digest(output),
            matches=_forbidden_matches(scanner, event, output, activity, decided),
        )
        previous_function = event.function
        previous_output_ref = event.id


def _index(events: Sequence[Any]) -> _Events:
    from inspect_ai.event import ApprovalEvent, SandboxEvent, SpanBeginEvent, ToolEvent

    found = _Events()
    parents: dict[str, str | None] = {}
    tool_spans: dict[str, int] = {}  # tool span id -> position of its call's tool event
    for at, event in enumerate(events):
        if isinstance(event, SpanBeginEvent):
            parents[event.id] = event.parent_id
        elif isinstance(event, ApprovalEvent):
            found.approvals.setdefault(event.call.id, []).append((at, event))
        elif isinstance(event, ToolEvent) and at > 0:
            before = events[at - 1]
            if (
                isinstance(before, SpanBeginEvent)
                and before.type == "tool"
                and before.name == event.function
            ):
                tool_spans[before.id] = at
    for event in events:
        if isinstance(event, SandboxEvent):
            owner = _owning_tool_span(event.span_id, parents, tool_spans)
            if owner is not None:
                found.sandbox.setdefault(tool_spans[owner], []).append(event)
    found.linked = set(tool_spans.values())
    return found


def _owning_tool_span(
    span_id: str | None, parents: Mapping[str, str | None], tool_spans: Mapping[str, int]
) -> str | None:
    """Return the nearest tool span at or above ``span_id`` that belongs to a call."""
    seen: set[str] = set()
    while span_id is not None and span_id not in seen:
        if span_id in tool_spans:
            return span_id
        seen.add(span_id)
        span_id = parents.get(span_id)
    return None


def _forbidden_matches(
    scanner: ForbiddenScanner,
    event: Any,
    output: Any,
    activity: list[Any],
    decided: list[tuple[int, Any]],
) -> dict[str, int]:
    """Scan a call's argument, output, sandbox and approval bodies; return counts by class."""

    def text(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, default=str)

    bodies = [
        text(event.arguments),
        text(output),
        *(text([e.cmd, e.file, e.input, e.output]) for e in activity),
        *(text([e.explanation, e.modified and e.modified.arguments]) for _, e in decided),
    ]
    counts, _matched = scanner.scan_bytes("\n".join(bodies).encode("utf-8", "surrogatepass"))
    return dict(counts)


def _digest(value: Any) -> str:
    data = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()
