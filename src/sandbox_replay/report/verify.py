"""Check that a published report site still follows from the inputs it records.

``verify_site`` finds each run's inputs at its recorded ``source_path`` under the inputs
root (``recorded_inputs`` reads what the manifest records). A site whose manifest names a
path that leaves the root or is not a regular file or folder is refused before anything
under the root is opened (``VerifyReport.refused``); otherwise:

1. every input file the manifest lists must hash to its recorded sha256 (an Inspect AI
   log, to its ``source_sha256``: the rebuild imports it again);
2. the site is rebuilt from them into a temporary folder with the packaged templates and
   the recorded settings;
3. each run's ``result.json`` and every other file must equal the rebuilt one byte for
   byte, the manifest's ``result_sha256`` must be the rebuilt record's digest, and
   neither side may hold a file the other lacks.

Whatever cannot be checked fails. Each difference is one line, made visible, in the order
above with runs and paths sorted, so two verifications of one site print the same report.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sandbox_replay.exports.text import one_line
from sandbox_replay.load.files import SiteTooDeepError, open_regular, site_entries
from sandbox_replay.report.build import BuildConfig, BuildError, build_site
from sandbox_replay.report.discover import DiscoveryError
from sandbox_replay.report.parallel import SchedulerError
from sandbox_replay.report.recorded_inputs import (
    Recorded,
    RecordedRun,
    VerifyError,
    read_manifest,
    read_recorded,
    refusals,
    sha256_of,
)

__all__ = ["VerifyConfig", "VerifyError", "VerifyReport", "verify_site"]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class VerifyConfig:
    """What one verification needs: the site, where its inputs are, and a progress sink."""

    site_dir: Path
    inputs_root: Path | None = None
    progress: Callable[[str], None] | None = field(default=None, compare=False)
    jobs: int | None = None
    # The baseline the site was built with (``build --baseline``), as given to ``verify``.
    baseline: Path | None = None


@dataclass(frozen=True)
class VerifyReport:
    """What verification found: the runs it checked and each difference, one line each.

    When ``refused`` is not empty nothing was checked, and it is the differences.
    """

    runs: tuple[str, ...]
    files_checked: int
    differences: tuple[str, ...]
    refused: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.differences


def _same_bytes(a: Path, b: Path) -> bool:
    """Compare two files piece by piece; one not readable as a regular file matches nothing."""
    try:
        with open_regular(a) as left, open_regular(b) as right:
            if os.fstat(left.fileno()).st_size != os.fstat(right.fileno()).st_size:
                return False
            while chunk := left.read(_CHUNK):
                if chunk != right.read(_CHUNK):
                    return False
    except OSError:
        return False
    return True


def _site_files(root: Path) -> tuple[dict[str, Path], list[str]]:
    """Return a site's regular files by relative path, and the paths that are not files."""
    files: dict[str, Path] = {}
    odd: list[str] = []
    try:
        entries = site_entries(root)
    except (OSError, SiteTooDeepError) as error:
        raise VerifyError(f"site folder {root} cannot be listed: {error}") from None
    for relative, info in entries:
        if stat.S_ISREG(info.st_mode):
            files[relative] = root / relative
        elif not stat.S_ISDIR(info.st_mode):
            odd.append(relative)
    return files, odd


def _check_inputs(run: RecordedRun, folder: Path) -> list[str]:
    found = []
    for relative, recorded in sorted(run.input_digests.items()):
        shown = f"{run.source_path}/{relative}"
        path = folder / relative
        if not path.is_file():
            found.append(f"input missing since the site was built: {shown}")
            continue
        try:  # as the replay reads it: through symlinks that stay inside the run folder
            resolved = path.resolve(strict=True)
            within = resolved.is_relative_to(folder.resolve())
            digest = sha256_of(resolved) if within else None
        except (OSError, RuntimeError):
            found.append(f"input unreadable since the site was built: {shown}")
            continue
        if digest != recorded:
            found.append(f"input changed since the site was built: {shown}")
    return found


def _find_inputs(
    runs: list[RecordedRun],
    root: Path,
    recorded: Recorded,
    differences: list[str],
    progress: Callable[[str], None],
) -> tuple[list[Path], list[str]]:
    """Return the input folders (and logs) to rebuild from, and the runs whose inputs are missing."""
    folders: list[Path] = []
    missing: list[str] = []
    for run in sorted(runs, key=lambda r: r.name):
        where = f"{run.source_path} (run {run.name})"
        folder = root / run.source_path
        log = run.source_sha256 is not None  # an Inspect AI log, imported again by the rebuild
        if not (folder.is_file() if log else folder.is_dir()):
            missing.append(run.name)
            differences.append(f"inputs not found: {where}")
        elif log and recorded.map_failed:
            missing.append(run.name)
        elif log:
            if sha256_of(folder) != run.source_sha256:
                differences.append(f"input changed: {where}")
            if folder not in folders:
                folders.append(folder)
        else:
            progress(f"checking the inputs of {run.name} in {run.source_path}")
            folders.append(folder)
            differences.extend(_check_inputs(run, folder))
    return folders, missing


def verify_site(config: VerifyConfig) -> VerifyReport:
    """Check every run, record and page of a built site against its inputs (module docstring)."""
    # A downloaded manifest is input: its names reach the terminal only made visible.
    sink = config.progress or (lambda _: None)

    def progress(message: str) -> None:
        sink(one_line(message))

    site = config.site_dir
    if not site.is_dir():
        raise VerifyError(f"site folder {site} does not exist")
    manifest, runs = read_manifest(site)
    root = (config.inputs_root or Path.cwd()).resolve()
    if not root.is_dir():
        raise VerifyError(f"inputs folder {root} is not a folder")
    refused = refusals(manifest, runs, root)
    if refused:
        return _report(runs, 0, refused, refused=True)
    recorded, differences = read_recorded(manifest, runs, root, config.baseline)
    folders, missing = _find_inputs(runs, root, recorded, differences, progress)
    published, odd = _site_files(site)
    if recorded.baseline_failed:
        differences.append("site not rebuilt: its baseline could not be checked")
        return _report(runs, 0, differences)
    if missing:
        differences.append(
            f"site not rebuilt: the inputs of {len(missing)} run(s) were not found "
            "(give their root with --inputs)"
        )
        differences.extend(f"not a regular file: {path}" for path in odd)
        return _report(runs, 0, differences)
    progress(f"rebuilding the site from {len(folders)} run folder(s)")
    scratch = Path(tempfile.mkdtemp(prefix="sandbox-replay-verify-"))
    try:
        out = scratch / "site"
        rebuild = BuildConfig(
            tuple(folders),
            out,
            templates=None,
            source_date_epoch=recorded.epoch,
            cwd=root,
            progress=progress,
            jobs=config.jobs,
            single_file=any(r.single_file for r in runs),
            forbidden=recorded.forbidden,
            policies=recorded.policies,
            baseline=recorded.baseline,
            label=recorded.label,
            inspect=recorded.inspect,
            sensitivity=recorded.sensitivity[0],
            require_sensitivity=recorded.sensitivity[1],
        )
        try:
            build_site(rebuild)
        except (BuildError, DiscoveryError, SchedulerError) as error:
            differences.append(f"site could not be rebuilt from its inputs: {error}")
            return _report(runs, 0, differences)
        rebuilt, _ = _site_files(out)
        differences += _compare(runs, published, rebuilt)
        differences.extend(f"not a regular file: {path}" for path in odd)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return _report(runs, len(set(published) | set(rebuilt)), differences)


def _compare(
    runs: list[RecordedRun], published: dict[str, Path], rebuilt: dict[str, Path]
) -> list[str]:
    """Return how the published site differs from the rebuilt one: records first, then pages."""
    differences: list[str] = []
    results: set[str] = set()
    for run in sorted(runs, key=lambda r: r.name):
        results.add(run.result)
        fresh = rebuilt.get(run.result)
        if fresh is None:
            differences.append(f"the replay produced no result record: {run.result}")
            continue
        if sha256_of(fresh) != run.result_sha256:
            differences.append(
                f"manifest result digest differs from the replay: {run.name} ({run.result})"
            )
        shown = published.get(run.result)
        if shown is None:
            differences.append(f"result record missing from the site: {run.result}")
        elif not _same_bytes(shown, fresh):
            differences.append(f"result record differs from the replay: {run.result}")
    for path in sorted(set(published) | set(rebuilt)):
        if path in results:
            continue
        if path not in published:
            differences.append(f"page missing from the site: {path}")
        elif path not in rebuilt:
            differences.append(f"file not produced by a rebuild: {path}")
        elif not _same_bytes(published[path], rebuilt[path]):
            differences.append(f"page no longer follows from its inputs: {path}")
    return differences


def _report(
    runs: list[RecordedRun], files: int, differences: list[str], *, refused: bool = False
) -> VerifyReport:
    lines = tuple(one_line(line) for line in differences)
    return VerifyReport(tuple(r.name for r in runs), files, lines, lines if refused else ())
