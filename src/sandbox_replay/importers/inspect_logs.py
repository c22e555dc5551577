"""Import Inspect AI evaluation logs (``.eval``) as bundle folders the replay reads.

Logs are read only through Inspect's own API (the extra ``sandbox-replay[inspect]``). Each
sample's tool calls become a bundle (one per sample, or per log with ``per_log``). Bodies
are read in memory for the classification and the forbidden-material scan only: a bundle
holds their digests, and counts by class of any forbidden material, never the text.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_replay.importers.inspect_bundle import Bundle, build_bundle, safe_name
from sandbox_replay.importers.inspect_events import tool_calls
from sandbox_replay.importers.tool_map import ToolMap, packaged_map
from sandbox_replay.load.files import MAX_DEPTH, sorted_walk
from sandbox_replay.load.scan import ForbiddenScanner

__all__ = [
    "EXTRA_HINT",
    "LOG_SUFFIX",
    "Bundle",
    "ImportOptions",
    "InspectImportError",
    "find_logs",
    "import_logs",
    "write_bundles",
]

EXTRA_HINT = "pip install 'sandbox-replay[inspect]'"
LOG_SUFFIX = ".eval"


class InspectImportError(ValueError):
    """A log that cannot be imported, or the extra is missing; one line naming the file."""


@dataclass(frozen=True)
class ImportOptions:
    """How logs become bundles: the map, one bundle per sample or per log, the rollbacks."""

    tool_map: ToolMap = field(default_factory=packaged_map)
    per_log: bool = False
    rollback_from_teardown: bool = False
    scanner: ForbiddenScanner | None = None


def find_logs(paths: Sequence[Path]) -> list[Path]:
    """Return the ``.eval`` files among ``paths`` and under its folders, sorted, each once."""
    return find_log_files(paths, lambda log: log.name.endswith(LOG_SUFFIX), InspectImportError)


def find_log_files(
    paths: Sequence[Path], is_log: Callable[[Path], bool], error: type[ValueError]
) -> list[Path]:
    """Return the files among ``paths``, and those under its folders ``is_log`` takes, sorted.

    Folders are searched as ``build`` searches for runs (no symlink, no hidden folder); a
    path that does not exist raises ``error``.
    """
    found: dict[Path, Path] = {}
    for path in paths:
        if path.is_file():
            found.setdefault(path.resolve(), path)
        elif path.is_dir():
            for log in _logs_under(path, is_log):
                found.setdefault(log.resolve(), log)
        else:
            raise error(f"{path} does not exist")
    return sorted(found.values(), key=str)


def _logs_under(root: Path, is_log: Callable[[Path], bool]) -> Iterator[Path]:
    for listing in sorted_walk(root):
        for entry in listing.entries:
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                if listing.depth < MAX_DEPTH:
                    listing.enter.append(listing.folder / entry.name)
            elif entry.is_file(follow_symlinks=False) and is_log(listing.folder / entry.name):
                yield listing.folder / entry.name


def import_logs(logs: Sequence[Path], options: ImportOptions) -> list[Bundle]:
    """Read each log through Inspect's API and return its bundles (nothing is written)."""
    read_eval_log = _inspect_reader()
    bundles: list[Bundle] = []
    for path in logs:
        try:
            log = read_eval_log(str(path), resolve_attachments=True)
        except Exception as error:  # Inspect's own errors vary by version; name only the type
            raise InspectImportError(
                f"{path}: not an Inspect AI log this version of inspect-ai can read "
                f"({type(error).__name__})"
            ) from None
        bundles.extend(_bundles_of(path, log, options))
    return refuse_repeated(bundles, InspectImportError)


def refuse_repeated(bundles: list[Bundle], error: type[ValueError]) -> list[Bundle]:
    """Return ``bundles``, or raise ``error`` where two would be written as one folder."""
    names = [bundle.name for bundle in bundles]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise error(
            f"two logs or samples would both be written as {repeated[0]}; import them apart"
        )
    return bundles


def write_bundles(
    bundles: Iterable[Bundle], out_dir: Path, error: type[ValueError] = InspectImportError
) -> list[Path]:
    """Write each bundle as a new folder of ``out_dir``, whole or not at all; return the folders.

    An existing folder of the same name is refused with ``error``, never overwritten.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    pending = list(bundles)
    for bundle in pending:
        if (out_dir / bundle.name).exists():
            raise error(
                f"{out_dir / bundle.name} already exists; remove it or choose another --out"
            )
    for bundle in pending:
        target = out_dir / bundle.name
        staging = Path(tempfile.mkdtemp(prefix=f".{bundle.name}.new-", dir=out_dir))
        try:
            for relative, data in sorted(bundle.files.items()):
                path = staging / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
            os.rename(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        written.append(target)
    return written


def _inspect_reader() -> Any:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise InspectImportError(
            f"reading Inspect AI logs needs the optional extra: {EXTRA_HINT}"
        ) from None
    return read_eval_log


def _bundles_of(path: Path, log: Any, options: ImportOptions) -> list[Bundle]:
    samples = list(log.samples or [])
    if not samples:
        raise InspectImportError(f"{path}: the log holds no samples to replay")
    stem = safe_name(path.name.removesuffix(LOG_SUFFIX))
    task = str(log.eval.task)
    harness_version = str((log.eval.packages or {}).get("inspect_ai", "unknown"))
    if options.rollback_from_teardown and log.eval.config.sandbox_cleanup is False:
        raise InspectImportError(
            f"{path}: the evaluation ran with sandbox cleanup off, so no teardown can stand "
            "for a rollback; import it without --rollback-from-teardown"
        )
    scanner = options.scanner or ForbiddenScanner.default()
    episodes = [
        (
            f"{sample.id}/epoch_{sample.epoch}",
            list(tool_calls(sample.events, scanner, harness_version)),
        )
        for sample in sorted(samples, key=lambda s: (str(s.id), s.epoch))
    ]
    bundle = functools.partial(
        build_bundle,
        task=task,
        harness_version=harness_version,
        tool_map=options.tool_map,
        teardown=options.rollback_from_teardown,
    )
    if options.per_log:
        return [bundle(stem, episodes=episodes, prefixed=True)]
    return [
        bundle(
            f"{stem}-{safe_name(episode.replace('/epoch_', '-e'))}",
            episodes=[(episode, calls)],
            prefixed=False,
        )
        for episode, calls in episodes
    ]
