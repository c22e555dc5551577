"""Write the findings of one or more runs as a SARIF 2.1.0 log, for code-scanning gates.

File format: one UTF-8 JSON object (2-space indent, ASCII-escaped, trailing newline) with
``$schema``, ``version: "2.1.0"`` and one ``run`` per replayed run, in the order given:

- ``tool.driver.rules``: every registered code in registry order (so ``ruleIndex`` is
  the same in every log of a version), its documents as help, tags ``["security",
  <layer>]`` and GitHub's ``security-severity`` band.
- ``automationDetails.id``: ``sandbox-replay/<run name>/``, so each run is its own
  code-scanning category and one run's results never close another's alerts.
- ``results``: one per finding, in the result record's order, located relative to
  ``%SRCROOT%`` (the repository root; line 1 when unknown). ``partialFingerprints`` hold
  ``sandboxReplay/v1`` (sha256 over code, file URI and subject, then ``:<n>`` for the
  n-th equal one: no line, so a reformatted input keeps its alerts) and
  ``sandboxReplay/finding/v1``, the identity ``build --baseline`` and ``diff`` match by.
  With a baseline each has a ``baselineState``, and each finding gone since is added as a
  ``kind: "pass"``, ``level: "none"`` result, ``absent``. Past ``MAX_RESULTS_PER_RUN``
  only the most severe are kept; the run's ``properties`` say how many were left out.
- ``properties``: the run's status, input mode, bundle id, finding counts and, replayed
  with ``--sensitivity``, ``seededEscapesApplicable``, ``seededEscapesCaught`` and
  ``seededEscapesMissed``.

GitHub takes at most ``MAX_RUNS_PER_FILE`` runs and ``MAX_GZIPPED_BYTES`` per file, so
``sarif_files`` splits the log in run order: ``replay.sarif``, then ``replay-2.sarif`` on,
each a complete log; a run over the limit alone is written alone, flagged ``oversize``.

In fixture mode a planted negative case that fired (the proof its alarm works) is at
``level: "note"`` with an accepted suppression and ``properties.expected: true``: visible
but out of any gate (``kind: "pass"`` would need ``level: "none"``, which viewers hide).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import stat
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sandbox_replay.atomic import dump_json
from sandbox_replay.exports import ExportRun, SeededCount
from sandbox_replay.exports.text import one_line, subject_look_alikes, subject_mark
from sandbox_replay.load import run as bundle
from sandbox_replay.model.codes import REGISTRY, FindingCode, Layer, Severity
from sandbox_replay.model.findings import Finding
from sandbox_replay.model.fingerprints import FINGERPRINT_VERSION, fingerprints
from sandbox_replay.records.changes import FindingRef
from sandbox_replay.version import TOOL_NAME, __version__

SARIF_SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SARIF_VERSION = "2.1.0"
SRCROOT = "%SRCROOT%"
FINGERPRINT_KEY = "sandboxReplay/v1"

SECURITY_SEVERITY = {
    Severity.CRITICAL: "9.5",
    Severity.HIGH: "7.5",
    Severity.MEDIUM: "5.0",
    Severity.LOW: "3.0",
}
LEVEL = {
    Severity.CRITICAL: "error",
    Severity.HIGH: "error",
    Severity.MEDIUM: "warning",
    Severity.LOW: "warning",
}
EXPECTED_LEVEL = "note"
LEVEL_RANK = {"error": 0, "warning": 1, "note": 2}
MAX_RESULTS_PER_RUN = 25_000
MAX_RUNS_PER_FILE = 20
MAX_GZIPPED_BYTES = 10_000_000
# Below gzip's default, so the size measured is never below what an uploader sends.
GZIP_LEVEL = 6

# Where a finding that names no row points: the file its layer reads.
LAYER_FILE = {
    Layer.STRICT_LOAD: bundle.PROJECTION_PROTOCOL,
    Layer.FORBIDDEN_MATERIAL: bundle.PROJECTION_PROTOCOL,
    Layer.PROJECTION_PROTOCOL: bundle.PROJECTION_PROTOCOL,
    Layer.SANDBOX_POLICY: bundle.SANDBOX_POLICY,
    Layer.ACTION_REQUESTS: bundle.ACTION_REQUESTS,
    Layer.POLICY_VERDICTS: bundle.POLICY_VERDICTS,
    Layer.SIDE_EFFECTS: bundle.SIDE_EFFECT_RECEIPTS,
    Layer.ROLLBACKS: bundle.ROLLBACK_RECEIPTS,
    Layer.COLD_REPLAY: bundle.COLD_REPLAY,
    Layer.PUBLIC_TRACE: bundle.ACTION_REQUESTS,
    Layer.NEGATIVE_CASES: bundle.PROJECTION_PROTOCOL,
    Layer.SOURCE_MODULES: bundle.SOURCE_MODULE_MANIFEST,
    Layer.BUNDLE_MANIFEST: bundle.BUNDLE_MANIFEST,
}

_SECTION = re.compile(r"^## What it checks\s*\n(.*?)(?=^## |\Z)", re.S | re.M)
_LINK_CHARS = re.compile(r"([\\\[\]])")


def rule_name(code: str) -> str:
    """Return a code in CamelCase, e.g. ``SandboxPolicyVerdictMissing``."""
    return "".join(part.capitalize() for part in code.split("_") if part)


def _what_it_checks(entry: FindingCode) -> str:
    found = _SECTION.search(entry.doc)
    text = " ".join(found.group(1).split()) if found else ""
    return text or entry.summary


def build_rule(entry: FindingCode) -> dict[str, Any]:
    """Return the SARIF reporting descriptor of one registered code."""
    doc = entry.doc.strip() or entry.summary
    return {
        "id": entry.code,
        "name": rule_name(entry.code),
        "shortDescription": {"text": entry.summary},
        "fullDescription": {"text": _what_it_checks(entry)},
        "help": {"text": doc, "markdown": doc},
        "defaultConfiguration": {"level": LEVEL[entry.severity]},
        "properties": {
            "tags": ["security", entry.layer.value],
            "security-severity": SECURITY_SEVERITY[entry.severity],
        },
    }


def plain_message(text: str) -> str:
    """Return input-derived text fit for ``message.text``: one line, visible, no live link.

    Brackets and the backslash are escaped with a backslash (SARIF §3.11.6).
    """
    return _LINK_CHARS.sub(r"\\\1", one_line(text))


def artifact_uri(run: ExportRun, path: str) -> str:
    """Return a finding's file as a percent-encoded URI relative to the repository root."""
    return quote(run.artifact_path(path), safe="/")


def _message(finding: Finding, look_alikes: Collection[str]) -> str:
    message = finding.message
    if finding.subject_id not in message:
        message += f" (subject: {finding.subject_id})"
    mark = subject_mark(finding.subject_id, look_alikes)
    return f"{message} — {mark}" if mark else message


def _locations(uri: str, line: int | None) -> list[dict[str, Any]]:
    region = {"startLine": max(line or 1, 1)}
    return [
        {
            "physicalLocation": {
                "artifactLocation": {"uri": uri, "uriBaseId": SRCROOT},
                "region": region,
            }
        }
    ]


def fingerprint(code: str, uri: str, subject_id: str) -> str:
    """Return the line-independent hash of a finding: code, file URI and subject."""
    digest = hashlib.sha256()
    for part in (code, uri, subject_id):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()


def build_result(
    run: ExportRun,
    finding: Finding,
    rule_index: dict[str, int],
    seen: Counter[str],
    identity: str,
    look_alikes: Collection[str],
) -> dict[str, Any]:
    """Return the SARIF result of one finding; ``seen`` numbers equal hashes, ``identity``
    is its fingerprint, ``look_alikes`` the run's ids its message marks (``subject_mark``)."""
    entry = REGISTRY[finding.error_code]
    uri = artifact_uri(run, finding.path or LAYER_FILE[finding.layer])
    base = fingerprint(finding.error_code, uri, finding.subject_id)
    seen[base] += 1
    expected = run.facts.expected(finding)
    result: dict[str, Any] = {
        "ruleId": finding.error_code,
        "ruleIndex": rule_index[finding.error_code],
        "level": EXPECTED_LEVEL if expected else LEVEL[entry.severity],
        "message": {"text": plain_message(_message(finding, look_alikes))},
        "locations": _locations(uri, finding.line),
        "partialFingerprints": {
            FINGERPRINT_KEY: f"{base}:{seen[base]}",
            FINGERPRINT_VERSION: identity,
        },
        "properties": {
            "layer": finding.layer.value,
            "subjectKind": one_line(finding.subject_kind),
            "negativeCaseId": one_line(finding.negative_case_id),
            "expected": expected,
        },
    }
    if run.change is not None:
        result["baselineState"] = run.change.baseline_state(identity)
    if expected:
        result["suppressions"] = [
            {
                "kind": "external",
                "status": "accepted",
                "justification": "Planted negative case: its alarm fired as designed, "
                "which is what makes the fixture pass.",
            }
        ]
    return result


def absent_result(
    run: ExportRun, finding: FindingRef, rule_index: dict[str, int]
) -> dict[str, Any]:
    """Return a finding of the baseline run that is gone: ``baselineState: absent``.

    It carries no ``sandboxReplay/v1`` hash: the alert that hash opened closes by its absence.
    """
    uri = artifact_uri(run, finding.path or LAYER_FILE[Layer(finding.layer)])
    return {
        "ruleId": finding.code,
        "ruleIndex": rule_index[finding.code],
        "kind": "pass",
        "level": "none",
        "message": {"text": plain_message(f"Fixed since the baseline: {finding.message}")},
        "locations": _locations(uri, finding.line),
        "partialFingerprints": {FINGERPRINT_VERSION: finding.fingerprint},
        "baselineState": "absent",
        "properties": {"layer": finding.layer, "expected": False},
    }


def most_severe(
    results: list[dict[str, Any]], rules: list[dict[str, Any]], limit: int
) -> list[dict[str, Any]]:
    """Return at most ``limit`` results, the most severe ones, in their original order."""
    if len(results) <= limit:
        return results

    def rank(index: int) -> tuple[int, float, int]:
        result = results[index]
        severity = float(rules[result["ruleIndex"]]["properties"]["security-severity"])
        return (LEVEL_RANK[result["level"]], -severity, index)

    keep = sorted(sorted(range(len(results)), key=rank)[:limit])
    return [results[i] for i in keep]


def _rules() -> list[dict[str, Any]]:
    return [build_rule(entry) for entry in REGISTRY]


def build_run(run: ExportRun, rules: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the SARIF run of one replay."""
    rule_index = {rule["id"]: i for i, rule in enumerate(rules)}
    seen: Counter[str] = Counter()
    facts = run.facts
    # Built for every finding before any is dropped, so fingerprint numbering never shifts.
    identities = fingerprints(
        (f.error_code, f.layer.value, f.path, f.subject_id) for f in facts.findings
    )
    look_alikes = subject_look_alikes(facts.findings)
    results = [
        build_result(run, f, rule_index, seen, identity, look_alikes)
        for f, identity in zip(facts.findings, identities, strict=True)
    ]
    kept = most_severe(results, rules, MAX_RESULTS_PER_RUN)
    if run.change is not None:
        kept += [absent_result(run, f, rule_index) for f in run.change.fixed]
    return {
        "tool": {
            "driver": {
                "name": TOOL_NAME,
                "version": __version__,
                "semanticVersion": __version__,
                "rules": rules,
            }
        },
        "automationDetails": {"id": f"{TOOL_NAME}/{one_line(run.name)}/"},
        "originalUriBaseIds": {
            SRCROOT: {"description": {"text": "The repository root the command ran in."}}
        },
        "results": kept,
        "columnKind": "unicodeCodePoints",
        "properties": {
            "status": facts.status,
            "inputMode": facts.input_mode.value,
            "bundleId": one_line(facts.bundle_id),
            "findingCount": len(results),
            "omittedResultCount": len(results) - len(kept),
            **_seeded(facts.seeded),
        },
    }


def _seeded(seeded: SeededCount | None) -> dict[str, int]:
    """Return the run's seeded escapes caught, as properties (none without ``--sensitivity``)."""
    if seeded is None:
        return {}
    return {
        "seededEscapesApplicable": seeded.applicable,
        "seededEscapesCaught": seeded.caught,
        "seededEscapesMissed": seeded.missed,
    }


def sarif_log(sarif_runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Return a SARIF log holding ``sarif_runs`` (as ``build_run`` returns them)."""
    return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": list(sarif_runs)}


def build_sarif(runs: Sequence[ExportRun]) -> dict[str, Any]:
    """Return the SARIF log of ``runs`` in one log: one SARIF run per replayed run."""
    rules = _rules()
    return sarif_log([build_run(run, rules) for run in runs])


@dataclass(frozen=True)
class SarifFile:
    """One file of a split SARIF log: its bytes, its runs' names and its gzipped size."""

    data: bytes
    run_names: tuple[str, ...]
    gzipped_size: int

    @property
    def oversize(self) -> bool:
        """Say whether the file is over ``MAX_GZIPPED_BYTES``: then it holds one run alone."""
        return self.gzipped_size > MAX_GZIPPED_BYTES


def gzipped_size(data: bytes) -> int:
    return len(gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0))


def sarif_files(runs: Sequence[ExportRun]) -> list[SarifFile]:
    """Return the SARIF log of ``runs`` split into files GitHub code scanning accepts.

    Runs are packed in order by their own gzipped sizes; a file still over the limit is
    halved until each half fits or holds one run.
    """
    rules = _rules()
    groups: list[list[tuple[str, dict[str, Any]]]] = []
    estimate = 0
    for run in runs:
        sarif_run = build_run(run, rules)
        size = gzipped_size(dump_json(sarif_run))
        if (
            not groups
            or len(groups[-1]) == MAX_RUNS_PER_FILE
            or estimate + size > MAX_GZIPPED_BYTES
        ):
            groups.append([])
            estimate = 0
        groups[-1].append((run.name, sarif_run))
        estimate += size
    return [part for group in groups for part in _fitted(group)]


def _fitted(group: list[tuple[str, dict[str, Any]]]) -> list[SarifFile]:
    data = dump_json(sarif_log([sarif_run for _, sarif_run in group]))
    size = gzipped_size(data)
    if size > MAX_GZIPPED_BYTES and len(group) > 1:
        half = len(group) // 2
        return _fitted(group[:half]) + _fitted(group[half:])
    return [SarifFile(data, tuple(name for name, _ in group), size)]


def part_path(path: Path, number: int) -> Path:
    """Return the path of file ``number`` (from 1) of a split log written at ``path``."""
    return path if number == 1 else path.with_name(f"{path.stem}-{number}{path.suffix}")


def part_number(path: Path, other: Path) -> int | None:
    """Return which numbered file (2 on) of a log at ``path`` ``other`` names, else None."""
    if other.parent != path.parent:
        return None
    pattern = rf"{re.escape(path.stem)}-([1-9][0-9]*){re.escape(path.suffix)}"
    found = re.fullmatch(pattern, other.name)
    number = int(found.group(1)) if found else 0
    return number if number >= 2 else None


def stale_parts(path: Path, count: int) -> list[Path]:
    """Return the numbered files of a log at ``path`` past its ``count`` files, regular ones only."""
    try:
        names = sorted(os.listdir(path.parent))
    except OSError:
        return []
    numbered = ((part_number(path, path.parent / name) or 0, path.parent / name) for name in names)
    return [other for number, other in sorted(numbered) if number > count and _is_regular(other)]


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
