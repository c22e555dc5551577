"""Pack a built report site into a reproducible ``tar.gz`` plus a ``SHA256SUMS`` file.

Archive format: a gzip stream (level 9, header mtime set to the archive mtime, no file
name, OS byte fixed) holding a POSIX pax tar whose entries are the site's folders and
regular files under one top folder named after the archive (``<stem>/...``), in sorted
order of their posix paths. Every entry has uid/gid 0, empty owner and group names,
mode 0755 for folders and 0644 for files, and mtime ``SOURCE_DATE_EPOCH`` (0 when unset),
so the same site gives the same bytes on any machine. A symlink or any other special
file in the site is refused rather than followed or stored.

``SHA256SUMS`` is written beside the archive in ``sha256sum`` format (``<hex>  <name>``),
so ``sha256sum -c SHA256SUMS`` checks a download.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

from sandbox_replay.atomic import write_bytes_atomic

SUMS_FILE = "SHA256SUMS"
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


def _entries(site_dir: Path) -> list[tuple[str, Path]]:
    """Return (posix path relative to the site, path) of every folder and file, sorted."""
    found: list[tuple[str, Path]] = []
    for path in site_dir.rglob("*"):
        info = path.lstat()
        if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
            kind = "symlink" if stat.S_ISLNK(info.st_mode) else "special file"
            raise PackError(f"{path} is a {kind}; a site holds only folders and regular files")
        found.append((path.relative_to(site_dir).as_posix(), path))
    return sorted(found)


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
    archive = config.archive.resolve()
    if archive.is_relative_to(site.resolve()):
        raise PackError(f"archive {config.archive} must not lie inside the site folder")
    stem = archive_stem(archive)
    tar_buffer = io.BytesIO()
    with tarfile.open(fileobj=tar_buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(_tar_info(stem, True, 0, config.mtime))
        for rel, path in _entries(site):
            if path.is_dir():
                tar.addfile(_tar_info(f"{stem}/{rel}", True, 0, config.mtime))
            else:
                data = path.read_bytes()
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


def sums_line(name: str, data: bytes) -> str:
    return f"{hashlib.sha256(data).hexdigest()}  {name}\n"


def pack_site(config: PackConfig) -> list[Path]:
    """Write the archive and its ``SHA256SUMS`` beside it; return both paths."""
    data = pack_bytes(config)
    sums = config.archive.parent / SUMS_FILE
    write_bytes_atomic(config.archive, data)
    write_bytes_atomic(sums, sums_line(config.archive.name, data).encode("utf-8"))
    return [config.archive, sums]
