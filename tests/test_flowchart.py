"""The pipeline flowchart: well-formed, laid out in layers left to right, inert to hostile text."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2 import Environment
from markupsafe import Markup

from sandbox_replay.drawing.flowchart import (
    Flowchart,
    FlowEdge,
    FlowNode,
    check_relative_href,
    draw_flowchart,
    mermaid_text,
)

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = [
    "</svg><script>alert(1)</script>",
    "\"double\" & 'single' <b>",
    "\u202eevil\u202c \u2066iso\u2069",
    "ctrl\x00\x07\x0b\x1b\x7f\x85\ufffe end",
    ']]><!-- x -->"]; click n_a href "javascript:alert(1)"',
    "#quot; %% comment\nnext line",
]


def pipeline(label: str = "", count: str = "") -> tuple[list[FlowNode], list[FlowEdge]]:
    """The pipeline the run page draws, with optional text appended to every label and count."""
    nodes = [
        FlowNode("requests", "Action requests" + label, "6" + count, "pass", "#layer-requests"),
        FlowNode("derived", "Derived verdicts" + label, "6 (1 fail-closed)" + count, "pass"),
        FlowNode("declared", "Declared verdicts checked" + label, "6" + count, "blocked"),
        FlowNode("side_effects", "Side-effect records" + label, "6" + count, "blocked", "#se"),
        FlowNode("rollbacks", "Rollbacks" + label, "2" + count, "pass"),
        FlowNode("cold_replay", "Cold replay" + label, "6" + count, "not_run"),
        FlowNode("trace", "Trace" + label, "14" + count, "pass"),
        FlowNode("result", "Result" + label, "blocked" + count, "blocked", "../index.html"),
        FlowNode("scan", "Scan" + label, "9 files" + count, "not_applicable"),
    ]
    pairs = [
        ("requests", "derived"),
        ("derived", "declared"),
        ("declared", "side_effects"),
        ("side_effects", "rollbacks"),
        ("side_effects", "cold_replay"),
        ("rollbacks", "trace"),
        ("cold_replay", "trace"),
        ("trace", "result"),
        ("scan", "result"),
        ("requests", "trace"),
    ]
    edges = [FlowEdge(s, t, ("1 mismatch" + label) if s == "declared" else "") for s, t in pairs]
    return nodes, edges


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def node_groups(root: ET.Element) -> dict[str, ET.Element]:
    return {
        g.attrib["id"].split("-node-", 1)[1]: g
        for g in root.iter(f"{SVG}g")
        if "flow-node" in g.attrib.get("class", "").split()
    }


def boxes(root: ET.Element) -> dict[str, tuple[float, float, float, float]]:
    """Node id -> (left, top, right, bottom) of its rounded rect."""
    found = {}
    for node_id, group in node_groups(root).items():
        rect = group.find(f"{SVG}rect")
        assert rect is not None
        x, y = float(rect.attrib["x"]), float(rect.attrib["y"])
        found[node_id] = (x, y, x + float(rect.attrib["width"]), y + float(rect.attrib["height"]))
    return found


def edge_paths(root: ET.Element) -> list[str]:
    return [p.attrib["d"] for p in root.iter(f"{SVG}path") if p.attrib.get("class") == "flow-edge"]


def shape(root: ET.Element) -> tuple[set[str], set[tuple[str, str]]]:
    """Every element tag, and every (tag, attribute name) pair, in the drawing."""
    tags = {element.tag for element in root.iter()}
    attributes = {(element.tag, name) for element in root.iter() for name in element.attrib}
    return tags, attributes


def test_structure_nodes_edges_classes_links_and_accessibility() -> None:
    nodes, edges = pipeline()
    chart = draw_flowchart(nodes, edges, title="Pipeline of run a", id_prefix="run-a")
    root = parse(chart.svg)
    assert root.tag == f"{SVG}svg"
    assert root.attrib["role"] == "img"
    ids = {element.attrib["id"] for element in root.iter() if "id" in element.attrib}
    assert root.attrib["aria-labelledby"] in ids
    assert root.attrib["aria-describedby"] in ids
    assert root.findtext(f"{SVG}title") == "Pipeline of run a"
    desc = root.findtext(f"{SVG}desc") or ""
    for node in nodes:
        assert f"{node.label}: {node.count_text}" in desc

    groups = node_groups(root)
    assert list(groups) == [node.node_id for node in nodes]
    for node in nodes:
        assert f"node-{node.status}" in groups[node.node_id].attrib["class"].split()
    assert len(edge_paths(root)) == len(edges)
    markers = [m.attrib["id"] for m in root.iter(f"{SVG}marker")]
    assert markers == ["run-a-arrow"]
    ends = {p.attrib["marker-end"] for p in root.iter(f"{SVG}path") if "marker-end" in p.attrib}
    assert ends == {"url(#run-a-arrow)"}

    links = {a.attrib["href"]: a for a in root.iter(f"{SVG}a")}
    assert set(links) == {node.href for node in nodes if node.href}
    for node in nodes:
        if node.href:
            assert links[node.href].find(f"{SVG}g") is groups[node.node_id]
    # No colour is set inline: status colours come from the stylesheet.
    painted = {
        value
        for element in root.iter()
        for name, value in element.attrib.items()
        if name in ("fill", "stroke", "style", "color")
    }
    assert painted <= {"none", "currentColor"}


def test_status_has_a_cue_besides_colour() -> None:
    nodes, edges = pipeline()
    groups = node_groups(parse(draw_flowchart(nodes, edges, title="t").svg))
    glyphs = {"pass": "✓", "blocked": "✗", "not_run": "○", "not_applicable": "–"}
    for node in nodes:
        count_text = "".join(
            t.text or ""
            for t in groups[node.node_id].iter(f"{SVG}text")
            if "count" in t.attrib["class"]
        )
        assert count_text.startswith(glyphs[node.status])
        rect = groups[node.node_id].find(f"{SVG}rect")
        assert rect is not None
        assert ("stroke-dasharray" in rect.attrib) == (node.status != "pass")


def test_ids_are_unique_per_chart_and_prefix() -> None:
    nodes, edges = pipeline()
    first = parse(draw_flowchart(nodes, edges, title="t", id_prefix="one").svg)
    second = parse(draw_flowchart(nodes, edges, title="t", id_prefix="two").svg)
    first_ids = [e.attrib["id"] for e in first.iter() if "id" in e.attrib]
    second_ids = [e.attrib["id"] for e in second.iter() if "id" in e.attrib]
    assert len(first_ids) == len(set(first_ids))
    assert not set(first_ids) & set(second_ids)
    with pytest.raises(ValueError):
        draw_flowchart(nodes, edges, title="t", id_prefix='x" onload="alert(1)')


def test_same_input_gives_the_same_bytes() -> None:
    nodes, edges = pipeline()
    first = draw_flowchart(nodes, edges, title="t")
    second = draw_flowchart(list(nodes), list(edges), title="t")
    assert first == second


def test_bytes_do_not_depend_on_hash_seed() -> None:
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import test_flowchart as t; "
        "from sandbox_replay.drawing.flowchart import draw_flowchart; "
        "c = draw_flowchart(*t.pipeline(), title='t'); print(c.svg + c.mermaid)"
    )
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        here = os.path.dirname(__file__)
        run = subprocess.run(
            [sys.executable, "-c", script, here],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.add(run.stdout)
    assert len(outputs) == 1


def test_layers_run_left_to_right_without_overlap() -> None:
    nodes, edges = pipeline()
    root = parse(draw_flowchart(nodes, edges, title="t").svg)
    box = boxes(root)
    for edge, path in zip(edges, edge_paths(root), strict=True):
        source, target = box[edge.source], box[edge.target]
        assert target[0] > source[2], edge
        numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", path)]
        assert numbers[0] == pytest.approx(source[2])  # leaves from the source's right side
        assert numbers[-2] == pytest.approx(target[0])  # arrives at the target's left side
    for (a, first), (b, second) in itertools.combinations(box.items(), 2):
        apart = first[2] <= second[0] or second[2] <= first[0]
        apart = apart or first[3] <= second[1] or second[3] <= first[1]
        assert apart, (a, b)
    # The two parallel checks share a layer; the side input sits next to its successor.
    assert (
        box["rollbacks"][0] + box["rollbacks"][2] == box["cold_replay"][0] + box["cold_replay"][2]
    )
    assert box["scan"][0] + box["scan"][2] == box["trace"][0] + box["trace"][2]
    width = float(root.attrib["width"])
    height = float(root.attrib["height"])
    for left, top, right, bottom in box.values():
        assert left >= 0 and top >= 0 and right <= width and bottom <= height


def test_top_to_bottom_for_print_runs_downwards_and_is_narrow() -> None:
    nodes, edges = pipeline()
    wide = draw_flowchart(nodes, edges, title="t", direction="LR")
    tall = draw_flowchart(nodes, edges, title="t", direction="TB")
    root = parse(tall.svg)
    box = boxes(root)
    for edge, path in zip(edges, edge_paths(root), strict=True):
        source, target = box[edge.source], box[edge.target]
        assert target[1] > source[3], edge
        numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", path)]
        assert numbers[1] == pytest.approx(source[3])  # leaves from the source's bottom
        assert numbers[-1] == pytest.approx(target[1])  # arrives at the target's top
    assert box["rollbacks"][1] == box["cold_replay"][1]
    assert float(root.attrib["width"]) <= 600 < float(parse(wide.svg).attrib["width"])
    assert tall.mermaid.startswith("flowchart TB\n")
    assert tall.mermaid.splitlines()[1:] == wide.mermaid.splitlines()[1:]
    with pytest.raises(ValueError):
        draw_flowchart(nodes, edges, title="t", direction="RL")


def test_barycenter_ordering_removes_avoidable_crossings() -> None:
    # Given in an order that crosses (a->y, b->x with x above y); the layout must uncross it.
    nodes = [FlowNode(n, n, "1", "pass") for n in ("a", "b", "x", "y")]
    edges = [FlowEdge("a", "y"), FlowEdge("b", "x")]
    box = boxes(parse(draw_flowchart(nodes, edges, title="t").svg))
    assert (box["a"][1] < box["b"][1]) == (box["y"][1] < box["x"][1])


dags = st.integers(min_value=1, max_value=20).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda p: p[0] < p[1]),
            max_size=40,
            unique=True,
        ),
    )
)


@settings(max_examples=80, deadline=None)
@given(dags, st.sampled_from(["LR", "TB"]))
def test_any_small_dag_lays_out_cleanly(
    dag: tuple[int, list[tuple[int, int]]], direction: str
) -> None:
    count, pairs = dag
    names = ["n" + "_" * i + "x" for i in range(count)]
    nodes = [FlowNode(name, f"Step {i}", str(i), "pass") for i, name in enumerate(names)]
    edges = [FlowEdge(names[s], names[t]) for s, t in pairs]
    chart = draw_flowchart(nodes, edges, title="t", direction=direction)
    root = parse(chart.svg)
    box = boxes(root)
    assert len(box) == count
    assert len(edge_paths(root)) == len(edges)
    near, far = (0, 2) if direction == "LR" else (1, 3)
    for edge in edges:
        assert box[edge.target][near] > box[edge.source][far]
    for first, second in itertools.combinations(box.values(), 2):
        assert (
            first[2] <= second[0]
            or second[2] <= first[0]
            or first[3] <= second[1]
            or second[3] <= first[1]
        )
    assert draw_flowchart(nodes, edges, title="t", direction=direction) == chart


def test_refuses_graphs_it_cannot_draw() -> None:
    a, b = FlowNode("a", "A", "1", "pass"), FlowNode("b", "B", "1", "pass")
    with pytest.raises(ValueError, match="cycle"):
        draw_flowchart([a, b], [FlowEdge("a", "b"), FlowEdge("b", "a")], title="t")
    with pytest.raises(ValueError, match="unknown"):
        draw_flowchart([a], [FlowEdge("a", "zzz")], title="t")
    with pytest.raises(ValueError, match="duplicate"):
        draw_flowchart([a, a], [], title="t")
    with pytest.raises(ValueError, match="loop"):
        draw_flowchart([a], [FlowEdge("a", "a")], title="t")
    with pytest.raises(ValueError):
        FlowNode("Bad-Id", "x", "1", "pass")
    with pytest.raises(ValueError):
        FlowNode("a", "x", "1", "green")


@pytest.mark.parametrize(
    "href",
    [
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        "java\tscript:alert(1)",
        " javascript:alert(1)",
        "data:text/html,x",
        "https://example.invalid/",
        "//example.invalid/x",
        "\\\\example.invalid\\x",
        "vbscript:x",
        "",
    ],
)
def test_links_with_a_scheme_or_host_are_refused(href: str) -> None:
    with pytest.raises(ValueError):
        FlowNode("a", "A", "1", "pass", href)


@pytest.mark.parametrize(
    "href", ["#layer-side-effects", "../codes/index.html#SR001", "result.json"]
)
def test_relative_links_are_kept(href: str) -> None:
    assert check_relative_href(href) == href
    root = parse(draw_flowchart([FlowNode("a", "A", "1", "pass", href)], [], title="t").svg)
    assert [a.attrib["href"] for a in root.iter(f"{SVG}a")] == [href]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_text_stays_text(hostile: str) -> None:
    benign = draw_flowchart(*pipeline(" plain", " plain"), title="plain", id_prefix="p")
    chart = draw_flowchart(*pipeline(hostile, hostile), title=hostile, id_prefix="p")
    assert "<script" not in chart.svg.lower()
    root = parse(chart.svg)  # well-formed despite the input
    assert shape(root) == shape(parse(benign.svg))
    for bad in ("\u202e", "\u2066", "\x00", "\x07", "\x1b", "\x7f", "\x85", "\ufffe"):
        assert bad not in chart.svg
    # The text survives as text: the node tooltips carry it in full (whitespace folded).
    expected = " ".join(
        hostile.translate(
            {ord(c): "\ufffd" for c in "\u202e\u202c\u2066\u2069\x00\x07\x0b\x1b\x7f\x85\ufffe"}
        ).split()
    )
    tooltips = [g.findtext(f"{SVG}title") or "" for g in node_groups(root).values()]
    assert all(expected in tip for tip in tooltips)


class _TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, str]] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.add((tag, ""))
        self.seen.update((tag, name) for name, _ in attrs)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_svg_goes_into_an_autoescaped_page_as_is_and_stays_inert(hostile: str) -> None:
    page = Environment(autoescape=True).from_string("<p>{{ name }}</p>{{ chart.svg }}")

    def tags(chart: Flowchart) -> set[tuple[str, str]]:
        html = page.render(name=hostile, chart=chart)
        assert html.count("<svg") == 1  # the SVG is markup, not escaped text
        collector = _TagCollector()
        collector.feed(html)
        return collector.seen

    hostile_chart = draw_flowchart(*pipeline(hostile, hostile), title=hostile)
    assert isinstance(hostile_chart.svg, Markup)
    assert tags(hostile_chart) == tags(draw_flowchart(*pipeline(" x", " x"), title="x"))


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_text_cannot_break_out_of_mermaid_labels(hostile: str) -> None:
    nodes, edges = pipeline(hostile, hostile)
    nodes.append(FlowNode("end", "end", "0", "pass"))
    edges.append(FlowEdge("result", "end", hostile))
    mermaid = draw_flowchart(nodes, edges, title=hostile).mermaid
    lines = mermaid.splitlines()
    assert lines[0] == "flowchart LR"
    node_line = re.compile(r' {4}n_[a-z_]+\["[^"<>\n]*<br/>[^"<>\n]*"\]')
    edge_line = re.compile(r' {4}n_[a-z_]+ -->(?:\|"[^"<>|\n]*"\|)? n_[a-z_]+')
    style_line = re.compile(r" {4}(?:classDef [a-z_]+ [a-z0-9:#.,\- ]+|class [a-z_,]+ [a-z_]+)")
    assert all(node_line.fullmatch(line) for line in lines[1 : 1 + len(nodes)])
    assert all(
        edge_line.fullmatch(line) for line in lines[1 + len(nodes) : 1 + len(nodes) + len(edges)]
    )
    assert all(style_line.fullmatch(line) for line in lines[1 + len(nodes) + len(edges) :])
    assert "%%" not in mermaid
    assert ' n_end["' in mermaid  # the keyword "end" is never a bare id


def test_mermaid_text_encodes_specials_as_entities() -> None:
    assert mermaid_text('say "hi" <b> & #1;') == "say #34;hi#34; #60;b#62; #38; #35;1;"
    assert mermaid_text("Résumé 6 (1 fail-closed)") == "Résumé 6 (1 fail-closed)"
