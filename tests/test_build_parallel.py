"""Building with several processes gives the same bytes as building in one."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO
from sandbox_replay.report import parallel
from sandbox_replay.report.build import BuildConfig, build_site

sys.path.insert(0, str(REPO / "benchmarks"))

from generate_bundle import generate


def quiet(message: str) -> None:
    """Swallow progress lines in tests."""


def tree(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_two_jobs_build_the_same_site_as_one(tmp_path: Path) -> None:
    sites = {}
    for jobs in (1, 2):
        out = tmp_path / f"site-{jobs}"
        build_site(BuildConfig((FIXTURES,), out, cwd=REPO, progress=quiet, jobs=jobs))
        sites[jobs] = tree(out)
    assert sites[1] == sites[2]
    assert len(sites[1]) > 15


def test_a_large_run_shares_its_pages_between_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = generate(tmp_path / "in" / "big", 1100, seed=5, failing_fraction=0.1)
    single = tmp_path / "single"
    build_site(BuildConfig((bundle.parent,), single, cwd=tmp_path, progress=quiet, jobs=1))
    # Fork for even a handful of pages, so that these three join and three trace pages
    # are rendered by two processes.
    monkeypatch.setattr(parallel, "PAGES_PER_PROCESS", 1)
    forked = tmp_path / "forked"
    build_site(BuildConfig((bundle.parent,), forked, cwd=tmp_path, progress=quiet, jobs=2))
    assert tree(forked) == tree(single)
    assert any(name.endswith("trace/page-0003.html") for name in tree(forked))


def test_progress_names_every_run_once_and_sums_up(tmp_path: Path) -> None:
    lines: list[str] = []
    result = build_site(
        BuildConfig((FIXTURES,), tmp_path / "site", cwd=REPO, progress=lines.append, jobs=2)
    )
    names = sorted(
        line.split(" as runs/")[1].split(":")[0] for line in lines if " as runs/" in line
    )
    assert names == sorted(run.name for run in result.runs)
    assert lines[-1].startswith(f"{len(result.runs)} runs: {len(result.runs)} built, 0 reused")
