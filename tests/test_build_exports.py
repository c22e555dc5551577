"""``BuildResult.export_runs`` and ``warnings``: what the exports need, from the build alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, REPO, project_policies
from sandbox_replay.exports import attach_changes
from sandbox_replay.report import inspect_runs
from sandbox_replay.report.build import BuildConfig, build_site
from sandbox_replay.report.discover import discover, exports_of
from sandbox_replay.report.inspect_runs import importing_logs


def _second_pass(config: BuildConfig, known: Any, root: Path | None) -> tuple[list[Any], list[str]]:
    """What the command line did after the build: import and discover everything again."""
    with importing_logs(config.paths, REPO, config.inspect, config.forbidden) as logs:
        return exports_of(discover(logs.paths, REPO).runs, known, root, logs.logs)


@pytest.mark.parametrize("inside", [True, False])
def test_the_build_gives_the_exports_runs_and_imports_each_log_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inside: bool
) -> None:
    imported: list[list[Path]] = []
    real_import = inspect_runs.import_logs

    def counted(logs: Any, options: Any) -> Any:
        imported.append(list(logs))
        return real_import(logs, options)

    monkeypatch.setattr(inspect_runs, "import_logs", counted)
    root = REPO if inside else tmp_path / "elsewhere"
    config = BuildConfig(
        (FIXTURES,),
        tmp_path / "site",
        cwd=REPO,
        progress=lambda line: None,
        policies=project_policies(),
        exports=True,
        export_root=root,
    )
    result = build_site(config)
    assert imported == [[FIXTURES / "inspect" / "example.eval"]]
    runs, warnings = _second_pass(config, result.exports, root)
    assert list(result.export_runs) == runs
    assert list(result.warnings) == warnings
    assert bool(warnings) is not inside
    assert [run.name for run in result.export_runs] == [run.name for run in result.runs]


def test_without_exports_asked_for_there_are_none(tmp_path: Path) -> None:
    scenario = FIXTURES / "scenarios" / "missing_verdict_row"
    result = build_site(BuildConfig((scenario,), tmp_path / "site", progress=lambda line: None))
    assert result.export_runs == () and result.warnings == ()


def test_the_exports_runs_carry_the_changes_since_a_baseline(tmp_path: Path) -> None:
    from sandbox_replay.report.baseline import read_baseline

    scenario = FIXTURES / "scenarios" / "missing_verdict_row"
    first = tmp_path / "first"
    build_site(BuildConfig((scenario,), first, progress=lambda line: None))
    result = build_site(
        BuildConfig(
            (scenario,),
            tmp_path / "second",
            progress=lambda line: None,
            baseline=read_baseline(first),
            exports=True,
        )
    )
    assert result.changes is not None
    plain = build_site(
        BuildConfig((scenario,), tmp_path / "third", progress=lambda line: None, exports=True)
    )
    assert list(result.export_runs) == attach_changes(plain.export_runs, result.changes)
