"""build --scheduler: the runs are replayed and rendered on a Dask cluster, same bytes."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from distributed import LocalCluster

from conftest import FIXTURES, REPO, project_policies
from sandbox_replay.report.build import BuildConfig, build_site
from sandbox_replay.report.parallel import SchedulerError

pytestmark = pytest.mark.dask


def quiet(message: str) -> None:
    """Swallow progress lines in tests."""


def tree(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    with LocalCluster(
        n_workers=2,
        processes=True,
        threads_per_worker=1,
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:
        yield str(cluster.scheduler_address)


def test_a_build_on_the_cluster_equals_a_local_build(tmp_path: Path, scheduler: str) -> None:
    local, remote = tmp_path / "local", tmp_path / "remote"
    # The project's policies: the Cedar scenario's policy travels to the workers too.
    policies = project_policies()
    build_site(BuildConfig((FIXTURES,), local, cwd=REPO, progress=quiet, jobs=1, policies=policies))
    lines: list[str] = []
    result = build_site(
        BuildConfig(
            (FIXTURES,),
            remote,
            cwd=REPO,
            progress=lines.append,
            scheduler=scheduler,
            policies=policies,
        )
    )
    assert tree(remote) == tree(local)
    assert "on the Dask scheduler" in lines[-1]
    assert result.reused == 0


def test_the_cli_builds_through_the_scheduler(tmp_path: Path, scheduler: str) -> None:
    out = tmp_path / "site"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from sandbox_replay.cli import main; main()",
            "build",
            "fixtures/first_wave",
            "--out",
            str(out),
            "--scheduler",
            scheduler,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (out / "runs" / "first_wave" / "index.html").is_file()


def test_a_missing_extra_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(SchedulerError, match=r"sandbox-replay\[dask\]"):
        build_site(
            BuildConfig(
                (FIXTURES / "first_wave",),
                tmp_path / "site",
                cwd=REPO,
                progress=quiet,
                scheduler="tcp://127.0.0.1:1",
            )
        )
    assert not (tmp_path / "site").exists()
    assert not any(tmp_path.iterdir()), "a staging folder was left behind"
