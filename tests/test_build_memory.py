"""``build`` fits its number of processes to the memory the machine has available."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sandbox_replay.report import build as build_module
from sandbox_replay.report.build import BuildConfig, build_site
from sandbox_replay.report.memory import (
    BASE_BYTES,
    available_bytes,
    fit_jobs,
    input_bytes,
    need,
    run_need,
)

GB = 10**9
BUNDLE = Path(__file__).resolve().parents[1] / "fixtures" / "bundles" / "exported_bundle"


def test_a_run_needs_its_input_two_and_a_half_times_over_plus_a_base() -> None:
    assert run_need(0) == BASE_BYTES
    assert run_need(GB) == BASE_BYTES + 2.5 * GB
    assert run_need(GB, page_jobs=3) == BASE_BYTES + 2.5 * GB + 2 * 1.7 * GB


def test_several_runs_need_the_largest_of_them_that_run_at_once() -> None:
    sizes = [1 * GB, 4 * GB, 2 * GB]
    assert need(sizes, 1) == run_need(4 * GB)
    assert need(sizes, 2) == run_need(4 * GB) + run_need(2 * GB)
    assert need(sizes, 8) == sum(run_need(size) for size in sizes)


def test_what_fits_is_left_alone() -> None:
    assert fit_jobs([GB, GB], 2, 100 * GB, explicit=False).note is None
    assert fit_jobs([GB, GB], 2, 100 * GB, explicit=False).jobs == 2
    assert fit_jobs([GB, GB], 2, None, explicit=False).jobs == 2  # nothing to check against
    assert fit_jobs([], 4, 1, explicit=False).jobs == 4  # nothing to build


def test_the_default_jobs_shrink_to_what_fits_and_say_so() -> None:
    sizes = [GB] * 4  # each ~2.56 GB
    fit = fit_jobs(sizes, 4, 6 * GB, explicit=False)
    assert fit.jobs == 2
    assert fit.note is not None
    assert fit.note.startswith("using --jobs 2: --jobs 4 may need about 10.3 GB")
    assert "6.0 GB is available" in fit.note


def test_one_large_run_drops_its_page_helpers_first() -> None:
    fit = fit_jobs([GB], 2, 3 * GB, explicit=False)  # alone 2.56 GB, with a helper 4.26 GB
    assert fit.jobs == 1


def test_an_explicit_jobs_is_kept_with_a_warning() -> None:
    fit = fit_jobs([GB] * 4, 4, 6 * GB, explicit=True)
    assert fit.jobs == 4
    assert fit.note is not None
    assert fit.note.startswith("warning: --jobs 4 may need about 10.3 GB of memory")


def test_when_nothing_fits_one_process_is_used_with_a_warning() -> None:
    fit = fit_jobs([10 * GB, 10 * GB], 2, 4 * GB, explicit=False)
    assert fit.jobs == 1
    assert fit.note is not None
    assert fit.note.startswith("warning: using --jobs 1, which may still need about 25.1 GB")


def test_available_memory_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683408 kB\nMemAvailable:   20000000 kB\n")
    assert available_bytes(meminfo) == 20000000 * 1024
    meminfo.write_text("MemTotal:       24683408 kB\n")
    assert available_bytes(meminfo) is None
    meminfo.write_text("MemAvailable:   lots\n")
    assert available_bytes(meminfo) is None
    assert available_bytes(tmp_path / "absent") is None


def test_input_bytes_counts_the_files_of_the_run_folder_only(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_bytes(b"x" * 100)
    (tmp_path / "b.json").write_bytes(b"x" * 23)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.json").write_bytes(b"x" * 1000)
    (tmp_path / "link.json").symlink_to(tmp_path / "sub" / "c.json")
    assert input_bytes(tmp_path) == 123
    assert input_bytes(tmp_path / "absent") == 0


def test_a_build_short_of_memory_uses_fewer_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs"
    for name in ("one", "two", "three"):
        shutil.copytree(BUNDLE, runs / name)
    each = run_need(input_bytes(runs / "one"))
    monkeypatch.setattr(build_module, "available_bytes", lambda: 2 * each + 1)
    monkeypatch.setattr(build_module, "usable_cpus", lambda: 3)
    said: list[str] = []
    build_site(BuildConfig((runs,), tmp_path / "site", progress=said.append))
    assert any(line.startswith("using --jobs 2: --jobs 3 may need") for line in said), said
    assert said[-1].endswith("(--jobs 2)")
    assert (tmp_path / "site" / "runs" / "three" / "index.html").is_file()

    said.clear()
    build_site(BuildConfig((runs,), tmp_path / "site", progress=said.append, jobs=3, rebuild=True))
    assert any(line.startswith("warning: --jobs 3 may need") for line in said), said
    assert said[-1].endswith("(--jobs 3)")
