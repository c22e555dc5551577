"""Opening input files safely: within the input folder, regular, unchanged while read, within limits.

A file is inspected before it is opened (``inspect_input``), opened without following a
link or blocking on a FIFO (``open_regular``), and checked to be the very file inspected,
unchanged while read (``read_same_file``). Site folders are walked the same way.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from io import BufferedReader
from pathlib import Path
from typing import BinaryIO, cast

import orjson

from sandbox_replay.model import codes
from sandbox_replay.version import TOOL_NAME


@dataclass(frozen=True)
class LoadLimits:
    """Resource limits applied to every input file; defaults are in docs/checks.md (Limits)."""

    max_file_bytes: int = 512 * 1024 * 1024
    max_rows: int = 2_000_000
    max_string_chars: int = 1_000_000
    max_depth: int = 64


class InputRefused(Exception):
    """An input file refused before it was parsed: the finding code and a safe message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def inspect_input(root: Path, name: str, limits: LoadLimits) -> tuple[Path, os.stat_result]:
    """Check the input file ``root / name`` before it is opened; return its path and ``stat``.

    Raises ``InputRefused`` for a file that is missing, resolves outside ``root``, is not
    a regular file or is over ``max_file_bytes``.
    """
    path = root / name
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise InputRefused(codes.INPUT_FILE_MISSING, f"{name} is missing") from None
    except OSError as exc:
        raise InputRefused(
            codes.INPUT_FILE_UNREADABLE, f"{name} cannot be inspected ({exc.strerror})"
        ) from None
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise InputRefused(codes.INPUT_FILE_UNREADABLE, f"{name} cannot be resolved") from None
    if not resolved.is_relative_to(root.resolve()):
        raise InputRefused(
            codes.INPUT_PATH_OUTSIDE_ROOT,
            f"{name} resolves outside the input folder and was not opened",
        )
    if stat.S_ISLNK(info.st_mode):
        info = resolved.stat()
    if not stat.S_ISREG(info.st_mode):
        raise InputRefused(codes.INPUT_FILE_UNREADABLE, f"{name} is not a regular file")
    if info.st_size > limits.max_file_bytes:
        raise InputRefused(
            codes.INPUT_LIMIT_EXCEEDED,
            f"{name} is {info.st_size} bytes, over the limit of {limits.max_file_bytes} "
            "bytes (max_file_bytes); it was not read",
        )
    return resolved, info


class FileChangedError(Exception):
    """A file was not the one inspected by the time it was opened, or changed while read."""


# For reading a file that may be hostile: no following a symlink put in its place, no
# waiting on a FIFO put there.
SAFE_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class NotRegularError(OSError):
    """What ``open_regular`` found at the path is not a regular file (a FIFO, a device...)."""


def open_regular(path: Path) -> BinaryIO:
    """Open a file to read that must be regular, where a hostile writer may swap it.

    No symlink at ``path`` is followed (``OSError`` with ELOOP) and no FIFO waited on;
    anything but a regular file raises ``NotRegularError``.
    """
    handle = open(os.open(path, SAFE_OPEN_FLAGS), "rb")  # noqa: SIM115  (returned open)
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        handle.close()
        raise NotRegularError(errno.EINVAL, f"not a regular file: {path.name}")
    return handle


def open_same_file(path: Path, inspected: os.stat_result | None, limit: int) -> BinaryIO:
    """Open the file at ``path`` to read, which must still be the one ``inspected`` (its ``stat``).

    A hostile writer may swap the file after its path was checked, so the open file must
    show the same device and inode (unless ``inspected`` is None: a caller that checks the
    bytes' digest instead) and a size within ``limit``. Raises ``FileChangedError``
    (saying what changed) or ``OSError``.
    """
    try:
        handle = open_regular(path)
    except NotRegularError:
        raise FileChangedError("is no longer a regular file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symlink now stands where the file was
            raise FileChangedError("was replaced by a symlink before it was opened") from None
        raise
    try:
        opened = os.fstat(handle.fileno())
        if inspected is not None and (opened.st_dev, opened.st_ino) != (
            inspected.st_dev,
            inspected.st_ino,
        ):
            raise FileChangedError("was replaced by another file before it was opened")
        if opened.st_size > limit:
            raise FileChangedError(f"grew past the limit of {limit} bytes (max_file_bytes)")
    except BaseException:
        handle.close()
        raise
    return handle


def read_same_file(path: Path, inspected: os.stat_result | None, limit: int) -> bytes:
    """Read the file at ``path``, which must still be the one ``inspected`` (``open_same_file``),
    and must not change size while read. Raises ``FileChangedError`` or ``OSError``."""
    with open_same_file(path, inspected, limit) as handle:
        size = os.fstat(handle.fileno()).st_size
        raw = handle.read(size + 1)
    if len(raw) != size:
        raise FileChangedError("changed size while it was read")
    return raw


# Deeper than any site this tool builds (``runs/<run>/join/page-NNNN.html``: 3 folders).
# Levels of folders below a path given that are searched (for runs, for Inspect logs).
MAX_DEPTH = 64


@dataclass
class Listing:
    """One folder met by ``sorted_walk``: its entries by name, or why it cannot be listed.

    The caller appends to ``enter`` the subfolders to search, in name order.
    """

    folder: Path
    depth: int
    entries: list[os.DirEntry[str]]
    error: OSError | None = None
    enter: list[Path] = field(default_factory=list)


def sorted_walk(root: Path) -> Iterator[Listing]:
    """Search ``root`` depth first in name order, entering only the folders callers ask for."""
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as error:
            yield Listing(folder, depth, [], error)
            continue
        found = Listing(folder, depth, entries)
        yield found
        stack.extend((child, depth + 1) for child in reversed(found.enter))


SITE_DEPTH = 32


class SiteTooDeepError(ValueError):
    """A folder under a site nests deeper than ``SITE_DEPTH``: no site this tool built."""


def site_entries(root: Path) -> list[tuple[str, os.stat_result]]:
    """Return every entry under ``root``: its posix path relative to ``root`` and its ``lstat``.

    Sorted by that path; walked without recursion and without following a symlink. A
    folder deeper than ``SITE_DEPTH`` raises ``SiteTooDeepError``, one that cannot be
    listed ``OSError``.
    """
    found: list[tuple[str, os.stat_result]] = []
    pending = [("", 0)]
    while pending:
        prefix, depth = pending.pop()
        with os.scandir(root / prefix) as listing:
            for entry in listing:
                relative = prefix + entry.name
                info = entry.stat(follow_symlinks=False)
                found.append((relative, info))
                if stat.S_ISDIR(info.st_mode):
                    if depth + 1 >= SITE_DEPTH:
                        raise SiteTooDeepError(f"{relative} lies {SITE_DEPTH} folders deep")
                    pending.append((relative + "/", depth + 1))
    return sorted(found, key=lambda item: item[0])


# A built site's root holds its manifest and the marker naming it a site this tool built
# (``report.build._marker`` writes it; ``build`` and ``pack`` read it here).
SITE_MANIFEST = "manifest.json"
SITE_MARKER = "sandbox-replay-site.json"
SITE_FORMAT = 1
_MARKER_BYTES = 4096


def read_site_json(path: Path, limit: int) -> object:
    """Read a JSON file of a site: a regular file (no symlink followed, no FIFO waited on)
    of at most ``limit`` bytes, nested at most 1,024 deep (orjson's bound). Raises
    ``OSError``, ``FileChangedError`` or ``ValueError``."""
    return orjson.loads(read_same_file(path, None, limit))


def site_marker_matches(site: Path) -> bool | None:
    """Say whether ``site`` holds a marker of a site this tool built; ``None``: no marker.

    The marker must name this tool and site format and hold the digest of the folder's
    ``manifest.json`` as it is now.
    """
    try:
        marker = read_site_json(site / SITE_MARKER, _MARKER_BYTES)
    except FileNotFoundError:
        return None
    except (OSError, FileChangedError, ValueError):
        return False
    if not isinstance(marker, dict):
        return False
    try:
        with open_regular(site / SITE_MANIFEST) as handle:
            reader = cast(BufferedReader, handle)  # what ``open_regular`` opens
            digest = "sha256:" + hashlib.file_digest(reader, "sha256").hexdigest()
    except OSError:
        return False
    return (
        marker.get("tool") == TOOL_NAME
        and marker.get("site_format") == SITE_FORMAT
        and marker.get("manifest_sha256") == digest
    )


def sha256_of(raw: bytes) -> str:
    """Return a file's digest as ``LoadedFile.sha256`` spells it."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()
