"""Pack a built report site into a reproducible ``tar.gz`` plus a ``SHA256SUMS`` file.

Archive format: a gzip stream (level 9, mtime the entries', no file name, OS byte 255) of
a POSIX pax tar of the site's folders and regular files under one top folder named after
the archive, sorted by path. Every entry has uid/gid 0, no owner names, mode 0755 or 0644
and mtime ``SOURCE_DATE_EPOCH`` (0 when unset). A symlink, special file, folder nested too
deep or file swapped after the listing is refused, never archived.

``SHA256SUMS`` beside it is in ``sha256sum`` format, sorted by name. An existing one is
merged: other files' lines are kept as they were; a line in any other format is refused.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

from sandbox_replay.atomic import write_bytes_atomic
from sandbox_replay.load.files import (
    SITE_MARKER,
    FileChangedError,
    SiteTooDeepError,
    read_same_file,
    site_entries,
    site_marker_matches,
)

SUMS_FILE = "SHA256SUMS"
SUMS_MAX_BYTES = 16 << 20
# ``sha256sum``'s line: digest, a space, " " (text) or "*" (binary), the file name.
_SUMS_LINE = re.compile(rb"([0-9a-fA-F]{64}) [ *](.+)")
DIR_MODE = 0o755
FILE_MODE = 0o644


class PackError(ValueError):
    """The site folder cannot be packed as asked."""


@dataclass(frozen=True)
class PackConfig:
    """What to pack and where: the site folder, the archive path and the entries' mtime."""

    site_dir: Path
    archive: Path
    mtime: int = 0


def source_date_epoch(environ: dict[str, str] | None = None) -> int:
    """Return ``SOURCE_DATE_EPOCH`` as an integer (0 when unset); refuse a malformed one."""
    value = (os.environ if environ is None else environ).get("SOURCE_DATE_EPOCH", "")
    if not value:
        return 0
    if not value.isdigit():
        raise PackError(f"SOURCE_DATE_EPOCH must be a non-negative integer, got {value!r}")
    return int(value)


def default_archive(site_dir: Path) -> Path:
    """Return the default archive path: ``<site folder>.tar.gz`` beside the folder."""
    resolved = site_dir.resolve()
    return resolved.parent / f"{resolved.name}.tar.gz"


def archive_stem(archive: Path) -> str:
    name = archive.name
    for suffix in (".tar.gz", ".tgz"):
        if name.endswith(suffix):
            return name[: -len(suffix)] or "site"
    return archive.stem or "site"


def _entries(site_dir: Path) -> list[tuple[str, os.stat_result]]:
    """Return (site-relative path, ``lstat``) of every folder and file, sorted."""
    try:
        found = site_entries(site_dir)
    except (OSError, SiteTooDeepError) as error:
        raise PackError(f"site folder {site_dir} cannot be listed: {error}") from None
    for relative, info in found:
        if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
            kind = "symlink" if stat.S_ISLNK(info.st_mode) else "special file"
            raise PackError(
                f"{site_dir / relative} is a {kind}; a site holds only folders and regular files"
            )
    return found


def _read_listed(path: Path, listed: os.stat_result) -> bytes:
    """Read the file at ``path``, which must still be the one listed (``listed``: its lstat)."""
    try:
        return read_same_file(path, listed, listed.st_size)
    except FileChangedError as error:
        raise PackError(f"{path} changed while it was packed: it {error}") from None
    except OSError as error:
        raise PackError(f"cannot read {path}: {error.strerror}") from None


def _tar_info(name: str, is_dir: bool, size: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if is_dir else tarfile.REGTYPE
    info.mode = DIR_MODE if is_dir else FILE_MODE
    info.size = 0 if is_dir else size
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def pack_bytes(config: PackConfig) -> bytes:
    """Return the archive of ``config.site_dir`` as bytes."""
    site = config.site_dir
    if not site.is_dir():
        raise PackError(f"site folder {site} does not exist or is not a folder")
    _check_archive_name(config.archive)
    archive = config.archive.resolve()
    if archive.is_relative_to(site.resolve()):
        raise PackError(f"archive {config.archive} must not lie inside the site folder")
    stem = archive_stem(archive)
    tar_buffer = io.BytesIO()
    with tarfile.open(fileobj=tar_buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(_tar_info(stem, True, 0, config.mtime))
        for rel, listed in _entries(site):
            if stat.S_ISDIR(listed.st_mode):
                tar.addfile(_tar_info(f"{stem}/{rel}", True, 0, config.mtime))
            else:
                data = _read_listed(site / rel, listed)
                info = _tar_info(f"{stem}/{rel}", False, len(data), config.mtime)
                tar.addfile(info, io.BytesIO(data))
    gz_buffer = io.BytesIO()
    with gzip.GzipFile(
        filename="", mode="wb", fileobj=gz_buffer, compresslevel=9, mtime=config.mtime
    ) as gz:
        gz.write(tar_buffer.getvalue())
    stream = bytearray(gz_buffer.getvalue())
    stream[9] = 255  # OS byte: "unknown", whatever platform packed it
    return bytes(stream)


def _check_archive_name(archive: Path) -> None:
    """Refuse an archive path that ``SHA256SUMS`` could not list, or that is that file."""
    name = archive.name
    if name.casefold() == SUMS_FILE.casefold():
        raise PackError(
            f"archive {archive} would be overwritten by the {SUMS_FILE} written beside it; "
            "choose another --out"
        )
    if any(char in name for char in "\\\n\r"):
        raise PackError(f"archive name {name!r} holds a character {SUMS_FILE} cannot list")


def merged_sums(existing: bytes, name: str, data: bytes) -> bytes:
    """Return ``existing`` (a ``SHA256SUMS``) with the line for ``name`` set to ``data``'s digest."""
    own = name.encode("utf-8")
    lines = [(own, f"{hashlib.sha256(data).hexdigest()}  {name}\n".encode())]
    for number, line in enumerate(existing.split(b"\n"), 1):
        if not line.strip():
            continue
        match = _SUMS_LINE.fullmatch(line)
        if match is None:
            raise PackError(
                f"{SUMS_FILE} line {number} is not '<sha256>  <name>'; refusing to rewrite the file"
            )
        if match[2] != own:
            lines.append((match[2], line + b"\n"))
    return b"".join(line for _, line in sorted(lines))


def _existing_sums(path: Path) -> bytes:
    """Return the ``SHA256SUMS`` at ``path`` (empty when there is none), no symlink followed."""
    try:
        return read_same_file(path, None, SUMS_MAX_BYTES)
    except FileNotFoundError:
        return b""
    except (OSError, FileChangedError) as error:
        reason = getattr(error, "strerror", None) or error
        raise PackError(f"cannot read {path} to add to it: {reason}") from None


def pack_site(config: PackConfig) -> list[Path]:
    """Write the archive of a site ``build`` made and merge its line into ``SHA256SUMS``; return both.

    Nothing is written before both are ready.
    """
    if config.site_dir.is_dir() and not site_marker_matches(config.site_dir):
        raise PackError(
            f"{config.site_dir} is not a site sandbox-replay built (no {SITE_MARKER} that "
            "matches its manifest.json); pack only packs the folder `build` writes"
        )
    data = pack_bytes(config)
    sums = config.archive.parent / SUMS_FILE
    merged = merged_sums(_existing_sums(sums), config.archive.name, data)
    for path, content in ((config.archive, data), (sums, merged)):
        try:
            write_bytes_atomic(path, content)
        except OSError as error:
            raise PackError(f"cannot write {path}: {error.strerror or error}") from None
    return [config.archive, sums]
