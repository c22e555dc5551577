"""Exports for CI: SARIF 2.1.0, JUnit XML and a Markdown summary of one or more runs.

Each exporter takes ``ExportRun``s and returns the bytes to write. The facts are redacted
as the records are and small: ``build`` keeps them in its status file, so a run it
reuses is exported without being replayed again.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, NamedTuple, cast

import msgspec

from sandbox_replay.atomic import write_bytes_atomic
from sandbox_replay.checks.base import LayerResult
from sandbox_replay.checks.negative_cases import NegativeCaseOutcome
from sandbox_replay.checks.pipeline import Replay
from sandbox_replay.exports.text import one_line
from sandbox_replay.load.run import InputMode
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.findings import Finding
from sandbox_replay.model.policy_coverage import PolicyCoverage
from sandbox_replay.records.build import COUNT_KEYS, build_result, redact
from sandbox_replay.records.changes import Changes, RunChange, RunSnapshot, finding_refs

# The result record's counts the Markdown summary's pipeline chart shows, and the trace's.
CHART_COUNTS = (*COUNT_KEYS, "span_count")
STATUSES = ("pass", "blocked")


class SeededCount(NamedTuple):
    """How many of the seeded escapes that applied to a run its replay caught
    (``checks.sensitivity``; a status file keeps it as a pair)."""

    caught: int
    applicable: int

    @property
    def missed(self) -> int:
        return self.applicable - self.caught

    @property
    def text(self) -> str:
        """Say "N of M", and how many were missed if any."""
        missed = f" ({self.missed:,} missed)" if self.missed else ""
        return f"{self.caught:,} of {self.applicable:,}{missed}"

    @classmethod
    def of(cls, outcome: Replay) -> SeededCount | None:
        seen = outcome.sensitivity
        return None if seen is None else cls(seen.caught, seen.applicable)


@dataclass(frozen=True)
class ExportFacts:
    """What the exports show of one replayed run, already redacted.

    ``layers`` carry no counts; ``counts`` are the record's ``CHART_COUNTS``; ``headline``
    is None when made without the summary.
    """

    status: str
    input_mode: InputMode
    bundle_id: str
    layers: tuple[LayerResult, ...]
    negative: NegativeCaseOutcome | None
    counts: Mapping[str, int]
    policy: PolicyCoverage
    headline: str | None = None
    # Only for a run replayed with ``--sensitivity``.
    seeded: SeededCount | None = None

    @property
    def request_count(self) -> int:
        return self.counts["action_request_count"]

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    @cached_property
    def findings(self) -> list[Finding]:
        """Every layer's findings in the result record's order (as ``Replay.findings``)."""
        return sorted((f for layer in self.layers for f in layer.findings), key=Finding.sort_key)

    def layer(self, layer: Layer) -> LayerResult | None:
        return next((r for r in self.layers if r.layer is layer), None)

    def expected(self, finding: Finding) -> bool:
        """Say whether a finding is a planted negative case that fired as designed."""
        negative = self.negative
        return (
            self.input_mode is InputMode.FIXTURE
            and finding.layer is Layer.NEGATIVE_CASES
            and negative is not None
            and finding.error_code in negative.observed.get(finding.negative_case_id, [])
        )

    def snapshot(
        self, name: str, source_path: str, input_digests: Mapping[str, str]
    ) -> RunSnapshot:
        """Return the run as a comparison with a baseline sees it (``changes``)."""
        refs = finding_refs(
            (f.error_code, f.layer.value, f.path, f.line, f.subject_id, f.message, self.expected(f))
            for f in self.findings
        )
        page = f"runs/{name}/index.html"
        return RunSnapshot(name, source_path, self.status, dict(input_digests), refs, page)

    @classmethod
    def of(
        cls,
        outcome: Replay,
        record: Mapping[str, Any] | None = None,
        headline: str | None = None,
        *,
        summary: bool = True,
    ) -> ExportFacts:
        """Return the facts of ``outcome``, redacted; with ``summary``, its headline.

        ``record`` and ``headline`` the caller has already are used only when nothing
        was redacted.
        """
        from sandbox_replay.records.headline import gap_headline

        shown = redacted(outcome)
        if shown is not outcome:
            record, headline = None, None
        record = record if record is not None else build_result(shown)
        counts = {key: record[key] for key in COUNT_KEYS}
        counts["span_count"] = record["public_agent_execution_trace"]["span_count"]
        if summary and headline is None:
            headline = gap_headline(record).text
        return cls(
            status=shown.status,
            input_mode=shown.run.mode,
            bundle_id=shown.bundle_id,
            layers=tuple(LayerResult(r.layer, list(r.findings), {}, r.ran) for r in shown.layers),
            negative=shown.negative,
            counts=counts,
            policy=PolicyCoverage.of_record(record),
            headline=headline if summary else None,
            seeded=SeededCount.of(shown),
        )

    def to_json(self) -> dict[str, Any]:
        """Return the facts as JSON values (``from_json`` reads them back)."""
        negative = self.negative
        stored = _StoredFacts(
            self.status,
            self.input_mode,
            self.bundle_id,
            [
                _StoredLayer(r.layer, r.ran, [dataclasses.astuple(f) for f in r.findings])
                for r in self.layers
            ],
            None if negative is None else _StoredNegative(negative.observed, negative.missing),
            dict(self.counts),
            self.policy.to_json(),
            self.headline,
            self.seeded,
        )
        return cast(dict[str, Any], msgspec.to_builtins(stored))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExportFacts:
        """Read ``to_json``'s values back; raise ValueError, KeyError or TypeError if malformed."""
        stored = msgspec.convert(data, _StoredFacts)
        if stored.status not in STATUSES:
            raise ValueError(f"status {stored.status!r} is neither of {STATUSES}")
        if sorted(stored.counts) != sorted(CHART_COUNTS):
            raise ValueError("the counts are not the chart's")
        negative = stored.negative
        return cls(
            status=stored.status,
            input_mode=stored.input_mode,
            bundle_id=stored.bundle_id,
            layers=tuple(
                LayerResult(r.layer, [Finding(*fields) for fields in r.findings], {}, r.ran)
                for r in stored.layers
            ),
            negative=(
                None
                if negative is None
                else NegativeCaseOutcome(negative.observed, negative.missing)
            ),
            counts={key: stored.counts[key] for key in CHART_COUNTS},
            policy=PolicyCoverage.from_json(stored.policy),
            headline=stored.headline,
            seeded=None if stored.seeded is None else SeededCount(*stored.seeded),
        )


# The facts as a status file keeps them: each field's type is checked as it is read back,
# since anyone may have edited the file.
_Count = Annotated[int, msgspec.Meta(ge=0)]


class _StoredLayer(msgspec.Struct):
    layer: Layer
    ran: bool
    # A finding's fields in ``Finding``'s order: code, message, case, subject, kind, path, line.
    findings: list[tuple[str, str, str, str, str, str | None, _Count | None]]


class _StoredNegative(msgspec.Struct):
    observed: dict[str, list[str]]
    missing: list[str]


class _StoredFacts(msgspec.Struct, omit_defaults=True):
    status: str
    input_mode: InputMode
    bundle_id: str
    layers: list[_StoredLayer]
    negative: _StoredNegative | None
    counts: dict[str, _Count]
    policy: dict[str, Any]
    headline: str | None
    seeded: tuple[_Count, _Count] | None = None


@dataclass(frozen=True)
class ExportRun:
    """One replayed run as the exports name it.

    ``source_root`` is the run's input folder relative to the repository root, as posix,
    or ``""`` outside it (never a host path); ``change``, with a baseline, how the run
    differs from its baseline run.
    """

    name: str
    facts: ExportFacts
    source_root: str
    change: RunChange | None = None

    def artifact_path(self, path: str) -> str:
        """Return an input-relative path as a repository-relative posix path."""
        return str(PurePosixPath(self.source_root, path)) if self.source_root else path

    def location(self, finding: Finding) -> str:
        """Return where a finding is, as people read it: ``path:line``, or ``(run)``."""
        if not finding.path:
            return "(run)"
        return f"{self.artifact_path(finding.path)}:{finding.line or 1}"


def located_at(run: ExportRun, artifact: str) -> ExportRun:
    """Return ``run`` with every finding located at ``artifact``, lineless, its message naming
    the bundle file (for a run imported from an Inspect AI log, whose bundle is gone)."""

    def moved(finding: Finding) -> Finding:
        if finding.path is None:
            return finding
        where = f"{finding.path}:{finding.line}" if finding.line else finding.path
        message = f"{finding.message} (imported as {where})"
        return replace(finding, message=message, path=artifact, line=None)

    layers = tuple(
        LayerResult(layer.layer, [moved(f) for f in layer.findings], {}, layer.ran)
        for layer in run.facts.layers
    )
    return ExportRun(run.name, replace(run.facts, layers=layers), "")


def repository_root(start: Path | None = None) -> Path:
    """Return the nearest folder up from ``start`` (the working folder) holding ``.git``, else it.

    Code scanning resolves an alert's path from there, wherever the command runs.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return here


def source_root_of(input_dir: Path, base: Path | None = None) -> str:
    """Return ``input_dir`` relative to ``base`` (``repository_root()``) as posix; ``""`` outside it."""
    try:
        rel = input_dir.resolve().relative_to((base or repository_root()).resolve())
    except ValueError:
        return ""
    return PurePosixPath(*rel.parts).as_posix() if rel.parts else ""


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


def outside_root(input_dir: Path, base: Path | None = None) -> str | None:
    """Return the warning for an input folder outside the exports' root, else None."""
    root = (base or repository_root()).resolve()
    if input_dir.resolve().is_relative_to(root):
        return None
    return (
        f"warning: {input_dir} lies outside {root.name or root}, the root export paths are "
        "relative to: its alerts name files relative to the input folder alone, which may "
        "not exist there and may collide with another run's; run from the repository that "
        "holds the inputs, or pass --root"
    )


def export_run(
    name: str,
    outcome: Replay,
    base: Path | None = None,
    record: Mapping[str, Any] | None = None,
    *,
    summary: bool = True,
) -> ExportRun:
    """Wrap a replay for the exports (redacted), naming its folder relative to ``base``."""
    facts = ExportFacts.of(outcome, record, summary=summary)
    return ExportRun(name, facts, source_root_of(outcome.config.input_dir, base))


def attach_changes(runs: Sequence[ExportRun], changes: Changes) -> list[ExportRun]:
    """Return ``runs``, each with how it differs from its baseline run (by run name)."""
    return [dataclasses.replace(run, change=changes.of(run.name)) for run in runs]


@dataclass(frozen=True)
class ExportTargets:
    """Which exports to write and where; ``site_url`` is the report site's absolute base."""

    sarif: Path | None = None
    junit: Path | None = None
    markdown: Path | None = None
    site_url: str | None = None

    def paths(self) -> list[Path]:
        return [p for p in (self.sarif, self.junit, self.markdown) if p is not None]


def render_exports(
    targets: ExportTargets, runs: Sequence[ExportRun], progress: Callable[[str], None] | None = None
) -> list[tuple[Path, bytes]]:
    """Return every requested export as (path, bytes); ``progress`` hears of an oversize SARIF run."""
    # Imported here because every exporter imports ExportRun from this module.
    from sandbox_replay.exports import junit, markdown, sarif

    rendered = []
    if targets.sarif is not None:
        for number, part in enumerate(sarif.sarif_files(runs), start=1):
            path = sarif.part_path(targets.sarif, number)
            if part.oversize and progress is not None:
                progress(
                    f"SARIF run {one_line(part.run_names[0])!r} alone is "
                    f"{part.gzipped_size:,} bytes gzipped, over GitHub code scanning's "
                    f"{sarif.MAX_GZIPPED_BYTES:,}; written alone to {path}"
                )
            rendered.append((path, part.data))
    if targets.junit is not None:
        rendered.append((targets.junit, junit.junit_bytes(runs)))
    if targets.markdown is not None:
        rendered.append((targets.markdown, markdown.markdown_bytes(runs, targets.site_url)))
    return rendered


def write_exports(
    targets: ExportTargets, runs: Sequence[ExportRun], progress: Callable[[str], None] | None = None
) -> list[Path]:
    """Write every requested export atomically; return the paths written.

    Then remove the numbered SARIF files an earlier, longer split left, telling
    ``progress`` (default: stderr) of each.
    """
    from sandbox_replay.exports import sarif

    say = progress or _stderr
    rendered = render_exports(targets, runs, say)
    for path, data in rendered:
        write_bytes_atomic(path, data)
    written = [path for path, _ in rendered]
    if targets.sarif is not None:
        count = 1
        while sarif.part_path(targets.sarif, count + 1) in written:
            count += 1
        for stale in sarif.stale_parts(targets.sarif, count):
            if stale not in written:
                stale.unlink(missing_ok=True)
                say(f"removed {stale}, a SARIF file of an earlier, longer export")
    return written


def _stderr(message: str) -> None:
    print(f"sandbox-replay: {one_line(message)}", file=sys.stderr, flush=True)
