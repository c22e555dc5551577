"""Write the findings of one or more runs as a SARIF 2.1.0 log, for code-scanning gates.

File format: one UTF-8 JSON object (2-space indent, ASCII-escaped, trailing newline) with
``$schema``, ``version: "2.1.0"`` and one ``run`` per replayed run, in the order given:

- ``tool.driver``: name, version and one rule per registered finding
  code, in registry order (so ``ruleIndex`` is the same in every log of a version): id =
  the code, name = the code in CamelCase, short description = its summary, full
  description = the "What it checks" section of its document, help = the whole document
  (text and Markdown), tags ``["security", <layer>]`` and ``security-severity`` (critical
  9.5, high 7.5, medium 5.0, low 3.0: GitHub's bands).
- ``runAutomationDetails.id``: ``sandbox-replay/<run name>/``, so each run is its own
  code-scanning category and one run's results never close another's alerts.
- ``originalUriBaseIds``: ``%SRCROOT%``, the repository root the URIs are relative to.
- ``results``: one per finding, in the finding order of the result record: ``ruleId``,
  ``ruleIndex``, ``level`` (critical/high: error, medium/low: warning; a low finding
  still blocks its run, and ``note`` is kept for expected alarms), ``message.text``
  (on one line, input values made visible and SARIF's link brackets escaped, so no input
  can open an embedded link nor forge a line of a log that prints it), one physical location (the input file relative to the repository root,
  ``uriBaseId: %SRCROOT%``, and the row's start line, 1 when unknown) and
  ``partialFingerprints["sandboxReplay/v1"]``: sha256 over code, file URI and subject id,
  then ``:<n>`` for the n-th result with that hash. The line is left out on purpose so a
  reformatted input keeps its alerts; the URI and subject are the same on every machine.
  ``partialFingerprints["sandboxReplay/finding/v1"]`` is the finding's identity across
  builds (``fingerprints``: code, layer, file within the run folder and subject), the one
  ``build --baseline`` and ``diff`` match findings by.
- ``baselineState``, only in a build given ``--baseline``: ``new`` or ``unchanged`` by
  that identity, and each finding of the baseline run that is gone is added after the
  results as a ``kind: "pass"``, ``level: "none"`` result with ``baselineState:
  "absent"`` (``absent_result``).
- ``properties`` of a run: status, input mode, bundle id, the finding count and how many
  results were left out to stay within ``MAX_RESULTS_PER_RUN`` (the most severe are kept).

Split files. GitHub code scanning rejects a file of more than 20 runs or over 10 MB
gzipped, so ``sarif_files`` splits the log: the runs in the order given, at most
``MAX_RUNS_PER_FILE`` per file, a file closed early when its gzipped size (level 6, the
serialized bytes as written) would pass ``MAX_GZIPPED_BYTES``. The first file keeps the
name given (``replay.sarif``), the next ones are numbered from 2 before the suffix
(``replay-2.sarif``, ``replay-3.sarif``, ...), each a complete log as above. A run whose
file alone is over the limit is written alone in its file and flagged ``oversize``.
Numbered files of an earlier, longer split are stale (``stale_parts``) and removed.

Expected findings. In fixture mode each planted negative case must raise its code: that
finding is the proof an alarm works, and a fixture that raises all of them passes. A gate
that fails on any error-level result would fail every passing fixture, so a fired
negative case is emitted at ``level: "note"`` with an accepted external suppression
(justification: the planted case fired as designed) and ``properties.expected: true``.
``kind: "pass"`` would say the same, but SARIF requires ``level: "none"`` with any kind
other than ``fail``, and viewers then hide the proof altogether; a suppressed note keeps
it visible and still out of the gate. A negative case that did *not* fire
(``NEGATIVE_CASE_MISSING``) is a real failure and keeps its own level.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import stat
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sandbox_replay.atomic import dump_json
from sandbox_replay.exports import ExportRun, is_expected
from sandbox_replay.exports.text import one_line
from sandbox_replay.load.run import (
    ACTION_REQUESTS,
    BUNDLE_MANIFEST,
    COLD_REPLAY,
    POLICY_VERDICTS,
    PROJECTION_PROTOCOL,
    ROLLBACK_RECEIPTS,
    SANDBOX_POLICY,
    SIDE_EFFECT_RECEIPTS,
    SOURCE_MODULE_MANIFEST,
)
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
# GitHub code scanning takes at most 25,000 results per run; past that the most severe are
# kept and ``properties.omittedResultCount`` says how many were left out.
MAX_RESULTS_PER_RUN = 25_000
# GitHub code scanning takes at most 20 runs per file and 10 MB per file gzipped.
MAX_RUNS_PER_FILE = 20
MAX_GZIPPED_BYTES = 10_000_000
# The level a file's gzipped size is measured at: lower than gzip's default, so the size
# measured is never below what an uploader compressing at its default level sends.
GZIP_LEVEL = 6

# Where a finding that names no row points: the file its layer reads.
LAYER_FILE = {
    Layer.STRICT_LOAD: PROJECTION_PROTOCOL,
    Layer.FORBIDDEN_MATERIAL: PROJECTION_PROTOCOL,
    Layer.PROJECTION_PROTOCOL: PROJECTION_PROTOCOL,
    Layer.SANDBOX_POLICY: SANDBOX_POLICY,
    Layer.ACTION_REQUESTS: ACTION_REQUESTS,
    Layer.POLICY_VERDICTS: POLICY_VERDICTS,
    Layer.SIDE_EFFECTS: SIDE_EFFECT_RECEIPTS,
    Layer.ROLLBACKS: ROLLBACK_RECEIPTS,
    Layer.COLD_REPLAY: COLD_REPLAY,
    Layer.PUBLIC_TRACE: ACTION_REQUESTS,
    Layer.NEGATIVE_CASES: PROJECTION_PROTOCOL,
    Layer.SOURCE_MODULES: SOURCE_MODULE_MANIFEST,
    Layer.BUNDLE_MANIFEST: BUNDLE_MANIFEST,
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
    """Return input-derived text fit for ``message.text``: one line, visible, no live link syntax.

    SARIF reads ``[text](target)`` in a plain-text message as an embedded link and asks
    literal brackets (and the backslash) to be escaped with a backslash (§3.11.6). A
    viewer or a CI log shows the message as it is: a line break from an id would start
    a line the tool did not write.
    """
    return _LINK_CHARS.sub(r"\\\1", one_line(text))


def artifact_uri(run: ExportRun, path: str) -> str:
    """Return a finding's file as a percent-encoded URI relative to the repository root."""
    return quote(run.artifact_path(path), safe="/")


def _message(finding: Finding) -> str:
    if finding.subject_id in finding.message:
        return finding.message
    return f"{finding.message} (subject: {finding.subject_id})"


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
) -> dict[str, Any]:
    """Return the SARIF result of one finding; ``seen`` numbers equal fingerprints.

    ``identity`` is the finding's fingerprint (``fingerprints``).
    """
    entry = REGISTRY[finding.error_code]
    uri = artifact_uri(run, finding.path or LAYER_FILE[finding.layer])
    base = fingerprint(finding.error_code, uri, finding.subject_id)
    seen[base] += 1
    expected = is_expected(run, finding)
    result: dict[str, Any] = {
        "ruleId": finding.error_code,
        "ruleIndex": rule_index[finding.error_code],
        "level": EXPECTED_LEVEL if expected else LEVEL[entry.severity],
        "message": {"text": plain_message(_message(finding))},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": uri, "uriBaseId": SRCROOT},
                    "region": {"startLine": max(finding.line or 1, 1)},
                }
            }
        ],
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

    A result of ``kind: "pass"`` and ``level: "none"`` (SARIF's "the rule was evaluated and
    no problem found"), so no gate or viewer counts it as a problem. It keeps the
    fingerprint it had, and carries no ``sandboxReplay/v1`` hash: the alert that hash
    opened is closed by its absence from this log, as code scanning closes any alert.
    """
    uri = artifact_uri(run, finding.path or LAYER_FILE[Layer(finding.layer)])
    return {
        "ruleId": finding.code,
        "ruleIndex": rule_index[finding.code],
        "kind": "pass",
        "level": "none",
        "message": {"text": plain_message(f"Fixed since the baseline: {finding.message}")},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": uri, "uriBaseId": SRCROOT},
                    "region": {"startLine": max(finding.line or 1, 1)},
                }
            }
        ],
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


def build_run(run: ExportRun, rules: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the SARIF run of one replay."""
    rule_index = {rule["id"]: i for i, rule in enumerate(rules)}
    seen: Counter[str] = Counter()
    facts = run.facts
    # Built for every finding before any is dropped, so fingerprint numbering never shifts.
    identities = fingerprints(
        (f.error_code, f.layer.value, f.path, f.subject_id) for f in facts.findings
    )
    results = [
        build_result(run, f, rule_index, seen, identity)
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
        },
    }


def sarif_log(sarif_runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Return a SARIF log holding ``sarif_runs`` (as ``build_run`` returns them)."""
    return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": list(sarif_runs)}


def build_sarif(runs: Sequence[ExportRun]) -> dict[str, Any]:
    """Return the SARIF log of ``runs`` in one log: one SARIF run per replayed run."""
    rules = [build_rule(entry) for entry in REGISTRY]
    return sarif_log([build_run(run, rules) for run in runs])


def sarif_bytes(runs: Sequence[ExportRun]) -> bytes:
    """Return the SARIF log of ``runs`` as one file, unsplit (``sarif_files`` splits it)."""
    return dump_json(build_sarif(runs))


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

    Runs are packed in order by their gzipped size alone; a file whose real gzipped size
    is still over the limit is halved until each half fits or holds one run.
    """
    rules = [build_rule(entry) for entry in REGISTRY]
    built = [(run.name, build_run(run, rules)) for run in runs]
    groups: list[list[tuple[str, dict[str, Any]]]] = []
    estimate = 0
    for name, sarif_run in built:
        size = gzipped_size(dump_json(sarif_run))
        if (
            not groups
            or len(groups[-1]) == MAX_RUNS_PER_FILE
            or estimate + size > MAX_GZIPPED_BYTES
        ):
            groups.append([])
            estimate = 0
        groups[-1].append((name, sarif_run))
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
    stale = []
    for name in names:
        other = path.parent / name
        number = part_number(path, other)
        if number is not None and number > count and _is_regular(other):
            stale.append((number, other))
    return [other for _, other in sorted(stale)]


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
