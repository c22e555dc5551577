"""Compare a build's runs with a baseline's: regressions, fixes, new and fixed findings.

What is compared is a ``RunSnapshot`` (a run's name, source folder, status, input digests
and its findings' identities), made from a result record or from what the exports keep of
a replay; so a published site, a packed one and a build in progress compare alike.

Runs are matched by source folder, then a new folder by name to a baseline run whose
folder is gone (it moved). Findings are matched by fingerprint. A fixture's planted
negative cases firing as designed are expected alarms: never new, fixed or unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from sandbox_replay.model.codes import REGISTRY, Layer, Severity
from sandbox_replay.model.fingerprints import fingerprints

REGRESSION = "regression"
FIX = "fix"
NEW_RUN = "new run"
# The most builds ``history.json`` keeps, the newest last.
HISTORY_LIMIT = 30


@dataclass(frozen=True)
class FindingRef:
    """One finding as a comparison sees it: its identity and what to show of it."""

    fingerprint: str
    code: str
    layer: str
    path: str | None
    line: int | None
    subject_id: str
    message: str
    expected: bool = False

    @property
    def severity(self) -> str:
        entry = REGISTRY.get(self.code)
        return entry.severity.value if entry is not None else Severity.CRITICAL.value


def finding_refs(
    findings: Iterable[tuple[str, str, str | None, int | None, str, str, bool]],
) -> tuple[FindingRef, ...]:
    """Return the refs of (code, layer, path, line, subject id, message, expected) findings,
    given in the result record's order (a fingerprint's occurrence number depends on it)."""
    listed = list(findings)
    prints = fingerprints(
        (code, layer, path, subject) for code, layer, path, _, subject, _, _ in listed
    )
    return tuple(
        FindingRef(fp, code, layer, path, line, subject, message, expected)
        for fp, (code, layer, path, line, subject, message, expected) in zip(
            prints, listed, strict=True
        )
    )


@dataclass(frozen=True)
class RunSnapshot:
    """What a comparison needs of one run of a build."""

    name: str
    source_path: str
    status: str
    input_digests: Mapping[str, str]
    findings: tuple[FindingRef, ...]
    page: str = ""

    @cached_property
    def gating(self) -> dict[str, FindingRef]:
        """Return the findings that are not expected alarms, by fingerprint."""
        return {f.fingerprint: f for f in self.findings if not f.expected}


def snapshot_of_record(
    name: str,
    source_path: str,
    result: Mapping[str, Any],
    input_digests: Mapping[str, str],
    page: str = "",
) -> RunSnapshot:
    """Return the snapshot of a run from its result record; raise ``ValueError`` when the
    record lacks what a comparison reads."""
    try:
        observed = result["observed_negative_cases"]
        fixture = result["input_mode"] == "fixture"
        status = result["status"]
        items = []
        for f in result["findings"]:
            code, layer = str(f["error_code"]), str(f["layer"])
            if code not in REGISTRY:
                raise ValueError(f"unknown finding code {code[:80]!r}")
            expected = (
                fixture
                and layer == Layer.NEGATIVE_CASES.value
                and code in observed.get(f.get("negative_case_id"), ())
            )
            path = f.get("path")
            line = f.get("line")
            items.append(
                (
                    code,
                    layer,
                    str(path) if path is not None else None,
                    line if isinstance(line, int) and not isinstance(line, bool) else None,
                    str(f["subject_id"]),
                    str(f["message"]),
                    bool(expected),
                )
            )
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"not a result record this tool writes ({error!r} missing)") from None
    if status not in ("pass", "blocked"):
        raise ValueError(f"not a result record this tool writes (status {status!r})")
    return RunSnapshot(
        name, source_path, str(status), dict(input_digests), finding_refs(items), page
    )


@dataclass(frozen=True)
class InputChange:
    """An input file whose digest differs from the baseline's: changed, added or removed."""

    path: str
    how: str


@dataclass(frozen=True)
class RunChange:
    """How one run of this build differs from its baseline run (None: a run new since)."""

    after: RunSnapshot
    before: RunSnapshot | None
    matched_by: str = ""  # "path", "name" (its folder moved) or "" (a new run)

    @property
    def name(self) -> str:
        return self.after.name

    @property
    def kind(self) -> str:
        """Return ``REGRESSION`` (pass to blocked), ``FIX`` (blocked to pass), ``NEW_RUN`` or ""."""
        if self.before is None:
            return NEW_RUN
        if self.before.status == "pass" and self.after.status == "blocked":
            return REGRESSION
        if self.before.status == "blocked" and self.after.status == "pass":
            return FIX
        return ""

    @property
    def moved_from(self) -> str | None:
        """Return the baseline run's folder when the run was matched by name, else None."""
        return self.before.source_path if self.matched_by == "name" and self.before else None

    @cached_property
    def new(self) -> tuple[FindingRef, ...]:
        before = self.before.gating if self.before else {}
        return tuple(f for fp, f in self.after.gating.items() if fp not in before)

    @cached_property
    def fixed(self) -> tuple[FindingRef, ...]:
        if self.before is None:
            return ()
        after = self.after.gating
        return tuple(f for fp, f in self.before.gating.items() if fp not in after)

    @cached_property
    def unchanged(self) -> tuple[FindingRef, ...]:
        before = self.before.gating if self.before else {}
        return tuple(f for fp, f in self.after.gating.items() if fp in before)

    @cached_property
    def inputs(self) -> tuple[InputChange, ...]:
        """Return the input files whose digests differ from the baseline's, by path."""
        if self.before is None:
            return ()
        old, new = self.before.input_digests, self.after.input_digests
        found = []
        for path in sorted(set(old) | set(new)):
            if path not in old:
                found.append(InputChange(path, "added"))
            elif path not in new:
                found.append(InputChange(path, "removed"))
            elif old[path] != new[path]:
                found.append(InputChange(path, "changed"))
        return tuple(found)

    def baseline_state(self, fingerprint: str) -> str:
        """Return a finding's SARIF ``baselineState``: ``unchanged`` or ``new``."""
        if self.before is not None and any(
            f.fingerprint == fingerprint for f in self.before.findings
        ):
            return "unchanged"
        return "new"

    @property
    def changed(self) -> bool:
        """Say whether anything differs from the baseline run."""
        return bool(self.kind or self.new or self.fixed or self.inputs or self.matched_by == "name")


@dataclass(frozen=True)
class Changes:
    """What changed since a baseline build, run by run (in this build's run order)."""

    baseline_sha256: str
    baseline_label: str | None
    runs: tuple[RunChange, ...]
    removed: tuple[RunSnapshot, ...] = field(default=())

    def of(self, name: str) -> RunChange | None:
        return next((run for run in self.runs if run.name == name), None)

    @property
    def regressions(self) -> tuple[RunChange, ...]:
        return tuple(run for run in self.runs if run.kind == REGRESSION)

    @property
    def fixes(self) -> tuple[RunChange, ...]:
        return tuple(run for run in self.runs if run.kind == FIX)

    @property
    def new_findings(self) -> tuple[tuple[RunChange, FindingRef], ...]:
        return tuple((run, f) for run in self.runs for f in run.new)

    @property
    def fixed_findings(self) -> tuple[tuple[RunChange, FindingRef], ...]:
        return tuple((run, f) for run in self.runs for f in run.fixed)

    @property
    def unchanged_count(self) -> int:
        return sum(len(run.unchanged) for run in self.runs)

    def summary(self) -> str:
        """Return the one-line count of what changed, as the command line prints it."""
        return (
            f"since the baseline: {len(self.regressions)} regression(s), "
            f"{len(self.new_findings)} new finding(s), {len(self.fixed_findings)} fixed "
            f"finding(s), {self.unchanged_count} unchanged, {len(self.fixes)} run(s) fixed, "
            f"{sum(1 for run in self.runs if run.kind == NEW_RUN)} new run(s), "
            f"{len(self.removed)} run(s) gone"
        )

    def fails(self, on: str) -> bool:
        """Say whether a gate ``--fail-on regression`` or ``--fail-on new`` fails (``new``
        on any new finding and on any regression)."""
        if on == REGRESSION:
            return bool(self.regressions)
        return bool(self.regressions or self.new_findings)


def match_runs(
    baseline: Sequence[RunSnapshot], current: Sequence[tuple[str, str]]
) -> dict[str, tuple[RunSnapshot, str]]:
    """Return, by this build's run name, the baseline run each (name, source folder) matches
    and how (``path`` or ``name``); a run matched by neither (a new one) is left out."""
    by_path = {run.source_path: run for run in baseline}
    matched: dict[str, tuple[RunSnapshot, str]] = {}
    taken: set[str] = set()
    for name, source_path in current:
        found = by_path.get(source_path)
        if found is not None:
            matched[name] = (found, "path")
            taken.add(found.source_path)
    current_paths = {source_path for _, source_path in current}
    left = {
        run.name: run
        for run in baseline
        if run.source_path not in taken and run.source_path not in current_paths
    }
    for name, _ in current:
        if name not in matched and name in left:
            matched[name] = (left.pop(name), "name")
    return matched


def compare(
    baseline: Sequence[RunSnapshot],
    current: Sequence[RunSnapshot],
    baseline_sha256: str,
    baseline_label: str | None = None,
) -> Changes:
    """Return what changed from the ``baseline`` build's runs to the ``current`` ones."""
    matched = match_runs(baseline, [(run.name, run.source_path) for run in current])
    runs = []
    for run in current:
        before, how = matched.get(run.name, (None, ""))
        runs.append(RunChange(run, before, how))
    used = {id(before) for before, _ in matched.values()}
    removed = tuple(run for run in baseline if id(run) not in used)
    return Changes(baseline_sha256, baseline_label, tuple(runs), removed)


def history_entry(label: str | None, runs: Sequence[RunSnapshot]) -> dict[str, Any]:
    """Return one build's entry of ``history.json`` (expected alarms are not counted); a run
    neither passed nor blocked counts in ``runs`` alone."""
    severity = {s.value: 0 for s in Severity}
    by_layer: dict[str, int] = {}
    for run in runs:
        for finding in run.gating.values():
            severity[finding.severity] = severity.get(finding.severity, 0) + 1
            by_layer[finding.layer] = by_layer.get(finding.layer, 0) + 1
    order = [layer.value for layer in Layer]
    layers = {
        layer: by_layer[layer]
        for layer in sorted(by_layer, key=lambda v: (order.index(v) if v in order else 99, v))
    }
    return {
        "label": label,
        "runs": len(runs),
        "passed": sum(1 for run in runs if run.status == "pass"),
        "blocked": sum(1 for run in runs if run.status == "blocked"),
        "findings": sum(severity.values()),
        "findings_by_severity": severity,
        "findings_by_layer": layers,
    }
