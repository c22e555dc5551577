"""Decide which runs of a rebuild can reuse the pages the previous build wrote.

A run is reused when nothing that shapes its pages changed: the global settings
(``settings_hash``: any change rebuilds every run) and the path and bytes of every file
under its input folder; mtimes play no part. ``build-status.json``, at the site root:

    {"format": 1,
     "tool_version": "<version>",
     "settings_sha256": "<hex: templates, assets, build time, version, forbidden classes>",
     "runs": [{"name", "source_path", "mode",
               "inputs_sha256": "<hex over each file's relative path and bytes>",
               "files": [<site-relative paths of this run's pages, sorted>],
               "summary": {<what the index, catalog, policy page and manifest need of the run>},
               "exports": {<what the exports show of the run: exports.ExportFacts>}}]}

A status file that is missing, unreadable or of another format is ignored (a full build).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from sandbox_replay.exports import ExportFacts
from sandbox_replay.load.files import FileChangedError, LoadLimits, open_regular, read_same_file
from sandbox_replay.report.discover import DiscoveredRun
from sandbox_replay.report.render import TEMPLATE_PACKAGE
from sandbox_replay.report.single_file import single_file_path
from sandbox_replay.report.site_views import RunSummary
from sandbox_replay.version import __version__

STATUS_FILE = "build-status.json"
DATA_PACKAGE = "sandbox_replay"
# 2: each run's export facts; 3: its policy and coverage; 4: first findings; 5: severities
STATUS_FORMAT = 5
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ReusableRun:
    """A run the previous build wrote that this build may copy as it is."""

    summary: RunSummary
    files: tuple[str, ...]
    exports: ExportFacts


def _walk_package(node: Traversable, prefix: str) -> Iterable[tuple[str, bytes]]:
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        name = f"{prefix}{child.name}"
        if child.is_dir():
            if child.name != "__pycache__":
                yield from _walk_package(child, name + "/")
        elif not child.name.endswith(".pyc"):
            yield name, child.read_bytes()


def settings_hash(
    templates: Path | None,
    shown_time: str,
    forbidden_sha256: str = "",
    policies: str = "",
    *,
    single_file: bool = False,
    sensitivity: tuple[bool, bool] = (False, False),
) -> str:
    """Hash everything global that shapes the pages: version, templates, assets, time, the
    packaged data, a user's forbidden-classes table and policies ("" for none),
    ``single_file`` and whether seeded escapes are replayed (and required)."""
    digest = hashlib.sha256()
    digest.update(f"{__version__}\0{shown_time}\0{forbidden_sha256}\0{policies}\0".encode())
    if single_file:
        digest.update(b"single-file\0")
    if any(sensitivity):
        digest.update(f"sensitivity {sensitivity}\0".encode())
    for name, data in _walk_package(resources.files(TEMPLATE_PACKAGE), "package/"):
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
    for name, data in _walk_package(resources.files(DATA_PACKAGE) / "data", "data/"):
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
    if templates is not None:
        for path in sorted(p for p in templates.rglob("*") if p.is_file()):
            data = path.read_bytes()
            name = "user/" + path.relative_to(templates).as_posix()
            digest.update(f"{name}\0{len(data)}\0".encode() + data)
    return digest.hexdigest()


def inputs_digests(folder: Path) -> tuple[str, dict[str, str]]:
    """Hash a run folder (each file's relative path and bytes, sorted); return that hash and
    the ``sha256:<hex>`` of each file read.

    A symlink is hashed as the path it holds, never followed (one to ``/dev/zero`` or a
    FIFO would never end); it gets the digest of the folder's file it leads to, if any.
    A file is read up to the size it had when opened.
    """
    digest = hashlib.sha256()
    files: dict[str, str] = {}
    links: dict[str, Path] = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        name = relative.encode() + b"\0"
        if path.is_symlink():
            try:
                target = os.fsencode(os.readlink(path))
            except OSError:
                target = b"\0unreadable"
            digest.update(name + b"\0symlink\0" + target + b"\0")
            links[relative] = path
        elif path.is_file():
            digest.update(name)
            try:
                files[relative] = _hash_regular_file(path, digest)
            except OSError:
                digest.update(b"\0unreadable")
            digest.update(b"\0")
    root = folder.resolve()
    for relative, path in links.items():
        try:
            inside = path.resolve(strict=True).relative_to(root).as_posix()
        except (OSError, RuntimeError, ValueError):
            continue
        if inside in files:
            files[relative] = files[inside]
    return digest.hexdigest(), files


def _hash_regular_file(path: Path, digest: hashlib._Hash) -> str:
    """Add a regular file's bytes to ``digest``, up to its size when opened; return its own."""
    own = hashlib.sha256()
    with open_regular(path) as handle:
        left = os.fstat(handle.fileno()).st_size
        while left > 0 and (chunk := handle.read(min(_CHUNK, left))):
            digest.update(chunk)
            own.update(chunk)
            left -= len(chunk)
    return "sha256:" + own.hexdigest()


class Hashed(NamedTuple):
    """Each run's key in the status file (``run_key``) and its files' digests, by run name."""

    keys: dict[str, dict[str, str]]
    files: dict[str, dict[str, str]]


def hash_runs(runs: Iterable[DiscoveredRun]) -> Hashed:
    """Hash every run's folder (``inputs_digests``)."""
    hashed = Hashed({}, {})
    for run in runs:
        combined, files = inputs_digests(run.path)
        hashed.keys[run.name] = run_key(run, combined)
        hashed.files[run.name] = files
    return hashed


def changed_while_built(hashed: Mapping[str, str], replayed: Mapping[str, str]) -> int:
    """Return how many files the replay read with other bytes than the hash did (then the
    run's key would name bytes its pages were not built from)."""
    return sum(1 for path, sha256 in replayed.items() if hashed.get(path) != sha256)


# The key of a run whose files changed while it was built: no later build matches it.
UNSETTLED = "changed-while-built"


def run_key(run: DiscoveredRun, inputs_sha256: str) -> dict[str, str]:
    return {
        "name": run.name,
        "source_path": run.display_path,
        "mode": run.mode.value,
        "inputs_sha256": inputs_sha256,
    }


def read_status(out_dir: Path, settings_sha256: str) -> dict[tuple[str, ...], ReusableRun]:
    """Return the runs of the previous build keyed by ``run_key``; empty on any global change.

    The old site is anyone's to edit: the file is read only if regular and within the
    input size limit.
    """
    try:
        status = orjson.loads(
            read_same_file(out_dir / STATUS_FILE, None, LoadLimits().max_file_bytes)
        )
        if (
            status.get("format") != STATUS_FORMAT
            or status.get("tool_version") != __version__
            or status.get("settings_sha256") != settings_sha256
        ):
            return {}
        found = {}
        for entry in status["runs"]:
            key = tuple(str(entry[k]) for k in ("name", "source_path", "mode", "inputs_sha256"))
            files = tuple(str(f) for f in entry["files"])
            if all(_own_page(f, key[0], out_dir) for f in files):
                summary = RunSummary.from_json(entry["summary"])
                found[key] = ReusableRun(summary, files, ExportFacts.from_json(entry["exports"]))
        return found
    except (OSError, FileChangedError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _own_page(path: str, name: str, out_dir: Path) -> bool:
    """Say whether ``path`` names a plain file of run ``name``'s folder in the site, or its
    single file: a path out of it (``..``, absolute, a link) must never be copied."""
    parts = path.split("/")
    single = path == single_file_path(name)
    if not single and not (
        len(parts) >= 3
        and parts[:2] == ["runs", name]
        and all(part not in ("", ".", "..") for part in parts)
        and "\\" not in path
    ):
        return False
    target = out_dir / path
    root = out_dir.resolve()
    folder = root / parts[0] if single else root / "runs" / name
    return target.is_file() and not target.is_symlink() and target.resolve().is_relative_to(folder)


def status_record(
    settings_sha256: str,
    runs: Iterable[tuple[Mapping[str, str], RunSummary, list[str], ExportFacts]],
) -> dict[str, Any]:
    """Return the status file's content for the runs of this build."""
    return {
        "format": STATUS_FORMAT,
        "tool_version": __version__,
        "settings_sha256": settings_sha256,
        "runs": [
            {
                **key,
                "files": sorted(files),
                "summary": summary.to_json(),
                "exports": exports.to_json(),
            }
            for key, summary, files, exports in runs
        ],
    }
