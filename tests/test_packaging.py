"""The release files (issue #26, 6): licence, metadata, the format contract, sdist and wheel.

The sdist and the wheel are built once, as a release would (``python -m build``: the
sdist, then the wheel from the sdist, each in an isolated environment).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest

from conftest import REPO


@dataclass(frozen=True)
class Dists:
    sdist: Path
    wheel: Path
    log: str


def _one(paths: list[Path]) -> Path:
    assert len(paths) == 1, paths
    return paths[0]


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    return Dists(_one(list(out.glob("*.tar.gz"))), _one(list(out.glob("*.whl"))), log)


def _sdist_names(sdist: Path) -> set[str]:
    with tarfile.open(sdist) as tar:
        return {name.partition("/")[2] for name in tar.getnames()}


def test_the_sdist_holds_what_its_tests_read(dists: Dists) -> None:
    names = _sdist_names(dists.sdist)
    for needed in (
        "LICENSE",
        "README.md",
        "pyproject.toml",
        "tests/conftest.py",
        "tests/test_packaging.py",
        "fixtures/first_wave/action_requests.json",
        "fixtures/bundles/exported_bundle/bundle_manifest.json",
        "schemas/result.schema.json",
        "templates/base.html",
        "docs/FORMAT.md",
        "site/manifest.json",  # the golden site tests/test_site_golden.py compares with
        "benchmarks/bench_build.py",
        "src/sandbox_replay/FORMAT.md",
    ):
        assert needed in names, f"the sdist lacks {needed}"
    assert not [name for name in names if "__pycache__" in name or "/.cache/" in name]


def test_the_wheel_builds_without_setuptools_warnings(dists: Dists) -> None:
    warnings = re.findall(
        r"^.*(?:Setuptools\w*Warning|is absent from the `packages` configuration).*$",
        dists.log,
        re.MULTILINE,
    )
    assert warnings == []


def test_the_wheel_carries_the_licence_metadata_and_data(dists: Dists) -> None:
    with zipfile.ZipFile(dists.wheel) as wheel:
        names = set(wheel.namelist())
        info = _one([n for n in names if n.endswith(".dist-info/METADATA")]).rpartition("/")[0]
        licence = wheel.read(f"{info}/licenses/LICENSE")
        metadata = wheel.read(f"{info}/METADATA").decode("utf-8")
    assert licence == (REPO / "LICENSE").read_bytes()
    assert b"Apache License" in licence and b"END OF TERMS AND CONDITIONS" in licence
    head, _, description = metadata.partition("\n\n")
    # The long description (docs/PYPI.md) has no image and no link relative to the repository.
    assert description.startswith("# sandbox-replay")
    assert "![" not in description and "](docs/" not in description
    assert "License-Expression: Apache-2.0" in head
    assert "Author: sandbox-replay contributors" in head
    assert "Classifier: Programming Language :: Python :: 3.11" in head
    assert "Project-URL: Source, " in head
    assert re.search(r"^Requires-Dist: msgspec<\d", head, re.MULTILINE), "msgspec is bounded"
    # typer is not capped in the package (a shared environment is never downgraded); the
    # project's own environments are held at 0.28 by constraints.txt, which make uses.
    [typer] = re.findall(r"^Requires-Dist: (typer\S*)$", head, re.MULTILINE)
    assert "<" not in typer
    assert "typer>=0.28,<0.29" in (REPO / "constraints.txt").read_text("utf-8")
    assert "-c constraints.txt" in (REPO / "Makefile").read_text("utf-8")
    for data in (
        "sandbox_replay/FORMAT.md",
        "sandbox_replay/checks/confusables.txt",
        "sandbox_replay/checks/confusables-LICENSE.txt",
        "sandbox_replay/data/policy_table.json",
        "sandbox_replay/data/codes/SANDBOX_POLICY_BLOCKED_ACTION_EXECUTED.md",
        "sandbox_replay/templates/base.html",
        "sandbox_replay/templates/assets/site.css",
    ):
        assert data in names, f"the wheel lacks {data}"


def test_the_format_contract_copies_are_identical() -> None:
    docs = (REPO / "docs" / "FORMAT.md").read_bytes()
    assert (REPO / "src" / "sandbox_replay" / "FORMAT.md").read_bytes() == docs
    assert (resources.files("sandbox_replay") / "FORMAT.md").read_bytes() == docs


def test_readme_cites_no_path_outside_the_repo() -> None:
    readme = (REPO / "README.md").read_text("utf-8")
    assert "../" not in readme
    assert "shared/spec" not in readme
    assert "`docs/FORMAT.md`" in readme
    cited = set(
        re.findall(r"`((?:docs|src|tests|fixtures|schemas|templates)/[\w./-]+\.\w+)`", readme)
    )
    missing = sorted(path for path in cited if not (REPO / path).exists())
    assert missing == [], f"README cites files the repository does not hold: {missing}"
