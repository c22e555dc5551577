"""Build the static report site: replay every run, build every view, render, then write.

The phases run in one direction and nothing touches the output folder before the last:

1. replay every run (one progress line per run);
2. build every page's view-model;
3. render every page and asset into memory, refusing two files at one path, and
   refusing any page that holds text the forbidden-material scan matched;
4. write: the site is written into a temporary sibling folder, which then replaces the
   output folder, so an interrupted build leaves the old site or the new one, never a
   mix. An output folder whose files already equal the new site is left untouched.

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

import html
import os
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
    _check_out_dir(config.out_dir)
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
    unchanged = _write_site(config.out_dir, pages.files)
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
        for relative, data in sorted(files.items()):
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        if out_dir.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=parent))
            retired.rmdir()
            out_dir.rename(retired)
        staging.rename(out_dir)
    except BaseException:
        if retired is not None and not out_dir.exists():
            retired.rename(out_dir)
            retired = None
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if retired is not None:
        shutil.rmtree(retired, ignore_errors=True)
    return False
