"""Read the tool calls of one Inspect AI sample from its events, bodies only as digests.

A call's tool span (type ``tool``, named after the function) opens right before its tool
event: Inspect records the two with no await between them, even for concurrent calls. The
call's sandbox events are those in that span or below it; its approvals name its call id.
The arguments of Inspect's standard tools are presented under the names of the newest
release (``PARAMETERS``), whichever release wrote the log.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox_replay.load.scan import ForbiddenScanner

# Inspect's tool-support programs: an exec of one whose input is JSON-RPC is a request to
# it, the way text_editor, bash_session and the browser work (no write_file is recorded).
TOOL_SUPPORT = ("inspect-tool-support", "inspect-sandbox-tools")
# Marks of Inspect finding, installing, probing and starting its tool support: set-up,
# not the call's work (unless the call's own arguments hold the mark).
SETUP_MARKS = (
    *TOOL_SUPPORT,
    *("web_client.py", "computer_tool.py", "/proc/self/status", "command -v uname"),
    *("/etc/os-release", "INSPECT_FRAMEWORK_DIRECTORY", "inspect_image_path="),
)
EDITS = frozenset({"create", "str_replace", "insert", "undo_edit"})


@dataclass(frozen=True)
class Former:
    """A name a parameter had in the releases before ``renamed_in``, for calls with ``when``."""

    name: str
    renamed_in: tuple[int, ...]
    when: tuple[str, str] | None = None  # (argument, value) the call must have


# Inspect's standard tools and their parameters, named as by the newest release known.
_CURRENT = {
    "bash": "command",
    "python": "code",
    "code_execution": "code",
    "bash_session": "action input",
    "text_editor": "command path file_text insert_line insert_text new_str old_str view_range",
    "think": "thought",
    "web_search": "query",
    "web_browser_go": "url",
    "web_browser_click": "element_id",
    "web_browser_type": "element_id text",
    "web_browser_type_submit": "element_id text",
    "web_browser_scroll": "direction",
    "web_browser_back": "",
    "web_browser_forward": "",
    "web_browser_refresh": "",
    "computer": "action coordinate duration region scroll_amount scroll_direction "
    "start_coordinate text repeat press_enter actions",
    "grep": "pattern path glob fixed_strings extended_regexp output_mode",
    "list_files": "path depth",
    "read_file": "file_path offset limit",
    "memory": "command path file_text old_str new_str insert_line insert_text view_range "
    "old_path new_path",
    "todo_write": "todos explanation",
    "update_plan": "plan explanation",
    "notify_user": "title message",
}
_RENAMED = (0, 3, 285)  # the first release known to use the current names below
_FORMER = {
    "bash": {"command": (Former("cmd", _RENAMED),)},
    "text_editor": {"insert_text": (Former("new_str", _RENAMED, ("command", "insert")),)},
}
# The one table: tool -> canonical parameter -> the names it had.
PARAMETERS: dict[str, dict[str, tuple[Former, ...]]] = {
    tool: {name: _FORMER.get(tool, {}).get(name, ()) for name in names.split()}
    for tool, names in _CURRENT.items()
}


@dataclass(frozen=True)
class Effects:
    """The sandbox events of a call's own work, by what the log tells of their change."""

    writes: int = 0  # write_file events, and text_editor edits through tool support
    unknown: int = 0  # execs: they ran, what they changed the log cannot tell
    reads: int = 0  # read_file events, and text_editor views through tool support


@dataclass
class ToolCall:
    """One tool call of a sample as the bundle needs it; bodies only as digests."""

    call_id: str
    function: str
    arguments: dict[str, Any]  # normalised (``normalise``)
    kept_as_recorded: tuple[str, ...]
    previous_function: str | None
    previous_output_ref: str | None
    decision: str | None
    approver: str
    pre_execution: bool
    effects: Effects
    arguments_sha256: str
    output_sha256: str
    matches: dict[str, int]
    trust_label: str | None = None  # where the harness tells it, else the map's rule decides


@dataclass
class _Events:
    """Where each tool event's span, sandbox events and approvals are, by event position."""

    linked: set[int] = field(default_factory=set)
    sandbox: dict[int, list[Any]] = field(default_factory=dict)
    approvals: dict[str, list[tuple[int, Any]]] = field(default_factory=dict)


def normalise(
    function: str, arguments: Mapping[str, Any], version: str
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Return a call's arguments under their canonical names, and the names left as recorded.

    A former name is renamed when the log's release (``version``) comes before the rename,
    or cannot be read, and the call lacks the canonical name. A standard tool's argument
    that is neither canonical nor renamed is kept under its own name and listed.
    """
    fields = PARAMETERS.get(function)
    if fields is None:
        return dict(arguments), ()
    release = _release(version)
    normalised: dict[str, Any] = {}
    kept: list[str] = []
    for name, value in arguments.items():
        canonical = next(
            (
                field_name
                for field_name, formers in fields.items()
                for former in formers
                if former.name == name
                and field_name not in arguments
                and (release is None or release < former.renamed_in)
                and (former.when is None or arguments.get(former.when[0]) == former.when[1])
            ),
            name,
        )
        if canonical not in fields:
            kept.append(name)
        normalised[canonical] = value
    return normalised, tuple(kept)


def _release(version: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        return None


def tool_calls(
    events: Sequence[Any], scanner: ForbiddenScanner, version: str = "unknown"
) -> Iterator[ToolCall]:
    """Yield each tool call of one sample's events, in log order; ``version`` wrote the log."""
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
        arguments, kept = normalise(event.function, event.arguments, version)
        yield ToolCall(
            call_id=event.id,
            function=event.function,
            arguments=arguments,
            kept_as_recorded=kept,
            previous_function=previous_function,
            previous_output_ref=previous_output_ref,
            decision=approval.decision if approval is not None else None,
            approver=approval.approver if approval is not None else "",
            pre_execution=position is not None and position < started,
            effects=effects_of(activity, _json(event.arguments)),
            arguments_sha256=digest(event.arguments),
            output_sha256=digest(output),
            matches=_forbidden_matches(scanner, event, output, activity, decided),
        )
        previous_function = event.function
        previous_output_ref = event.id


def effects_of(activity: Sequence[Any], arguments_text: str) -> Effects:
    """Sort a call's sandbox events into writes, execs and reads; drop Inspect's set-up."""
    counts = {"writes": 0, "unknown": 0, "reads": 0}
    for event in activity:
        kind = _effect_kind(event, arguments_text)
        if kind is not None:
            counts[kind] += 1
    return Effects(**counts)


def _effect_kind(event: Any, arguments_text: str) -> str | None:
    target = (event.cmd if event.action == "exec" else event.file) or ""
    if event.action == "exec" and any(
        name in target and name not in arguments_text for name in TOOL_SUPPORT
    ):
        request = _rpc_request(event.input)
        if request is not None:
            return _rpc_kind(*request)
    if any(mark in target and mark not in arguments_text for mark in SETUP_MARKS):
        return None
    return {"write_file": "writes", "exec": "unknown", "read_file": "reads"}.get(event.action)


def _rpc_request(text: str | None) -> tuple[str, str] | None:
    """Return the method and ``command`` parameter of a JSON-RPC request, or None."""
    try:
        request = json.loads(text or "")
    except (ValueError, RecursionError):  # not JSON, or nested too deep to be a request
        return None
    if not isinstance(request, dict) or "jsonrpc" not in request:
        return None
    params = request.get("params")
    command = params.get("command") if isinstance(params, dict) else None
    return str(request.get("method")), str(command)


def _rpc_kind(method: str, command: str) -> str | None:
    if method.endswith("_new_session"):
        return None  # tool support opening a session: transport, no work yet
    if method == "text_editor":
        return "writes" if command in EDITS else "reads"
    return "unknown"


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

    bodies = [
        _json(event.arguments),
        _json(output),
        *(_json([e.cmd, e.file, e.input, e.output]) for e in activity),
        *(_json([e.explanation, e.modified and e.modified.arguments]) for _, e in decided),
    ]
    counts, _matched = scanner.scan_bytes("\n".join(bodies).encode("utf-8", "surrogatepass"))
    return dict(counts)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def digest(value: Any) -> str:
    """Return the sha256 of ``value`` as canonical JSON, as a bundle names a body."""
    data = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()
