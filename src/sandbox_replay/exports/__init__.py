"""Exports for CI: SARIF 2.1.0, JUnit XML and a Markdown summary of one or more runs.

Each exporter takes a list of ``ExportRun`` (a replay plus the name and repository-relative
folder it is reported under) and returns the bytes to write; none of them reads or writes
files itself, so the CLI writes every output only after every run is in memory.

``export_run`` and ``discovered_runs`` hand the exporters a redacted replay: when the
forbidden-material scan matched anything, every finding message, subject and path and the
bundle id holding a matched text is replaced (``records.redact``), as in the records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from sandbox_replay.atomic import write_bytes_atomic
from sandbox_replay.codes import Layer
from sandbox_replay.findings import Finding
from sandbox_replay.inputs import InputMode
from sandbox_replay.pipeline import Replay
from sandbox_replay.records import redact


@dataclass(frozen=True)
class ExportRun:
    """One replayed run as the exports name it.

    ``source_root`` is the run's input folder as a posix path relative to the repository
    root (the working folder), or ``""`` when the folder lies outside it; finding paths,
    which are relative to the input folder, are joined onto it. It never holds a host path.
    """

    name: str
    replay: Replay
    source_root: str

    def artifact_path(self, path: str) -> str:
        """Return an input-relative path as a repository-relative posix path."""
        return str(PurePosixPath(self.source_root, path)) if self.source_root else path


def source_root_of(input_dir: Path, base: Path | None = None) -> str:
    """Return ``input_dir`` relative to ``base`` (default: the working folder) as posix.

    A folder outside ``base`` gives ``""``: the exports then name files relative to the
    input folder alone rather than leak where on the host the folder lives.
    """
    root = (base or Path.cwd()).resolve()
    target = input_dir.resolve()
    try:
        rel = target.relative_to(root)
    except ValueError:
        return ""
    text = PurePosixPath(*rel.parts).as_posix() if rel.parts else ""
    return "" if text == "." else text


def redacted(outcome: Replay) -> Replay:
    """Return the replay with every finding text and the bundle id that hold matched text replaced."""
    matched = outcome.scan.matched_texts
    if not matched:
        return outcome
    layers = [
        dataclasses.replace(layer, findings=[_redact_finding(f, matched) for f in layer.findings])
        for layer in outcome.layers
    ]
    return dataclasses.replace(outcome, layers=layers, bundle_id=redact(outcome.bundle_id, matched))


def _redact_finding(finding: Finding, matched: frozenset[bytes]) -> Finding:
    message, subject_id, path = redact([finding.message, finding.subject_id, finding.path], matched)
    return dataclasses.replace(finding, message=message, subject_id=subject_id, path=path)


def export_run(name: str, outcome: Replay, base: Path | None = None) -> ExportRun:
    """Wrap a replay for the exports (redacted), naming its folder relative to ``base``."""
    return ExportRun(name, redacted(outcome), source_root_of(outcome.config.input_dir, base))


def is_expected(run: ExportRun, finding: Finding) -> bool:
    """Say whether a finding is a planted negative case that fired as designed.

    In fixture mode such a finding is the proof an alarm works, not a defect: the exports
    keep it visible but out of any gate.
    """
    negative = run.replay.negative
    return (
        run.replay.run.mode is InputMode.FIXTURE
        and finding.layer is Layer.NEGATIVE_CASES
        and negative is not None
        and finding.error_code in negative.observed.get(finding.negative_case_id, [])
    )


@dataclass(frozen=True)
class ExportTargets:
    """Which exports to write and where; ``site_url`` is the report site's absolute base."""

    sarif: Path | None = None
    junit: Path | None = None
    markdown: Path | None = None
    site_url: str | None = None

    def paths(self) -> list[Path]:
        return [p for p in (self.sarif, self.junit, self.markdown) if p is not None]


def discovered_runs(
    paths: Sequence[Path], cwd: Path | None = None, replayed: Sequence[Replay] = ()
) -> list[ExportRun]:
    """Replay every run ``build`` finds under ``paths``, named as the site names them.

    A run with a replay of the same config in ``replayed`` (one the build made and kept) is
    not replayed again: a replay depends only on its config and the input files, which the
    build has just read (at 600,000 requests a second replay is about a minute).
    """
    from sandbox_replay.pipeline import ReplayConfig, replay
    from sandbox_replay.report.discover import discover_runs

    def replay_of(config: ReplayConfig) -> Replay:
        kept = (outcome for outcome in replayed if outcome.config == config)
        return next(kept, None) or replay(config)

    return [
        export_run(run.name, replay_of(ReplayConfig(run.path, run.mode)), cwd)
        for run in discover_runs(paths, cwd)
    ]


def render_exports(targets: ExportTargets, runs: Sequence[ExportRun]) -> list[tuple[Path, bytes]]:
    """Return every requested export as (path, bytes), rendering all before any is written."""
    # Imported here because every exporter imports ExportRun from this module.
    from sandbox_replay.exports import junit, markdown, sarif

    rendered = []
    if targets.sarif is not None:
        rendered.append((targets.sarif, sarif.sarif_bytes(runs)))
    if targets.junit is not None:
        rendered.append((targets.junit, junit.junit_bytes(runs)))
    if targets.markdown is not None:
        rendered.append((targets.markdown, markdown.markdown_bytes(runs, targets.site_url)))
    return rendered


def write_exports(targets: ExportTargets, runs: Sequence[ExportRun]) -> list[Path]:
    """Render and then write every requested export atomically; return the paths written."""
    rendered = render_exports(targets, runs)
    for path, data in rendered:
        write_bytes_atomic(path, data)
    return [path for path, _ in rendered]
