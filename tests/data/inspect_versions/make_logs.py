"""Make a small offline Inspect AI log of the standard tools with the installed Inspect.

Run it with the Python of a venv that has one Inspect release installed; it writes
``<version>.eval`` beside this file (or in ``--out-dir``). See README.md here.

One sample, a scripted mock model (no provider, no network) and the local sandbox; every
call is approved by an approval policy, so approval events are recorded. The calls use the
argument names the installed release's tools declare (``bash``'s ``cmd`` or ``command``,
``text_editor``'s ``new_str`` or ``insert_text`` for ``insert``). A tool the release lacks is
left out. Tools that need Inspect's tool support in the sandbox, a browser or a search
provider fail under the local sandbox, as they would for a real model: Inspect records the
call and the error. An error Inspect would let end the sample (its ``PrerequisiteError``
for a missing tool-support sandbox or search key) is turned into a ``ToolError`` by a guard
that keeps the tool's name and parameters, so the sample goes on to the next call.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import inspect_ai
import inspect_ai.tool as standard
from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.approval import ApprovalPolicy, auto_approver
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelAPI, ModelOutput, get_model, modelapi
from inspect_ai.model._providers.mockllm import MockLLM
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import Tool, ToolDef, ToolError

MODEL = "offline_mock/scripted"
HERE = Path(__file__).resolve().parent
# A fixed folder outside the local sandbox's random one, for text_editor's absolute paths.
WORK = Path(f"/tmp/inspect-versions-work-{inspect_ai.__version__}")
NOTES = str(WORK / "notes.txt")
# Errors Inspect itself turns into a tool error; the guard lets them through untouched.
HANDLED: tuple[type[BaseException], ...] = (
    ToolError,
    TimeoutError,
    UnicodeDecodeError,
    PermissionError,
    FileNotFoundError,
    IsADirectoryError,
)


@modelapi(name="offline_mock")
def offline_mock() -> type[ModelAPI]:
    """Register the mock provider with token counts that need no download."""

    class OfflineMock(MockLLM):
        async def count_text_tokens(self, text: str) -> int:
            return len(text) // 4 + 1

    return OfflineMock


def _guarded(tool: Tool) -> Tool:
    """Return the tool with its name and parameters, its unhandled errors as ToolError."""
    definition = ToolDef(tool)
    inner = definition.tool

    @functools.wraps(inner)
    async def execute(*args: Any, **kwargs: Any) -> Any:
        try:
            return await inner(*args, **kwargs)
        except HANDLED:
            raise
        except Exception as ex:
            if type(ex).__name__ in ("OutputLimitExceededError", "LimitExceededError"):
                raise
            # A retrying client's RetryError names a memory address: report its cause.
            cause = ex.last_attempt.exception() if hasattr(ex, "last_attempt") else ex
            raise ToolError(f"{type(cause).__name__}: {cause}") from ex

    return ToolDef(
        execute,
        name=definition.name,
        description=definition.description,
        parameters=definition.parameters,
        parallel=definition.parallel,
    ).as_tool()


def _web_search() -> Tool:
    """Return web_search with Tavily, made to fail fast offline.

    Releases that check the key only when called fail there with no key. Older ones want it
    to construct the tool: they get a placeholder key and a proxy on a closed local port, so
    the search is refused at once without leaving the machine.
    """
    try:
        return standard.web_search("tavily")
    except Exception as ex:
        if type(ex).__name__ != "PrerequisiteError":
            raise
    os.environ["TAVILY_API_KEY"] = "offline-placeholder"
    os.environ["HTTPS_PROXY"] = "http://127.0.0.1:9"
    return standard.web_search("tavily")


# Tools left out of a release because their call never returns under the local sandbox
# (0.3.135's bash_session: the exec of the injected tool-support binary never ends).
HANGS = {"0.3.135": {"bash_session"}}


# web_browser tools no call uses: not offered, to keep the log small (every model event
# lists the tools offered).
UNUSED = {
    f"web_browser_{n}" for n in ("type_submit", "type", "scroll", "back", "forward", "refresh")
}


def _tools() -> dict[str, Tool]:
    """Construct every standard tool this release has, by the name a model calls."""
    factories: dict[str, Any] = {
        "bash": lambda: standard.bash(timeout=30),
        "python": lambda: standard.python(timeout=30),
        "bash_session": standard.bash_session,
        "text_editor": lambda: standard.text_editor(timeout=30),
        "think": standard.think,
        "web_browser": standard.web_browser,
        "web_search": _web_search,
        "computer": standard.computer,
        # Tools only newer releases have.
        "code_execution": lambda: standard.code_execution(),
        "grep": lambda: standard.grep(),
        "list_files": lambda: standard.list_files(),
        "read_file": lambda: standard.read_file(),
        "memory": lambda: standard.memory(),
        "todo_write": lambda: standard.todo_write(),
        "update_plan": lambda: standard.update_plan(),
        "notify_user": lambda: standard.notify_user(),
    }
    tools: dict[str, Tool] = {}
    for name, factory in factories.items():
        if not hasattr(standard, name) or name in HANGS.get(inspect_ai.__version__, ()):
            continue
        made = factory()
        for one in made if isinstance(made, list) else [made]:
            if ToolDef(one).name not in UNUSED:
                tools[ToolDef(one).name] = _guarded(one)
    return tools


def _params(tool: Tool) -> list[str]:
    return list(ToolDef(tool).parameters.properties)


def _calls(tools: dict[str, Tool]) -> list[tuple[str, str, dict[str, Any]]]:
    """Return the scripted calls (id, tool, arguments) for the tools of this release."""
    shell = "command" if "command" in _params(tools["bash"]) else "cmd"
    insert = "insert_text" if "insert_text" in _params(tools["text_editor"]) else "new_str"
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("call_ls", "bash", {shell: "ls -a"}),
        ("call_curl", "bash", {shell: "curl --silent --max-time 2 http://127.0.0.1:9/"}),
        ("call_write", "bash", {shell: "echo hello > written.txt"}),
        ("call_python", "python", {"code": "print(2 + 2)"}),
        ("call_view", "text_editor", {"command": "view", "path": str(WORK)}),
        ("call_create", "text_editor", {"command": "create", "path": NOTES, "file_text": "a\n"}),
        (
            "call_replace",
            "text_editor",
            {"command": "str_replace", "path": NOTES, "old_str": "a", "new_str": "b"},
        ),
        (
            "call_insert",
            "text_editor",
            {"command": "insert", "path": NOTES, "insert_line": 1, insert: "c"},
        ),
        ("call_think", "think", {"thought": "The notes file is ready."}),
        ("call_go", "web_browser_go", {"url": "https://example.com"}),
        ("call_click", "web_browser_click", {"element_id": 1}),
        ("call_search", "web_search", {"query": "inspect ai sandbox"}),
        ("call_screenshot", "computer", {"action": "screenshot"}),
        ("call_session", "bash_session", {"action": "type_submit", "input": "pwd"}),
        ("call_code", "code_execution", {"code": "print(1)"}),
        ("call_grep", "grep", {"pattern": "hello", "path": "."}),
        ("call_list", "list_files", {"path": "."}),
        ("call_read", "read_file", {"file_path": "written.txt"}),
        ("call_memory", "memory", {"command": "view", "path": "/memories"}),
        ("call_todo", "todo_write", {"todos": [{"content": "tidy", "status": "pending"}]}),
        ("call_plan", "update_plan", {"plan": [{"step": "tidy", "status": "pending"}]}),
        ("call_notify", "notify_user", {"title": "done", "message": "Tidied."}),
    ]
    return [call for call in calls if call[1] in tools]


def standard_tools_task(tools: dict[str, Tool]) -> Task:
    """Return the one-sample task that offers every tool, all calls approved."""
    return Task(
        name="standard_tools",
        dataset=[Sample(id="standard_tools", input="Use each of your tools once.")],
        solver=[use_tools(*tools.values()), generate()],
        sandbox="local",
        approval=[ApprovalPolicy(auto_approver("approve"), "*")],
    )


def make_log(out_dir: Path, display: Any = "none") -> Path:
    """Run the task offline and write ``<inspect version>.eval`` in ``out_dir``."""
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    tools = _tools()
    outputs = [
        ModelOutput.for_tool_call(MODEL, function, arguments, tool_call_id=call_id)
        for call_id, function, arguments in _calls(tools)
    ]
    model = get_model(MODEL, custom_outputs=[*outputs, ModelOutput.from_content(MODEL, "done")])
    out = out_dir / f"{inspect_ai.__version__}.eval"
    with tempfile.TemporaryDirectory(prefix="inspect-versions-") as folder:
        log = inspect_eval(
            standard_tools_task(tools),
            model=model,
            log_dir=folder,
            log_format="eval",
            display=display,
        )[0]
        if log.status != "success":
            raise RuntimeError(f"the task ended {log.status}: {log.error}")
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log.location, out)
    shutil.rmtree(WORK, ignore_errors=True)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=HERE)
    parser.add_argument("--display", default="none", help="Inspect's display, e.g. plain")
    args = parser.parse_args()
    print(make_log(args.out_dir, args.display))
