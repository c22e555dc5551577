"""Import AgentDojo run logs as bundle folders the replay reads (docs/agentdojo.md).

AgentDojo writes one JSON log per run, at
``<pipeline>/<suite>/<user_task>/<attack>/<injection_task>.json``. Each log is read with
the strict decoder of the replay's own inputs, its fields checked, and made one bundle
(``inspect_bundle.build_bundle``): each assistant tool call a request, labelled
``untrusted_tool_output`` once an earlier tool result carried one of the log's injection
texts, else ``trusted_user_request``; its tool result the side effect. What the benchmark
said of the run goes into the manifest's ``benchmark`` object. Bodies are read in memory
for the labels and the forbidden-material scan only: a bundle holds their digests.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_replay.importers.inspect_bundle import Bundle, Harness, build_bundle, safe_name
from sandbox_replay.importers.inspect_events import Effects, ToolCall, digest
from sandbox_replay.importers.inspect_logs import find_log_files, refuse_repeated
from sandbox_replay.importers.tool_map import (
    UNTRUSTED_TOOL_OUTPUT,
    ToolMap,
    packaged_map,
    read_tool_map,
)
from sandbox_replay.load.decode import parse_input, read_input
from sandbox_replay.load.files import LoadLimits
from sandbox_replay.load.scan import ForbiddenScanner

__all__ = [
    "AGENTDOJO",
    "AgentDojoImportError",
    "AgentDojoOptions",
    "find_logs",
    "import_logs",
    "is_agentdojo_log",
    "read_map",
]

PACKAGED_MAP = "agentdojo_tool_map.json"
TRUSTED_USER_REQUEST = "trusted_user_request"
# AgentDojo's suites name every tool that only reads so: its result is the whole effect.
READ_ONLY = ("get_*", "read_*", "search_*", "list_*", "check_*")
_TASK = re.compile(r"(user|injection)_task_\w+")
_RUN = re.compile(r"(none|injection_task_\w+)\.json")


def agentdojo_map() -> ToolMap:
    """Return the packaged map of the four AgentDojo suites' tools."""
    return packaged_map(PACKAGED_MAP)


AGENTDOJO = Harness(
    "agentdojo", "agentdojo", "policy:agentdojo_none_recorded", "agentdojo/1", agentdojo_map
)


def read_map(path: Path) -> ToolMap:
    """Read a user's map file, tried before the packaged map (``MapFileError`` if bad)."""
    return read_tool_map(path, packaged=False).extending(agentdojo_map())


class AgentDojoImportError(ValueError):
    """A log that cannot be imported; one line naming the file."""


@dataclass(frozen=True)
class AgentDojoOptions:
    """How logs become bundles: the map in force and the forbidden-material scanner."""

    tool_map: ToolMap = field(default_factory=agentdojo_map)
    scanner: ForbiddenScanner | None = None


def is_agentdojo_log(path: Path) -> bool:
    """Tell whether ``path`` is where AgentDojo writes a run log: ``<task>/<attack>/<run>.json``."""
    return (
        _RUN.fullmatch(path.name) is not None
        and _TASK.fullmatch(path.parent.parent.name) is not None
    )


def find_logs(paths: Sequence[Path]) -> list[Path]:
    """Return the run logs among ``paths`` and under its folders, sorted, each once."""
    return find_log_files(paths, is_agentdojo_log, AgentDojoImportError)


def import_logs(logs: Sequence[Path], options: AgentDojoOptions) -> list[Bundle]:
    """Read each log and return its bundle, one per run (nothing is written)."""
    scanner = options.scanner or ForbiddenScanner.default()
    return refuse_repeated(
        [_bundle(path, read_log(path), options.tool_map, scanner) for path in logs],
        AgentDojoImportError,
    )


def read_log(path: Path) -> dict[str, Any]:
    """Return a log's object, read strictly, with the fields the import uses checked."""
    limits = LoadLimits()
    raw, loaded = read_input(path.parent, path.name, limits)
    if raw is not None:
        loaded = parse_input(raw, loaded, None, limits)
    if loaded.data is None:
        message = loaded.findings[0].message if loaded.findings else "cannot be read"
        raise AgentDojoImportError(f"{path.parent / message}")
    log = loaded.data
    for key in ("suite_name", "pipeline_name", "user_task_id"):
        _expect(path, key, isinstance(log.get(key), str) and log[key] != "", "a non-empty string")
    for key in ("injection_task_id", "attack_type"):
        _expect(path, key, isinstance(log.get(key, ""), str | None), "a string or null")
    for key in ("utility", "security"):
        _expect(path, key, isinstance(log.get(key), bool), "true or false")
    injections = log.get("injections")
    texts_ok = isinstance(injections, dict) and all(isinstance(v, str) for v in injections.values())
    _expect(path, "injections", texts_ok, "an object of texts")
    messages = log.get("messages")
    listed = isinstance(messages, list) and all(isinstance(m, dict) for m in messages)
    _expect(path, "messages", listed, "a list of objects")
    return log


def _expect(path: Path, key: str, ok: bool, what: str) -> None:
    if not ok:
        raise AgentDojoImportError(f"{path}: {key} is missing or not {what}")


def _bundle(
    path: Path, log: dict[str, Any], tool_map: ToolMap, scanner: ForbiddenScanner
) -> Bundle:
    parts = (log["user_task_id"], log.get("attack_type"), log.get("injection_task_id"))
    episode = "/".join(safe_name(part or "none") for part in parts)
    version = _text_or_none(log.get("agentdojo_package_version")) or "unknown"
    calls = list(_tool_calls(path, log, scanner))
    return build_bundle(
        safe_name(f"{log['pipeline_name']}-{log['suite_name']}-{episode.replace('/', '-')}"),
        task=safe_name(f"{log['pipeline_name']}/{log['suite_name']}"),
        harness_version=version,
        episodes=[(episode, calls)],
        tool_map=tool_map,
        teardown=False,
        prefixed=False,
        harness=AGENTDOJO,
        benchmark={
            "suite": log["suite_name"],
            "pipeline": log["pipeline_name"],
            "user_task_id": log["user_task_id"],
            "injection_task_id": log.get("injection_task_id"),
            "attack_type": log.get("attack_type"),
            "utility": log["utility"],
            "security": log["security"],
            "benchmark_version": _text_or_none(log.get("benchmark_version")),
            "agentdojo_version": version,
            # A run ends on the agent's reply; one that ends on a tool result was stopped
            # there, as when AgentDojo's detector aborts (its log records no error then).
            "stopped_after_tool_result": bool(log["messages"])
            and log["messages"][-1].get("role") == "tool",
        },
    )


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass
class _Call:
    """A tool call seen in an assistant message, and its tool result once one follows."""

    number: int
    call: dict[str, Any]
    result: dict[str, Any] | None = None
    injected_by: _Call | None = None  # the first call whose result carried an injection


def _tool_calls(path: Path, log: dict[str, Any], scanner: ForbiddenScanner) -> Iterator[ToolCall]:
    """Yield each assistant tool call of ``log`` in order, paired with its tool result."""
    injections = [_collapsed(text) for text in log["injections"].values() if text.strip()]
    calls: list[_Call] = []
    pending: list[_Call] = []
    injected: _Call | None = None
    for at, message in enumerate(log["messages"]):
        role = message.get("role")
        if role == "assistant":
            tool_calls = message.get("tool_calls") or []
            if not isinstance(tool_calls, list):
                raise AgentDojoImportError(f"{path}: messages[{at}].tool_calls is not a list")
            for call in tool_calls:
                _expect_call(path, at, call)
                pending.append(_Call(len(calls) + 1, call, injected_by=injected))
                calls.append(pending[-1])
        elif role == "tool":
            if not pending:
                raise AgentDojoImportError(f"{path}: messages[{at}] is a tool result of no call")
            answered = pending.pop(0)
            answered.result = message
            content = _collapsed(_text(message.get("content")))
            if injected is None and any(text in content for text in injections):
                injected = answered
    previous: _Call | None = None
    for seen in calls:
        yield _tool_call(seen, previous, scanner)
        previous = seen


def _expect_call(path: Path, at: int, call: Any) -> None:
    ok = isinstance(call, dict) and isinstance(call.get("function"), str)
    ok = ok and isinstance(call.get("args", {}), dict)
    if not ok:
        raise AgentDojoImportError(
            f"{path}: messages[{at}] has a tool call without a function name and arguments"
        )


def _tool_call(seen: _Call, previous: _Call | None, scanner: ForbiddenScanner) -> ToolCall:
    function, arguments = seen.call["function"], seen.call.get("args") or {}
    source = seen.injected_by or previous
    output = None if seen.result is None else {k: seen.result.get(k) for k in ("content", "error")}
    read_only = any(fnmatch.fnmatchcase(function, glob) for glob in READ_ONLY)
    if seen.result is None:
        effects = Effects()
    else:
        effects = Effects(reads=1) if read_only else Effects(unknown=1)
    counts, _ = scanner.scan_bytes(
        "\n".join([_json_text(arguments), _json_text(output)]).encode("utf-8", "surrogatepass")
    )
    return ToolCall(
        call_id=_call_id(seen),
        function=function,
        arguments=dict(arguments),
        kept_as_recorded=(),
        previous_function=None if previous is None else previous.call["function"],
        # The output the call follows: the one that carried the injection, once one did.
        previous_output_ref=_call_id(source) if source is not None else None,
        decision=None,
        approver="",
        pre_execution=False,
        effects=effects,
        arguments_sha256=digest(arguments),
        output_sha256=digest(output),
        matches=dict(counts),
        trust_label=TRUSTED_USER_REQUEST if seen.injected_by is None else UNTRUSTED_TOOL_OUTPUT,
    )


def _call_id(seen: _Call) -> str:
    recorded = seen.call.get("id")
    return safe_name(recorded) if isinstance(recorded, str) and recorded else f"call_{seen.number}"


def _text(content: Any) -> str:
    """Return a message's text: AgentDojo writes a string, or a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return _text(content.get("content"))
    if isinstance(content, list):
        return "\n".join(_text(block) for block in content)
    return ""


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _collapsed(text: str) -> str:
    """Return ``text`` with each run of white space one space: tools re-wrap what they show."""
    return " ".join(text.split())
