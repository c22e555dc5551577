"""The run page's figures, facts and pipeline flowchart."""

from __future__ import annotations

from markupsafe import Markup

from sandbox_replay.checks.negative_cases import NEGATIVE_CASES
from sandbox_replay.drawing.flowchart import FlowEdge, FlowNode, draw_flowchart
from sandbox_replay.figures import count
from sandbox_replay.load.run import InputMode
from sandbox_replay.model.codes import Layer
from sandbox_replay.report.views.common import STATUS_LABELS, expected_alarm, plural
from sandbox_replay.report.views.index import RunIndex
from sandbox_replay.report.views.models import Fact, RunCounts

# The pipeline's edges; the last node (negative cases, or source modules) joins "result".
_EDGES = (
    ("strict_load", "requests"),
    ("requests", "derived"),
    ("policy", "declared"),
    ("derived", "declared"),
    ("declared", "side_effects"),
    ("side_effects", "rollbacks"),
    ("side_effects", "cold_replay"),
    ("rollbacks", "trace"),
    ("cold_replay", "trace"),
    ("trace", "result"),
    ("scan", "result"),
)


def counts(ix: RunIndex) -> RunCounts:
    """Return the run's figures as the index shows and sorts them."""
    c = ix.counts
    expected = sum(1 for f in ix.findings if expected_alarm(f.error_code))
    return RunCounts(
        requests=c["action_request_count"],
        derived_block=c["derived_block_count"],
        derived_allow=c["derived_allow_count"],
        derived_review=c["derived_review_count"],
        mismatches=c["derived_policy_verdict_mismatch_count"],
        findings=len(ix.findings) - expected,
        expected_alarms=expected,
    )


def _negatives(ix: RunIndex) -> tuple[int, int]:
    """Return how many planted negative cases fired, and how many there are."""
    expected = len(NEGATIVE_CASES) if ix.replay.run.mode is InputMode.FIXTURE else 0
    missing = len(ix.replay.negative.missing) if ix.replay.negative is not None else 0
    return expected - missing, expected


def _verdicts(ix: RunIndex) -> str:
    c = ix.counts
    return (
        f"{count(c['derived_block_count'])} block · {count(c['derived_allow_count'])} allow · "
        f"{count(c['derived_review_count'])} review"
    )


def _ratio(ix: RunIndex, done: str, total: str) -> str:
    return f"{count(ix.counts[done])}/{count(ix.counts[total])}"


def facts(ix: RunIndex, figures: RunCounts) -> tuple[Fact, ...]:
    """Return the facts under the run's headline."""
    c = ix.counts
    executed = f"{count(c['executed_action_count'])} of {count(c['side_effect_receipt_count'])}"
    shown = [
        Fact("Requests", count(figures.requests)),
        Fact("Derived", _verdicts(ix)),
        Fact("Mismatches", count(figures.mismatches), "gap" if figures.mismatches else ""),
        Fact("Executed", f"{executed} receipts"),
        Fact("Rollbacks", _ratio(ix, "rollback_verified_count", "rollback_receipt_count")),
        Fact(
            "Cold replays confirmed", _ratio(ix, "cold_replay_confirmed_count", "cold_replay_count")
        ),
        Fact("Findings", count(figures.findings), "gap" if figures.findings else ""),
    ]
    fired, expected = _negatives(ix)
    if expected:
        alarms = f"{count(fired)}/{count(expected)}"
        shown.append(Fact("Alarms fired", alarms, "gap" if fired < expected else ""))
    return tuple(shown)


def flowchart(ix: RunIndex) -> tuple[Markup, Markup, str]:
    """Draw the pipeline left to right for the screen, and top to bottom for print (where
    the wide chart's text would shrink too small to read)."""
    c, status = ix.counts, ix.layer_status

    def node(node_id: str, label: str, figure: str, layer: Layer) -> FlowNode:
        return FlowNode(node_id, label, figure, status.get(layer.value, "not_applicable"))

    policy = status.get(Layer.SANDBOX_POLICY.value, "not_run")
    if "blocked" in (policy, status.get(Layer.PROJECTION_PROTOCOL.value)):
        policy = "blocked"
    mismatches = plural(c["derived_policy_verdict_mismatch_count"], "mismatch", "mismatches")
    effects = (
        f"{count(c['executed_action_count'])} executed · "
        f"{count(c['blocked_without_execution_count'])} held"
    )
    rollbacks = _ratio(ix, "rollback_verified_count", "rollback_receipt_count")
    replays = _ratio(ix, "cold_replay_confirmed_count", "cold_replay_count")
    # No links on nodes: the chart is one role="img", which may not hold focusable
    # children (axe: nested-interactive); the Layers table carries the same figures.
    nodes = [
        node("strict_load", "Strict load", _files_loaded(ix), Layer.STRICT_LOAD),
        node(
            "scan",
            "Forbidden-material scan",
            plural(ix.replay.scan.blocking_hit_count, "hit"),
            Layer.FORBIDDEN_MATERIAL,
        ),
        FlowNode("policy", "Sandbox policy and projection", "2 contracts", policy),
        node(
            "requests",
            "Action requests",
            plural(c["action_request_count"], "request"),
            Layer.ACTION_REQUESTS,
        ),
        node("derived", "Derived verdicts", _verdicts(ix), Layer.ACTION_REQUESTS),
        node("declared", "Declared verdicts checked", mismatches, Layer.POLICY_VERDICTS),
        node("side_effects", "Side-effect receipts", effects, Layer.SIDE_EFFECTS),
        node("rollbacks", "Rollbacks", rollbacks + " verified", Layer.ROLLBACKS),
        node("cold_replay", "Cold replay", replays + " confirmed", Layer.COLD_REPLAY),
        node("trace", "Public trace", plural(len(ix.spans), "span"), Layer.PUBLIC_TRACE),
        node(*_last_node(ix)),
        FlowNode("result", "Result", STATUS_LABELS[ix.status].upper(), ix.status),
    ]
    edges = [FlowEdge(a, b) for a, b in (*_EDGES, (nodes[-2].node_id, "result"))]
    title = f"Replay pipeline of {ix.run.name}"
    chart = draw_flowchart(nodes, edges, title=title, id_prefix="flow")
    printed = draw_flowchart(nodes, edges, title=title, id_prefix="flowprint", direction="TB")
    return chart.svg, printed.svg, chart.mermaid


def _last_node(ix: RunIndex) -> tuple[str, str, str, Layer]:
    """Return the node a fixture's negative cases, or a bundle's source modules, make."""
    if ix.run.mode is InputMode.FIXTURE:
        fired, expected = _negatives(ix)
        figure = f"{count(fired)}/{count(expected)} fired"
        return ("negative", "Negative cases", figure, Layer.NEGATIVE_CASES)
    bodies = ix.replay.modules.bodies if ix.replay.modules is not None else []
    verified = sum(1 for body in bodies if body.verified)
    figure = f"{count(verified)}/{count(len(bodies))} verified"
    return ("modules", "Source modules", figure, Layer.SOURCE_MODULES)


def _files_loaded(ix: RunIndex) -> str:
    layer = ix.replay.layer(Layer.STRICT_LOAD)
    if layer is None:
        return "not run"
    loaded, expected = layer.counts.get("files_loaded", 0), layer.counts.get("files_expected", 0)
    return f"{count(loaded)}/{count(expected)} files"
