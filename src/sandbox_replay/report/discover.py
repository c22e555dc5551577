"""Find the runs under the paths given to ``build``: fixture folders and bundle folders.

A folder holding any of the seven core files is one run (its strict load reports what is
missing), a bundle when it holds ``bundle_manifest.json``, else a fixture. Any other
folder is searched, in sorted order. A folder that may hold a run and is not replayed is
reported as a ``SkippedFolder``, never left out in silence: a run in a hidden folder, a
symbolic link (never followed), a folder that cannot be listed, one more than
``MAX_DEPTH`` levels deep. It counts as blocked for ``--fail-on blocked`` unless an
``--exclude`` pattern names it or a folder above it.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox_replay.exports import ExportFacts, ExportRun, located_at, outside_root, source_root_of
from sandbox_replay.exports.text import one_line
from sandbox_replay.load.files import MAX_DEPTH, sorted_walk
from sandbox_replay.load.run import BUNDLE_MANIFEST, CORE_FILES, InputMode

_UNSAFE = re.compile(r"[^a-z0-9_-]+")


class DiscoveryError(ValueError):
    """A path given to ``build`` is unusable, or it holds no run."""


@dataclass(frozen=True)
class DiscoveredRun:
    """One run folder: its page name, mode, where it is, and how to name it relative to cwd."""

    name: str
    mode: InputMode
    path: Path
    display_path: str
    # The sha256 of the Inspect AI log the run was imported from (``inspect_runs``).
    source_sha256: str | None = None


@dataclass(frozen=True)
class SkippedFolder:
    """A folder that may hold a run and was not replayed, and the ``--exclude`` pattern that
    accepts it (None: it counts as blocked)."""

    path: Path
    display_path: str
    reason: str
    excluded_by: str | None = None

    @property
    def shown(self) -> str:
        """Return the path with control and bidi characters made visible."""
        return one_line(self.display_path)

    @property
    def note(self) -> str:
        """Return the one progress line that reports this folder."""
        if self.excluded_by is not None:
            return (
                f"excluded {self.shown} ({self.reason}): not replayed, "
                f"as --exclude {one_line(self.excluded_by)} asks"
            )
        return (
            f"skipped {self.shown} ({self.reason}): not replayed; it counts as blocked "
            "for --fail-on blocked unless --exclude names it"
        )


@dataclass(frozen=True)
class Discovery:
    """Every run found under the paths, sorted by name, and every folder skipped, by path."""

    runs: tuple[DiscoveredRun, ...]
    skipped: tuple[SkippedFolder, ...]


def mode_of(folder: Path) -> InputMode:
    """Return the mode a run folder is read in."""
    return InputMode.BUNDLE if (folder / BUNDLE_MANIFEST).is_file() else InputMode.FIXTURE


def safe_name(text: str) -> str:
    """Return ``text`` made safe for one path segment: lowercase ``[a-z0-9_-]``, never empty."""
    name = _UNSAFE.sub("-", text.lower()).strip("-")
    return name or "run"


def display_path(path: Path, cwd: Path) -> str:
    """Return ``path`` relative to ``cwd`` in POSIX form (as given when that is impossible)."""
    try:
        relative = os.path.relpath(path.resolve(), cwd.resolve())
    except ValueError:  # another drive on Windows
        return path.as_posix()
    return Path(relative).as_posix()


class _Walked:
    """What one walk found: run folders in search order, and skipped folders with a reason."""

    def __init__(self) -> None:
        self.runs: list[Path] = []
        self.skipped: list[tuple[Path, str]] = []


def _is_core_file(entry: os.DirEntry[str]) -> bool:
    if entry.name not in CORE_FILES:
        return False
    try:
        return entry.is_file()
    except OSError:  # named as one: the run's strict load reports it unreadable
        return True


def _kind(entry: os.DirEntry[str]) -> str:
    """Return "folder", "link" (to a folder, or that cannot be checked), "unreadable" or
    "other" for one entry of a folder being searched."""
    try:
        if entry.is_symlink():
            try:
                return "link" if entry.is_dir() else "other"
            except OSError:
                return "link"
        return "folder" if entry.is_dir(follow_symlinks=False) else "other"
    except OSError:
        return "unreadable"


def _walk(root: Path, found: _Walked) -> None:
    for listing in sorted_walk(root):
        folder = listing.folder
        if listing.error is not None:
            error = listing.error
            found.skipped.append((folder, f"cannot be read: {error.strerror or error}"))
            continue
        if any(_is_core_file(entry) for entry in listing.entries):
            if any(part.startswith(".") for part in folder.relative_to(root).parts):
                found.skipped.append((folder, "a run in a hidden folder"))
            else:
                found.runs.append(folder)
            continue
        for entry in listing.entries:
            child = folder / entry.name
            kind = _kind(entry)
            if kind == "link":
                found.skipped.append((child, "a symbolic link, not followed"))
            elif kind == "unreadable":
                found.skipped.append((child, "cannot be read"))
            elif kind == "folder":
                if listing.depth + 1 > MAX_DEPTH:
                    found.skipped.append((child, f"more than {MAX_DEPTH} levels deep"))
                else:
                    listing.enter.append(child)


def _excluded_by(shown: str, patterns: Sequence[str]) -> str | None:
    """Return the first pattern naming ``shown`` or a folder above it, else None."""
    parts = shown.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        wanted = pattern.removeprefix("./").rstrip("/") or "."
        if any(fnmatch.fnmatchcase(prefix, wanted) for prefix in prefixes):
            return pattern
    return None


def _skipped_display(path: Path, cwd: Path) -> str:
    # The parent is resolved, never the folder itself: a symbolic link is shown as itself.
    parent = display_path(path.parent, cwd)
    return path.name if parent == "." else f"{parent}/{path.name}"


def discover(
    paths: Sequence[Path], cwd: Path | None = None, exclude: Sequence[str] = ()
) -> Discovery:
    """Return every run under ``paths``, each once, with a unique path-safe name, and every
    folder skipped.

    Two folders of one name are each named after their path from the working directory
    (never after the order given); a collision left is refused. ``exclude`` holds globs
    (``*`` also matches ``/``) of folder paths relative to ``cwd``.
    """
    base = cwd or Path.cwd()
    found = _Walked()
    for path in paths:
        if not path.exists():
            raise DiscoveryError(f"path {path} does not exist")
        if not path.is_dir():
            raise DiscoveryError(f"path {path} is not a folder")
        _walk(path, found)
    unique: dict[Path, Path] = {}
    for folder in found.runs:
        unique.setdefault(folder.resolve(), folder)  # the first of each, in search order
    folders = list(unique.values())
    skipped: dict[str, SkippedFolder] = {}
    for folder, reason in found.skipped:
        shown = _skipped_display(folder, base)
        if shown not in skipped:
            skipped[shown] = SkippedFolder(folder, shown, reason, _excluded_by(shown, exclude))
    ordered_skipped = tuple(skipped[shown] for shown in sorted(skipped))
    if not folders:
        shown = ", ".join(str(p) for p in paths)
        notes = [f"{folder.shown} ({folder.reason})" for folder in ordered_skipped]
        also = f"; not replayed: {', '.join(notes[:5])}" if notes else ""
        more = f" and {len(notes) - 5} more" if len(notes) > 5 else ""
        raise DiscoveryError(f"no fixture or bundle folder found under {shown}{also}{more}")
    shown_paths = {folder: display_path(folder, base) for folder in folders}
    short = {folder: safe_name(folder.resolve().name) for folder in folders}
    counts = Counter(short.values())
    names = {
        folder: safe_name(shown_paths[folder].replace("/", "-").lstrip(".-"))
        if counts[short[folder]] > 1
        else short[folder]
        for folder in folders
    }
    taken: dict[str, Path] = {}
    for folder, name in names.items():
        if name in taken:
            raise DiscoveryError(
                f"runs {taken[name]} and {folder} would both be published as runs/{name}/; "
                "rename one of the folders"
            )
        taken[name] = folder
    runs = [DiscoveredRun(names[f], mode_of(f), f, shown_paths[f]) for f in folders]
    return Discovery(tuple(sorted(runs, key=lambda r: r.name)), ordered_skipped)


def exports_of(
    runs: Sequence[DiscoveredRun],
    facts: Mapping[str, ExportFacts],
    root: Path | None = None,
    logs: Mapping[Path, Path] | None = None,
) -> tuple[list[ExportRun], list[str]]:
    """Return ``runs`` as the exports take them, and the warnings of their folders outside
    ``root``; a run imported from a log (``logs``: by resolved folder) is located by the log."""
    exported, named = [], set()
    for run in runs:
        export = ExportRun(run.name, facts[run.name], source_root_of(run.path, root))
        log = (logs or {}).get(run.path.resolve())
        if log is not None:
            folder = source_root_of(log.parent, root)
            export = located_at(export, f"{folder}/{log.name}" if folder else log.name)
        exported.append(export)
        named.add(log or run.path)
    warnings = (outside_root(p.parent if p.is_file() else p, root) for p in sorted(named))
    return exported, [warning for warning in warnings if warning is not None]
