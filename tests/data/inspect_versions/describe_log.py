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

TRANSPORT = ("inspect-tool-support", "inspect_tool_support", "web_client.py")


def _event_label(event: Any) -> str:
    kind = event.event
    if kind == "sandbox":
        label = f"sandbox {event.action}"
        if event.action == "exec" and any(t in (event.cmd or "") for t in TRANSPORT):
            label += " (transport)"
        return label
    if kind == "approval":
        return f"approval {event.decision}"
    return kind


def _flat(events: list[Any]) -> list[Any]:
    """Return the events in order, with the events of each span or subtask inside it."""
    flat: list[Any] = []
    for event in events:
        flat.append(event)
        flat.extend(_flat(getattr(event, "events", None) or []))
    return flat


def _tool_rows(events: list[Any]) -> list[str]:
    """Return one table row per tool event: its own events, its transport, its error."""
    rows = []
    flat = _flat(events)
    for index, event in enumerate(flat):
        if event.event != "tool":
            continue
        inner = getattr(event, "events", None) or []
        if not inner:
            # Releases that record the tool's events after it, not inside it: take the
            # events up to the next model or tool event.
            for later in flat[index + 1 :]:
                if later.event in ("model", "tool"):
                    break
                inner.append(later)
        approvals = [
            e
            for e in flat[:index]
            if e.event == "approval" and getattr(e.call, "id", None) == event.id
        ]
        labels = [_event_label(e) for e in [*approvals, *_flat(inner)]]
        transport = sum(1 for label in labels if label.endswith("(transport)"))
        work = sum(
            1 for label in labels if label.startswith("sandbox") and "(transport)" not in label
        )
        error = f"{event.error.type}: {event.error.message[:70]!r}" if event.error else "-"
        rows.append(
            f"| {event.function} | {', '.join(event.arguments)} | {', '.join(labels) or '-'} "
            f"| {transport} | {work} | {error} |"
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
        "| tool | argument names | events between call and result | transport execs "
        "| other sandbox events | error |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for sample in log.samples or []:
        lines.extend(_tool_rows(sample.events))
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log")
    print(describe(parser.parse_args().log))
