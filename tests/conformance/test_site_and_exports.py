"""The original's ``rollback/`` refs resolve on the site and in every export, not only in the layers."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from sandbox_replay.cli import app

from .cases import ORIGINAL_BUNDLE

VERIFIED_CELL = re.compile(
    r'<span class="cell-main">verified</span><span class="note">rollback/<wbr>rollback_'
)


def test_the_join_table_shows_each_prefixed_rollback_as_verified(tmp_path: Path) -> None:
    site = tmp_path / "site"
    built = CliRunner().invoke(
        app, ["build", str(ORIGINAL_BUNDLE), "--out", str(site), "--jobs", "1"]
    )
    assert built.exit_code == 0, built.output
    page = (site / "runs" / "original_bundle" / "index.html").read_text("utf-8")
    # The two executed requests name their rollback as rollback/<id>; both cells resolve.
    assert len(VERIFIED_CELL.findall(page)) == 2
    assert "row-gap" not in page


def test_every_export_of_the_original_bundle_is_clean(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sarif, junit, markdown = (tmp_path / name for name in ("r.sarif", "r.xml", "r.md"))
    done = CliRunner().invoke(
        app,
        [
            "run-sandbox-bundle",
            "--input",
            str(ORIGINAL_BUNDLE),
            "--out",
            str(out),
            "--sarif",
            str(sarif),
            "--junit",
            str(junit),
            "--markdown",
            str(markdown),
        ],
    )
    assert done.exit_code == 0, done.output
    [run] = json.loads(sarif.read_text("utf-8"))["runs"]
    assert run["results"] == []
    xml = junit.read_text("utf-8")
    assert 'failures="0"' in xml and "ROLLBACK" not in xml
    summary = markdown.read_text("utf-8")
    assert "2/2 verified" in summary and "ROLLBACK" not in summary
