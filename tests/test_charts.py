"""The index page's small charts: well-formed, numbers in words, classes not colours, inert text."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from sandbox_replay.report.charts import (
    CSS_CLASSES,
    HEATMAP_LEVELS,
    BarDatum,
    bar_chart,
    heat_level,
    stacked_bar_chart,
)

SVG = "{http://www.w3.org/2000/svg}"
STATUS = [
    BarDatum("pass", 3, "status-pass"),
    BarDatum("blocked", 5, "status-blocked"),
    BarDatum("not run", 0, "status-not_run"),
]
VERDICTS = [
    (
        "first_wave",
        [
            BarDatum("allow", 2, "verdict-allow"),
            BarDatum("block", 4, "verdict-block"),
            BarDatum("review", 0, "verdict-review"),
        ],
    ),
    (
        "scenario_exfil",
        [
            BarDatum("allow", 1, "verdict-allow"),
            BarDatum("block", 3, "verdict-block"),
            BarDatum("review", 2, "verdict-review"),
        ],
    ),
]
HOSTILE = "</svg><script>alert(1)</script> \"q\" & 'a' \u202eevil\x00\x1b"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def bars(root: ET.Element) -> list[ET.Element]:
    return [
        rect
        for row in root.iter(f"{SVG}g")
        if row.attrib.get("class") == "chart-row"
        for rect in row.iter(f"{SVG}rect")
    ]


def shape(root: ET.Element) -> tuple[set[str], set[tuple[str, str]]]:
    tags = {element.tag for element in root.iter()}
    return tags, {(element.tag, name) for element in root.iter() for name in element.attrib}


def test_bar_chart_structure_numbers_and_classes() -> None:
    svg = bar_chart(STATUS, title="Runs by status", id_prefix="runs")
    root = parse(svg)
    assert root.attrib["role"] == "img"
    assert root.attrib["viewBox"].split()[2] == "320"
    assert root.attrib["aria-labelledby"] == "runs-title"
    assert root.attrib["aria-describedby"] == "runs-desc"
    assert root.findtext(f"{SVG}title") == "Runs by status"
    assert root.findtext(f"{SVG}desc") == "pass: 3. blocked: 5. not run: 0."
    drawn = bars(root)
    assert [rect.attrib["class"] for rect in drawn] == ["bar status-pass", "bar status-blocked"]
    assert float(drawn[1].attrib["width"]) > float(drawn[0].attrib["width"])  # 5 > 3
    values = [t.text for t in root.iter(f"{SVG}text") if t.attrib.get("class") == "chart-value"]
    assert values == ["3", "5", "0"]  # the zero row still says 0
    painted = {
        value
        for element in root.iter()
        for name, value in element.attrib.items()
        if name in ("fill", "stroke", "style", "color")
    }
    assert painted <= {"none", "currentColor"}
    assert len(svg) < 4096


def test_stacked_chart_segments_legend_and_desc() -> None:
    svg = stacked_bar_chart(VERDICTS, title="Derived verdicts per run", id_prefix="verdicts")
    root = parse(svg)
    desc = root.findtext(f"{SVG}desc")
    assert desc == (
        "first_wave: allow 2, block 4, review 0 (total 6). "
        "scenario_exfil: allow 1, block 3, review 2 (total 6)."
    )
    assert [rect.attrib["class"] for rect in bars(root)] == [
        "bar verdict-allow",
        "bar verdict-block",
        "bar verdict-allow",
        "bar verdict-block",
        "bar verdict-review",
    ]
    legend = [
        t.text
        for g in root.iter(f"{SVG}g")
        if g.attrib.get("class") == "chart-legend"
        for t in g.iter(f"{SVG}text")
    ]
    assert legend == ["allow", "block", "review"]
    # Equal totals give equal bar lengths.
    rows = [g for g in root.iter(f"{SVG}g") if g.attrib.get("class") == "chart-row"]
    lengths = [sum(float(r.attrib["width"]) for r in row.iter(f"{SVG}rect")) for row in rows]
    assert lengths[0] == pytest.approx(lengths[1], abs=0.2)
    assert len(svg) < 4096


def test_empty_and_all_zero_data_render_tidily() -> None:
    for svg in (
        bar_chart([], title="Findings by layer", id_prefix="empty"),
        stacked_bar_chart([], title="Derived verdicts", id_prefix="empty"),
    ):
        root = parse(svg)
        assert root.findtext(f"{SVG}desc") == "No data."
        assert [t.text for t in root.iter(f"{SVG}text")] == ["No data"]
        assert float(root.attrib["height"]) > 0
    zeros = parse(bar_chart([BarDatum("a", 0), BarDatum("b", 0)], title="t", id_prefix="z"))
    assert bars(zeros) == []
    assert zeros.findtext(f"{SVG}desc") == "a: 0. b: 0."


def test_same_input_gives_the_same_bytes() -> None:
    assert bar_chart(STATUS, title="t", id_prefix="a") == bar_chart(
        list(STATUS), title="t", id_prefix="a"
    )
    assert stacked_bar_chart(VERDICTS, title="t", id_prefix="a") == stacked_bar_chart(
        list(VERDICTS), title="t", id_prefix="a"
    )


def test_hostile_labels_stay_text() -> None:
    # As long as the hostile label, so that both are drawn above their bars.
    plain = "a plain run name as long as the hostile one"
    benign = stacked_bar_chart(
        [(plain, [BarDatum("allow", 1, "verdict-allow")])], title="plain", id_prefix="h"
    )
    hostile = stacked_bar_chart(
        [(HOSTILE, [BarDatum(HOSTILE, 1, "verdict-allow")])], title=HOSTILE, id_prefix="h"
    )
    assert "<script" not in hostile.lower()
    for bad in ("\u202e", "\x00", "\x1b"):
        assert bad not in hostile
    root = parse(hostile)
    assert shape(root) == shape(parse(benign))
    assert "</svg><script>alert(1)</script>" in (root.findtext(f"{SVG}desc") or "")


def test_inputs_are_checked() -> None:
    with pytest.raises(ValueError):
        BarDatum("x", -1)
    with pytest.raises(ValueError):
        BarDatum("x", 1, 'bar" onclick="x')
    with pytest.raises(ValueError):
        bar_chart(STATUS, title="t", id_prefix="1bad")
    assert "verdict-block" in CSS_CLASSES


def test_heat_levels() -> None:
    assert HEATMAP_LEVELS == 5
    assert heat_level(0, 0) == 0
    assert heat_level(0, 9) == 0
    assert heat_level(1, 100) == 1
    assert heat_level(100, 100) == 4
    assert heat_level(1, 1) == 4
    levels = [heat_level(value, 12) for value in range(13)]
    assert levels == sorted(levels)
    assert set(levels) == {0, 1, 2, 3, 4}
    assert all(level > 0 for level in levels[1:])
    with pytest.raises(ValueError):
        heat_level(3, 2)
    with pytest.raises(ValueError):
        heat_level(-1, 2)
