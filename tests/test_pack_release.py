"""pack as a release step (issue #26, 5): only a built site, a merged SHA256SUMS, the umask.

Also the umask for the other files written through ``atomic``: records and exports.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import FIRST_WAVE
from sandbox_replay.cli import app
from sandbox_replay.exports.pack import PackConfig, PackError, pack_site
from sandbox_replay.report.build import MANIFEST, SITE_MARKER, BuildConfig, build_site

runner = CliRunner()


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site ``build`` made from the first-wave fixture (shared: copy it before changing it)."""
    root = tmp_path_factory.mktemp("built")
    shutil.copytree(FIRST_WAVE, root / "runs" / "first_wave")
    build_site(
        BuildConfig((root / "runs",), root / "site", cwd=root, progress=lambda _: None, jobs=1)
    )
    return root / "site"


@pytest.fixture
def site(built_site: Path, tmp_path: Path) -> Path:
    """A copy of the built site in this test's own folder."""
    return Path(shutil.copytree(built_site, tmp_path / "site"))


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_built_site_packs(site: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["pack", str(site)])
    assert result.exit_code == 0, result.output
    archive = tmp_path / "site.tar.gz"
    assert (tmp_path / "SHA256SUMS").read_text("utf-8") == f"{_sha256(archive)}  site.tar.gz\n"


@pytest.mark.parametrize("what", ["no marker", "no manifest", "manifest changed", "bad marker"])
def test_a_folder_that_is_not_a_built_site_is_refused(
    site: Path, tmp_path: Path, what: str
) -> None:
    if what == "no marker":
        (site / SITE_MARKER).unlink()
    elif what == "no manifest":
        (site / MANIFEST).unlink()
    elif what == "manifest changed":
        with (site / MANIFEST).open("ab") as handle:
            handle.write(b" ")
    else:
        (site / SITE_MARKER).write_text('{"tool": "someone-else"}\n', "utf-8")
    result = runner.invoke(app, ["pack", str(site)])
    assert result.exit_code == 2, result.output
    assert SITE_MARKER in result.output
    assert not (tmp_path / "site.tar.gz").exists()
    assert not (tmp_path / "SHA256SUMS").exists()


def test_any_folder_is_refused_by_the_library_too(tmp_path: Path) -> None:
    folder = tmp_path / "home"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a site\n", "utf-8")
    with pytest.raises(PackError, match=SITE_MARKER):
        pack_site(PackConfig(folder, tmp_path / "home.tar.gz"))
    assert not (tmp_path / "home.tar.gz").exists()


@pytest.mark.parametrize("name", ["SHA256SUMS", "sub/SHA256SUMS"])
def test_an_archive_named_sha256sums_is_refused(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["pack", str(site), "--out", name])
    assert result.exit_code == 2, result.output
    assert "SHA256SUMS" in result.output
    assert not (tmp_path / name).exists()


def test_an_existing_sha256sums_is_merged_line_by_line(site: Path, tmp_path: Path) -> None:
    sums = tmp_path / "SHA256SUMS"
    other = "a" * 64 + "  other-tool.whl\n"
    later = "b" * 64 + "  zz-notes.txt\n"
    stale = "0" * 64 + "  site.tar.gz\n"
    sums.write_text(later + stale + other, "utf-8")
    result = runner.invoke(app, ["pack", str(site)])
    assert result.exit_code == 0, result.output
    fresh = f"{_sha256(tmp_path / 'site.tar.gz')}  site.tar.gz\n"
    # Every other artifact's line kept as it was; this archive's replaced; sorted by name.
    assert sums.read_text("utf-8") == other + fresh + later
    again = runner.invoke(app, ["pack", str(site)])
    assert again.exit_code == 0, again.output
    assert sums.read_text("utf-8") == other + fresh + later


def test_a_malformed_sha256sums_is_refused_not_rewritten(site: Path, tmp_path: Path) -> None:
    sums = tmp_path / "SHA256SUMS"
    sums.write_text("this is not a checksum line\n", "utf-8")
    result = runner.invoke(app, ["pack", str(site)])
    assert result.exit_code == 2, result.output
    assert "SHA256SUMS" in result.output
    assert sums.read_text("utf-8") == "this is not a checksum line\n"
    assert not (tmp_path / "site.tar.gz").exists()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask_022")
def test_archive_and_sums_honour_the_umask(site: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["pack", str(site)])
    assert result.exit_code == 0, result.output
    assert _mode(tmp_path / "site.tar.gz") == 0o644
    assert _mode(tmp_path / "SHA256SUMS") == 0o644


@pytest.mark.usefixtures("umask_022")
def test_records_and_exports_honour_the_umask(tmp_path: Path) -> None:
    out = tmp_path / "records"
    exports = {
        flag: tmp_path / name
        for flag, name in [("--sarif", "r.sarif"), ("--junit", "r.xml"), ("--markdown", "r.md")]
    }
    args = ["run", "-i", str(FIRST_WAVE), "-o", str(out)]
    for flag, path in exports.items():
        args += [flag, str(path)]
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    written = [p for p in out.rglob("*") if p.is_file()] + list(exports.values())
    assert len(written) > 3
    assert {p.name: _mode(p) for p in written} == {p.name: 0o644 for p in written}


@pytest.mark.parametrize("umask", [0o077, 0o002])
def test_the_umask_is_read_not_assumed(tmp_path: Path, umask: int) -> None:
    from sandbox_replay.atomic import write_bytes_atomic

    old = os.umask(umask)
    try:
        write_bytes_atomic(tmp_path / "record.json", b"{}\n")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "record.json") == 0o666 & ~umask
