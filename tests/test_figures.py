"""One number format, four severities, counts never cut, a headline that stays short."""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import orjson
import pytest

from conftest import REPO
from sandbox_replay import figures
from sandbox_replay.checks.pipeline import ReplayConfig, replay
from sandbox_replay.drawing.flowchart import FlowNode, draw_flowchart
from sandbox_replay.exports.sarif import LEVEL, SECURITY_SEVERITY
from sandbox_replay.load.run import InputMode
from sandbox_replay.model import codes
from sandbox_replay.model.codes import REGISTRY, Severity
from sandbox_replay.records.build import build_records
from sandbox_replay.records.headline import ID_BUDGET, MAX_GAPS, gap_headline
from sandbox_replay.report import charts
from sandbox_replay.report.render import _shown

sys.path.insert(0, str(REPO / "benchmarks"))

from generate_bundle import generate

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0"), (7, "7"), (999, "999"), (1000, "1,000"), (1666, "1,666"), (600000, "600,000")],
)
def test_a_count_is_written_with_separators(value: int, text: str) -> None:
    assert figures.count(value) == text
    # A template prints a count the same way; a bool is no count.
    assert _shown(value) == text
    assert _shown(True) is True


def test_plural_agrees_and_separates() -> None:
    assert figures.plural(1, "hit") == "1 hit"
    assert figures.plural(1666, "finding") == "1,666 findings"
    assert figures.plural(2, "mismatch", "mismatches") == "2 mismatches"


def test_severities_rank_worst_first_and_each_means_something() -> None:
    assert [s.value for s in Severity] == ["critical", "high", "medium", "low"]
    assert all(s.meaning.endswith(".") for s in Severity)
    used = {entry.severity for entry in REGISTRY}
    assert used == set(Severity)


def test_containment_failures_are_critical_and_floors_are_low() -> None:
    for code in (
        codes.BLOCKED_ACTION_EXECUTED,
        codes.VERDICT_SEMANTIC_MISMATCH,
        codes.SIDE_EFFECT_SEMANTIC_MISMATCH,
        codes.TRACE_BLOCKED_ACTION_EXECUTED,
        codes.TRACE_VERDICT_NOT_PRE_EXECUTION,
        codes.FORBIDDEN_MATERIAL_DETECTED,
    ):
        assert REGISTRY[code].severity is Severity.CRITICAL, code
    low = {entry.code for entry in REGISTRY if entry.severity is Severity.LOW}
    assert low == {
        codes.ACTION_REQUEST_INVALID,
        codes.VERDICT_INVALID,
        codes.SIDE_EFFECT_RECEIPT_INVALID,
        codes.ROLLBACK_RECEIPT_INVALID,
        codes.PROJECTION_DENSITY_MISSING,
        codes.SOURCE_MODULE_COUNT_MISMATCH,
    }
    # What went unchecked is never low: a file or row that could not be read.
    for code in (codes.INPUT_JSON_INVALID, codes.INPUT_ROW_NOT_OBJECT, codes.INPUT_DUPLICATE_KEY):
        assert REGISTRY[code].severity is Severity.HIGH, code


def test_every_severity_has_a_sarif_level_and_score() -> None:
    assert set(LEVEL) == set(SECURITY_SEVERITY) == set(Severity)
    assert LEVEL[Severity.LOW] == "warning"  # "note" is the expected alarms' level
    scores = [float(SECURITY_SEVERITY[s]) for s in Severity]
    assert scores == sorted(scores, reverse=True) and scores[-1] < 4.0
    assert f"sev-{Severity.LOW.value}" in charts.CSS_CLASSES


def test_a_large_count_is_never_cut_in_a_flowchart_node() -> None:
    count = "30,103 block · 20,378 allow · 9,519 review"
    nodes = [
        FlowNode("derived", "Derived verdicts", count, "blocked"),
        FlowNode("replay", "Cold replay", "59,629/60,000 confirmed", "blocked"),
    ]
    root = ET.fromstring(str(draw_flowchart(nodes, [], title="t").svg))
    shown = [
        " ".join(
            (t.text or "") for t in g.iter(f"{SVG}text") if "count" in t.attrib.get("class", "")
        )
        for g in root.iter(f"{SVG}g")
        if "flow-node" in g.attrib.get("class", "").split()
    ]
    texts = [re.sub(r"\s+", " ", v.replace("\u00a0", " ")) for v in shown]
    assert texts == [f"✗ {count}", "✗ 59,629/60,000 confirmed"]
    assert not any("…" in text for text in texts)


def test_chart_values_have_separators_and_filters_are_checked() -> None:
    rows = [("a run with a rather long name indeed", [charts.BarDatum("x", 60000, "finding")])]
    svg = charts.stacked_bar_chart(
        rows, title="t", id_prefix="c", filters=["run=a%20run"], legend_filters={"x": "sev=low"}
    )
    root = ET.fromstring(str(svg))
    values = [t.text for t in root.iter(f"{SVG}text") if t.attrib.get("class") == "chart-value"]
    assert values == ["60,000"]
    labels = [t.text for t in root.iter(f"{SVG}text") if t.attrib.get("class") == "chart-label"]
    assert labels == ["a run with a rather long name indeed"]
    assert 'data-filter="run=a%20run"' in svg and 'data-filter="sev=low"' in svg
    for bad in ('run=x" onclick="y', "run=a b", "javascript:alert(1)", "run=<x>"):
        with pytest.raises(ValueError):
            charts.bar_chart([charts.BarDatum("x", 1)], title="t", id_prefix="c", filters=[bad])


def _record(folder: Path) -> dict[str, object]:
    result: dict[str, object] = orjson.loads(
        build_records(replay(ReplayConfig(folder, InputMode.BUNDLE))).result_bytes
    )
    return result


def test_the_headline_of_a_large_failing_run_stays_short(tmp_path: Path) -> None:
    folder = tmp_path / "bundle"
    generate(folder, 2000, seed=7, failing_fraction=0.1)
    headline = gap_headline(_record(folder))
    assert len(headline.gaps) > MAX_GAPS  # every gap is still known
    assert headline.text.count(";") <= MAX_GAPS + 1
    assert re.search(r"and \d+ more kinds? of gap", headline.text)
    ids = re.findall(r"req_ep_\d+_\d+_step_\d+", headline.text)
    assert 0 < len(ids) <= ID_BUDGET
    assert " more)" in headline.text  # a listed gap says how many ids it left out
    assert len(headline.text) < 600


def test_the_headline_writes_counts_with_separators(tmp_path: Path) -> None:
    folder = tmp_path / "bundle"
    generate(folder, 1500, seed=3)
    headline = gap_headline(_record(folder))
    assert headline.passed
    assert headline.text.startswith("All 1,500 verdicts re-derived")
