"""Attacks on the site folders that ``build``, ``verify`` and ``pack`` touch (issue #28: 9, 10, 12).

Each test first sets up the attack as it was reported, then checks the outcome: a
folder that is not this tool's site is never replaced, a symlinked ``--out`` leaves
nothing hidden behind, a hostile site or old status file is refused in bounded time and
memory, nothing outside the inputs root is read, a file swapped while packing never
reaches the archive, two builds into one ``--out`` never clash, and a full or read-only
disk is a one-line usage error. Commands that could hang or eat memory before the fix
run in a child process with a timeout and an address-space limit.
"""

from __future__ import annotations

import errno
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import FIRST_WAVE
from sandbox_replay import cli as cli_module
from sandbox_replay import runtime
from sandbox_replay.exports import pack
from sandbox_replay.exports.pack import PackConfig, PackError, pack_bytes
from sandbox_replay.report import verify
from sandbox_replay.report.build import MANIFEST, SITE_MARKER, BuildConfig, BuildError, build_site
from sandbox_replay.report.incremental import STATUS_FILE
from sandbox_replay.report.verify import VerifyConfig, verify_site

RUN = "first_wave"
TIMEOUT = 60  # seconds; a fixed build or verification takes one or two
MEMORY = 3 << 30  # address space of a child: reading /dev/zero whole would exceed it


def quiet(message: str) -> None:
    """Swallow progress lines in tests."""


def _build(root: Path, out: Path, *, rebuild: bool = False) -> None:
    build_site(
        BuildConfig((root / "runs",), out, cwd=root, progress=quiet, jobs=1, rebuild=rebuild)
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A folder holding one run's inputs under runs/ (the inputs root of its site)."""
    folder = tmp_path / "root"
    shutil.copytree(FIRST_WAVE, folder / "runs" / RUN)
    return folder


@pytest.fixture
def built(root: Path) -> Path:
    """``root`` with the run's site built into root/site."""
    _build(root, root / "site")
    return root


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the command line in a child, bounded in time and memory."""
    return subprocess.run(
        [sys.executable, "-c", "from sandbox_replay.cli import main; main()", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        preexec_fn=_limit_memory,
        check=False,
    )


def _no_crash(stderr: str) -> None:
    assert "Traceback" not in stderr
    assert "internal error" not in stderr and "This is a bug" not in stderr


def _tree(folder: Path) -> dict[str, bytes | str]:
    found: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            found[name] = "<not a file>"
        elif path.is_file():
            found[name] = path.read_bytes()
    return found


def _hidden_siblings(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


# ---------------------------------------------------------------------------------------
# 9. build --out replaces only a site this tool built


def _web_app(folder: Path, built: Path) -> None:
    (folder / MANIFEST).write_text('{"name": "My App", "start_url": "/", "display": "standalone"}')


def _copied_manifest(folder: Path, built: Path) -> None:
    # This tool's manifest, copied beside a user's own files: still not a site.
    shutil.copy(built / "site" / MANIFEST, folder / MANIFEST)


def _marker_of_another_manifest(folder: Path, built: Path) -> None:
    # The marker of a real site, copied beside another manifest: its digest does not match.
    shutil.copy(built / "site" / SITE_MARKER, folder / SITE_MARKER)
    (folder / MANIFEST).write_text('{"name": "My App"}')


@pytest.mark.parametrize(
    "plant", [_web_app, _copied_manifest, _marker_of_another_manifest], ids=lambda f: f.__name__
)
def test_build_refuses_a_folder_that_is_not_its_site(built: Path, plant: Any) -> None:
    folder = built.parent / "webapp"
    (folder / "static").mkdir(parents=True)
    (folder / "index.html").write_text("<p>my app</p>\n")
    (folder / "static" / "app.js").write_text("console.log('mine')\n")
    plant(folder, built)
    before = _tree(folder)
    with pytest.raises(BuildError, match="not a site this tool built"):
        _build(built, folder)
    assert _tree(folder) == before
    assert _hidden_siblings(folder) == []


def test_a_site_built_before_the_marker_is_still_replaced(built: Path) -> None:
    site = built / "site"
    (site / SITE_MARKER).unlink()
    _build(built, site, rebuild=True)
    assert (site / SITE_MARKER).is_file()
    marker = json.loads((site / SITE_MARKER).read_bytes())
    assert marker["tool"] == "sandbox-replay"


@pytest.mark.parametrize("target", ["empty folder", "folder with files", "dangling"])
def test_a_symlinked_out_is_replaced_cleanly(root: Path, target: str) -> None:
    pointed = root.parent / "pointed"
    if target != "dangling":
        pointed.mkdir()
    if target == "folder with files":
        (pointed / "keep.txt").write_text("mine\n")
    before = _tree(pointed) if pointed.exists() else None
    link = root.parent / "outlink"
    link.symlink_to(pointed, target_is_directory=True)
    _build(root, link)
    assert not link.is_symlink() and (link / "index.html").is_file()
    assert (link / SITE_MARKER).is_file()
    assert (_tree(pointed) if pointed.exists() else None) == before
    assert _hidden_siblings(link) == [], "a hidden folder or link was left beside --out"


# ---------------------------------------------------------------------------------------
# 10. hostile sites: verify and build open only regular files, bounded, inside the root


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to("/dev/zero")


def _deep(path: Path) -> None:
    path.write_bytes(b"[" * 100_000)


HOSTILE_FILES = {"fifo": _fifo, "symlink to /dev/zero": _dev_zero, "100,000 levels": _deep}


@pytest.mark.parametrize("kind", sorted(HOSTILE_FILES))
def test_verify_refuses_a_hostile_manifest_cleanly(built: Path, kind: str) -> None:
    HOSTILE_FILES[kind](built / "site" / MANIFEST)
    done = _cli(["verify", "site", "--inputs", "."], built)
    assert done.returncode == 1, done.stderr
    assert "cannot verify" in done.stderr and MANIFEST in done.stderr
    _no_crash(done.stderr)


@pytest.mark.parametrize("kind", sorted(HOSTILE_FILES))
def test_build_ignores_a_hostile_old_status_file(built: Path, kind: str) -> None:
    HOSTILE_FILES[kind](built / "site" / STATUS_FILE)
    done = _cli(["build", "runs", "--out", "site", "--jobs", "1"], built)
    assert done.returncode == 0, done.stderr
    _no_crash(done.stderr)
    status = built / "site" / STATUS_FILE
    assert not status.is_symlink() and status.is_file()
    assert json.loads(status.read_bytes())["runs"][0]["name"] == RUN


DOCTORED = {
    "absolute": ("/etc", {"passwd": "sha256:" + "0" * 64}),
    "climbing": ("../../../../../../../../etc", {"passwd": "sha256:" + "0" * 64}),
    "climbing to a copy": ("../outside", {"action_requests.json": "sha256:" + "0" * 64}),
    "symlink out": ("runs/escape", {"passwd": "sha256:" + "0" * 64}),
}


@pytest.mark.parametrize("kind", sorted(DOCTORED))
def test_verify_never_reads_outside_the_inputs_root(
    built: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, digests = DOCTORED[kind]
    shutil.copytree(FIRST_WAVE, built.parent / "outside")
    (built / "runs" / "escape").symlink_to("/etc", target_is_directory=True)
    manifest_path = built / "site" / MANIFEST
    manifest = json.loads(manifest_path.read_bytes())
    manifest["runs"][0]["source_path"] = source
    manifest["runs"][0]["input_digests"] = digests
    manifest_path.write_text(json.dumps(manifest))

    opened: list[Path] = []
    rebuilt_from: list[Path] = []
    real_open = verify.open_regular

    def spy_open(path: Path) -> Any:
        opened.append(Path(os.path.abspath(path)))
        return real_open(path)

    def spy_build(config: BuildConfig) -> None:
        rebuilt_from.extend(Path(os.path.abspath(p)) for p in config.paths)
        raise BuildError("stopped by the test")

    monkeypatch.setattr(verify, "open_regular", spy_open)
    monkeypatch.setattr(verify, "build_site", spy_build)
    report = verify_site(VerifyConfig(built / "site", built, progress=quiet, jobs=1))
    assert not report.ok
    assert any("outside the inputs root" in line for line in report.differences)
    root = built.resolve()
    read_outside = [p for p in opened if not p.resolve().is_relative_to(root)]
    assert read_outside == [], f"verify opened {read_outside}"
    assert [p for p in rebuilt_from if not p.resolve().is_relative_to(root)] == []


# ---------------------------------------------------------------------------------------
# 10. pack reads each file through the handle it checked


SECRET = b"OUTSIDE-SECRET-BYTES-never-in-an-archive\n"


def _small_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    (site / "runs" / "b").mkdir(parents=True)
    (site / "index.html").write_text("<p>site</p>\n")
    (site / "runs" / "b" / "index.html").write_text("<p>run</p>\n")
    return site


@pytest.mark.parametrize("swapped", ["index.html", "runs/b"])
def test_pack_never_archives_a_file_swapped_after_its_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swapped: str
) -> None:
    site = _small_site(tmp_path)
    outside = tmp_path / "outside"
    (outside / "b").mkdir(parents=True)
    (outside / "index.html").write_bytes(SECRET)
    (outside / "b" / "index.html").write_bytes(SECRET)
    real_entries = pack._entries

    def entries_then_swap(folder: Path) -> Any:
        found = real_entries(folder)
        target = site / swapped
        if target.is_dir():
            shutil.rmtree(target)
            target.symlink_to(outside / "b", target_is_directory=True)
        else:
            target.unlink()
            target.symlink_to(outside / "index.html")
        return found

    monkeypatch.setattr(pack, "_entries", entries_then_swap)
    try:
        data = pack_bytes(PackConfig(site, tmp_path / "site.tar.gz"))
    except PackError as error:
        assert "changed while" in str(error)
        return
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        contents = [
            tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        ]
    assert SECRET not in contents, "the archive holds a file from outside the site"


# ---------------------------------------------------------------------------------------
# 12. faults are usage errors, not bugs


def test_two_builds_into_one_out_at_once_never_clash(root: Path) -> None:
    for round_ in range(4):
        builds = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "from sandbox_replay.cli import main; main()",
                    "build",
                    "runs",
                    "--out",
                    "site",
                    "--jobs",
                    "1",
                    *(["--rebuild"] if round_ % 2 else []),
                ],
                cwd=root,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        for child in builds:
            _, stderr = child.communicate(timeout=TIMEOUT)
            _no_crash(stderr)
            if child.returncode != 0:  # the one refusal allowed says why in one line
                assert child.returncode == 2, stderr
                assert "another build" in stderr
        assert (root / "site" / SITE_MARKER).is_file()
        assert _hidden_siblings(root / "site") == []


@pytest.fixture
def main_in_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Let ``cli.main`` run in this process without tuning its collector."""
    monkeypatch.setattr(runtime, "tune_process", lambda *args: None)
    yield


def _main(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["sandbox-replay", *args])
    with pytest.raises(SystemExit) as exit_info:
        cli_module.main()
    code = exit_info.value.code
    assert isinstance(code, int)
    return code


DISK_ERRORS = [errno.ENOSPC, errno.EROFS, errno.EDQUOT]


def _one_line_naming(err: str, path: Path) -> None:
    """The error is one line naming ``path``; any other line is a progress line."""
    lines = err.strip().splitlines()
    assert all(line.startswith("sandbox-replay: ") for line in lines), err
    errors = [line for line in lines if line.startswith("sandbox-replay: error: ")]
    assert len(errors) == 1 and errors[0] == lines[-1], err
    assert str(path) in errors[0]
    _no_crash(err)


@pytest.mark.usefixtures("main_in_process")
@pytest.mark.parametrize("code", DISK_ERRORS, ids=errno.errorcode.get)
def test_a_full_or_read_only_disk_during_build_is_a_usage_error(
    built: Path,
    code: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    site = built / "site"
    before = _tree(site)
    real_write = Path.write_bytes

    def failing_write(self: Path, data: Any) -> int:
        if ".site.new-" in str(self):  # every page written into the staging folder
            raise OSError(code, os.strerror(code), str(self))
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_bytes", failing_write)
    monkeypatch.chdir(built)
    capsys.readouterr()
    assert _main(monkeypatch, "build", "runs", "--out", str(site), "--jobs", "1", "--rebuild") == 2
    _one_line_naming(capsys.readouterr().err, site)
    assert _tree(site) == before, "the previous site was changed"
    assert _hidden_siblings(site) == []


@pytest.mark.usefixtures("main_in_process")
@pytest.mark.parametrize("code", DISK_ERRORS, ids=errno.errorcode.get)
def test_a_full_or_read_only_disk_during_pack_is_a_usage_error(
    built: Path,
    code: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    archive = built / "site.tar.gz"

    def failing_write(path: Path, data: bytes) -> None:
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(pack, "write_bytes_atomic", failing_write)
    capsys.readouterr()
    assert _main(monkeypatch, "pack", str(built / "site"), "--out", str(archive)) == 2
    _one_line_naming(capsys.readouterr().err, archive)
    assert not archive.exists()


def _nest(folder: Path, depth: int) -> None:
    """Make ``depth`` folders one inside the other under ``folder`` (short relative steps)."""
    here = os.getcwd()
    os.chdir(folder)
    try:
        for _ in range(depth):
            os.mkdir("a")
            os.chdir("a")
    finally:
        os.chdir(here)


def test_a_site_folder_a_thousand_levels_deep_is_refused(built: Path) -> None:
    # Path.rglob recursed: 1,200 nested folders ended verify and pack with RecursionError.
    _nest(built / "site", 1200)
    try:
        done = _cli(["verify", "site", "--inputs", "."], built)
        assert done.returncode == 1, done.stderr
        assert "cannot verify" in done.stderr
        _no_crash(done.stderr)
        with pytest.raises(PackError, match="cannot be listed"):
            pack_bytes(PackConfig(built / "site", built / "site.tar.gz"))
    finally:  # shutil.rmtree, which pytest cleans up with, recurses too
        subprocess.run(["rm", "-rf", str(built / "site" / "a")], check=True)
