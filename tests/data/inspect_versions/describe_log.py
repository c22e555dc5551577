"""Print, for an Inspect log, each tool call and the events recorded while it ran.

Run it with the Python of the venv of the release that wrote the log, so that its own
``read_eval_log`` reads it: ``python describe_log.py 0.3.95.eval``. Prints a Markdown
table: tool, argument names, the events between the call's start and its result, which
sandbox execs are Inspect's tool-support transport, and the error, if any.
"""

from __future__ import annotations

import argparse
from typing import Any

import inspect_ai
from inspect_ai.log import read_eval_log

# Marks of Inspect's own sandbox work for tool support: finding, installing and probing
# its programs. Such events are set-up, not the tool's work.
SETUP = (
    "inspect-tool-support",
    "inspect-sandbox-tools",
    "web_client.py",
    "computer_tool.py",
    "/proc/self/status",
    "command -v uname",
    "/etc/os-release",
    "INSPECT_FRAMEWORK_DIRECTORY",
    "inspect_image_path=",
)
# Newer releases wrap their probes in a shell script that resets PATH; the probe's own
# words follow the script.
WRAPPER = "/bin/sh -c 'inspect_image_path="


def _target(event: Any) -> str:
    target = (event.cmd if event.action == "exec" else event.file) or ""
    if target.startswith(WRAPPER):
        words = target.rsplit("' sh", 1)[-1].strip()
        return f"sh-wrapped: {words or 'probe'}"
    return " ".join(target.split())


def _kind(event: Any) -> str:
    """Return rpc (a JSON-RPC request to tool support: the tool's work), setup or work."""
    target = (event.cmd if event.action == "exec" else event.file) or ""
    if event.action == "exec" and "jsonrpc" in (event.input or ""):
        return "rpc"
    return "setup" if any(mark in target for mark in SETUP) else "work"


def _event_label(event: Any) -> str:
    if event.event == "sandbox":
        kind = _kind(event)
        label = f"sandbox {event.action} `{_target(event)[:44]}`"
        return label if kind == "work" else f"{label} ({kind})"
    if event.event == "approval":
        return f"approval {event.decision}"
    return str(event.event)


def _flat(events: list[Any]) -> list[Any]:
    """Return the events in order, with the events nested in any event inside it."""
    flat: list[Any] = []
    for event in events:
        flat.append(event)
        flat.extend(_flat(getattr(event, "events", None) or []))
    return flat


def _within(flat: list[Any], span: str | None) -> list[Any]:
    """Return the events of the span ``span`` and of the spans inside it."""
    parents = {e.id: e.parent_id for e in flat if e.event == "span_begin"}
    spans = {span}
    for child in parents:
        ancestor = child
        while ancestor is not None and ancestor not in spans:
            ancestor = parents.get(ancestor)
        if ancestor is not None:
            spans.add(child)
    return [e for e in flat if e.span_id in spans and e.event not in ("span_begin", "span_end")]


def _tool_rows(events: list[Any]) -> list[str]:
    """Return one table row per tool event: the events of its span, transport, error."""
    rows = []
    flat = _flat(events)
    for index, event in enumerate(flat):
        if event.event != "tool":
            continue
        # The tool's span is the tool span opened just before its event (the tool event
        # itself belongs to the span around the call).
        span = next(
            (e.id for e in reversed(flat[:index]) if e.event == "span_begin" and e.type == "tool"),
            None,
        )
        approvals = [
            e for e in flat if e.event == "approval" and getattr(e.call, "id", None) == event.id
        ]
        inner = [e for e in _within(flat, span) if e is not event] if span else []
        labels = [_event_label(e) for e in [*approvals, *inner]]
        kinds = [_kind(e) for e in inner if e.event == "sandbox"]
        counts = " | ".join(str(kinds.count(kind)) for kind in ("setup", "rpc", "work"))
        error = f"{event.error.type}: {event.error.message[:60]!r}" if event.error else "-"
        rows.append(
            f"| {event.function} | {', '.join(event.arguments)} | {', '.join(labels) or '-'} "
            f"| {counts} | {error} |"
        )
    return rows


def describe(path: str) -> str:
    """Return the Markdown description of the log at ``path``."""
    log = read_eval_log(path)
    packages = getattr(log.eval, "packages", None)
    lines = [
        f"## {path} (read by inspect_ai {inspect_ai.__version__})",
        "",
        f"- status: {log.status}; eval.packages: {packages}; "
        f"eval.inspect_version? {getattr(log.eval, 'inspect_version', 'absent')}",
        "",
        "| tool | argument names | events between call and result | setup | rpc | work | error |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for sample in log.samples or []:
        lines.extend(_tool_rows(sample.events))
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log")
    print(describe(parser.parse_args().log))
