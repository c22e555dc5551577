"""``build --forbidden-classes``: the table blocks in the site, is recorded, and is checked.

The table is part of the evidence: a changed table rebuilds every run (never reuses a
verdict reached without it), and ``verify`` scans with the recorded table and names a
table that changed since the build.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from conftest import working_directory
from sandbox_replay.cli import app
from sandbox_replay.report.verify import VerifyConfig, verify_site

from .cases import ORIGINAL_BUNDLE, ORIGINAL_FORBIDDEN_CLASSES, edit_object, read

TOKEN = "TEAM_TICKET_BODY_MARKER_31"


def team_table(path: Path, token: str = TOKEN) -> None:
    table = read(ORIGINAL_FORBIDDEN_CLASSES)
    table["classes"].append(
        {
            "class_id": "team_private_ticket",
            "label": "Private ticket body",
            "remediation": "Name the ticket by ref.",
            "terms": [{"term_id": "ticket", "token": token}],
        }
    )
    path.write_text(json.dumps(table, indent=2), "utf-8")


def build(*options: str) -> Any:
    return CliRunner().invoke(app, ["build", "runs", "--out", "site", "--jobs", "1", *options])


def test_a_table_given_to_build_blocks_records_and_verifies(tmp_path: Path) -> None:
    shutil.copytree(ORIGINAL_BUNDLE, tmp_path / "runs" / "team_bundle")
    edit_object(tmp_path / "runs" / "team_bundle", "bundle_manifest.json", exporter_ref=TOKEN)
    team_table(tmp_path / "team_table.json")
    with working_directory(tmp_path):
        assert "0 blocked" in build().output
        built = build("--forbidden-classes", "team_table.json", "--fail-on", "blocked")
        assert built.exit_code == 1, built.output
        assert "as runs/team_bundle: pass (inputs unchanged)" not in built.output
        manifest = read(tmp_path / "site" / "manifest.json")
        recorded = manifest["forbidden_classes"]
        assert recorded["path"] == "team_table.json"
        assert recorded["sha256"].startswith("sha256:")
        [run] = manifest["runs"]
        assert run["status"] == "blocked"
        page = (tmp_path / "site" / "runs" / "team_bundle" / "index.html").read_text("utf-8")
        assert TOKEN not in page and "team_private_ticket" in page

        report = verify_site(VerifyConfig(Path("site"), None, progress=lambda _: None, jobs=1))
        assert report.ok, report.differences

        team_table(tmp_path / "team_table.json", "TEAM_TICKET_BODY_MARKER_32")
        report = verify_site(VerifyConfig(Path("site"), None, progress=lambda _: None, jobs=1))
        assert "forbidden-classes table changed since the site was built: team_table.json" in (
            report.differences
        )
        again = build("--forbidden-classes", "team_table.json")
        assert "(inputs unchanged)" not in again.output and "0 blocked" in again.output


def test_a_missing_table_is_a_usage_error_before_anything_is_built(tmp_path: Path) -> None:
    shutil.copytree(ORIGINAL_BUNDLE, tmp_path / "runs" / "team_bundle")
    with working_directory(tmp_path):
        outcome = build("--forbidden-classes", "no_such_table.json")
    assert outcome.exit_code == 2
    assert "no_such_table.json is not a file" in outcome.output
    assert not (tmp_path / "site").exists()
