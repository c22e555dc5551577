"""Read what a built site's manifest records of its inputs, as ``verify`` rebuilds from them.

The site may be hostile: its manifest is read only as a regular file within the input
size limit, and ``refusals`` names every recorded path (a run's source and its input
files, a policy, a map file, a forbidden-classes table) that ``confine`` refuses, before
any of them is opened. A recorded file that cannot be read again, or no longer has its
recorded digest, is a difference, never an error.
"""

from __future__ import annotations

import errno
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import attrgetter
from pathlib import Path
from typing import Any, TypeVar

from sandbox_replay.exports.text import one_line
from sandbox_replay.importers.inspect_logs import ImportOptions
from sandbox_replay.importers.tool_map import MapFileError, read_tool_map
from sandbox_replay.load.files import FileChangedError, LoadLimits, open_regular, read_site_json
from sandbox_replay.load.scan import ForbiddenClassesError, ForbiddenTable, read_forbidden_table
from sandbox_replay.model.policy import Policy, PolicyChoice, PolicyFileError, read_policy
from sandbox_replay.report.baseline import Baseline, BaselineError, read_baseline
from sandbox_replay.report.build import MANIFEST, SITE_SCHEMA
from sandbox_replay.report.confine import inside, refusal, under
from sandbox_replay.version import TOOL_NAME, __version__

_CHUNK = 1 << 20
T = TypeVar("T")


class VerifyError(ValueError):
    """The site cannot be verified at all (no readable manifest)."""


@dataclass(frozen=True)
class RecordedRun:
    """One run as the manifest records it."""

    name: str
    source_path: str
    result: str
    result_sha256: str
    input_digests: Mapping[str, str]
    single_file: bool
    policy: tuple[str, str] | None = None  # (path under the inputs root, sha256)
    source_sha256: str | None = None  # of the Inspect AI log that source_path names


@dataclass(frozen=True)
class Recorded:
    """The build settings a site records, read again; what failed to check is in the flags."""

    epoch: int | None
    forbidden: ForbiddenTable | None
    policies: PolicyChoice
    baseline: Baseline | None
    label: str | None
    inspect: ImportOptions | None
    baseline_failed: bool
    map_failed: bool
    # Seeded escapes replayed, and required (``manifest.json`` "sensitivity").
    sensitivity: tuple[bool, bool] = (False, False)


def sha256_of(path: Path) -> str:
    """Return ``sha256:<hex>`` of a regular file (a symlink or FIFO is never followed)."""
    digest = hashlib.sha256()
    with open_regular(path) as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def _reread(
    root: Path,
    recorded: tuple[str, str],
    what: str,
    read: Callable[[Path], T],
    digest_of: Callable[[T], str],
    errors: tuple[type[Exception], ...],
) -> tuple[T | None, str | None]:
    """Read a recorded file again under ``root``; return it, or why it is not the one recorded."""
    path, digest = recorded
    found = under(root, path)
    try:
        value = read(found) if found is not None else None
    except errors:
        value = None
    if value is None:
        return None, f"{what} not readable as the build read it: {path}"
    if digest_of(value) != digest:
        return None, f"{what} changed since the site was built: {path}"
    return value, None


def _file_record(recorded: object, problem: str) -> tuple[str, str]:
    """Return a recorded ``{"path", "sha256"}`` pair; raise VerifyError(problem) if malformed."""
    path = recorded.get("path") if isinstance(recorded, dict) else None
    digest = recorded.get("sha256") if isinstance(recorded, dict) else None
    if not isinstance(path, str) or not path or not isinstance(digest, str):
        raise VerifyError(f"{MANIFEST}: {problem}")
    return path, digest


def _text(entry: Mapping[str, Any], key: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise VerifyError(f"{MANIFEST}: a run has no valid {key!r}")
    return value


def _optional_text(entry: Mapping[str, Any], key: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise VerifyError(f"{MANIFEST}: run {_text(entry, 'name')!r} has a {key} that is not text")
    return value


def read_manifest(site_dir: Path) -> tuple[dict[str, Any], list[RecordedRun]]:
    """Return the site's manifest and its runs; raise VerifyError when it is unusable."""
    path = site_dir / MANIFEST
    try:
        manifest = read_site_json(path, LoadLimits().max_file_bytes)
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
    return manifest, [_run(entry) for entry in entries]


def _run(entry: object) -> RecordedRun:
    if not isinstance(entry, dict):
        raise VerifyError(f"{MANIFEST}: a run is not an object")
    name = _text(entry, "name")
    digests = entry.get("input_digests")
    if not isinstance(digests, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in digests.items()
    ):
        raise VerifyError(f"{MANIFEST}: run {name!r} has no valid input_digests")
    policy = entry.get("policy")
    problem = f"run {name!r} has a policy without a valid path and sha256"
    return RecordedRun(
        name=name,
        source_path=_text(entry, "source_path"),
        result=_text(entry, "result"),
        result_sha256=_text(entry, "result_sha256"),
        input_digests=digests,
        single_file="single_file" in entry,
        policy=None if policy is None else _file_record(policy, problem),
        source_sha256=_optional_text(entry, "source_sha256"),
    )


def read_recorded(
    manifest: Mapping[str, Any], runs: list[RecordedRun], root: Path, baseline: Path | None
) -> tuple[Recorded, list[str]]:
    """Return the settings to rebuild with, and the differences found reading them again."""
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
    policies, policy_differences = _policies(runs, root)
    given, baseline_differences = _baseline(manifest, baseline)
    differences += table_differences + policy_differences + baseline_differences
    label = manifest.get("label")
    if label is not None and not isinstance(label, str):
        differences.append("manifest label is not a string")
        label = None
    inspect, map_differences = _inspect_options(manifest, root)
    differences += map_differences
    seeded = manifest.get("sensitivity")
    if seeded is not None and not (
        isinstance(seeded, dict) and seeded.get("required") in (True, False)
    ):
        differences.append('manifest sensitivity is not {"required": true or false}')
        seeded = None
    recorded = Recorded(
        epoch,
        forbidden,
        policies,
        given,
        label,
        inspect,
        baseline_failed=bool(baseline_differences),
        map_failed=bool(map_differences),
        sensitivity=(seeded is not None, seeded is not None and seeded["required"] is True),
    )
    return recorded, differences


def refusals(manifest: Mapping[str, Any], runs: list[RecordedRun], root: Path) -> list[str]:
    """Return a line for each recorded path ``verify`` must not open (``confine.refusal``).

    Nothing is opened to find them; ``root`` must be resolved.
    """
    lines: list[str] = []

    def refuse(path: str, owner: str) -> bool:
        why = refusal(root, path)
        if why is not None:
            lines.append(f"manifest names {why}: {path} ({owner})")
        return why is not None

    for run in sorted(runs, key=attrgetter("name")):
        owner = f"run {run.name}"
        if refuse(run.source_path, owner):
            continue
        for relative in sorted(run.input_digests):
            shown = f"{run.source_path}/{relative}"
            if not inside(relative):
                lines.append(f"manifest names an input outside its run folder: {shown} ({owner})")
            else:
                refuse(shown, owner)
        if run.policy is not None:
            refuse(run.policy[0], f"policy of run {run.name}")
    table, tool_map = _table_record(manifest), _map_record(_import_record(manifest))
    if table is not None:
        refuse(table[0], "forbidden-classes table")
    if tool_map is not None:
        refuse(tool_map[0], "Inspect AI map file")
    return lines


def _import_record(manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    recorded = manifest.get("inspect_import")
    if recorded is not None and not isinstance(recorded, dict):
        raise VerifyError(f"{MANIFEST}: inspect_import is not an object")
    return recorded


def _map_record(recorded: Mapping[str, Any] | None) -> tuple[str, str] | None:
    if recorded is None or recorded.get("map") is None:
        return None
    return _file_record(recorded["map"], "inspect_import has a map without a valid path and sha256")


def _table_record(manifest: Mapping[str, Any]) -> tuple[str, str] | None:
    recorded = manifest.get("forbidden_classes")
    if recorded is None:
        return None
    if not isinstance(recorded, dict):
        raise VerifyError(f"{MANIFEST}: forbidden_classes is not an object")
    return _file_record(recorded, "forbidden_classes has no valid path and sha256")


def _inspect_options(
    manifest: Mapping[str, Any], root: Path
) -> tuple[ImportOptions | None, list[str]]:
    """Return how the build imported its Inspect AI logs, with the map file it recorded."""
    recorded = _import_record(manifest)
    if recorded is None:
        return None, []
    teardown = recorded.get("rollback_from_teardown") is True
    shown = _map_record(recorded)
    if shown is None:
        return ImportOptions(rollback_from_teardown=teardown), []
    tool_map, problem = _reread(
        root, shown, "map file", read_tool_map, attrgetter("sha256"), (MapFileError,)
    )
    if tool_map is None:
        return None, [str(problem)]
    return ImportOptions(tool_map, rollback_from_teardown=teardown), []


def _policies(runs: list[RecordedRun], root: Path) -> tuple[PolicyChoice, list[str]]:
    """Return the policies the runs were replayed with, and what is wrong with them.

    A run whose policy cannot be read again unchanged is rebuilt with the packaged table.
    """
    chosen: list[tuple[Path, Policy]] = []
    differences: list[str] = []
    read: dict[tuple[str, str], tuple[Policy | None, str | None]] = {}
    for run in sorted(runs, key=lambda r: r.name):
        if run.policy is None:
            continue
        if run.policy not in read:
            read[run.policy] = _reread(
                root,
                run.policy,
                "policy",
                read_policy,
                attrgetter("source.sha256"),
                (PolicyFileError,),
            )
        policy, problem = read[run.policy]
        if policy is None:
            differences.append(f"{problem} (run {run.name})")
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


def _forbidden_table(
    manifest: Mapping[str, Any], root: Path
) -> tuple[ForbiddenTable | None, list[str]]:
    """Return the forbidden-classes table the site was built with, and what is wrong with it.

    A table that cannot be read again unchanged is a difference; the rebuild goes without.
    """
    recorded = _table_record(manifest)
    if recorded is None:
        return None, []
    path, digest = recorded
    table, problem = _reread(
        root,
        (path, digest),
        "forbidden-classes table",
        read_forbidden_table,
        attrgetter("sha256"),
        (OSError, ForbiddenClassesError),
    )
    if table is None:
        return None, [str(problem)]
    return ForbiddenTable(path, digest, table.classes), []


def _baseline(manifest: Mapping[str, Any], given: Path | None) -> tuple[Baseline | None, list[str]]:
    """Return the baseline to rebuild with, and the differences found checking it.

    Without the very baseline the site records (``Baseline.record``) its pages cannot be
    rebuilt: a missing, unreadable or other one is a difference.
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
        shown = recorded.get("manifest_sha256") if isinstance(recorded, dict) else recorded
        return None, [
            f"baseline {given} is not the one the site was built against "
            f"(manifest {baseline.manifest_sha256}, the site records {one_line(str(shown))})"
        ]
    return baseline, []
