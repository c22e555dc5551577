"""The gaps listing holds the rows with a gap (a finding about it, or nothing joined), each
once, however the joins cross; and a join row joins the rows its ids name."""

from __future__ import annotations

import dataclasses
import json
import operator
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import EXPORTED_BUNDLE, replay_dir
from sandbox_replay.load.run import rollback_id_of
from sandbox_replay.model import codes
from sandbox_replay.model.findings import Finding
from sandbox_replay.report.discover import discover
from sandbox_replay.report.views import RunIndex, index_run
from sandbox_replay.report.views.joins import find_gaps, partners_of, row_findings
from test_perturbations import TRIGGERS, replay_trigger

FILES = (
    "action_requests.json",
    "policy_verdicts.json",
    "side_effect_receipts.json",
    "rollback_receipts.json",
    "cold_replay.json",
)


def _table(folder: Path) -> RunIndex:
    run = discover([folder], folder.parent).runs[0]
    outcome, records = replay_dir(folder, run.mode)
    return index_run(run, outcome, records, "now", "0")


def _walked(table: RunIndex) -> set[int]:
    """The rows with a gap, found by joining every request row."""
    gaps = set()
    for index, request in enumerate(table.requests):
        partners = partners_of(table, index, request)
        if partners is None or row_findings(table, request, partners):
            gaps.add(index)
    return gaps


def _assert_gaps_are_walked(table: RunIndex) -> None:
    walked = _walked(table)
    gaps = find_gaps(table)
    assert set(gaps.order) == walked
    assert len(gaps.order) == len(walked)
    assert set(gaps.severity) == walked


@pytest.mark.parametrize("code", sorted(TRIGGERS))
def test_the_gaps_of_each_codes_trigger_are_those_a_walk_finds(code: str, tmp_path: Path) -> None:
    folder, outcome, records = replay_trigger(code, tmp_path)
    run = discover([folder], folder.parent).runs[0]
    _assert_gaps_are_walked(index_run(run, outcome, records, "now", "0"))


# Edits that cross the joins: a row given another row's id, a rollback ref naming another
# request's rollback (bare or as ``rollback/<id>``), an id that is not text, one the record
# cuts, a row removed.
_EDITS = st.lists(
    st.tuples(
        st.sampled_from(FILES),
        st.integers(min_value=0, max_value=40),
        st.sampled_from(
            ["request_id", "replay_id", "rollback_id", "rollback_receipt_ref", "line", "drop"]
        ),
        st.integers(min_value=0, max_value=40),
        st.sampled_from(["bare", "prefixed", "number", "list", "object", "long"]),
    ),
    max_size=6,
)


def _edit(folder: Path, edits: list[tuple[str, int, str, int, str]], prefixed: bool) -> None:
    """Make ``edits``; with ``prefixed``, each receipt first names its rollback as
    ``rollback/<id>``."""
    data = {name: json.loads((folder / name).read_text("utf-8")) for name in FILES}
    lists = {name: data[name][name.removesuffix(".json")] for name in FILES}
    rollback_ids = [row.get("rollback_id") for row in lists["rollback_receipts.json"]]
    for effect in lists["side_effect_receipts.json"] if prefixed else []:
        if effect.get("rollback_receipt_ref") in rollback_ids:
            effect["rollback_receipt_ref"] = "rollback/" + effect["rollback_receipt_ref"]
    request_ids = [row.get("request_id") for row in lists["action_requests.json"]]
    for name, at, field, source, shape in edits:
        rows = lists[name]
        if not rows:
            continue
        row = rows[at % len(rows)]
        if field == "drop":
            rows.remove(row)
            continue
        if field not in row and field != "line":
            continue
        ids = rollback_ids if field in ("rollback_id", "rollback_receipt_ref") else request_ids
        value: Any = ids[source % len(ids)] if ids else "x"
        if shape == "prefixed":
            value = f"rollback/{value}"
        elif shape == "number":
            value = source
        elif shape == "list":
            value = [value]
        elif shape == "object":  # the record shows "<dict>"
            value = {"id": value}
        elif shape == "long":  # the record cuts it: every such id there is the same
            value = "x" * 600 + str(value)
        row[field] = value
    for name in FILES:
        (folder / name).write_text(json.dumps(data[name], indent=2), "utf-8")


# What a finding may cite: a request id, a span id, a replay id, a rollback id, or the
# line of a row in one of the files.
_CITES = ("request", "span", "replay", "rollback", *FILES)


def _cite(table: RunIndex, picks: list[tuple[str, int]]) -> RunIndex:
    """Return the index with its findings citing only what ``picks`` choose (a kind of
    citation and which of them), so that each kind of citation is the only one a row has."""
    r = table.records.result
    rows = dict(
        zip(
            FILES,
            [
                r["request_rows"],
                r["policy_verdict_rows"],
                r["side_effect_rows"],
                r["rollback_rows"],
                r["cold_replay_rows"],
            ],
            strict=True,
        )
    )
    choices: dict[str, list[Any]] = {
        "request": [row.get("request_id") for row in r["request_rows"]],
        "span": ["span:" + str(row.get("request_id")) for row in r["request_rows"]],
        "replay": [row.get("replay_id") for row in r["cold_replay_rows"]],
        "rollback": [row.get("rollback_id") for row in r["rollback_rows"]],
    }
    for path, found in rows.items():
        choices[path] = [(path, row.get("line")) for row in found]
    cited = [choices[kind][i % len(choices[kind])] for kind, i in picks if choices[kind]]
    by_subject = {s: [0] for s in cited if not isinstance(s, tuple | list)}
    by_line: dict[tuple[Any, Any], list[int]] = {
        line: [0] for line in cited if isinstance(line, tuple)
    }
    finding_lines: dict[Any, set[Any]] = {}
    for path, line in by_line:
        finding_lines.setdefault(path, set()).add(line)
    findings = table.findings or (Finding(codes.ALLOWED_ACTION_MISSING_DIFF, "", "", "", ""),)
    return dataclasses.replace(
        table,
        by_subject=by_subject,
        by_line=by_line,
        finding_lines=finding_lines,
        findings=findings,
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    edits=_EDITS,
    prefixed=st.booleans(),
    picks=st.lists(st.tuples(st.sampled_from(_CITES), st.integers(0, 40)), max_size=3),
)
def test_the_gaps_of_crossed_joins_are_those_a_walk_finds(
    tmp_path: Path,
    edits: list[tuple[str, int, str, int, str]],
    prefixed: bool,
    picks: list[tuple[str, int]],
) -> None:
    folder = tmp_path / "bundle"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(EXPORTED_BUNDLE, folder)
    _edit(folder, edits, prefixed)
    table = _table(folder)
    _assert_gaps_are_walked(table)
    _assert_gaps_are_walked(_cite(table, picks))


@pytest.mark.parametrize("prefixed", [False, True])
def test_the_gaps_of_each_single_citation_are_those_a_walk_finds(
    tmp_path: Path, prefixed: bool
) -> None:
    folder = tmp_path / "bundle"
    shutil.copytree(EXPORTED_BUNDLE, folder)
    _edit(folder, [], prefixed)
    table = _table(folder)
    for kind in _CITES:
        for i in range(6):
            _assert_gaps_are_walked(_cite(table, [(kind, i)]))


def _partners_by_id(table: RunIndex, folder: Path) -> list[Any]:
    """Each request row's partners, found by id in the files as written: a row whose id is
    text and held by no earlier request row, as written and as the record shows it, joins
    the first row of each file naming it (the record lists a file's rows in its order),
    its derived row and its span; its receipt's rollback is the first rollback row
    holding the id the ref names."""
    r = table.records.result
    written = {
        name: json.loads((folder / name).read_text("utf-8"))[name.removesuffix(".json")]
        for name in FILES
    }

    def first(name: str, record_rows: list[Any], rid: str) -> Any:
        for position, row in enumerate(written[name]):
            if row.get("request_id") == rid:
                return record_rows[position]
        return None

    rollback_ids = [row.get("rollback_id") for row in r["rollback_rows"]]
    found: list[Any] = []
    seen: set[str] = set()
    shown_seen: set[str] = set()
    for request, shown_row in zip(written["action_requests.json"], r["request_rows"], strict=True):
        rid, shown = request.get("request_id"), shown_row.get("request_id")
        joins = type(rid) is str and rid not in seen
        joins = joins and type(shown) is str and shown not in shown_seen
        seen.update([rid] if type(rid) is str else [])
        shown_seen.update([shown] if type(shown) is str else [])
        if not joins:
            found.append(None)
            continue
        effect = first("side_effect_receipts.json", r["side_effect_rows"], rid)
        rollback = None
        ref = effect.get("rollback_receipt_ref") if effect is not None else None
        if isinstance(ref, str):
            named = rollback_id_of(ref, {i for i in rollback_ids if type(i) is str})
            if named in rollback_ids:
                rollback = r["rollback_rows"][rollback_ids.index(named)]
        found.append(
            (
                next(d for d in r["derived_policy_verdict_rows"] if d.request_id == rid),
                first("policy_verdicts.json", r["policy_verdict_rows"], rid),
                effect,
                rollback,
                first("cold_replay.json", r["cold_replay_rows"], rid),
                next(s for s in table.spans if s.span_id == "span:" + rid),
            )
        )
    return found


def _assert_joined_by_id(
    tmp_path: Path, edits: list[tuple[str, int, str, int, str]], prefixed: bool
) -> None:
    """The pages join the record's rows where the replay's join put them: the same rows,
    row for row, as looking each request's id up in the files as written."""
    folder = tmp_path / "bundle"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(EXPORTED_BUNDLE, folder)
    _edit(folder, edits, prefixed)
    table = _table(folder)
    joined = [partners_of(table, index, request) for index, request in enumerate(table.requests)]
    expected = _partners_by_id(table, folder)
    assert len(joined) == len(expected)
    for partners, wanted in zip(joined, expected, strict=True):
        if wanted is None:
            assert partners is None
        else:
            assert partners is not None
            assert all(map(operator.is_, partners, wanted)), (partners, wanted)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(edits=_EDITS, prefixed=st.booleans())
def test_join_rows_of_crossed_joins_join_the_rows_their_ids_name(
    tmp_path: Path, edits: list[tuple[str, int, str, int, str]], prefixed: bool
) -> None:
    _assert_joined_by_id(tmp_path, edits, prefixed)


REQUESTS = "action_requests.json"


@pytest.mark.parametrize(
    "edits",
    [
        [],
        [(REQUESTS, 1, "request_id", 0, "bare")],  # a repeated id: the second row joins nothing
        [(REQUESTS, 1, "request_id", 0, "number")],
        [(REQUESTS, 1, "request_id", 0, "list")],  # the record shows the list
        [(REQUESTS, 1, "request_id", 0, "object")],  # the record shows "<dict>": text
        [(REQUESTS, 3, "request_id", 0, "object"), (REQUESTS, 1, "request_id", 1, "object")],
        # Ids the record cuts to one text: only the first of them joins on the pages.
        [(REQUESTS, 1, "request_id", 1, "long"), (REQUESTS, 2, "request_id", 2, "long")],
        [("policy_verdicts.json", 0, "drop", 0, "bare")],  # the files no longer in step
        [("cold_replay.json", 0, "request_id", 2, "bare")],
        [("side_effect_receipts.json", 2, "rollback_receipt_ref", 0, "prefixed")],
    ],
)
def test_join_rows_join_the_rows_their_ids_name(
    tmp_path: Path, edits: list[tuple[str, int, str, int, str]]
) -> None:
    _assert_joined_by_id(tmp_path, edits, prefixed=False)
