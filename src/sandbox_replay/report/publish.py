"""Publish a built site: lock the output folder, recover a killed build, swap the new site in.

A build killed at any instant leaves the output folder byte for byte the previous site or
the new one, and no temporary file. The new site is written into a hidden sibling
``.<out>.new-<random>``, made durable, then swapped in by one ``renameat2(RENAME_EXCHANGE)``;
where that call is missing the old site is renamed aside to ``.<out>.old-<random>`` first,
and ``recover`` renames it back should a kill fall between the two renames. A symlink given
as the output folder is swapped out like a folder, never followed.
"""

from __future__ import annotations

import ctypes
import errno
import filecmp
import hashlib
import io
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from sandbox_replay.atomic import dump_json
from sandbox_replay.exports import ExportFacts
from sandbox_replay.exports.text import one_line
from sandbox_replay.load.files import (
    SITE_FORMAT,
    SITE_MANIFEST,
    SITE_MARKER,
    FileChangedError,
    LoadLimits,
    SiteTooDeepError,
    open_regular,
    read_site_json,
    site_entries,
    site_marker_matches,
)
from sandbox_replay.report.baseline import HISTORY
from sandbox_replay.report.discover import DiscoveredRun
from sandbox_replay.report.site_views import RunSummary
from sandbox_replay.version import TOOL_NAME, __version__

try:
    import fcntl
except ImportError:  # Windows: no build lock
    fcntl = None  # type: ignore[assignment]

SITE_SCHEMA = "sandbox-replay.site/1"
# The errors of a disk that is full, read-only or not ours to write: the user's to fix,
# reported in one line, not as a bug.
WRITE_FAULTS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})
# What the root of a site holds; ``runs/`` and ``single/`` hold one entry per run.
_SITE_ENTRIES = frozenset(
    {"index.html", "codes", "policy", "changes", "assets", "runs", "single"}
    | {SITE_MANIFEST, "build-status.json", HISTORY}
)


class BuildError(ValueError):
    """The site cannot be built as asked (a usage problem, not a finding)."""


class Site:
    """The site as a build gathers it: pages in memory and pages staged (refusing a second
    file at one path), and what each run gave."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.staged: set[str] = set()
        self.summaries: dict[str, RunSummary] = {}
        self.run_files: dict[str, list[str]] = {}
        self.exports: dict[str, ExportFacts] = {}
        self.digests: dict[str, str] = {}  # staged result records, hashed as written
        self.needles: set[bytes] = set()

    def add(self, path: str, data: bytes) -> None:
        self.add_staged(path)
        self.staged.discard(path)
        self.files[path] = data

    def add_staged(self, path: str) -> None:
        if path in self.files or path in self.staged:
            raise BuildError(f"two pages map to {path}")
        self.staged.add(path)

    def add_run(self, name: str, summary: RunSummary, files: list[str], facts: ExportFacts) -> None:
        self.summaries[name] = summary
        self.run_files[name] = files
        self.exports[name] = facts

    def ordered(self, runs: Sequence[DiscoveredRun]) -> list[RunSummary]:
        return [self.summaries[run.name] for run in runs]


def write_fault(error: OSError, shown: Path) -> BuildError:
    """Return the one-line error for a full, read-only or forbidden disk (``WRITE_FAULTS``)."""
    failed = f" ({one_line(str(error.filename))})" if error.filename else ""
    return BuildError(
        f"cannot build the site into {shown}: {error.strerror}{failed}; "
        "the previous site there is unchanged"
    )


def check_out_path(out_dir: Path, inside: Sequence[Path], shown: Path) -> None:
    """Refuse an output folder that is a root, lies under a file, or holds ``inside[0]`` (the
    working directory) or an input path."""
    if out_dir.parent == out_dir:
        raise BuildError(f"output folder {shown} is a filesystem root")
    for path in inside:
        absolute = Path(os.path.abspath(path))
        if absolute == out_dir or absolute.is_relative_to(out_dir):
            what = "the working directory" if path == inside[0] else f"the input {path}"
            raise BuildError(
                f"output folder {shown} holds {what}, which replacing it would remove; "
                "choose another --out"
            )
    for parent in out_dir.parents:
        if parent.exists() and not parent.is_dir():
            raise BuildError(f"output path {out_dir} lies under {parent}, which is a file")


def check_out_dir(out_dir: Path) -> None:
    """Refuse an output folder that is not empty and not a site this tool built."""
    if out_dir.is_symlink():
        return
    if out_dir.exists() and not out_dir.is_dir():
        raise BuildError(f"output path {out_dir} exists and is not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not _own_site(out_dir):
        raise BuildError(
            f"output folder {out_dir} is not empty and is not a site this tool built "
            f"(no {SITE_MARKER} that matches its {SITE_MANIFEST}); refusing to replace it: "
            "choose another --out"
        )


def site_marker(manifest: bytes) -> bytes:
    """Return ``sandbox-replay-site.json`` for a site whose ``manifest.json`` holds ``manifest``.

    ``{"tool": "sandbox-replay", "site_format": 1, "manifest_sha256": "sha256:<hex>"}``:
    ``build`` replaces a folder that is not empty only where one matches.
    """
    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    record = {"tool": TOOL_NAME, "site_format": SITE_FORMAT, "manifest_sha256": digest}
    return dump_json(record, may_hold_floats=False)


def _own_site(out_dir: Path) -> bool:
    """Say whether ``out_dir`` holds a site this tool built, with or without a marker."""
    matches = site_marker_matches(out_dir)
    return _unmarked_site(out_dir) if matches is None else matches


def _unmarked_site(out_dir: Path) -> bool:
    """Say whether ``out_dir`` is a site this version built before it wrote a marker: this
    tool's manifest, and nothing but the site's entries and the runs it lists."""
    try:
        manifest = read_site_json(out_dir / SITE_MANIFEST, LoadLimits().max_file_bytes)
    except (OSError, FileChangedError, ValueError):
        return False
    if not (
        isinstance(manifest, dict)
        and manifest.get("schema_version") == SITE_SCHEMA
        and manifest.get("tool") == {"name": TOOL_NAME, "version": __version__}
        and isinstance(manifest.get("runs"), list)
    ):
        return False
    names = {entry.get("name") for entry in manifest["runs"] if isinstance(entry, dict)}
    if any(child.name not in _SITE_ENTRIES for child in out_dir.iterdir()):
        return False
    runs, single = out_dir / "runs", out_dir / "single"
    return (not runs.is_dir() or all(c.name in names for c in runs.iterdir())) and (
        not single.is_dir() or all(c.name.removesuffix(".html") in names for c in single.iterdir())
    )


@contextmanager
def out_lock(out_dir: Path, progress: Callable[[str], None]) -> Iterator[None]:
    """Hold a ``flock`` on ``.<out>.lock`` beside ``out_dir`` for a whole build.

    A second build waits, saying so. The holder removes the file as it lets go, so one that
    waited on it finds it gone and locks the next. Where ``fcntl`` is missing, nothing is locked.
    """
    if fcntl is None:
        yield
        return
    path = out_dir.parent / f".{out_dir.name}.lock"
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    while True:
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as error:
            if error.errno in WRITE_FAULTS:
                raise  # a full or read-only disk: ``build_site`` says so
            raise BuildError(f"cannot open the lock file {path}: {error.strerror}") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                progress(f"waiting for another build into {out_dir} to finish")
                fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            try:
                now = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                now = None
        except BaseException:
            os.close(fd)
            raise
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)  # the holder before removed this file: lock the one now there
    try:
        yield
    finally:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)


def _leftovers(out_dir: Path) -> tuple[list[Path], list[Path]]:
    """Return the staging and retired siblings a killed build may have left."""
    pattern = re.compile(rf"\.{re.escape(out_dir.name)}\.(new|old)-[A-Za-z0-9_]+")
    found: dict[str, list[Path]] = {"new": [], "old": []}
    if out_dir.parent.is_dir():
        for sibling in sorted(out_dir.parent.iterdir()):
            match = pattern.fullmatch(sibling.name)
            if match and (sibling.is_dir() or sibling.is_symlink()):
                found[match.group(1)].append(sibling)
    return found["new"], found["old"]


def _present(path: Path) -> bool:
    """Say whether anything is at ``path``, a dangling symlink included."""
    return path.is_symlink() or path.exists()


def _remove(path: Path) -> None:
    """Remove a folder a build left, or a symlink in its place (never what it points to)."""
    if path.is_symlink():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def recover(out_dir: Path) -> None:
    """Undo what a killed build left: restore a site renamed aside, remove temp folders."""
    staged, retired = _leftovers(out_dir)
    if retired and not _present(out_dir):
        # Killed between the two renames of the fallback swap: the old site is whole.
        retired[0].rename(out_dir)
        retired = retired[1:]
        _fsync_dir(out_dir.parent)
    for folder in staged + retired:
        _remove(folder)


def new_staging(out_dir: Path) -> Path:
    """Create the hidden sibling folder the new site is assembled in (``write_site``)."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.new-", dir=out_dir.parent))


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _sync_tree(root: Path) -> None:
    """Make everything under ``root`` durable: one ``syncfs`` on Linux, else an fsync of each
    file, then each folder."""
    if _syncfs(root):
        return
    folders = {root}
    for path in sorted(root.rglob("*")):
        if path.is_dir():
            folders.add(path)
        elif path.is_file():
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
    for folder in sorted(folders):
        _fsync_dir(folder)


def _libc_call(name: str) -> Callable[..., int] | None:
    """Return the Linux C library's function ``name``, None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    return cast(Callable[..., int], function)


def _syncfs(folder: Path) -> bool:
    """Flush the whole file system holding ``folder`` (Linux ``syncfs``); False where unsupported."""
    syncfs = _libc_call("syncfs")
    if syncfs is None:
        return False
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return False
    try:
        return syncfs(ctypes.c_int(fd)) == 0
    finally:
        os.close(fd)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one atomic step (Linux ``renameat2``); False where unsupported."""
    renameat2 = _libc_call("renameat2")
    if renameat2 is None:
        return False
    where, flag = ctypes.c_int(_AT_FDCWD), ctypes.c_uint(_RENAME_EXCHANGE)
    return renameat2(where, os.fsencode(a), where, os.fsencode(b), flag) == 0


def _listing(root: Path) -> dict[str, int] | None:
    """Return each regular file's size under ``root``; None if anything else is there."""
    found = {}
    try:
        entries = site_entries(root)
    except (OSError, SiteTooDeepError):
        return None
    for relative, info in entries:
        if stat.S_ISREG(info.st_mode):
            found[relative] = info.st_size
        elif not stat.S_ISDIR(info.st_mode):
            return None
    return found


def same_tree(staging: Path, out_dir: Path, digests: Mapping[str, str] | None = None) -> bool:
    """Say whether two folders hold the same files with the same bytes (``digests``: the
    ``sha256:<hex>`` of staged files hashed as they were written)."""
    if not out_dir.is_dir() or out_dir.is_symlink():
        return False
    new, old = _listing(staging), _listing(out_dir)
    if new is None or new != old:
        return False
    try:
        known = digests or {}
        return all(same_file(staging / name, out_dir / name, known.get(name)) for name in new)
    finally:
        filecmp.clear_cache()  # a cached outcome is keyed on size and mtime alone


def same_file(staged: Path, old: Path, digest: str | None) -> bool:
    """Say whether two files hold the same bytes (``digest``: the staged file's sha256).

    A hard link (a reused page) is not read; of a known digest only the old file is hashed.
    """
    if os.path.samefile(staged, old):
        return True
    if digest is not None:
        try:  # no symlink followed nor FIFO waited on, should one replace the old file
            handle = open_regular(old)
        except OSError:
            return False  # not one to keep: the site is replaced
        with handle:
            reader = cast(io.BufferedReader, handle)  # what ``open_regular`` opens
            return "sha256:" + hashlib.file_digest(reader, "sha256").hexdigest() == digest
    return filecmp.cmp(staged, old, shallow=False)


def write_site(
    out_dir: Path,
    files: Mapping[str, bytes],
    staged: Path | None = None,
    digests: Mapping[str, str] | None = None,
) -> bool:
    """Write ``files`` and what ``staged`` holds as the whole of ``out_dir``; return True if
    it already was (``digests``: as ``same_tree`` takes them)."""
    parent = out_dir.parent
    staging = staged or new_staging(out_dir)
    retired: Path | None = None
    try:
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)
        for relative, data in sorted(files.items()):
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        if same_tree(staging, out_dir, digests):
            shutil.rmtree(staging, ignore_errors=True)
            return True
        _sync_tree(staging)
        # A symlink at ``out_dir`` (a dangling one too) is swapped out like a folder.
        if _present(out_dir) and _exchange(staging, out_dir):
            retired, staging = staging, out_dir
        else:
            if _present(out_dir):
                retired = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=parent))
                retired.rmdir()
                out_dir.rename(retired)
            staging.rename(out_dir)
        _fsync_dir(parent)
    except BaseException:
        if retired is not None and not _present(out_dir):
            retired.rename(out_dir)
            retired = None
        if staging != out_dir:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    if retired is not None:
        _remove(retired)
    return False
