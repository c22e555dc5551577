"""Lay out a small DAG in layers, left to right or top to bottom (the same steps, axes swapped).

The layered method of Sugiyama, Tagawa and Toda (1981): layers by longest path (a source
moved next to its nearest successor); dummy vertices splitting the edges that span
layers; barycenter sweeps keeping the order with the fewest crossings; then one rank per
layer, each vertex pulled towards its neighbours' mean by an exact least-squares fit that
keeps order and gaps (pool-adjacent-violators). Ties go by input position and the sweeps
are fixed in number, so the same input gives the same layout.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Final
from urllib.parse import urlsplit

from sandbox_replay.drawing.svg import clean_text, num, text_width, wrap_text

STATUSES: Final = ("pass", "blocked", "not_run", "not_applicable")
# A shape cue besides colour, for colour-blind readers and black-and-white printouts.
STATUS_GLYPHS: Final = {"pass": "✓", "blocked": "✗", "not_run": "○", "not_applicable": "–"}
MAX_NODES: Final = 40

_NODE_ID = re.compile(r"[a-z_]{1,64}")

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


def check_relative_href(href: str) -> str:
    """Return the link if it is relative: no scheme, host, whitespace or control character."""
    if not href or any(char.isspace() or not char.isprintable() for char in href):
        raise ValueError(f"href must be a non-empty link without whitespace: {href!r}")
    head = re.split(r"[/?#]", href, maxsplit=1)[0]
    parts = urlsplit(href)
    if ":" in head or parts.scheme or parts.netloc or href.startswith("\\"):
        raise ValueError(f"href must be relative (no scheme or host): {href!r}")
    return href


@dataclass
class Graph:
    """Validated nodes and edges, by input position."""

    nodes: list[FlowNode]
    edges: list[tuple[int, int, str]]
    succs: list[list[int]]
    preds: list[list[int]]

    @classmethod
    def build(cls, nodes: Sequence[FlowNode], edges: Sequence[FlowEdge]) -> Graph:
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
class Box:
    """A real node's text lines and size."""

    label_lines: list[str]
    count_lines: list[str]
    width: float
    height: float


@dataclass
class Layout:
    """Where everything goes, along the layer axis ("main", x left to right) and across it."""

    layer_of: list[int]
    layers: list[list[int]]
    chains: list[list[int]]
    boxes: list[Box]
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


def layout_graph(graph: Graph, vertical: bool) -> Layout:
    layer_of = _assign_layers(graph)
    boxes = [_measure(node) for node in graph.nodes]
    chains, succs, preds = _split_long_edges(graph, layer_of)
    layers = _order_layers(layer_of, succs, preds)
    layout = Layout(layer_of, layers, chains, boxes, vertical)
    _assign_ranks(layout, graph)
    _assign_cross(layout, succs, preds)
    return layout


def _assign_layers(graph: Graph) -> list[int]:
    """Longest path from the sources, then each source moved next to its nearest successor."""
    layer = [0] * len(graph.nodes)
    for vertex in graph.topological_order():
        for succ in graph.succs[vertex]:
            layer[succ] = max(layer[succ], layer[vertex] + 1)
    for vertex, preds in enumerate(graph.preds):
        if not preds and graph.succs[vertex]:
            layer[vertex] = min(layer[succ] for succ in graph.succs[vertex]) - 1
    return layer


def _measure(node: FlowNode) -> Box:
    """Wrap the label (two lines) and the count (four, widening up to ``COUNT_MAX_WIDTH``)."""
    label_lines = wrap_text(name_of(node), LABEL_FONT, LABEL_MAX_WIDTH, 2)
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
    return Box(label_lines, count_lines, round(width), round(height))


def _split_long_edges(
    graph: Graph, layer_of: list[int]
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
    """Sort the layer by the mean position of each vertex's neighbours in the fixed layer
    (its own position where it has none there; ties keep order)."""
    position = {vertex: i for i, vertex in enumerate(fixed)}

    def key(item: tuple[int, int]) -> tuple[float, int]:
        current, vertex = item
        linked = [position[n] for n in neighbours[vertex] if n in position]
        return (sum(linked) / len(linked) if linked else float(current), current)

    return [vertex for _, vertex in sorted(enumerate(layer), key=key)]


def _assign_ranks(layout: Layout, graph: Graph) -> None:
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


def _separation(layout: Layout, before: int, after: int) -> float:
    if layout.is_dummy(before) or layout.is_dummy(after):
        gap = DUMMY_GAP
    else:
        gap = NODE_GAP_TB if layout.vertical else NODE_GAP_LR
    return layout.cross_half(before) + layout.cross_half(after) + gap


def _place_layer(layout: Layout, layer: list[int], wanted: list[float]) -> None:
    """Set the layer's cross positions closest (least squares) to ``wanted``, keeping order and gaps.

    With c_i the packed position of vertex i, z_i = y_i - c_i must not decrease:
    pool-adjacent-violators fits z to wanted_i - c_i exactly.
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


def _assign_cross(layout: Layout, succs: list[list[int]], preds: list[list[int]]) -> None:
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


def name_of(node: FlowNode) -> str:
    return clean_text(node.label) or node.node_id
