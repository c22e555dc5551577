"""Fuzz the AgentDojo reader: whatever a log holds, it imports or is refused in one line.

A committed log (tests/data/agentdojo) gets a value replaced or a key removed at a random
place; ``import_logs`` must give bundles or an ``AgentDojoImportError`` naming the file,
never another exception. A mutated bundle manifest's ``benchmark`` must give a record its
schema accepts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from sandbox_replay import InputMode, ReplayConfig, replay
from sandbox_replay.importers.agentdojo_logs import (
    AgentDojoImportError,
    AgentDojoOptions,
    import_logs,
)
from sandbox_replay.importers.inspect_logs import write_bundles
from sandbox_replay.records.build import build_records
from test_schemas import validator

LOGS = sorted((REPO / "tests" / "data" / "agentdojo" / "logs").rglob("*.json"))
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
DELETE = object()


def places(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Return the path of every value below ``node``."""
    found = [at] if at else []
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for key, value in items:
        found += places(value, (*at, key))
    return found


def edited(document: Any, at: tuple[Any, ...], value: Any) -> Any:
    copy = json.loads(json.dumps(document))
    parent = copy
    for key in at[:-1]:
        parent = parent[key]
    if value is DELETE:
        del parent[at[-1]]
    else:
        parent[at[-1]] = value
    return copy


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_mutated_log_imports_or_is_refused_naming_the_file(
    data: st.DataObject, tmp_path: Path
) -> None:
    log = data.draw(st.sampled_from(LOGS))
    document = json.loads(log.read_text("utf-8"))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.sampled_from(places(document)))
        document = edited(document, at, data.draw(st.one_of(VALUES, st.just(DELETE))))
    target = tmp_path / log.relative_to(LOGS[0].parents[4])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(document))
    try:
        import_logs([target], AgentDojoOptions())
    except AgentDojoImportError as error:
        assert str(target) in str(error) and "\n" not in str(error)


BENCHMARK_KEYS = ["suite", "injection_task_id", "attack_type", "utility", "security", "other"]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(changes=st.dictionaries(st.sampled_from(BENCHMARK_KEYS), VALUES, min_size=1, max_size=4))
def test_a_mutated_benchmark_gives_a_record_its_schema_accepts(
    changes: dict[str, Any], tmp_path_factory: Any
) -> None:
    out = tmp_path_factory.mktemp("bundle")
    attacked = next(log for log in LOGS if "obeys_injection" in str(log))
    (folder,) = write_bundles(import_logs([attacked], AgentDojoOptions()), out)
    manifest = json.loads((folder / "bundle_manifest.json").read_text("utf-8"))
    manifest["benchmark"].update(changes)
    (folder / "bundle_manifest.json").write_text(json.dumps(manifest))
    outcome = replay(ReplayConfig(folder, InputMode.BUNDLE))
    record = json.loads(build_records(outcome).result_bytes)
    assert [e.message for e in validator("result").iter_errors(record)] == []
    assert record["status"] == "blocked"
