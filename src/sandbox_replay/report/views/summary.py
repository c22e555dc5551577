"""The run page's headline, facts and pipeline flowchart."""

from __future__ import annotations

from markupsafe import Markup

from sandbox_replay.drawing.flowchart import FlowEdge, FlowNode, draw_flowchart
from sandbox_replay.figures import count
from sandbox_replay.load.run import InputMode
from sandbox_replay.model.codes import Layer
from sandbox_replay.records.headline import GapHeadline, gap_headline
from sandbox_replay.report.views.base import RunBase
from sandbox_replay.report.views.cells import _expected_alarm
from sandbox_replay.report.views.common import STATUS_LABELS, plural
from sandbox_replay.report.views.models import Fact, RunCounts


class Summary(RunBase):
    def headline(self) -> GapHeadline:
        return gap_headline(self.result)

    def counts(self) -> RunCounts:
        r = self.result
        expected = sum(1 for f in self.findings if _expected_alarm(f))
        return RunCounts(
            requests=r["action_request_count"],
            derived_block=r["derived_block_count"],
            derived_allow=r["derived_allow_count"],
            derived_review=r["derived_review_count"],
            mismatches=r["derived_policy_verdict_mismatch_count"],
            findings=len(self.findings) - expected,
            expected_alarms=expected,
        )

    def facts(self, counts: RunCounts) -> tuple[Fact, ...]:
        r = self.result
        facts = [
            Fact("Requests", count(counts.requests)),
            Fact(
                "Derived",
                f"{count(counts.derived_block)} block · {count(counts.derived_allow)} allow · "
                f"{count(counts.derived_review)} review",
            ),
            Fact("Mismatches", count(counts.mismatches), "gap" if counts.mismatches else ""),
            Fact(
                "Executed",
                f"{count(r['executed_action_count'])} of "
                f"{count(r['side_effect_receipt_count'])} receipts",
            ),
            Fact(
                "Rollbacks",
                f"{count(r['rollback_verified_count'])}/{count(r['rollback_receipt_count'])}",
            ),
            Fact(
                "Cold replays confirmed",
                f"{count(r['cold_replay_confirmed_count'])}/{count(r['cold_replay_count'])}",
            ),
            Fact("Findings", count(counts.findings), "gap" if counts.findings else ""),
        ]
        expected = len(r["expected_negative_cases"])
        if expected:
            fired = expected - len(r["missing_negative_cases"])
            facts.append(
                Fact(
                    "Alarms fired",
                    f"{count(fired)}/{count(expected)}",
                    "gap" if fired < expected else "",
                )
            )
        return tuple(facts)

    def flowchart(self) -> tuple[Markup, Markup, str]:
        """Draw the pipeline left to right for the screen and top to bottom for print.

        On A4 the wide left-to-right chart shrinks to about 5pt text; the top-to-bottom copy
        is about three times narrower and prints at full size. The stylesheet shows one.
        """
        r = self.result
        st = self.layer_status

        def node(node_id: str, label: str, count: str, layer: Layer | None) -> FlowNode:
            status = st.get(layer.value, "not_applicable") if layer else r["status"]
            # No links on nodes: the chart is one role="img", which may not hold focusable
            # children (axe: nested-interactive); the Layers table carries the same figures.
            return FlowNode(node_id, label, count, status)

        scan = r["secret_exclusion_scan"]
        policy_status = (
            "blocked"
            if "blocked"
            in (st.get(Layer.SANDBOX_POLICY.value), st.get(Layer.PROJECTION_PROTOCOL.value))
            else st.get(Layer.SANDBOX_POLICY.value, "not_run")
        )
        nodes = [
            node(
                "strict_load",
                "Strict load",
                self._layer_count(Layer.STRICT_LOAD, "files_loaded", "files_expected", "files"),
                Layer.STRICT_LOAD,
            ),
            node(
                "scan",
                "Forbidden-material scan",
                plural(scan["blocking_hit_count"], "hit"),
                Layer.FORBIDDEN_MATERIAL,
            ),
            FlowNode(
                "policy",
                "Sandbox policy and projection",
                "2 contracts",
                policy_status,
            ),
            node(
                "requests",
                "Action requests",
                plural(r["action_request_count"], "request"),
                Layer.ACTION_REQUESTS,
            ),
            node(
                "derived",
                "Derived verdicts",
                f"{count(r['derived_block_count'])} block · {count(r['derived_allow_count'])} allow · "
                f"{count(r['derived_review_count'])} review",
                Layer.ACTION_REQUESTS,
            ),
            node(
                "declared",
                "Declared verdicts checked",
                plural(r["derived_policy_verdict_mismatch_count"], "mismatch", "mismatches"),
                Layer.POLICY_VERDICTS,
            ),
            node(
                "side_effects",
                "Side-effect receipts",
                f"{count(r['executed_action_count'])} executed · "
                f"{count(r['blocked_without_execution_count'])} held",
                Layer.SIDE_EFFECTS,
            ),
            node(
                "rollbacks",
                "Rollbacks",
                f"{count(r['rollback_verified_count'])}/{count(r['rollback_receipt_count'])} verified",
                Layer.ROLLBACKS,
            ),
            node(
                "cold_replay",
                "Cold replay",
                f"{count(r['cold_replay_confirmed_count'])}/{count(r['cold_replay_count'])} confirmed",
                Layer.COLD_REPLAY,
            ),
            node(
                "trace",
                "Public trace",
                plural(r["public_agent_execution_trace"]["span_count"], "span"),
                Layer.PUBLIC_TRACE,
            ),
        ]
        edges = [
            FlowEdge("strict_load", "requests"),
            FlowEdge("requests", "derived"),
            FlowEdge("policy", "declared"),
            FlowEdge("derived", "declared"),
            FlowEdge("declared", "side_effects"),
            FlowEdge("side_effects", "rollbacks"),
            FlowEdge("side_effects", "cold_replay"),
            FlowEdge("rollbacks", "trace"),
            FlowEdge("cold_replay", "trace"),
            FlowEdge("trace", "result"),
            FlowEdge("scan", "result"),
        ]
        if self.run.mode is InputMode.FIXTURE:
            expected = len(r["expected_negative_cases"])
            fired = expected - len(r["missing_negative_cases"])
            nodes.append(
                node(
                    "negative",
                    "Negative cases",
                    f"{count(fired)}/{count(expected)} fired",
                    Layer.NEGATIVE_CASES,
                )
            )
            edges.append(FlowEdge("negative", "result"))
        else:
            modules = r["source_modules"]
            verified = sum(1 for m in modules if m.get("verified"))
            nodes.append(
                node(
                    "modules",
                    "Source modules",
                    f"{count(verified)}/{count(len(modules))} verified",
                    Layer.SOURCE_MODULES,
                )
            )
            edges.append(FlowEdge("modules", "result"))
        nodes.append(
            FlowNode(
                "result",
                "Result",
                STATUS_LABELS[r["status"]].upper(),
                r["status"],
            )
        )
        title = f"Replay pipeline of {self.run.name}"
        chart = draw_flowchart(nodes, edges, title=title, id_prefix="flow")
        printed = draw_flowchart(nodes, edges, title=title, id_prefix="flowprint", direction="TB")
        return chart.svg, printed.svg, chart.mermaid

    def _layer_count(self, layer: Layer, done: str, total: str, noun: str) -> str:
        for entry in self.result["layers"]:
            if entry["layer"] == layer.value:
                counts = entry["counts"]
                return f"{count(counts.get(done, 0))}/{count(counts.get(total, 0))} {noun}"
        return "not run"
