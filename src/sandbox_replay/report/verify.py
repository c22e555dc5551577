"""Check that a published report site still follows from the inputs it records.

``verify_site`` reads the site's ``manifest.json`` (its format is in ``build.py``) and, for
each run, finds the run's input folder at its recorded ``source_path``, relative to the
inputs root (the working directory unless given). Then:

1. every input file the manifest lists must hash to its recorded sha256;
2. the whole site is rebuilt from those folders into a temporary folder, with the
   packaged templates, the recorded build time as ``SOURCE_DATE_EPOCH`` and the recorded
   ``--single-file`` choice; the rebuild replays every run through every validator;
3. each run's published ``result.json`` must equal the rebuilt one byte for byte, and
   the manifest's ``result_sha256`` must be the rebuilt record's digest;
4. every published file must equal the rebuilt one byte for byte, and neither side may
   hold a file the other lacks.

A site built with ``--forbidden-classes`` records that table's path (relative to the
inputs root) and digest; the rebuild scans with it, and a table missing, unreadable or
changed since the build is a difference. So is a run's policy (``--policy``, the
project's ``[tool.sandbox-replay]``): each run's recorded policy file is read again at
its path, must have its recorded sha256, and the run is re-derived with it. A run
imported from an Inspect AI log (``inspect_runs``) records the log as its source: the log
must hash to its recorded ``source_sha256`` and the rebuild imports it again, with the map
file the manifest's ``inspect_import`` records (read again, as a policy is).

Whatever cannot be checked fails (inputs not found, an unreadable manifest, another tool
version). The site may be hostile: its manifest is read only as a regular file within the
input size limit and nesting depth, its folders are listed without recursion to a
bounded depth, and a recorded path (a run's source, a policy, a forbidden-classes table)
that is absolute, climbs with ``..`` or resolves out of the inputs root is a difference,
never opened. Each difference is one line; the lines come in the order above, runs and paths
sorted, so two verifications of one site print the same report. Each line, and each
progress line, has its control and bidi characters made visible and stays one line. A site built with
``--templates`` does not verify: its pages follow from templates the site does not hold.

A site built with ``--baseline`` records that baseline's digests; it verifies only given
the very same baseline (``VerifyConfig.baseline``), with which it is rebuilt. A missing
baseline, one that cannot be read or checked, or another one is a difference.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from sandbox_replay.exports.text import one_line
from sandbox_replay.importers.inspect_logs import ImportOptions
from sandbox_replay.importers.tool_map import MapFileError, read_tool_map
from sandbox_replay.load.files import (
    FileChangedError,
    LoadLimits,
    SiteTooDeepError,
    open_regular,
    read_same_file,
    site_entries,
)
from sandbox_replay.load.scan import ForbiddenClassesError, ForbiddenTable, read_forbidden_table
from sandbox_replay.model.policy import Policy, PolicyChoice, PolicyFileError, read_policy
from sandbox_replay.report.baseline import Baseline, BaselineError, read_baseline
from sandbox_replay.report.build import (
    MANIFEST,
    SITE_SCHEMA,
    BuildConfig,
    BuildError,
    build_site,
)
from sandbox_replay.report.discover import DiscoveryError
from sandbox_replay.report.parallel import SchedulerError
from sandbox_replay.version import TOOL_NAME, __version__

_CHUNK = 1 << 20


class VerifyError(ValueError):
    """The site cannot be verified at all (no readable manifest)."""


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
    """What verification found: the runs it checked and each difference, one line each."""

    runs: tuple[str, ...]
    files_checked: int
    differences: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.differences


@dataclass(frozen=True)
class _Run:
    name: str
    source_path: str
    result: str
    result_sha256: str
    input_digests: Mapping[str, str]
    single_file: bool
    # The policy file it was replayed with (path relative to the inputs root, sha256);
    # None for the packaged table.
    policy: tuple[str, str] | None = None
    # The sha256 of the Inspect AI log it was imported from (then source_path is the log).
    source_sha256: str | None = None


# Every file is opened with ``open_regular``: a symlink or FIFO swapped in after the site's
# folders were listed is neither followed nor waited on, and cannot be read.


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open_regular(path) as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def _same_bytes(a: Path, b: Path) -> bool:
    """Compare two files piece by piece (a large run's result record is gigabytes).

    A file that cannot be read as a regular file is not the same as anything.
    """
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


def _text(entry: Mapping[str, Any], key: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise VerifyError(f"{MANIFEST}: a run has no valid {key!r}")
    return value


def _inside(relative: str) -> bool:
    """Say whether a recorded relative path stays inside the folder it is relative to."""
    path = PurePosixPath(relative)
    return not path.is_absolute() and ".." not in path.parts and "\\" not in relative


def _under(root: Path, relative: str) -> Path | None:
    """Return ``root / relative`` if it lies inside ``root``, symlinks resolved; else None.

    A recorded path is the site's word, and the site may be hostile: one that is absolute,
    climbs with ``..`` or leads out through a symlink is never opened.
    """
    if not _inside(relative):
        return None
    path = root / relative
    try:
        inside = path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        return None
    return path if inside else None


def read_manifest(site_dir: Path) -> tuple[dict[str, Any], list[_Run]]:
    """Return the site's manifest and its runs; raise VerifyError when it is unusable.

    The manifest must be a regular file (no symlink followed, no FIFO waited on) within
    the input size limit, nested at most 1,024 levels deep (orjson's bound).
    """
    path = site_dir / MANIFEST
    try:
        manifest = orjson.loads(read_same_file(path, None, LoadLimits().max_file_bytes))
    except FileNotFoundError:
        raise VerifyError(f"{path} is missing: not a site this tool built") from None
    except (OSError, FileChangedError) as error:
        if getattr(error, "errno", None) == errno.ELOOP:
            raise VerifyError(f"{path} is a symlink, not followed") from None
        raise VerifyError(
            f"{path} is not readable as a regular file within the size limit "
            f"({type(error).__name__})"
        ) from None
    except ValueError as error:
        raise VerifyError(f"{path} is not readable JSON: {type(error).__name__}") from None
    if not isinstance(manifest, dict) or manifest.get("schema_version") != SITE_SCHEMA:
        raise VerifyError(f"{path} is not a {SITE_SCHEMA} manifest")
    entries = manifest.get("runs")
    if not isinstance(entries, list) or not entries:
        raise VerifyError(f"{path} lists no runs")
    runs = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise VerifyError(f"{MANIFEST}: a run is not an object")
        digests = entry.get("input_digests")
        if not isinstance(digests, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in digests.items()
        ):
            raise VerifyError(
                f"{MANIFEST}: run {_text(entry, 'name')!r} has no valid input_digests"
            )
        runs.append(
            _Run(
                name=_text(entry, "name"),
                source_path=_text(entry, "source_path"),
                result=_text(entry, "result"),
                result_sha256=_text(entry, "result_sha256"),
                input_digests=digests,
                single_file="single_file" in entry,
                policy=_policy_entry(entry),
                source_sha256=_optional_text(entry, "source_sha256"),
            )
        )
    return manifest, runs


def _optional_text(entry: Mapping[str, Any], key: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise VerifyError(f"{MANIFEST}: run {_text(entry, 'name')!r} has a {key} that is not text")
    return value


def _inspect_options(
    manifest: Mapping[str, Any], root: Path
) -> tuple[ImportOptions | None, list[str]]:
    """Return how the build imported its Inspect AI logs, with the map it recorded.

    The map file is read again from the inputs root; a missing or changed one is a
    difference, as for a policy.
    """
    recorded = manifest.get("inspect_import")
    if recorded is None:
        return None, []
    if not isinstance(recorded, dict):
        raise VerifyError(f"{MANIFEST}: inspect_import is not an object")
    teardown = recorded.get("rollback_from_teardown") is True
    shown = recorded.get("map")
    if shown is None:
        return ImportOptions(rollback_from_teardown=teardown), []
    path = shown.get("path") if isinstance(shown, dict) else None
    digest = shown.get("sha256") if isinstance(shown, dict) else None
    if not isinstance(path, str) or not _inside(path) or not isinstance(digest, str):
        raise VerifyError(f"{MANIFEST}: inspect_import has a map without a valid path and sha256")
    found = _under(root, path)
    try:
        tool_map = read_tool_map(found) if found is not None else None
    except MapFileError:
        tool_map = None
    if tool_map is None:
        return None, [f"map file not readable as the build read it: {path}"]
    if tool_map.sha256 != digest:
        return None, [f"map file changed since the site was built: {path}"]
    return ImportOptions(tool_map, rollback_from_teardown=teardown), []


def _policy_entry(entry: Mapping[str, Any]) -> tuple[str, str] | None:
    recorded = entry.get("policy")
    if recorded is None:
        return None
    path = recorded.get("path") if isinstance(recorded, dict) else None
    digest = recorded.get("sha256") if isinstance(recorded, dict) else None
    if not isinstance(path, str) or not _inside(path) or not isinstance(digest, str):
        raise VerifyError(
            f"{MANIFEST}: run {_text(entry, 'name')!r} has a policy without a valid path and sha256"
        )
    return path, digest


def _policies(runs: list[_Run], root: Path) -> tuple[PolicyChoice, list[str]]:
    """Return the policies the site's runs were replayed with, and what is wrong with them.

    Each run's policy is the file at its recorded path; one that cannot be read or has
    changed since the build is a difference, and that run is rebuilt with the packaged
    table instead (so its pages differ too).
    """
    chosen: list[tuple[Path, Policy]] = []
    differences: list[str] = []
    read: dict[str, Policy | None] = {}
    for run in sorted(runs, key=lambda r: r.name):
        if run.policy is None:
            continue
        path, digest = run.policy
        if path not in read:
            found = _under(root, path)
            try:
                read[path] = read_policy(found) if found is not None else None
            except PolicyFileError:
                read[path] = None
        policy = read[path]
        if policy is None:
            differences.append(f"policy not readable as the build read it: {path} (run {run.name})")
        elif policy.source.sha256 != digest:
            differences.append(f"policy changed since the site was built: {path} (run {run.name})")
        else:
            chosen.append(((root / run.source_path).resolve(), policy))
    return PolicyChoice(None, tuple(chosen)), differences


def _epoch(build_time: object) -> int | None:
    """Return the SOURCE_DATE_EPOCH a recorded build time came from (seconds, UTC)."""
    if build_time is None:
        return None
    if not isinstance(build_time, str):
        raise VerifyError(f"{MANIFEST}: build_time is neither null nor a time")
    try:
        moment = datetime.strptime(build_time, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise VerifyError(f"{MANIFEST}: build_time {build_time!r} is not a UTC time") from None
    return int(moment.timestamp())


def _site_files(root: Path) -> tuple[dict[str, Path], list[str]]:
    """Return a site's regular files by relative path, and the paths that are not files.

    Listed by ``loader.site_entries``: no symlink followed, no recursion, a bounded depth.
    """
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


def _check_inputs(run: _Run, folder: Path) -> list[str]:
    found = []
    for relative, recorded in sorted(run.input_digests.items()):
        shown = f"{run.source_path}/{relative}"
        if not _inside(relative):
            found.append(f"manifest names an input outside its run folder: {shown}")
            continue
        path = folder / relative
        if not path.is_file():
            found.append(f"input missing since the site was built: {shown}")
            continue
        try:  # as the replay reads it: through symlinks that stay inside the run folder
            resolved = path.resolve(strict=True)
            inside = resolved.is_relative_to(folder.resolve())
            digest = _sha256(resolved) if inside else None
        except (OSError, RuntimeError):
            found.append(f"input unreadable since the site was built: {shown}")
            continue
        if digest != recorded:
            found.append(f"input changed since the site was built: {shown}")
    return found


def _forbidden_table(
    manifest: Mapping[str, Any], root: Path
) -> tuple[ForbiddenTable | None, list[str]]:
    """Return the forbidden-classes table the site was built with, and what is wrong with it.

    The table is the one at the recorded path, recorded again as the build recorded it;
    a table that cannot be read or has changed is a difference, and the rebuild goes on
    without it (so its pages differ too).
    """
    recorded = manifest.get("forbidden_classes")
    if recorded is None:
        return None, []
    if not isinstance(recorded, dict):
        raise VerifyError(f"{MANIFEST}: forbidden_classes is not an object")
    path, digest = recorded.get("path"), recorded.get("sha256")
    if not isinstance(path, str) or not _inside(path) or not isinstance(digest, str):
        raise VerifyError(f"{MANIFEST}: forbidden_classes has no valid path and sha256")
    found = _under(root, path)
    if found is None:
        return None, [f"forbidden-classes table outside the inputs root, not read: {path}"]
    try:
        table = read_forbidden_table(found)
    except (OSError, ForbiddenClassesError):
        return None, [f"forbidden-classes table not readable as the build read it: {path}"]
    if table.sha256 != digest:
        return None, [f"forbidden-classes table changed since the site was built: {path}"]
    return ForbiddenTable(path, digest, table.classes), []


def _rebuild(
    config: VerifyConfig,
    folders: list[Path],
    out: Path,
    epoch: int | None,
    single: bool,
    forbidden: ForbiddenTable | None,
    policies: PolicyChoice,
    baseline: Baseline | None = None,
    label: str | None = None,
    inspect: ImportOptions | None = None,
) -> None:
    root = config.inputs_root or Path.cwd()
    build_site(
        BuildConfig(
            tuple(folders),
            out,
            templates=None,
            source_date_epoch=epoch,
            cwd=root,
            progress=config.progress,
            jobs=config.jobs,
            single_file=single,
            forbidden=forbidden,
            policies=policies,
            baseline=baseline,
            label=label,
            inspect=inspect,
        )
    )


def _baseline(manifest: Mapping[str, Any], given: Path | None) -> tuple[Baseline | None, list[str]]:
    """Return the baseline to rebuild with, and the differences found checking it.

    A site built with ``--baseline`` records that build's digests (``Baseline.record``):
    without the same baseline its pages cannot be rebuilt, so a missing baseline, one that
    cannot be read or checked, or another one, is a difference (fail closed).
    """
    recorded = manifest.get("baseline")
    if recorded is None and given is None:
        return None, []
    if given is None:
        digest = recorded.get("manifest_sha256") if isinstance(recorded, dict) else None
        return None, [
            f"site was built against a baseline (manifest {one_line(str(digest))}); "
            "give that baseline with --baseline"
        ]
    if recorded is None:
        return None, [f"site records no baseline, but --baseline {given} was given"]
    try:
        baseline = read_baseline(given)
    except BaselineError as error:
        return None, [f"baseline cannot be checked: {error}"]
    if baseline.record() != recorded:
        return None, [
            f"baseline {given} is not the one the site was built against "
            f"(manifest {baseline.manifest_sha256}, the site records "
            f"{one_line(str(recorded.get('manifest_sha256') if isinstance(recorded, dict) else recorded))})"
        ]
    return baseline, []


def verify_site(config: VerifyConfig) -> VerifyReport:
    """Check every run, record and page of a built site against its inputs (module docstring)."""
    # A downloaded manifest is input: its names reach the terminal only made visible.
    sink = config.progress or (lambda _: None)

    def progress(message: str) -> None:
        sink(one_line(message))

    config = VerifyConfig(
        config.site_dir, config.inputs_root, progress, config.jobs, config.baseline
    )
    site = config.site_dir
    if not site.is_dir():
        raise VerifyError(f"site folder {site} does not exist")
    manifest, runs = read_manifest(site)
    root = config.inputs_root or Path.cwd()
    differences: list[str] = []
    tool = manifest.get("tool")
    built_by = tool.get("version") if isinstance(tool, dict) else None
    if not isinstance(tool, dict) or tool.get("name") != TOOL_NAME or built_by != __version__:
        differences.append(
            f"site was built by {TOOL_NAME} {built_by!s}, this is {__version__}: "
            "its pages cannot be rebuilt"
        )
    epoch = _epoch(manifest.get("build_time"))
    forbidden, table_differences = _forbidden_table(manifest, root)
    differences.extend(table_differences)
    policies, policy_differences = _policies(runs, root)
    differences.extend(policy_differences)
    baseline, baseline_differences = _baseline(manifest, config.baseline)
    differences.extend(baseline_differences)
    label = manifest.get("label")
    if label is not None and not isinstance(label, str):
        differences.append("manifest label is not a string")
        label = None

    folders: list[Path] = []
    missing: list[str] = []
    inspect, map_differences = _inspect_options(manifest, root)
    differences.extend(map_differences)
    for run in sorted(runs, key=lambda r: r.name):
        folder = _under(root, run.source_path)
        if folder is None:
            missing.append(run.name)
            differences.append(
                f"inputs outside the inputs root, not read: {run.source_path} (run {run.name})"
            )
            continue
        if run.source_sha256 is not None:  # an Inspect AI log, imported again by the rebuild
            if not folder.is_file() or map_differences:
                missing.append(run.name)
                if not folder.is_file():
                    differences.append(f"inputs not found: {run.source_path} (run {run.name})")
                continue
            if _sha256(folder) != run.source_sha256:
                differences.append(f"input changed: {run.source_path} (run {run.name})")
            if folder not in folders:
                folders.append(folder)
            continue
        if not folder.is_dir():
            missing.append(run.name)
            differences.append(f"inputs not found: {run.source_path} (run {run.name})")
            continue
        progress(f"checking the inputs of {run.name} in {run.source_path}")
        folders.append(folder)
        differences.extend(_check_inputs(run, folder))

    published, odd = _site_files(site)
    if baseline_differences:
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
    out = scratch / "site"
    try:
        try:
            single = any(r.single_file for r in runs)
            _rebuild(
                config, folders, out, epoch, single, forbidden, policies, baseline, label, inspect
            )
        except (BuildError, DiscoveryError, SchedulerError) as error:
            differences.append(f"site could not be rebuilt from its inputs: {error}")
            return _report(runs, 0, differences)
        rebuilt, _ = _site_files(out)
        results: set[str] = set()
        for run in sorted(runs, key=lambda r: r.name):
            results.add(run.result)
            fresh = rebuilt.get(run.result)
            if fresh is None:
                differences.append(f"the replay produced no result record: {run.result}")
                continue
            if _sha256(fresh) != run.result_sha256:
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
        differences.extend(f"not a regular file: {path}" for path in odd)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return _report(runs, len(set(published) | set(rebuilt)), differences)


def _report(runs: list[_Run], files: int, differences: list[str]) -> VerifyReport:
    return VerifyReport(
        tuple(r.name for r in runs), files, tuple(one_line(line) for line in differences)
    )
