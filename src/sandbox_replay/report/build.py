"""Build the static report site: replay every run, build every view, render, then write.

The phases run in one direction and nothing touches the output folder before the last
(only the recovery below runs first, and it only puts back what a killed build moved):

1. replay every run (one progress line per run);
2. build every page's view-model;
3. render every page and asset into memory, refusing two files at one path, and
   refusing any page that holds text the forbidden-material scan matched;
4. write (see "Crash safety" below). An output folder whose files already equal the new
   site is left untouched.

Crash safety. A build killed at any instant (SIGKILL included) leaves the output folder
either byte for byte the previous site or byte for byte the new one, never a mix, and
holds no temporary file. The new site is written and fsynced in full (files, then their
folders) into a hidden sibling folder ``.<out>.new-<random>``; then, on Linux, one
``renameat2(RENAME_EXCHANGE)`` swaps it with the output folder atomically, and the
sibling (now the old site) is removed. Where that call is missing (other systems, some
file systems) the old site is first renamed aside to ``.<out>.old-<random>`` and the new
one renamed into place: a kill between those two renames leaves no output folder for an
instant, and the next build's recovery renames the old site back before anything else.
Every build starts with that recovery: it restores a site renamed aside when the output
folder is missing, then removes every ``.<out>.new-*`` and ``.<out>.old-*`` sibling
folder left by a killed build. One build at a time may write a given output folder.
``tests/test_build_interrupt.py`` kills builds at random times and at every line of this
phase, on both paths.

Site layout (all links relative, so it opens from ``file://`` or any static host):
``index.html``; ``runs/<run>/index.html`` and ``runs/<run>/result.json`` (the run's result
record, byte for byte as ``run`` writes it); ``codes/index.html``; ``assets/site.css`` and
``assets/site.js``; and ``manifest.json``:

    {"schema_version": "sandbox-replay.site/1",
     "tool": {"name", "version"}, "build_time": <ISO 8601 UTC or null>,
     "runs": [{"name", "mode", "status", "source_path" (relative to the working
               directory), "page", "result", "result_sha256",
               "input_digests": {path: "sha256:<hex>"}}]}

It is written the way every record is (``atomic.dump_json``), so a later ``verify`` can
check a published site against its inputs. With ``SOURCE_DATE_EPOCH`` unset no time is
recorded anywhere, so equal inputs always give equal bytes.
"""

from __future__ import annotations

import ctypes
import html
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sandbox_replay.atomic import dump_json
from sandbox_replay.pipeline import Replay, ReplayConfig, replay
from sandbox_replay.records import RunRecords, build_records
from sandbox_replay.report.discover import DiscoveredRun, discover_runs
from sandbox_replay.report.render import ASSETS, Renderer
from sandbox_replay.report.views import (
    RunView,
    build_catalog_view,
    build_index_view,
    build_run_view,
)
from sandbox_replay.version import TOOL_NAME, __version__

SITE_SCHEMA = "sandbox-replay.site/1"
MANIFEST = "manifest.json"


class BuildError(ValueError):
    """The site cannot be built as asked (a usage problem, not a finding)."""


@dataclass(frozen=True)
class BuildConfig:
    """What one build needs: the run paths, where to write, and optional overrides."""

    paths: tuple[Path, ...]
    out_dir: Path
    templates: Path | None = None
    source_date_epoch: int | None = None
    cwd: Path | None = None
    progress: Callable[[str], None] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class RunOutcome:
    name: str
    status: str
    headline: str


@dataclass(frozen=True)
class BuildResult:
    """What was built: the site folder, each run's status, and how many files."""

    out_dir: Path
    runs: tuple[RunOutcome, ...]
    file_count: int
    unchanged: bool

    @property
    def any_blocked(self) -> bool:
        return any(run.status == "blocked" for run in self.runs)


def epoch_from_env(environ: Mapping[str, str] | None = None) -> int | None:
    """Return ``SOURCE_DATE_EPOCH`` as an int, None when unset; raise on a bad value."""
    value = (environ if environ is not None else os.environ).get("SOURCE_DATE_EPOCH", "")
    if not value.strip():
        return None
    try:
        epoch = int(value.strip())
    except ValueError:
        raise BuildError(f"SOURCE_DATE_EPOCH must be an integer, got {value!r}") from None
    if epoch < 0:
        raise BuildError("SOURCE_DATE_EPOCH must not be negative")
    return epoch


def _build_time(epoch: int | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _stderr(message: str) -> None:
    print(f"sandbox-replay: {message}", file=sys.stderr, flush=True)


@dataclass
class _Replayed:
    run: DiscoveredRun
    replay: Replay
    records: RunRecords


class _Pages:
    """The site in memory: relative path → bytes, refusing a second file at one path."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def add(self, path: str, data: bytes) -> None:
        if path in self.files:
            raise BuildError(f"two pages map to {path}")
        self.files[path] = data


def build_site(config: BuildConfig) -> BuildResult:
    """Replay every run under ``config.paths`` and write the report site to ``config.out_dir``."""
    progress = config.progress or _stderr
    # Absolute and normalised, so `--out .` or `--out ..` names a folder with a parent.
    out_dir = Path(os.path.abspath(config.out_dir))
    _refuse_enclosing_out_dir(out_dir, [Path.cwd(), *config.paths], config.out_dir)
    _recover(out_dir)
    _check_out_dir(out_dir)
    renderer = Renderer(config.templates)
    runs = discover_runs(config.paths, config.cwd)
    build_time = _build_time(config.source_date_epoch)
    shown_time = build_time or "not recorded (SOURCE_DATE_EPOCH was not set)"

    # Phase 1: replay.
    replayed = []
    for run in runs:
        outcome = replay(ReplayConfig(run.path, run.mode))
        records = build_records(outcome)
        progress(f"replayed {run.display_path} as runs/{run.name}: {outcome.status}")
        replayed.append(_Replayed(run, outcome, records))

    # Phase 2: view-models.
    run_views = [
        build_run_view(r.run, r.replay, r.records, shown_time, __version__) for r in replayed
    ]
    index = build_index_view(run_views, shown_time, __version__)
    catalog = build_catalog_view(run_views, shown_time, __version__)

    # Phase 3: render into memory.
    pages = _Pages()
    pages.add("index.html", renderer.render("index.html", view=index))
    pages.add("codes/index.html", renderer.render("codes.html", view=catalog))
    for item, view in zip(replayed, run_views, strict=True):
        pages.add(f"runs/{view.name}/index.html", renderer.render("run.html", view=view))
        pages.add(f"runs/{view.name}/result.json", item.records.result_bytes)
    for asset in ASSETS:
        pages.add(asset, renderer.asset(asset))
    pages.add(MANIFEST, dump_json(_manifest(replayed, run_views, build_time)))
    _refuse_matched_text(pages, replayed)

    # Phase 4: write.
    unchanged = _write_site(out_dir, pages.files)
    return BuildResult(
        out_dir=config.out_dir,
        runs=tuple(RunOutcome(v.name, v.status, v.headline.text) for v in run_views),
        file_count=len(pages.files),
        unchanged=unchanged,
    )


def _manifest(
    replayed: Sequence[_Replayed], views: Sequence[RunView], build_time: str | None
) -> dict[str, object]:
    return {
        "schema_version": SITE_SCHEMA,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "build_time": build_time,
        "runs": [
            {
                "name": view.name,
                "mode": item.run.mode.value,
                "status": view.status,
                "source_path": item.run.display_path,
                "page": f"runs/{view.name}/index.html",
                "result": f"runs/{view.name}/result.json",
                "result_sha256": item.records.receipt["result_record_sha256"],
                "input_digests": item.records.receipt["input_digests"],
            }
            for item, view in zip(replayed, views, strict=True)
        ],
    }


def _refuse_matched_text(pages: _Pages, replayed: Sequence[_Replayed]) -> None:
    """Fail closed if any output byte repeats text the scan matched (records are redacted)."""
    needles: set[bytes] = set()
    for item in replayed:
        for matched in item.replay.scan.matched_texts:
            needles.add(matched)
            text = matched.decode("utf-8", errors="ignore")
            needles.add(html.escape(text, quote=True).encode("utf-8"))
    needles.discard(b"")
    for path, data in pages.files.items():
        if any(needle in data for needle in needles):
            raise BuildError(
                f"{path} would contain text the forbidden-material scan matched; "
                "nothing was written"
            )


def _refuse_enclosing_out_dir(out_dir: Path, inside: Sequence[Path], shown: Path) -> None:
    """Refuse an output folder that is, or holds, the working directory or an input path.

    The whole output folder is replaced, so either would be swept away with the old site.
    """
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


def _check_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise BuildError(f"output path {out_dir} exists and is not a folder")
    for parent in out_dir.parents:
        if parent.exists() and not parent.is_dir():
            raise BuildError(f"output path {out_dir} lies under {parent}, which is a file")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / MANIFEST).is_file():
        raise BuildError(
            f"output folder {out_dir} is not empty and holds no {MANIFEST}; "
            "refusing to replace a folder that is not a site this tool built"
        )


def _current_files(out_dir: Path) -> dict[str, bytes] | None:
    if not out_dir.is_dir():
        return None
    found: dict[str, bytes] = {}
    for path in sorted(out_dir.rglob("*")):
        if path.is_file():
            found[path.relative_to(out_dir).as_posix()] = path.read_bytes()
        elif not path.is_dir():
            return None
    return found


def _leftovers(out_dir: Path) -> tuple[list[Path], list[Path]]:
    """Return the staging and retired sibling folders a killed build may have left."""
    pattern = re.compile(rf"\.{re.escape(out_dir.name)}\.(new|old)-[A-Za-z0-9_]+")
    found: dict[str, list[Path]] = {"new": [], "old": []}
    if out_dir.parent.is_dir():
        for sibling in sorted(out_dir.parent.iterdir()):
            match = pattern.fullmatch(sibling.name)
            if match and sibling.is_dir() and not sibling.is_symlink():
                found[match.group(1)].append(sibling)
    return found["new"], found["old"]


def _recover(out_dir: Path) -> None:
    """Undo what a killed build left: restore a site renamed aside, remove temp folders."""
    staged, retired = _leftovers(out_dir)
    if retired and not out_dir.exists() and not out_dir.is_symlink():
        # Killed between the two renames of the fallback swap: the old site is whole.
        retired[0].rename(out_dir)
        retired = retired[1:]
        _fsync_dir(out_dir.parent)
    for folder in staged + retired:
        shutil.rmtree(folder, ignore_errors=True)


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


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one atomic step (Linux ``renameat2``); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    renameat2.restype = ctypes.c_int
    done: int = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return done == 0


def _write_site(out_dir: Path, files: Mapping[str, bytes]) -> bool:
    """Write ``files`` as the whole content of ``out_dir``; return True if it already was."""
    if _current_files(out_dir) == dict(files):
        return True
    parent = out_dir.parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.new-", dir=parent))
    retired: Path | None = None
    try:
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)
        folders = {staging}
        for relative, data in sorted(files.items()):
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            folders.add(target.parent)
            with target.open("wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        for folder in sorted(folders):
            _fsync_dir(folder)
        if out_dir.exists() and _exchange(staging, out_dir):
            retired, staging = staging, out_dir
        else:
            if out_dir.exists():
                retired = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=parent))
                retired.rmdir()
                out_dir.rename(retired)
            staging.rename(out_dir)
        _fsync_dir(parent)
    except BaseException:
        if retired is not None and not out_dir.exists():
            retired.rename(out_dir)
            retired = None
        if staging != out_dir:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    if retired is not None:
        shutil.rmtree(retired, ignore_errors=True)
    return False
