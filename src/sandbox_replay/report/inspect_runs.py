"""Build over harness logs: each Inspect AI ``.eval`` log or AgentDojo run log becomes runs.

Every log given or found under a PATH folder is imported as ``import inspect`` or ``import
agentdojo`` would (both with ``--map`` and the forbidden classes), into a temporary folder
that lives as long as the build; its runs are shown with the log as their source (its path
and sha256, in ``manifest.json``). Without the ``inspect`` extra an Inspect log is an
``UnreadLog``, shown with the install hint, and the build is incomplete.
"""

from __future__ import annotations

import hashlib
import importlib
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from sandbox_replay.importers import agentdojo_logs as agentdojo
from sandbox_replay.importers.inspect_logs import (
    EXTRA_HINT,
    LOG_SUFFIX,
    Bundle,
    ImportOptions,
    InspectImportError,
    find_logs,
    import_logs,
    write_bundles,
)
from sandbox_replay.load.scan import ForbiddenTable, scanner_with
from sandbox_replay.model.policy_coverage import PolicyCoverage
from sandbox_replay.report.discover import DiscoveredRun, display_path, safe_name
from sandbox_replay.report.site_views import RunSummary
from sandbox_replay.report.views import Chrome, RunCounts, chrome

MISSING_EXTRA = f"reading Inspect AI logs needs the optional extra: {EXTRA_HINT}"


@dataclass(frozen=True)
class LogSource:
    """Where a run imported from a log came from: the log as shown, and its digest."""

    path: str
    sha256: str
    log: Path


@dataclass(frozen=True)
class UnreadLog:
    """A log that could not be read: its page name, the log as shown, and why."""

    name: str
    display_path: str
    reason: str

    def summary(self) -> RunSummary:
        """Return the index row's summary: no figures, the reason as its headline."""
        return RunSummary(
            name=self.name,
            mode="bundle",
            mode_label="Inspect AI log",
            status="not_run",
            headline=f"could not be read: {self.reason}",
            counts=RunCounts(0, 0, 0, 0, 0, 0, 0),
            findings_by_layer=(),
            error_codes=(),
            expected_codes=(),
            source_path=self.display_path,
            result_sha256="",
            input_digests=(),
            policy=PolicyCoverage("", "", "", 0, ()),
        )

    def view(self, build_time: str, version: str) -> UnreadView:
        """Return the view-model of the log's own page (``runs/<name>/index.html``)."""
        frame = chrome(f"{self.name} — sandbox-replay", "../../", "run", build_time, version)
        return UnreadView(frame, self.name, self.display_path, self.reason)


@dataclass(frozen=True)
class UnreadView:
    """The page of a log that could not be read (``unread.html``)."""

    chrome: Chrome
    name: str
    source_path: str
    reason: str


@dataclass(frozen=True)
class LogRuns:
    """The paths to search for runs, each imported folder's log, and the logs not read."""

    paths: tuple[Path, ...]
    sources: Mapping[Path, LogSource] = field(default_factory=dict)
    unread: tuple[UnreadLog, ...] = ()

    @property
    def logs(self) -> dict[Path, Path]:
        """Return each imported folder (resolved) with the log it was imported from."""
        return {folder: source.log for folder, source in self.sources.items()}

    def relabel(self, run: DiscoveredRun) -> DiscoveredRun:
        """Return ``run`` shown with its log as the source, when it was imported from one."""
        source = self.sources.get(run.path.resolve())
        if source is None:
            return run
        return replace(run, display_path=source.path, source_sha256=source.sha256)


def _extra_missing() -> bool:
    try:
        importlib.import_module("inspect_ai.log")
    except ImportError:
        return True
    return False


@contextmanager
def importing_logs(
    paths: Sequence[Path],
    cwd: Path,
    options: ImportOptions | None = None,
    forbidden: ForbiddenTable | None = None,
) -> Iterator[LogRuns]:
    """Import every log among ``paths`` into a temporary folder, removed on leaving,
    scanning also for the classes of a user's ``forbidden`` table.

    A PATH that is a file must be a ``.eval`` log or an AgentDojo run log;
    ``InspectImportError`` otherwise, for an Inspect log that cannot be read, and when the
    extra is missing and there is nothing but Inspect logs. An AgentDojo log that cannot be
    read raises ``AgentDojoImportError``.
    """
    files = [path for path in paths if path.is_file()]
    folders = [path for path in paths if path.is_dir()]
    dojo = agentdojo.find_logs([*(p for p in files if agentdojo.is_agentdojo_log(p)), *folders])
    files = [path for path in files if not agentdojo.is_agentdojo_log(path)]
    logs = find_logs([*files, *folders])
    kept = tuple(path for path in paths if not path.is_file())
    if not logs and not dojo:
        yield LogRuns(tuple(paths))
        return
    for path in files:
        if not path.name.endswith(LOG_SUFFIX):
            raise InspectImportError(
                f"path {path} is a file but not an Inspect AI .eval log or an AgentDojo run log"
            )
    unread: tuple[UnreadLog, ...] = ()
    if logs and _extra_missing():
        if not kept and not dojo:
            raise InspectImportError(MISSING_EXTRA)
        names = (safe_name(log.name.removesuffix(LOG_SUFFIX)) for log in logs)
        shown = (display_path(log, cwd) for log in logs)
        unread = tuple(map(UnreadLog, names, shown, [MISSING_EXTRA] * len(logs)))
        logs = []
    if not logs and not dojo:
        yield LogRuns(kept, unread=unread)
        return
    options = options or ImportOptions()
    if forbidden is not None:
        options = replace(options, scanner=scanner_with(forbidden.classes))
    root = Path(tempfile.mkdtemp(prefix="sandbox-replay-inspect-"))
    try:
        sources: dict[Path, LogSource] = {}
        named: dict[str, str] = {}  # each run's name, and the log that gave it
        for log in [*logs, *dojo]:
            digest = "sha256:" + hashlib.sha256(log.read_bytes()).hexdigest()
            shown_log = display_path(log, cwd)
            bundles = _bundles(log, options)
            for bundle in bundles:
                if bundle.name in named:
                    raise InspectImportError(
                        f"{named[bundle.name]} and {shown_log} would both be the run "
                        f"{bundle.name}; build them apart"
                    )
                named[bundle.name] = shown_log
            for folder in write_bundles(bundles, root):
                sources[folder.resolve()] = LogSource(shown_log, digest, log)
        yield LogRuns((*kept, root), sources, unread)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _bundles(log: Path, options: ImportOptions) -> list[Bundle]:
    """Import one log; an AgentDojo log with the same map file and forbidden classes."""
    if agentdojo.is_agentdojo_log(log):
        tool_map = options.tool_map.rebased(agentdojo.agentdojo_map())
        return agentdojo.import_logs([log], agentdojo.AgentDojoOptions(tool_map, options.scanner))
    return import_logs([log], options)
