"""The code keeps the size a newcomer can carry: issue #42's budgets, checked on every run.

No module over 500 lines, and no function over 80 lines (a typer command's option
declarations excepted: a command's signature is counted apart from its body). A module or
function that outgrows these is split along a real seam.

The issue's budget for the whole of ``src/`` is 18,000 lines; it is not met yet.
``MAX_SOURCE_LINES`` is a ratchet just above what the tree has now: lower it when code goes;
a feature that cannot take its lines back elsewhere raises it in a commit of its own that
says why.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "sandbox_replay"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "templates" not in p.parts)
MAX_SOURCE_LINES = 23_029
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def _lines(path: Path) -> int:
    return len(path.read_text("utf-8").splitlines())


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef, command: bool) -> int:
    """Return a function's length; for a CLI command, only its body (docstring included)."""
    start = node.body[0].lineno if command else node.lineno
    assert node.end_lineno is not None
    return node.end_lineno - start + 1


def _is_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Say whether a function is registered as a typer command or callback."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and target.attr in {"command", "callback"}:
            return True
    return False


def long_functions(path: Path) -> list[str]:
    """Return ``name (N lines)`` for each function of a module over the budget."""
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = body_lines(node, _is_command(node))
            if length > MAX_FUNCTION_LINES:
                found.append(f"{node.name} ({length} lines)")
    return found


def test_the_source_fits_its_budget() -> None:
    total = sum(_lines(path) for path in MODULES)
    assert total <= MAX_SOURCE_LINES, (
        f"src/ has {total} lines (ratchet {MAX_SOURCE_LINES}; the budget is 18,000)"
    )


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_module_outgrows_its_budget(path: Path) -> None:
    assert _lines(path) <= MAX_MODULE_LINES
    assert long_functions(path) == []


def test_the_budget_sees_a_long_function(tmp_path: Path) -> None:
    module = tmp_path / "sample.py"
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    module.write_text(
        f"def long():\n{body}\n\n@app.command()\ndef cmd(\n    a: int,\n):\n    pass\n"
    )
    assert long_functions(module) == [f"long ({MAX_FUNCTION_LINES + 1} lines)"]
