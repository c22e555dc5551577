"""Draw a run's pipeline as an inline SVG flowchart and as Mermaid source.

The SVG carries CSS classes (``assets/site.css`` colours them) and only neutral
presentation attributes as a fallback.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Final

from markupsafe import Markup

from sandbox_replay.drawing.layout import (
    COUNT_FONT,
    COUNT_LINE,
    EDGE_FONT,
    LABEL_FONT,
    LABEL_LINE,
    PAD_Y,
    STATUS_GLYPHS,
    STATUSES,
    FlowEdge,
    FlowNode,
    Graph,
    Layout,
    check_relative_href,
    layout_graph,
    name_of,
)
from sandbox_replay.drawing.svg import check_id_prefix, clean_text, escape, num

__all__ = [
    "FlowEdge",
    "FlowNode",
    "Flowchart",
    "check_relative_href",
    "draw_flowchart",
    "mermaid_text",
]


STATUS_WORDS: Final = {
    "pass": "passed",
    "blocked": "blocked",
    "not_run": "not run",
    "not_applicable": "not applicable",
}
DIRECTIONS: Final = ("LR", "TB")
_DASHES: Final = {"pass": "", "blocked": "6 3", "not_run": "2 3", "not_applicable": "2 3"}
_STROKES: Final = {"pass": "1.5", "blocked": "3", "not_run": "1.5", "not_applicable": "1"}
PORT_STEP_LR: Final = 10.0
PORT_STEP_TB: Final = 16.0


@dataclass(frozen=True)
class Flowchart:
    """The same graph twice: inline SVG for the page, Mermaid source for copying."""

    svg: Markup
    mermaid: str


def draw_flowchart(
    nodes: Sequence[FlowNode],
    edges: Sequence[FlowEdge],
    *,
    title: str,
    id_prefix: str = "flow",
    direction: str = "LR",
) -> Flowchart:
    """Lay out the DAG and render it as SVG and Mermaid; ``direction`` is "LR" or "TB" (print)."""
    prefix = check_id_prefix(id_prefix)
    graph = Graph.build(nodes, edges)
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    layout = layout_graph(graph, vertical=direction == "TB")
    return Flowchart(
        svg=Markup(_render_svg(graph, layout, title, prefix)),
        mermaid=_render_mermaid(graph, direction),
    )


def _render_svg(graph: Graph, layout: Layout, title: str, prefix: str) -> str:
    width, height = (num(extent) for extent in layout.size)
    arrow = f"{prefix}-arrow"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="flowchart" role="img" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'aria-labelledby="{prefix}-title" aria-describedby="{prefix}-desc" '
        f'font-family="sans-serif">',
        f'<title id="{prefix}-title">{escape(title)}</title>',
        f'<desc id="{prefix}-desc">{escape(_describe(graph))}</desc>',
        f'<defs><marker id="{arrow}" class="flow-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="9" markerHeight="9" markerUnits="userSpaceOnUse" orient="auto">'
        '<path d="M0 0L10 5L0 10z" fill="currentColor"/></marker></defs>',
        '<g class="flow-edges" fill="none" stroke="currentColor" stroke-width="1.5">',
    ]
    ports = _ports(graph, layout)
    labels: list[str] = []
    for number, ((_, _, label), chain) in enumerate(zip(graph.edges, layout.chains, strict=True)):
        start, end = ports[number]
        parts.append(
            f'<path class="flow-edge" d="{_edge_path(layout, chain, start, end)}" '
            f'marker-end="url(#{arrow})"/>'
        )
        if label:
            labels.append(_edge_label(layout, chain, start, end, label))
    parts.append("</g>")
    if labels:
        parts.append('<g class="flow-edge-labels" fill="currentColor">')
        parts.extend(labels)
        parts.append("</g>")
    parts.append('<g class="flow-nodes">')
    for vertex, node in enumerate(graph.nodes):
        parts.append(_render_node(layout, vertex, node, prefix))
    parts.append("</g></svg>")
    return "".join(parts)


def _ports(graph: Graph, layout: Layout) -> list[tuple[float, float]]:
    """Spread the edges leaving (entering) each node along its side, ordered by where they go."""
    outgoing: list[list[int]] = [[] for _ in graph.nodes]
    incoming: list[list[int]] = [[] for _ in graph.nodes]
    for number, chain in enumerate(layout.chains):
        outgoing[chain[0]].append(number)
        incoming[chain[-1]].append(number)
    starts = [0.0] * len(layout.chains)
    ends = [0.0] * len(layout.chains)
    widest_step = PORT_STEP_TB if layout.vertical else PORT_STEP_LR

    def spread(vertex: int, numbers: list[int], toward: int, into: list[float]) -> None:
        ordered = sorted(numbers, key=lambda n: (layout.cross[layout.chains[n][toward]], n))
        step = min(widest_step, 2 * layout.cross_half(vertex) / (len(ordered) + 1))
        for rank, number in enumerate(ordered):
            into[number] = layout.cross[vertex] + (rank - (len(ordered) - 1) / 2) * step

    for vertex in range(len(graph.nodes)):
        spread(vertex, outgoing[vertex], 1, starts)
        spread(vertex, incoming[vertex], -2, ends)
    return list(zip(starts, ends, strict=True))


def _edge_path(layout: Layout, chain: list[int], start: float, end: float) -> str:
    """Smooth curves between layers; straight runs through the ranks a long edge crosses."""
    source, target = chain[0], chain[-1]
    stops = [(0.0, layout.main[source] + layout.main_size(source) / 2, start)]  # (in, out, cross)
    for dummy in chain[1:-1]:
        rank = layout.layer_of[dummy]
        begin = layout.rank_start[rank]
        stops.append((begin, begin + layout.rank_size[rank], layout.cross[dummy]))
    stops.append((layout.main[target] - layout.main_size(target) / 2, 0.0, end))
    path = f"M{layout.point(stops[0][1], stops[0][2])}"
    for (_, leave, cross_from), (arrive, then, cross_to) in pairwise(stops):
        middle = (leave + arrive) / 2
        path += (
            f"C{layout.point(middle, cross_from)} {layout.point(middle, cross_to)} "
            f"{layout.point(arrive, cross_to)}"
        )
        if then > arrive:
            path += f"L{layout.point(then, cross_to)}"
    return path


def _edge_label(layout: Layout, chain: list[int], start: float, end: float, label: str) -> str:
    """Place the label in the gap after the source: above the edge, or beside it top to bottom."""
    source, after = chain[0], chain[1]
    gap_from = layout.main[source] + layout.main_size(source) / 2
    gap_to = layout.rank_start[layout.layer_of[after]]
    cross = (start + (end if len(chain) == 2 else layout.cross[after])) / 2
    main = (gap_from + gap_to) / 2
    if layout.vertical:
        x, y, anchor = num(cross + 6), num(main + EDGE_FONT / 3), "start"
    else:
        x, y, anchor = num(main), num(cross - 5), "middle"
    return (
        f'<text class="flow-edge-label" x="{x}" y="{y}" text-anchor="{anchor}" '
        f'font-size="{num(EDGE_FONT)}">{escape(label)}</text>'
    )


def _render_node(layout: Layout, vertex: int, node: FlowNode, prefix: str) -> str:
    box = layout.boxes[vertex]
    centre_x, centre_y = layout.xy(layout.main[vertex], layout.cross[vertex])
    left = centre_x - box.width / 2
    top = centre_y - box.height / 2
    dash = _DASHES[node.status]
    rect = (
        f'<rect x="{num(left)}" y="{num(top)}" width="{num(box.width)}" '
        f'height="{num(box.height)}" rx="7" fill="none" stroke="currentColor" '
        f'stroke-width="{_STROKES[node.status]}" pointer-events="all"'
        + (f' stroke-dasharray="{dash}"' if dash else "")
        + "/>"
    )
    texts = []
    baseline = top + PAD_Y + LABEL_FONT
    for line in box.label_lines:
        texts.append(
            f'<text class="flow-label" x="{num(centre_x)}" y="{num(baseline)}" '
            f'text-anchor="middle" font-size="{num(LABEL_FONT)}">{escape(line)}</text>'
        )
        baseline += LABEL_LINE
    baseline += COUNT_LINE - LABEL_LINE + 4
    for line in box.count_lines:
        texts.append(
            f'<text class="flow-count" x="{num(centre_x)}" y="{num(baseline)}" '
            f'text-anchor="middle" font-size="{num(COUNT_FONT)}" font-weight="bold">'
            f"{escape(line)}</text>"
        )
        baseline += COUNT_LINE
    tooltip = f"{node.label}: {node.count_text} ({STATUS_WORDS[node.status]})"
    group = (
        f'<g id="{prefix}-node-{node.node_id}" class="flow-node node-{node.status}" '
        f'fill="currentColor"><title>{escape(tooltip)}</title>{rect}{"".join(texts)}</g>'
    )
    if node.href is None:
        return group
    return f'<a href="{escape(node.href)}">{group}</a>'


def _describe(graph: Graph) -> str:
    """Say in words what the chart shows: every step's count and status, then the arrows."""
    steps = "; ".join(
        f"{clean_text(node.label) or node.node_id}: {clean_text(node.count_text)}, "
        f"{STATUS_WORDS[node.status]}"
        for node in graph.nodes
    )
    arrows = "; ".join(
        f"{name_of(graph.nodes[source])} to {name_of(graph.nodes[target])}"
        + (f" ({label})" if label else "")
        for source, target, label in graph.edges
    )
    text = f"{len(graph.nodes)} steps. {steps}."
    return f"{text} Flow: {arrows}." if arrows else text


_MERMAID_PLAIN = re.compile(r"[^\W_]|[ .,:;()/+*!?'_=-]")
_MERMAID_STYLES: Final = {
    "pass": "fill:#e7f4ea,stroke:#1e6b34,stroke-width:1.5px",
    "blocked": "fill:#fbe4e6,stroke:#a3142a,stroke-width:3px,stroke-dasharray:6 3",
    "not_run": "fill:#eeeeee,stroke:#666666,stroke-dasharray:2 3",
    "not_applicable": "fill:#f7f7f7,stroke:#999999,stroke-dasharray:2 3",
}


def mermaid_text(value: str) -> str:
    """Encode text for a quoted Mermaid label: anything but letters, digits and plain
    punctuation becomes a ``#code;`` entity, so no input can close the quote or the shape."""
    return "".join(
        char if _MERMAID_PLAIN.fullmatch(char) else f"#{ord(char)};" for char in clean_text(value)
    )


def _render_mermaid(graph: Graph, direction: str) -> str:
    # Ids are prefixed so no node is the keyword "end" or starts an "o"/"x" edge head.
    def ident(node: FlowNode) -> str:
        return f"n_{node.node_id}"

    lines = [f"flowchart {direction}"]
    for node in graph.nodes:
        label = mermaid_text(name_of(node))
        count = mermaid_text(f"{STATUS_GLYPHS[node.status]} {clean_text(node.count_text)}")
        lines.append(f'    {ident(node)}["{label}<br/>{count}"]')
    for source, target, label in graph.edges:
        arrow = f'-->|"{mermaid_text(label)}"|' if label else "-->"
        lines.append(f"    {ident(graph.nodes[source])} {arrow} {ident(graph.nodes[target])}")
    for status in STATUSES:
        members = [ident(node) for node in graph.nodes if node.status == status]
        if members:
            lines.append(f"    classDef {status} {_MERMAID_STYLES[status]}")
            lines.append(f"    class {','.join(members)} {status}")
    return "\n".join(lines) + "\n"
