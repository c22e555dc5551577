"""No module imports one above it: the engine knows nothing of exports, exports nothing of pages.

The order, lowest first: the engine (loading, layers, trace, records, the headline), then
``drawing`` (SVG shared by pages and exports), then ``exports``, then ``report``, then the
command line. A module may import from its own level or any lower one, never higher,
so the exports can be used (and read) without the report site, and the engine without
either.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "sandbox_replay"
LEVELS = {"drawing": 1, "exports": 2, "report": 3, "cli": 4}


def level_of(module: str) -> int:
    """Return the level of ``sandbox_replay.<first part>...`` (the engine is 0)."""
    parts = module.split(".")
    return LEVELS.get(parts[1], 0) if len(parts) > 1 else 0


def imported(path: Path) -> set[str]:
    """Return the sandbox_replay modules a file imports, at any place in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "sandbox_replay":  # from sandbox_replay import codes, ...
                names = [f"sandbox_replay.{alias.name}" for alias in node.names]
            else:
                names = [node.module]
            found.update(n for n in names if n.startswith("sandbox_replay."))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("sandbox_replay."))
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_module_imports_a_higher_level(path: Path) -> None:
    relative = path.relative_to(PACKAGE).with_suffix("")
    own = level_of("sandbox_replay." + ".".join(relative.parts))
    higher = sorted(m for m in imported(path) if level_of(m) > own)
    assert higher == [], f"{relative} imports from a higher level: {higher}"


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "sample.py"
    module.write_text("from sandbox_replay.report.views import RunView\n", "utf-8")
    assert imported(module) == {"sandbox_replay.report.views"}
    assert level_of("sandbox_replay.report.views") == LEVELS["report"]
