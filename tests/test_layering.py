"""No module imports one above it: the model knows nothing of files, the checks nothing of
records, the exports nothing of pages.

The order, lowest first: the shared utilities (``atomic``, ``forking``, ``version``) and
the ``model`` (rows, codes, findings, policies), then ``load`` (reading a run's files),
``checks`` (the layers, the trace, the pipeline), ``records`` (what a replay is written
as), ``drawing`` (SVG shared by pages and exports), ``exports``, ``report``, and last the
command line and the package's own API. A module may import from its own level or any
lower one, never higher, so each part can be used (and read) without those above it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "sandbox_replay"
LEVELS = {
    "model": 0,
    "load": 1,
    "checks": 2,
    "importers": 2,
    "records": 3,
    "drawing": 4,
    "exports": 5,
    "report": 6,
    "cli": 7,
    "__init__": 7,
}


def level_of(module: str) -> int:
    """Return the level of ``sandbox_replay.<first part>...`` (a shared utility is 0)."""
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
