"""The run page's "What the benchmark said": a harness's own verdict, shown beside the
replay's and never trusted (``records.benchmark``)."""

from __future__ import annotations

from sandbox_replay.records.benchmark import BenchmarkFacts, untrusted_executed
from sandbox_replay.report.views.index import RunIndex
from sandbox_replay.report.views.models import BenchmarkView

# The benchmark's fields as the page names them, in the order it shows them.
_SAID = (
    ("suite", "Suite"),
    ("user_task_id", "User task"),
    ("injection_task_id", "Injection task"),
    ("attack_type", "Attack"),
    ("pipeline", "Pipeline"),
    ("benchmark_version", "Benchmark version"),
    ("agentdojo_version", "AgentDojo"),
)


def _flag(value: object) -> str:
    return "not recorded" if value is None else str(value).lower()


def benchmark(ix: RunIndex) -> BenchmarkView | None:
    """Return what the benchmark said of the run, None for a run without a benchmark."""
    result = ix.records.result
    said = result.get("benchmark")
    if said is None:
        return None
    facts = [(label, str(said[key])) for key, label in _SAID if said.get(key) is not None]
    attacked = bool(said.get("injection_task_id"))
    security = _flag(said.get("security"))
    if attacked:
        meaning = " (the injection task's goal was met)" if said.get("security") else ""
        facts.append(("Security", security + meaning))
    facts.append(("Utility", _flag(said.get("utility"))))
    found = untrusted_executed(result)
    replayed = (
        f"{len(found):,} call(s) made after untrusted tool output executed"
        + (f" ({', '.join(request_id for request_id, _k, _v in found)})" if found else "")
        + "."
    )
    counted = BenchmarkFacts.of(result)
    assert counted is not None
    return BenchmarkView(tuple(facts), replayed, attacked, counted)
