"""Draw a run's pipeline as an inline SVG flowchart and as Mermaid source.

The layout is the layered method of Sugiyama, Tagawa and Toda (1981), drawn left to right
for the screen or top to bottom for a printed page (the same steps, axes swapped):

1. *Layers* by longest path from the sources; a source is then moved right to sit just
   before its nearest successor, so a side input (a scan, a negative-case set) does not
   drag a long edge across the whole chart.
2. *Dummy vertices* split every edge that spans more than one layer, so the edge is
   routed between the nodes of the layers it crosses.
3. *Crossing reduction* by barycenter sweeps: each layer is reordered by the mean
   position of its neighbours in the previous layer, sweeping right then left; the
   order with the fewest crossings seen is kept.
4. *Coordinates*: one rank per layer, as deep as its largest node; within a rank each
   vertex is pulled towards the mean height of its neighbours, keeping the order and a
   minimum gap (an exact least-squares fit by pool-adjacent-violators), sweeping both
   ways a fixed number of times.

Everything is ordered by input position and computed with a fixed number of sweeps, and
coordinates are printed with one fixed format, so the same input gives the same bytes.
The SVG carries CSS classes, not colours (the site's stylesheet, ``assets/site.css``,
colours them); presentation attributes give only a neutral fallback that any stylesheet
overrides.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Final
from urllib.parse import urlsplit

from markupsafe import Markup

from sandbox_replay.drawing.svg import (
    check_id_prefix,
    clean_text,
    escape,
    num,
    text_width,
    wrap_text,
)

STATUSES: Final = ("pass", "blocked", "not_run", "not_applicable")
STATUS_WORDS: Final = {
    "pass": "passed",
    "blocked": "blocked",
    "not_run": "not run",
    "not_applicable": "not applicable",
}
# A shape cue besides colour, for colour-blind readers and black-and-white printouts.
STATUS_GLYPHS: Final = {"pass": "✓", "blocked": "✗", "not_run": "○", "not_applicable": "–"}
MAX_NODES: Final = 40
DIRECTIONS: Final = ("LR", "TB")

_NODE_ID = re.compile(r"[a-z_]{1,64}")
_DASHES: Final = {"pass": "", "blocked": "6 3", "not_run": "2 3", "not_applicable": "2 3"}
_STROKES: Final = {"pass": "1.5", "blocked": "3", "not_run": "1.5", "not_applicable": "1"}

# Geometry, in SVG user units (px at 100 % zoom).
LABEL_FONT: Final = 12.0
COUNT_FONT: Final = 14.0
BOLD_COUNT_FONT: Final = COUNT_FONT * 1.1  # for width estimates: bold runs wider
COUNT_LINE: Final = 18.0
EDGE_FONT: Final = 11.0
LABEL_LINE: Final = 15.0
PAD_X: Final = 12.0
PAD_Y: Final = 9.0
NODE_MIN_WIDTH: Final = 112.0
LABEL_MAX_WIDTH: Final = 132.0
COUNT_MAX_WIDTH: Final = 240.0
COUNT_MAX_LINES: Final = 4
RANK_GAP_LR: Final = 44.0
RANK_GAP_TB: Final = 36.0
NODE_GAP_LR: Final = 20.0
NODE_GAP_TB: Final = 24.0
PORT_STEP_LR: Final = 10.0
PORT_STEP_TB: Final = 16.0
DUMMY_GAP: Final = 12.0
MARGIN: Final = 8.0
SWEEPS: Final = 12
ALIGN_ROUNDS: Final = 8


@dataclass(frozen=True)
class FlowNode:
    """One pipeline step: its count and its layer's status."""

    node_id: str
    label: str
    count_text: str
    status: str
    href: str | None = None

    def __post_init__(self) -> None:
        if not _NODE_ID.fullmatch(self.node_id):
            raise ValueError(f"node_id must match {_NODE_ID.pattern}, got {self.node_id!r}")
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.href is not None:
            check_relative_href(self.href)


@dataclass(frozen=True)
class FlowEdge:
    """A step that feeds another."""

    source: str
    target: str
    label: str = ""


@dataclass(frozen=True)
class Flowchart:
    """The same graph twice: inline SVG for the page, Mermaid source for copying."""

    svg: Markup
    mermaid: str


def check_relative_href(href: str) -> str:
    """Return the link if it is relative: no scheme, no host, no whitespace or control character."""
    if not href or any(char.isspace() or not char.isprintable() for char in href):
        raise ValueError(f"href must be a non-empty link without whitespace: {href!r}")
    head = re.split(r"[/?#]", href, maxsplit=1)[0]
    parts = urlsplit(href)
    if ":" in head or parts.scheme or parts.netloc or href.startswith("\\"):
        raise ValueError(f"href must be relative (no scheme or host): {href!r}")
    return href


def draw_flowchart(
    nodes: Sequence[FlowNode],
    edges: Sequence[FlowEdge],
    *,
    title: str,
    id_prefix: str = "flow",
    direction: str = "LR",
) -> Flowchart:
    """Lay out the DAG in layers and render it as SVG and as Mermaid source.

    ``direction`` is "LR" (left to right, for a wide screen) or "TB" (top to bottom: about
    three times narrower, so a printed A4 page shows it at full size).
    """
    prefix = check_id_prefix(id_prefix)
    graph = _Graph.build(nodes, edges)
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    layout = _layout(graph, vertical=direction == "TB")
    return Flowchart(
        svg=Markup(_render_svg(graph, layout, title, prefix)),
        mermaid=_render_mermaid(graph, direction),
    )


# ---------------------------------------------------------------------------------------
# Graph and layout


@dataclass
class _Graph:
    """Validated nodes and edges, by input position."""

    nodes: list[FlowNode]
    edges: list[tuple[int, int, str]]
    succs: list[list[int]]
    preds: list[list[int]]

    @classmethod
    def build(cls, nodes: Sequence[FlowNode], edges: Sequence[FlowEdge]) -> _Graph:
        if len(nodes) > MAX_NODES:
            raise ValueError(f"a flowchart holds at most {MAX_NODES} nodes, got {len(nodes)}")
        index: dict[str, int] = {}
        for position, node in enumerate(nodes):
            if node.node_id in index:
                raise ValueError(f"duplicate node_id {node.node_id!r}")
            index[node.node_id] = position
        pairs: list[tuple[int, int, str]] = []
        seen: set[tuple[int, int]] = set()
        for edge in edges:
            if edge.source not in index or edge.target not in index:
                raise ValueError(f"edge {edge.source!r} -> {edge.target!r} names an unknown node")
            pair = (index[edge.source], index[edge.target])
            if pair[0] == pair[1]:
                raise ValueError(f"edge {edge.source!r} -> {edge.target!r} is a loop")
            if pair in seen:
                raise ValueError(f"duplicate edge {edge.source!r} -> {edge.target!r}")
            seen.add(pair)
            pairs.append((pair[0], pair[1], clean_text(edge.label)))
        succs: list[list[int]] = [[] for _ in nodes]
        preds: list[list[int]] = [[] for _ in nodes]
        for source, target, _ in pairs:
            succs[source].append(target)
            preds[target].append(source)
        return cls(list(nodes), pairs, succs, preds)

    def topological_order(self) -> list[int]:
        """Kahn's algorithm, taking ready nodes by input position; refuses a cycle."""
        waiting = [len(p) for p in self.preds]
        ready = [v for v, count in enumerate(waiting) if count == 0]
        order: list[int] = []
        while ready:
            vertex = min(ready)
            ready.remove(vertex)
            order.append(vertex)
            for succ in self.succs[vertex]:
                waiting[succ] -= 1
                if waiting[succ] == 0:
                    ready.append(succ)
        if len(order) != len(self.nodes):
            raise ValueError("the flowchart's edges form a cycle")
        return order


@dataclass(frozen=True)
class _Box:
    """A real node's text lines and size."""

    label_lines: list[str]
    count_lines: list[str]
    width: float
    height: float


@dataclass
class _Layout:
    """Where everything goes, along the layer axis ("main") and across it ("cross").

    Left to right, main is x and cross is y; top to bottom, the other way round.
    """

    layer_of: list[int]
    layers: list[list[int]]
    chains: list[list[int]]
    boxes: list[_Box]
    vertical: bool
    main: list[float] = field(default_factory=list)
    cross: list[float] = field(default_factory=list)
    rank_start: list[float] = field(default_factory=list)
    rank_size: list[float] = field(default_factory=list)
    main_extent: float = 0.0
    cross_extent: float = 0.0

    def is_dummy(self, vertex: int) -> bool:
        return vertex >= len(self.boxes)

    def main_size(self, vertex: int) -> float:
        box = self.boxes[vertex]
        return box.height if self.vertical else box.width

    def cross_half(self, vertex: int) -> float:
        if self.is_dummy(vertex):
            return 0.0
        box = self.boxes[vertex]
        return (box.width if self.vertical else box.height) / 2

    def xy(self, main: float, cross: float) -> tuple[float, float]:
        """Turn a point in layout axes into SVG x and y."""
        return (cross, main) if self.vertical else (main, cross)

    def point(self, main: float, cross: float) -> str:
        """Format a point in layout axes as SVG ``x y``."""
        x, y = self.xy(main, cross)
        return f"{num(x)} {num(y)}"

    @property
    def size(self) -> tuple[float, float]:
        """Width and height of the drawing."""
        if self.vertical:
            return self.cross_extent, self.main_extent
        return self.main_extent, self.cross_extent


def _layout(graph: _Graph, vertical: bool) -> _Layout:
    layer_of = _assign_layers(graph)
    boxes = [_measure(node) for node in graph.nodes]
    chains, succs, preds = _split_long_edges(graph, layer_of)
    layers = _order_layers(layer_of, succs, preds)
    layout = _Layout(layer_of, layers, chains, boxes, vertical)
    _assign_ranks(layout, graph)
    _assign_cross(layout, succs, preds)
    return layout


def _assign_layers(graph: _Graph) -> list[int]:
    """Longest path from the sources, then each source moved next to its nearest successor."""
    layer = [0] * len(graph.nodes)
    for vertex in graph.topological_order():
        for succ in graph.succs[vertex]:
            layer[succ] = max(layer[succ], layer[vertex] + 1)
    for vertex, preds in enumerate(graph.preds):
        if not preds and graph.succs[vertex]:
            layer[vertex] = min(layer[succ] for succ in graph.succs[vertex]) - 1
    return layer


def _measure(node: FlowNode) -> _Box:
    """Wrap the label (two lines) and the count (four) and size the box around them.

    A count is broken only at spaces and never cut mid-number: a word wider than the
    usual line (``59,629/60,000``) widens the box, up to ``COUNT_MAX_WIDTH``.
    """
    label_lines = wrap_text(_name(node), LABEL_FONT, LABEL_MAX_WIDTH, 2)
    # No-break spaces keep the glyph on the count's first line when a long count wraps,
    # and each " · " at the end of the line it closes.
    shown = clean_text(node.count_text).replace(" · ", "\u00a0· ")
    count = f"{STATUS_GLYPHS[node.status]}\u00a0{shown}".strip()
    count_lines = wrap_text(
        count, BOLD_COUNT_FONT, LABEL_MAX_WIDTH, COUNT_MAX_LINES, widest=COUNT_MAX_WIDTH
    )
    inner = max(
        *(text_width(line, LABEL_FONT) for line in label_lines),
        *(text_width(line, BOLD_COUNT_FONT) for line in count_lines),
    )
    width = max(NODE_MIN_WIDTH, inner + 2 * PAD_X)
    height = 2 * PAD_Y + LABEL_LINE * len(label_lines) + COUNT_LINE * len(count_lines) + 2
    return _Box(label_lines, count_lines, round(width), round(height))


def _split_long_edges(
    graph: _Graph, layer_of: list[int]
) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    """Give each edge a chain of vertices, one per layer, adding dummies where it skips layers."""
    count = len(graph.nodes)
    succs = [list(s) for s in graph.succs]
    preds = [list(p) for p in graph.preds]
    chains: list[list[int]] = []
    for source, target, _ in graph.edges:
        chain = [source]
        for layer in range(layer_of[source] + 1, layer_of[target]):
            dummy = count
            count += 1
            layer_of.append(layer)
            succs.append([])
            preds.append([])
            chain.append(dummy)
        chain.append(target)
        if len(chain) > 2:
            succs[source].remove(target)
            preds[target].remove(source)
            for left, right in pairwise(chain):
                succs[left].append(right)
                preds[right].append(left)
        chains.append(chain)
    return chains, succs, preds


def _crossings(layers: list[list[int]], succs: list[list[int]]) -> int:
    total = 0
    for upper, lower in pairwise(layers):
        position = {vertex: i for i, vertex in enumerate(lower)}
        ends = [
            (i, position[succ])
            for i, vertex in enumerate(upper)
            for succ in succs[vertex]
            if succ in position
        ]
        for a, (a_top, a_bottom) in enumerate(ends):
            for b_top, b_bottom in ends[a + 1 :]:
                if (a_top - b_top) * (a_bottom - b_bottom) < 0:
                    total += 1
    return total


def _order_layers(
    layer_of: list[int], succs: list[list[int]], preds: list[list[int]]
) -> list[list[int]]:
    """Barycenter sweeps, keeping the order with the fewest crossings (the first one on a tie)."""
    layers: list[list[int]] = [[] for _ in range(max(layer_of) + 1)] if layer_of else []
    for vertex, layer in enumerate(layer_of):
        layers[layer].append(vertex)
    best = [list(layer) for layer in layers]
    best_crossings = _crossings(layers, succs)
    for sweep in range(SWEEPS):
        if sweep % 2 == 0:
            for index in range(1, len(layers)):
                layers[index] = _by_barycenter(layers[index], layers[index - 1], preds)
        else:
            for index in range(len(layers) - 2, -1, -1):
                layers[index] = _by_barycenter(layers[index], layers[index + 1], succs)
        crossings = _crossings(layers, succs)
        if crossings < best_crossings:
            best, best_crossings = [list(layer) for layer in layers], crossings
        if best_crossings == 0:
            break
    return best


def _by_barycenter(layer: list[int], fixed: list[int], neighbours: list[list[int]]) -> list[int]:
    """Sort the layer by the mean position of each vertex's neighbours in the fixed layer.

    A vertex with no neighbour there keeps its own position as its key; ties keep the
    current order, so the sort is stable and deterministic.
    """
    position = {vertex: i for i, vertex in enumerate(fixed)}

    def key(item: tuple[int, int]) -> tuple[float, int]:
        current, vertex = item
        linked = [position[n] for n in neighbours[vertex] if n in position]
        return (sum(linked) / len(linked) if linked else float(current), current)

    return [vertex for _, vertex in sorted(enumerate(layer), key=key)]


def _assign_ranks(layout: _Layout, graph: _Graph) -> None:
    """One rank per layer, as deep as its largest node; left to right, gaps widen for edge labels."""
    count = len(layout.layers)
    sizes = [0.0] * count
    for vertex in range(len(layout.boxes)):
        layer = layout.layer_of[vertex]
        sizes[layer] = max(sizes[layer], layout.main_size(vertex))
    sizes = [size or 24.0 for size in sizes]
    gaps = [RANK_GAP_TB if layout.vertical else RANK_GAP_LR] * count
    if not layout.vertical:  # top to bottom, a label sits beside its edge and needs no room
        for (_, _, label), chain in zip(graph.edges, layout.chains, strict=True):
            if label:
                layer = layout.layer_of[chain[0]]
                gaps[layer] = max(gaps[layer], text_width(label, EDGE_FONT) + 24)
    start = MARGIN
    for index in range(count):
        layout.rank_start.append(start)
        layout.rank_size.append(sizes[index])
        start += sizes[index] + gaps[index]
    layout.main_extent = start - gaps[-1] + MARGIN if count else 2 * MARGIN
    layout.main = [layout.rank_start[rank] + layout.rank_size[rank] / 2 for rank in layout.layer_of]


def _separation(layout: _Layout, before: int, after: int) -> float:
    if layout.is_dummy(before) or layout.is_dummy(after):
        gap = DUMMY_GAP
    else:
        gap = NODE_GAP_TB if layout.vertical else NODE_GAP_LR
    return layout.cross_half(before) + layout.cross_half(after) + gap


def _place_layer(layout: _Layout, layer: list[int], wanted: list[float]) -> None:
    """Set the layer's cross positions closest (least squares) to ``wanted``, keeping order and gaps.

    With offsets c_i (the packed position of vertex i), z_i = y_i - c_i must not decrease;
    pool-adjacent-violators gives the exact fit of z to wanted_i - c_i.
    """
    offsets = [0.0]
    for before, after in pairwise(layer):
        offsets.append(offsets[-1] + _separation(layout, before, after))
    blocks: list[list[float]] = []  # [sum, count]
    for target, offset in zip(wanted, offsets, strict=True):
        blocks.append([target - offset, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, size = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += size
    fitted = [block[0] / block[1] for block in blocks for _ in range(int(block[1]))]
    for vertex, z_value, offset in zip(layer, fitted, offsets, strict=True):
        layout.cross[vertex] = z_value + offset


def _assign_cross(layout: _Layout, succs: list[list[int]], preds: list[list[int]]) -> None:
    """Pull each vertex towards its neighbours' mean cross position, sweeping both ways."""
    layout.cross = [0.0] * len(layout.layer_of)
    for layer in layout.layers:
        _place_layer(layout, layer, [0.0] * len(layer))  # packed, then centred on 0
        middle = (layout.cross[layer[0]] + layout.cross[layer[-1]]) / 2 if layer else 0.0
        for vertex in layer:
            layout.cross[vertex] -= middle

    def mean_of(vertex: int, neighbours: list[int]) -> float:
        if not neighbours:
            return layout.cross[vertex]
        return sum(layout.cross[n] for n in neighbours) / len(neighbours)

    for _ in range(ALIGN_ROUNDS):
        for layer in layout.layers[1:]:
            _place_layer(layout, layer, [mean_of(v, preds[v]) for v in layer])
        for layer in reversed(layout.layers[:-1]):
            _place_layer(layout, layer, [mean_of(v, succs[v]) for v in layer])
    for layer in layout.layers:
        _place_layer(layout, layer, [mean_of(v, preds[v] + succs[v]) for v in layer])

    vertices = range(len(layout.layer_of))
    low = min((layout.cross[v] - layout.cross_half(v) for v in vertices), default=0.0)
    high = max((layout.cross[v] + layout.cross_half(v) for v in vertices), default=0.0)
    layout.cross = [round(c - low + MARGIN, 1) for c in layout.cross]
    layout.cross_extent = high - low + 2 * MARGIN


# ---------------------------------------------------------------------------------------
# Rendering


def _render_svg(graph: _Graph, layout: _Layout, title: str, prefix: str) -> str:
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


def _ports(graph: _Graph, layout: _Layout) -> list[tuple[float, float]]:
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


def _edge_path(layout: _Layout, chain: list[int], start: float, end: float) -> str:
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


def _edge_label(layout: _Layout, chain: list[int], start: float, end: float, label: str) -> str:
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


def _render_node(layout: _Layout, vertex: int, node: FlowNode, prefix: str) -> str:
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


def _describe(graph: _Graph) -> str:
    """Say in words what the chart shows: every step's count and status, then the arrows."""
    steps = "; ".join(
        f"{clean_text(node.label) or node.node_id}: {clean_text(node.count_text)}, "
        f"{STATUS_WORDS[node.status]}"
        for node in graph.nodes
    )
    arrows = "; ".join(
        f"{_name(graph.nodes[source])} to {_name(graph.nodes[target])}"
        + (f" ({label})" if label else "")
        for source, target, label in graph.edges
    )
    text = f"{len(graph.nodes)} steps. {steps}."
    return f"{text} Flow: {arrows}." if arrows else text


def _name(node: FlowNode) -> str:
    return clean_text(node.label) or node.node_id


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


def _render_mermaid(graph: _Graph, direction: str) -> str:
    # Ids are prefixed so no node is the keyword "end" or starts an "o"/"x" edge head.
    def ident(node: FlowNode) -> str:
        return f"n_{node.node_id}"

    lines = [f"flowchart {direction}"]
    for node in graph.nodes:
        label = mermaid_text(_name(node))
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
