"""A scripted history of three builds over a copy of the built-in fixtures.

Build v1 is the fixtures as they are. Before v2, one failing scenario is fixed
(``missing_verdict_row`` gets its verdict row back), a new failing scenario is added
(``new_failure``, a copy of ``allow_network_exfil_executed``) and one input is edited
without changing what it says (``first_wave/action_requests.json`` re-indented). Before
v3, the passing ``exported_bundle`` is broken the way ``allow_network_exfil_executed`` is
(a regression) and ``blocked_action_left_diff`` moves to another folder. Each build is
given the one before as ``--baseline``; v2 is given it as a ``pack`` archive.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from conftest import FIXTURES, working_directory
from sandbox_replay.cli import app

BROKEN = "allow_network_exfil_executed"


@dataclass(frozen=True)
class History:
    root: Path  # the working directory every build ran in

    def site(self, version: str) -> Path:
        return self.root / version

    def out(self, name: str) -> Path:
        return self.root / "out" / name


def cli(root: Path, *args: str) -> tuple[int, str, str]:
    """Run the command line in ``root``; return its exit code, stdout and stderr."""
    with working_directory(root):
        result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _build(root: Path, version: str, *extra: str) -> None:
    code, _, err = cli(
        root,
        "build",
        "fixtures",
        "--out",
        version,
        "--label",
        version,
        "--jobs",
        "1",
        "--sarif",
        f"out/{version}.sarif",
        "--markdown",
        f"out/{version}.md",
        *extra,
    )
    assert code == 0, err


def make_history(root: Path) -> History:
    """Build v1, v2 and v3 in ``root`` (see the module docstring)."""
    fixtures = root / "fixtures"
    shutil.copytree(FIXTURES, fixtures)
    (root / "out").mkdir()
    _build(root, "v1")
    code, _, err = cli(root, "pack", "v1", "--out", "out/v1.tar.gz")
    assert code == 0, err

    scenarios = fixtures / "scenarios"
    bundle = fixtures / "bundles" / "exported_bundle"
    shutil.copy(bundle / "policy_verdicts.json", scenarios / "missing_verdict_row")
    shutil.copytree(scenarios / BROKEN, scenarios / "new_failure")
    requests = fixtures / "first_wave" / "action_requests.json"
    requests.write_text(json.dumps(json.loads(requests.read_text("utf-8")), indent=4) + "\n")
    _build(root, "v2", "--baseline", "out/v1.tar.gz")

    for name in ("policy_verdicts.json", "side_effect_receipts.json"):
        shutil.copy(scenarios / BROKEN / name, bundle / name)
    (fixtures / "moved").mkdir()
    (scenarios / "blocked_action_left_diff").rename(fixtures / "moved" / "blocked_action_left_diff")
    _build(root, "v3", "--baseline", "v2")
    return History(root)
