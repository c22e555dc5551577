"""pack: a reproducible tar.gz of a site, with SHA256SUMS beside it."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import FIRST_WAVE
from sandbox_replay.cli import app
from sandbox_replay.exports.pack import PackConfig, PackError, pack_bytes, source_date_epoch


def make_site(root: Path) -> Path:
    """Build a small site-like folder from the fixture files, in a scrambled creation order."""
    site = root / "site"
    (site / "runs" / "b").mkdir(parents=True)
    (site / "assets").mkdir()
    for path in sorted(FIRST_WAVE.glob("*.json"), reverse=True):
        shutil.copy(path, site / "runs" / "b" / path.name)
    (site / "index.html").write_text("<!doctype html><title>x</title>\n", "utf-8")
    (site / "assets" / "site.css").write_text("body{}\n", "utf-8")
    (site / "runs" / "é-unicode.html").write_text("ok\n", "utf-8")
    # What makes it a site ``build`` made, for ``pack`` (format: ``report.build._marker``).
    manifest = b'{"schema_version": "sandbox-replay.site/1"}\n'
    (site / "manifest.json").write_bytes(manifest)
    marker = {
        "tool": "sandbox-replay",
        "site_format": 1,
        "manifest_sha256": "sha256:" + hashlib.sha256(manifest).hexdigest(),
    }
    (site / "sandbox-replay-site.json").write_text(json.dumps(marker), "utf-8")
    return site


def test_packing_twice_gives_identical_bytes(tmp_path: Path) -> None:
    first = make_site(tmp_path / "one")
    second = make_site(tmp_path / "two")
    # Different owners' modes and times on the second copy must not matter.
    for path in second.rglob("*"):
        os.utime(path, (1_000_000, 1_000_000))
        if path.is_file():
            path.chmod(0o600)
    a = pack_bytes(PackConfig(first, tmp_path / "one" / "site.tar.gz"))
    b = pack_bytes(PackConfig(second, tmp_path / "two" / "site.tar.gz"))
    assert a == b
    assert a == pack_bytes(PackConfig(first, tmp_path / "one" / "site.tar.gz"))


def test_archive_entries_are_normalised(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    data = pack_bytes(PackConfig(site, tmp_path / "report.tar.gz", mtime=1_700_000_000))
    assert data[:2] == b"\x1f\x8b"
    assert data[3] & 0x08 == 0, "no file name in the gzip header"
    assert int.from_bytes(data[4:8], "little") == 1_700_000_000
    archive = tmp_path / "report.tar.gz"
    archive.write_bytes(data)
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names[0] == "report"
    assert names == ["report", *sorted(names[1:])]
    assert "report/runs/b/action_requests.json" in names
    for member in members:
        assert (member.uid, member.gid, member.uname, member.gname) == (0, 0, "", "")
        assert member.mtime == 1_700_000_000
        assert member.mode == (0o755 if member.isdir() else 0o644)
    assert gzip.decompress(data)  # a valid stream


def test_symlinks_are_refused(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    (site / "escape").symlink_to("/etc/hostname")
    with pytest.raises(PackError, match="symlink"):
        pack_bytes(PackConfig(site, tmp_path / "x.tar.gz"))


def test_archive_inside_the_site_is_refused(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    with pytest.raises(PackError, match="inside"):
        pack_bytes(PackConfig(site, site / "x.tar.gz"))


def test_source_date_epoch() -> None:
    assert source_date_epoch({}) == 0
    assert source_date_epoch({"SOURCE_DATE_EPOCH": "1700000000"}) == 1_700_000_000
    with pytest.raises(PackError):
        source_date_epoch({"SOURCE_DATE_EPOCH": "yesterday"})


def test_cli_writes_archive_and_sums(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = make_site(tmp_path)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    runner = CliRunner()
    result = runner.invoke(app, ["pack", str(site)])
    assert result.exit_code == 0, result.output
    archive = tmp_path / "site.tar.gz"
    sums = (tmp_path / "SHA256SUMS").read_text("utf-8")
    assert sums == f"{hashlib.sha256(archive.read_bytes()).hexdigest()}  site.tar.gz\n"
    first = archive.read_bytes()
    again = runner.invoke(app, ["pack", str(site), "--out", str(tmp_path / "out" / "site.tar.gz")])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "out" / "site.tar.gz").read_bytes() == first
    missing = runner.invoke(app, ["pack", str(tmp_path / "nope")])
    assert missing.exit_code == 2
