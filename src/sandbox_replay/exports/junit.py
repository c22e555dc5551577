"""Write the layer checks of one or more runs as JUnit XML, for CI test reports.

File format: UTF-8 XML with a declaration, 2-space indented, no timestamps (so equal runs
give equal bytes)::

    <testsuites name="sandbox-replay" tests= failures= errors="0" skipped="0" time="0">
      <testsuite name="<run name>" tests= failures= errors="0" skipped="0" time="0">
        <properties> status, input_mode, bundle_id, source_root
                     [, seeded_escapes: "N of M" caught (--sensitivity)] </properties>
        <testcase classname="<layer>" name="<layer title>" time="0">
          <failure message="<n> finding(s): CODE, ..." type="<first code>">
            one line per finding: code, subject, file:line, message
          </failure>
        </testcase>
        ...
      </testsuite>
    </testsuites>

In fixture mode the negative-case layer is one testcase per planted case, failing when
it did not fire; a layer that did not run fails with type ``not_run``. Every input-derived
value is made visible (which keeps the XML well-formed) and escaped by the serialiser.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sandbox_replay.checks.negative_cases import NEGATIVE_CASES
from sandbox_replay.exports import ExportRun
from sandbox_replay.exports.text import one_line, subject_look_alikes, subject_mark
from sandbox_replay.load.run import InputMode
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.findings import Finding
from sandbox_replay.version import TOOL_NAME

NOT_RUN = "not_run"
MAX_SUBJECTS = 10


@dataclass(frozen=True)
class CheckCase:
    """One JUnit testcase: a layer check or a negative case, and what failed it."""

    classname: str
    name: str
    findings: tuple[Finding, ...]
    ran: bool = True

    @property
    def failed(self) -> bool:
        return bool(self.findings) or not self.ran


def check_cases(run: ExportRun) -> list[CheckCase]:
    """Return the testcases of one run, in pipeline order."""
    facts = run.facts
    fixture = facts.input_mode is InputMode.FIXTURE
    cases: list[CheckCase] = []
    for layer in facts.layers:
        if fixture and layer.layer is Layer.NEGATIVE_CASES:
            cases += _negative_cases(run)
            continue
        findings = tuple(sorted(layer.findings, key=Finding.sort_key))
        cases.append(CheckCase(layer.layer.value, layer.layer.label, findings, layer.ran))
    return cases


def _negative_cases(run: ExportRun) -> list[CheckCase]:
    facts = run.facts
    layer = facts.layer(Layer.NEGATIVE_CASES)
    missing = set(facts.negative.missing) if facts.negative else set()
    findings = layer.findings if layer else []
    cases = []
    for case in NEGATIVE_CASES:
        failing = tuple(
            f for f in findings if f.negative_case_id == case.case_id and case.case_id in missing
        )
        cases.append(
            CheckCase(Layer.NEGATIVE_CASES.value, case.case_id, failing, layer is not None)
        )
    return cases


def _failure(
    parent: ET.Element, case: CheckCase, run: ExportRun, look_alikes: Collection[str]
) -> None:
    if not case.ran:
        element = ET.SubElement(
            parent, "failure", {"message": "the layer did not run", "type": NOT_RUN}
        )
        element.text = "The layer did not run, so nothing it checks is verified."
        return
    counts = Counter(f.error_code for f in case.findings)
    summary = ", ".join(f"{code} x{n}" if n > 1 else code for code, n in sorted(counts.items()))
    subjects = [_marked(s, look_alikes) for s in sorted({f.subject_id for f in case.findings})]
    shown = ", ".join(subjects[:MAX_SUBJECTS])
    if len(subjects) > MAX_SUBJECTS:
        shown += f" and {len(subjects) - MAX_SUBJECTS} more"
    message = f"{len(case.findings)} finding(s): {summary}; subjects: {shown}"
    element = ET.SubElement(
        parent,
        "failure",
        {"message": one_line(message), "type": case.findings[0].error_code},
    )
    element.text = "\n".join(_finding_line(f, run, look_alikes) for f in case.findings)


def _marked(subject: str, look_alikes: Collection[str]) -> str:
    """Return a finding's subject followed by its ``subject_mark``, if any."""
    mark = subject_mark(subject, look_alikes)
    return f"{subject} ({mark})" if mark else subject


def _finding_line(finding: Finding, run: ExportRun, look_alikes: Collection[str]) -> str:
    where = run.location(finding)
    subject = _marked(finding.subject_id, look_alikes)
    return one_line(f"{finding.error_code} {subject} at {where}: {finding.message}")


def _suite(parent: ET.Element, run: ExportRun) -> tuple[int, int]:
    cases = check_cases(run)
    failures = sum(1 for c in cases if c.failed)
    suite = ET.SubElement(
        parent, "testsuite", {"name": one_line(run.name), **_totals(len(cases), failures)}
    )
    props = ET.SubElement(suite, "properties")
    facts = run.facts
    for name, value in (
        ("status", facts.status),
        ("input_mode", facts.input_mode.value),
        ("bundle_id", facts.bundle_id),
        ("source_root", run.source_root),
        *((("seeded_escapes", facts.seeded.text + " caught"),) if facts.seeded else ()),
    ):
        ET.SubElement(props, "property", {"name": name, "value": one_line(value)})
    look_alikes = subject_look_alikes(facts.findings)
    for case in cases:
        element = ET.SubElement(
            suite,
            "testcase",
            {"classname": case.classname, "name": one_line(case.name), "time": "0"},
        )
        if case.failed:
            _failure(element, case, run, look_alikes)
    return len(cases), failures


def _totals(tests: int, failures: int) -> dict[str, str]:
    return {
        "tests": str(tests),
        "failures": str(failures),
        "errors": "0",
        "skipped": "0",
        "time": "0",
    }


def junit_bytes(runs: Sequence[ExportRun]) -> bytes:
    """Return the JUnit XML of ``runs`` as written."""
    root = ET.Element("testsuites", {"name": TOOL_NAME})
    totals = [_suite(root, run) for run in runs]
    root.attrib.update(_totals(sum(t for t, _ in totals), sum(f for _, f in totals)))
    ET.indent(root, space="  ")
    body = ET.tostring(root, encoding="unicode", short_empty_elements=True)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n").encode("utf-8")
