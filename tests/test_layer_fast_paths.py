"""The layers' fast paths give exactly what their exact per-row code gives.

Each validator layer clears plain rows in bulk, joins requests in bulk and judges each
distinct combination of values once; its exact per-row code runs only on the rest.
Here those fast paths are switched off (every row a suspect, every request put to the
exact test) and the findings and counts of mangled bundles must not change. The edits
reach what the reference inputs do not: lookalike values (1 for true, 0.0 for 0),
blank and whitespace text, wrong types, missing fields, repeated ids, rows out of
request order, and ids that name another request or none.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import EXPORTED_BUNDLE, read_json
from sandbox_replay.inputs import InputMode, RowRef, RunInputs, load_run
from sandbox_replay.layers import actions, base, cold_replay, rollbacks, side_effects, verdicts
from sandbox_replay.layers.base import NO_ROW, FloorScan, LayerResult
from sandbox_replay.loader import LoadLimits
from sandbox_replay.policy import default_table

LAYERS = (actions, verdicts, side_effects, rollbacks, cold_replay)
LIST_FILES = (
    "action_requests",
    "policy_verdicts",
    "side_effect_receipts",
    "rollback_receipts",
    "cold_replay",
)
DELETE = object()  # an edit that removes the field
LOOKALIKES = [True, False, 1, 0, 1.0, 0.0, -1, 2, None, "", " ", "\u2003", "\t\n", "x"]
ODD = [[], {}, ["x"], [""], [1], {"k": "v"}, DELETE]


def _every_row(refs: list[RowRef], *args: Any, **kwargs: Any) -> FloorScan:
    scan = base.scan_floor(refs, *args, **kwargs)
    return FloorScan(set(range(len(refs))), scan.columns, scan.raw, scan.refs, scan.index)


def _each_failing(run: RunInputs) -> list[str]:
    return [
        request_id
        for request_id, derivation in run.derivations.items()
        if not verdicts.derivation_passes(
            derivation,
            ref.row if (ref := run.verdict_by_request.get(request_id)) is not None else None,
        )
    ]


def _each_executed(run: RunInputs, scan: FloorScan) -> tuple[list[tuple[str, RowRef]], bool]:
    executed = []
    for request_id in run.derivations:
        effect = run.effect_by_request.get(request_id)
        if effect is not None and effect.get("execution_attempted") is True:
            executed.append((request_id, effect))
    return executed, False


def _each_lookup(index: dict[str, RowRef], keys: Iterable[Any]) -> list[RowRef]:
    return [index.get(key, NO_ROW) for key in keys]


def _each_unknown(self: base.Join, ids: list[Any], requests: dict[str, RowRef]) -> list[int]:
    return [i for i, request_id in enumerate(ids) if request_id not in requests]


@contextmanager
def exact_only() -> Iterator[None]:
    """Switch every fast path of the layers off."""
    with ExitStack() as stack:
        for layer in LAYERS:
            stack.enter_context(mock.patch.object(layer, "scan_floor", _every_row))
        stack.enter_context(mock.patch.object(verdicts, "failing_requests", _each_failing))
        stack.enter_context(mock.patch.object(cold_replay, "failing_requests", _each_failing))
        stack.enter_context(mock.patch.object(rollbacks, "_uncovered", _each_executed))
        stack.enter_context(mock.patch.object(base, "joined", _each_lookup))
        stack.enter_context(mock.patch.object(rollbacks, "joined", _each_lookup))
        stack.enter_context(mock.patch.object(base.Join, "unknown", _each_unknown))
        stack.enter_context(mock.patch.object(base, "from_scan", lambda *args: None))
        stack.enter_context(
            mock.patch.object(
                side_effects, "per_distinct", lambda judge, *cols: list(map(judge, *cols))
            )
        )
        yield


def _fixture_rows() -> dict[str, list[dict[str, Any]]]:
    return {name: read_json(EXPORTED_BUNDLE / f"{name}.json")[name] for name in LIST_FILES}


def _fast_and_exact(
    data: dict[str, list[dict[str, Any]]], step: int = base._SCAN_STEP
) -> tuple[list[Any], list[Any]]:
    """Write the exported bundle with ``data`` as its list files; check it both ways.

    The fast way reads the rows ``step`` at a time, so that a small step puts the edits
    on either side of a step's edge.
    """
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for source in EXPORTED_BUNDLE.iterdir():
            if source.is_file():
                (folder / source.name).write_bytes(source.read_bytes())
        for name, rows in data.items():
            (folder / f"{name}.json").write_text(json.dumps({name: rows}), "utf-8")
        with mock.patch.object(base, "_SCAN_STEP", step):
            fast = _results(folder)
        with exact_only():
            exact = _results(folder)
    return fast, exact


def _results(folder: Path) -> list[tuple[Any, ...]]:
    run = load_run(folder, InputMode.BUNDLE, default_table(), LoadLimits())
    results: list[LayerResult] = [layer.check(run) for layer in LAYERS]
    return [(r.findings, r.counts, r.ran) for r in results]


EDIT = st.one_of(
    st.tuples(
        st.just("set"),
        st.sampled_from(LIST_FILES),
        st.integers(0, 7),
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", max_size=30),
        st.sampled_from(LOOKALIKES + ODD),
    ),
    st.tuples(st.just("copy"), st.sampled_from(LIST_FILES), st.integers(0, 7), st.integers(0, 7)),
    st.tuples(st.just("swap"), st.sampled_from(LIST_FILES), st.integers(0, 7), st.integers(0, 7)),
    st.tuples(st.just("id"), st.sampled_from(LIST_FILES), st.integers(0, 7), st.integers(0, 7)),
)


def _apply(data: dict[str, list[dict[str, Any]]], edit: tuple[Any, ...]) -> None:
    kind, name, i, arg = edit[0], edit[1], edit[2], edit[3]
    rows = data[name]
    if not rows:
        return
    i %= len(rows)
    row = rows[i]
    if kind == "set":
        # Mostly a field the row has, so that the edit lands on something checked.
        field = sorted(row)[len(arg) % len(row)] if len(arg) % 3 else arg
        value = edit[4]
        if value is DELETE:
            row.pop(field, None)
        else:
            row[field] = value
    elif kind == "copy":
        rows.insert(arg % (len(rows) + 1), dict(row))
    elif kind == "swap":
        j = arg % len(rows)
        rows[i], rows[j] = rows[j], rows[i]
    else:  # point the row at another request (or its own file's id at another row's)
        other = data["action_requests"][arg % len(data["action_requests"])]
        row["request_id"] = other.get("request_id")


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(edits=st.lists(EDIT, min_size=1, max_size=6), step=st.sampled_from([1, 2, 3, 4096]))
def test_fast_paths_change_no_finding(edits: list[tuple[Any, ...]], step: int) -> None:
    data = _fixture_rows()
    for edit in edits:
        _apply(data, edit)
    fast, exact = _fast_and_exact(data, step)
    assert fast == exact


def test_lookalike_flags_are_not_cleared() -> None:
    """1 for true and 0 for false hash and compare alike: the bulk check must not care."""
    data = _fixture_rows()
    for name in LIST_FILES:
        data[name][0]["body_redacted"] = 1
    data["side_effect_receipts"][1]["execution_attempted"] = 1
    data["side_effect_receipts"][2]["side_effect_diff_count"] = True
    fast, exact = _fast_and_exact(data)
    assert fast == exact
    flagged = [f for findings, _, _ in fast for f in findings if "body_redacted" in f.message]
    assert len(flagged) == len(LIST_FILES)


# Not -0.0: it equals 0.0 and is judged with it, as before; no judge here tells them apart.
SCALARS = st.sampled_from([True, False, 1, 0, 1.0, 0.0, 2, None, "", "x", "allow"])


@settings(max_examples=200, deadline=None)
@given(
    columns=st.integers(1, 4).flatmap(
        lambda width: st.lists(st.tuples(*[SCALARS] * width), max_size=12).map(
            lambda rows: list(zip(*rows, strict=True)) or [[] for _ in range(width)]
        )
    ),
    unhashable=st.booleans(),
)
def test_per_distinct_judges_as_each_position(columns: list[Any], unhashable: bool) -> None:
    """Judging each distinct typed tuple once gives what judging each position gives."""
    columns = [list(values) for values in columns]
    if unhashable and columns[0]:
        columns[0][0] = ["x"]

    def judge(*values: Any) -> tuple[Any, ...]:
        return tuple((type(value), repr(value)) for value in values)

    assert base.per_distinct(judge, *columns) == list(map(judge, *columns))
