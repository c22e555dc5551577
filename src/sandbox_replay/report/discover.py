"""Find the runs under the paths given to ``build``: fixture folders and bundle folders.

A folder holding any of the seven core files is one run (a run missing some of them is
still a run: its strict-load layer reports what is missing, which the report must show
rather than skip). It is a bundle when it holds ``bundle_manifest.json``, otherwise a
fixture (whose absent negative-case files the negative-case layer then reports). Any other
folder is searched recursively, in sorted order; a run folder is not searched further.
``exported_runs`` gives the exports every run found, replayed unless the build made it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox_replay import pipeline
from sandbox_replay.exports import ExportFacts, ExportRun, export_run, source_root_of
from sandbox_replay.inputs import BUNDLE_MANIFEST, CORE_FILES, InputMode
from sandbox_replay.policy import PolicyChoice
from sandbox_replay.scan import ForbiddenScanner

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


def is_run_folder(folder: Path) -> bool:
    """Say whether ``folder`` holds any of the seven core files."""
    return any((folder / name).is_file() for name in CORE_FILES)


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


def _walk(folder: Path) -> Iterable[Path]:
    if is_run_folder(folder):
        yield folder
        return
    for child in sorted(folder.iterdir(), key=lambda p: p.name):
        if child.is_dir() and not child.is_symlink() and not child.name.startswith("."):
            yield from _walk(child)


def discover_runs(paths: Sequence[Path], cwd: Path | None = None) -> list[DiscoveredRun]:
    """Return every run under ``paths``, each once, with a unique path-safe name.

    Names come from the folder name. When two folders give one name, each of them is
    named after its path relative to the working directory instead (its parent folders
    joined with ``-``), so the choice never depends on the order the paths were given;
    if that still collides, the build is refused.
    """
    base = cwd or Path.cwd()
    folders: list[Path] = []
    seen: set[Path] = set()
    for path in paths:
        if not path.exists():
            raise DiscoveryError(f"path {path} does not exist")
        if not path.is_dir():
            raise DiscoveryError(f"path {path} is not a folder")
        for folder in _walk(path):
            key = folder.resolve()
            if key not in seen:
                seen.add(key)
                folders.append(folder)
    if not folders:
        shown = ", ".join(str(p) for p in paths)
        raise DiscoveryError(f"no fixture or bundle folder found under {shown}")
    shown_paths = {folder: display_path(folder, base) for folder in folders}
    short = {folder: safe_name(folder.resolve().name) for folder in folders}
    counts: dict[str, int] = {}
    for name in short.values():
        counts[name] = counts.get(name, 0) + 1
    names: dict[Path, str] = {}
    for folder in folders:
        name = short[folder]
        if counts[name] > 1:
            name = safe_name(shown_paths[folder].replace("/", "-").lstrip(".-"))
        names[folder] = name
    taken: dict[str, Path] = {}
    for folder, name in names.items():
        if name in taken:
            raise DiscoveryError(
                f"runs {taken[name]} and {folder} would both be published as runs/{name}/; "
                "rename one of the folders"
            )
        taken[name] = folder
    runs = [DiscoveredRun(names[f], mode_of(f), f, shown_paths[f]) for f in folders]
    return sorted(runs, key=lambda r: r.name)


def exported_runs(
    paths: Sequence[Path],
    cwd: Path | None = None,
    known: Mapping[str, ExportFacts] | None = None,
    *,
    summary: bool = True,
    scanner: ForbiddenScanner | None = None,
    policies: PolicyChoice | None = None,
) -> list[ExportRun]:
    """Return every run ``build`` finds under ``paths`` for the exports, named as the site
    names them.

    A run whose facts are ``known`` by that name (``BuildResult.exports``: the build made or
    reused them from these very inputs) is not replayed again; any other run is.
    """
    runs = []
    for run in discover_runs(paths, cwd):
        facts = (known or {}).get(run.name)
        if facts is None:
            policy = policies.for_run(run.path) if policies is not None else None
            config = pipeline.ReplayConfig(run.path, run.mode, policy=policy, scanner=scanner)
            outcome = pipeline.replay(config)
            runs.append(export_run(run.name, outcome, cwd, summary=summary))
        else:
            runs.append(ExportRun(run.name, facts, source_root_of(run.path, cwd)))
    return runs
