"""Read a previous build to compare with: a site folder, or a ``pack`` archive of one.

A baseline that cannot be checked is a ``BaselineError`` naming the file: the marker must
hold the manifest's digest and each record the digest the manifest lists, so an edited
baseline is refused. An archive is read in memory, regular members within the size limit.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from sandbox_replay.load.files import (
    SITE_FORMAT,
    SITE_MANIFEST,
    SITE_MARKER,
    FileChangedError,
    LoadLimits,
    read_same_file,
)
from sandbox_replay.records.changes import HISTORY_LIMIT, RunSnapshot, snapshot_of_record
from sandbox_replay.version import TOOL_NAME

HISTORY = "history.json"
HISTORY_SCHEMA = "sandbox-replay.history/1"


class BaselineError(ValueError):
    """The baseline cannot be read or checked (a usage error: the build does not start)."""


@dataclass(frozen=True)
class Baseline:
    """A previous build: its runs, its history, and the digests that identify it."""

    shown: str  # the path as given, for messages
    manifest_sha256: str
    history_sha256: str | None
    label: str | None
    runs: tuple[RunSnapshot, ...]
    history: tuple[dict[str, Any], ...]

    def record(self) -> dict[str, Any]:
        """Return what a build's manifest records of its baseline."""
        return {
            "manifest_sha256": self.manifest_sha256,
            "history_sha256": self.history_sha256,
            "label": self.label,
        }


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def read_baseline(path: Path) -> Baseline:
    """Return the baseline at ``path``: a site folder or a ``.tar.gz`` made by ``pack``."""
    shown = str(path)
    try:
        info = os.stat(path)
    except OSError as error:
        raise BaselineError(f"baseline {shown} cannot be read: {error.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        return _read(shown, _folder_reader(path))
    if stat.S_ISREG(info.st_mode):
        return _read(shown, _archive_reader(path))
    raise BaselineError(f"baseline {shown} is neither a site folder nor a pack archive")


Reader = Callable[[str], bytes | None]


def _folder_reader(root: Path) -> Reader:
    limit = LoadLimits().max_file_bytes

    def read(relative: str) -> bytes | None:
        try:
            return read_same_file(root / relative, None, limit)
        except FileNotFoundError:
            return None
        except (OSError, FileChangedError) as error:
            what = getattr(error, "strerror", None) or str(error)
            raise BaselineError(
                f"baseline file {root / relative} cannot be read as a regular file: {what}"
            ) from None

    return read


def _archive_reader(archive: Path) -> Reader:
    limit = LoadLimits().max_file_bytes
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            files: dict[str, bytes] = {}
            wanted = {SITE_MANIFEST, SITE_MARKER, HISTORY}
            tops = {PurePosixPath(m.name).parts[0] for m in members if m.name}
            if len(tops) != 1:
                raise BaselineError(
                    f"baseline {archive} is not a pack archive: it holds no single top folder"
                )
            for member in members:
                parts = PurePosixPath(member.name).parts
                relative = "/".join(parts[1:])
                keep = relative in wanted or (
                    len(parts) == 4 and parts[1] == "runs" and parts[3] == "result.json"
                )
                if not keep:
                    continue
                if not member.isreg():
                    raise BaselineError(f"baseline {archive}: {member.name} is not a regular file")
                if member.size > limit:
                    raise BaselineError(f"baseline {archive}: {member.name} is over the size limit")
                handle = tar.extractfile(member)
                if handle is None:
                    raise BaselineError(f"baseline {archive}: {member.name} cannot be read")
                files[relative] = handle.read()
    except (OSError, tarfile.TarError, EOFError) as error:
        raise BaselineError(
            f"baseline {archive} is not a readable pack archive ({type(error).__name__})"
        ) from None
    return files.get


def _json(shown: str, relative: str, data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise BaselineError(f"baseline {shown}: {relative} is not valid JSON ({error})") from None


def _read(shown: str, read: Reader) -> Baseline:
    manifest_bytes = read(SITE_MANIFEST)
    if manifest_bytes is None:
        raise BaselineError(f"baseline {shown} has no {SITE_MANIFEST}: not a site this tool built")
    manifest_sha256 = digest(manifest_bytes)
    marker_bytes = read(SITE_MARKER)
    marker = _json(shown, SITE_MARKER, marker_bytes) if marker_bytes is not None else None
    if not (
        isinstance(marker, dict)
        and marker.get("tool") == TOOL_NAME
        and marker.get("site_format") == SITE_FORMAT
        and marker.get("manifest_sha256") == manifest_sha256
    ):
        raise BaselineError(
            f"baseline {shown}: {SITE_MARKER} is missing or does not match its {SITE_MANIFEST}; "
            "the site was changed after it was built, or is not one this tool built"
        )
    manifest = _json(shown, SITE_MANIFEST, manifest_bytes)
    entries = manifest.get("runs") if isinstance(manifest, dict) else None
    if not isinstance(entries, list):
        raise BaselineError(f"baseline {shown}: {SITE_MANIFEST} lists no runs")
    history_bytes = read(HISTORY)
    history = _history(shown, history_bytes) if history_bytes is not None else ()
    return Baseline(
        shown=shown,
        manifest_sha256=manifest_sha256,
        history_sha256=digest(history_bytes) if history_bytes is not None else None,
        label=history[-1]["label"] if history else None,
        runs=tuple(_run(shown, entry, read) for entry in entries),
        history=history,
    )


def _run(shown: str, entry: object, read: Reader) -> RunSnapshot:
    if not isinstance(entry, dict):
        raise BaselineError(f"baseline {shown}: a run of {SITE_MANIFEST} is not an object")
    name, source, result, sha = (
        entry.get(k) for k in ("name", "source_path", "result", "result_sha256")
    )
    digests = entry.get("input_digests")
    if not (
        all(isinstance(v, str) for v in (name, source, result, sha))
        and isinstance(digests, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in digests.items())
    ):
        raise BaselineError(f"baseline {shown}: a run of {SITE_MANIFEST} lacks its fields")
    assert isinstance(name, str) and isinstance(source, str) and isinstance(result, str)
    if not name or name.startswith(".") or "/" in name or "\\" in name or "\x00" in name:
        raise BaselineError(f"baseline {shown}: a run of {SITE_MANIFEST} has an unsafe name")
    if result != f"runs/{name}/result.json":
        raise BaselineError(f"baseline {shown}: run {name!r} names an unexpected record {result!r}")
    data = read(result)
    if data is None:
        raise BaselineError(f"baseline {shown}: {result} is missing")
    if digest(data) != sha:
        raise BaselineError(
            f"baseline {shown}: {result} does not hash to the digest its {SITE_MANIFEST} "
            "records; the site was changed after it was built"
        )
    record = _json(shown, result, data)
    if not isinstance(record, Mapping):
        raise BaselineError(f"baseline {shown}: {result} is not a result record")
    try:
        return snapshot_of_record(name, source, record, digests, f"runs/{name}/index.html")
    except ValueError as error:
        raise BaselineError(f"baseline {shown}: {result}: {error}") from None


_ENTRY_COUNTS = ("runs", "passed", "blocked", "findings")
_ENTRY_KEYS = ("label", *_ENTRY_COUNTS, "findings_by_severity", "findings_by_layer")


def _history(shown: str, data: bytes) -> tuple[dict[str, Any], ...]:
    """Return a baseline's ``history.json`` builds, checked and cut to the keys a build writes."""
    history = _json(shown, HISTORY, data)
    builds = history.get("builds") if isinstance(history, dict) else None
    if not isinstance(history, dict) or history.get("schema_version") != HISTORY_SCHEMA:
        raise BaselineError(f"baseline {shown}: {HISTORY} is not a {HISTORY_SCHEMA} file")
    if not isinstance(builds, list) or len(builds) > HISTORY_LIMIT:
        raise BaselineError(
            f"baseline {shown}: {HISTORY} holds no list of at most {HISTORY_LIMIT} builds"
        )
    for number, entry in enumerate(builds, start=1):
        if not _valid_entry(entry):
            raise BaselineError(f"baseline {shown}: {HISTORY}: build {number} is malformed")
    return tuple({key: entry.get(key) for key in _ENTRY_KEYS} for entry in builds)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _valid_entry(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    label = entry.get("label")
    tables = (entry.get("findings_by_severity"), entry.get("findings_by_layer"))
    return (
        (label is None or isinstance(label, str))
        and all(_count(entry.get(key)) for key in _ENTRY_COUNTS)
        and all(
            isinstance(t, dict) and all(isinstance(k, str) and _count(v) for k, v in t.items())
            for t in tables
        )
    )
