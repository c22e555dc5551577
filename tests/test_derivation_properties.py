"""Property tests: the derivation fails closed, and mangled rows never crash the replay.

(a) A request derives to a table row's verdict only when its whole shape is that row;
    anything else derives to block by the fail-closed rule.
(b) Random mutations of the passing fixture's rows always yield a result record, and a
    ``blocked`` one whenever the mutation changed something the format constrains.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIRST_WAVE, copy_fixture, find_row, read_json, replay_dir, write_json
from sandbox_replay.model.policy import SHAPE_FIELDS, default_table

TABLE = default_table()
FAIL_CLOSED_RULE = "rule:sandbox_policy_fail_closed_unrecognized_action"
SHAPE_KEYS = ("risk_class", *SHAPE_FIELDS)
TABLE_ROWS = {
    tuple(getattr(rule, key) for key in SHAPE_KEYS): (rule.verdict, rule.rule_ref)
    for rule in TABLE.rules.values()
}
# Each shape field draws from every value the table uses (so near-misses are common),
# plus arbitrary text and values of the wrong JSON type.
ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.lists(st.text(max_size=3), max_size=2)
)


def field_values(key: str) -> st.SearchStrategy[Any]:
    known = sorted({getattr(rule, key) for rule in TABLE.rules.values()})
    return st.one_of(st.sampled_from(known), st.text(max_size=12), ODD_VALUES)


SHAPES = st.fixed_dictionaries({key: field_values(key) for key in SHAPE_KEYS})


@settings(max_examples=400, deadline=None)
@given(shape=SHAPES)
def test_derivation_is_the_table_row_or_fail_closed_block(shape: dict[str, Any]) -> None:
    derivation = TABLE.derive(shape)
    key = tuple(shape[k] for k in SHAPE_KEYS)
    row = TABLE_ROWS.get(key) if all(isinstance(v, str) for v in key) else None
    if row is None:
        assert (derivation.verdict, derivation.rule_ref) == ("block", FAIL_CLOSED_RULE)
        assert derivation.fail_closed
    else:
        assert (derivation.verdict, derivation.rule_ref) == row
        assert not derivation.fail_closed


def test_every_table_row_derives_to_its_own_verdict() -> None:
    for key, expected in TABLE_ROWS.items():
        derivation = TABLE.derive(dict(zip(SHAPE_KEYS, key, strict=True)))
        assert (derivation.verdict, derivation.rule_ref) == expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=SHAPES)
def test_replayed_request_with_any_shape_off_the_table_blocks(shape: dict[str, Any]) -> None:
    """Through the whole pipeline: reshape the allowed safe edit and replay it."""
    key = tuple(shape[k] for k in SHAPE_KEYS)
    on_table = all(isinstance(v, str) for v in key) and key in TABLE_ROWS
    with tempfile.TemporaryDirectory() as tmp:
        folder = copy_fixture(Path(tmp))
        data = read_json(folder / "action_requests.json")
        find_row(data["action_requests"], "req_safe_fixture_edit").update(shape)
        write_json(folder / "action_requests.json", data)
        outcome, records = replay_dir(folder)
    derived = find_row(records.result["derived_policy_verdict_rows"], "req_safe_fixture_edit")
    if on_table:
        assert (derived.get("derived_verdict"), derived.get("derived_rule_ref")) == TABLE_ROWS[key]
    else:
        assert (derived.get("derived_verdict"), derived.get("derived_rule_ref")) == (
            "block",
            FAIL_CLOSED_RULE,
        )
        # The fixture declared allow for this request, so a fail-closed block must block.
        assert outcome.status == "blocked"


# --- (b) mutations of the passing fixture ----------------------------------------------

ROW_FILES = {
    "action_requests.json": "action_requests",
    "policy_verdicts.json": "policy_verdicts",
    "side_effect_receipts.json": "side_effect_receipts",
    "rollback_receipts.json": "rollback_receipts",
    "cold_replay.json": "cold_replay",
}
# What the format constrains in each row kind. Every required key's presence, JSON type
# and emptiness is constrained; the *value* of a key is constrained only where the format
# ties it to something (a join, the policy table, an exact flag). Free-text refs such as
# ``decision_reason_ref`` may hold any non-empty string, so swapping them is no change.
REQUIRED = {
    "action_requests": (
        "request_id",
        "episode_id",
        "action_kind",
        "normalized_action_ref",
        "source_trust_label",
        "untrusted_tool_output_ref",
        "requested_capability",
        "risk_class",
        "intended_side_effect_ref",
        "body_redacted",
        "secret_like_data_synthetic",
        "raw_payload_exported",
        "live_network_target",
    ),
    "policy_verdicts": (
        "request_id",
        "policy_version",
        "verdict",
        "rule_refs",
        "pre_execution",
        "decision_reason_ref",
        "body_redacted",
    ),
    "side_effect_receipts": (
        "request_id",
        "execution_attempted",
        "filesystem_diff_ref",
        "network_diff_ref",
        "database_diff_ref",
        "side_effect_diff_count",
        "rollback_receipt_ref",
        "body_redacted",
    ),
    "rollback_receipts": (
        "rollback_id",
        "request_id",
        "rollback_required",
        "rollback_verified",
        "rollback_command_ref",
        "body_redacted",
    ),
    "cold_replay": (
        "replay_id",
        "request_id",
        "replay_command",
        "receipt_ref",
        "verdict_reproduced",
        "side_effect_state_reproduced",
        "pass_label",
        "body_redacted",
    ),
}
FREE_TEXT = frozenset(
    {
        "episode_id",
        "normalized_action_ref",
        "untrusted_tool_output_ref",
        "intended_side_effect_ref",
        "decision_reason_ref",
        "filesystem_diff_ref",
        "network_diff_ref",
        "database_diff_ref",
        "rollback_command_ref",
        "replay_id",
        "replay_command",
        "receipt_ref",
    }
)
BASE = {name: read_json(FIRST_WAVE / name) for name in ROW_FILES}
OTHER_VALUES: list[Any] = [0, 1, 2.5, "", "x", True, False, None, [], ["x"], {}, {"k": "v"}]


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "list", dict: "object"}.get(type(value), "null")


def constrained_view(row: Mapping[str, Any], kind: str) -> str:
    """Return what the format constrains about ``row``, as canonical JSON."""
    view: dict[str, Any] = {}
    for key in REQUIRED[kind]:
        if key not in row:
            view[key] = "<absent>"
        elif key in FREE_TEXT:
            value = row[key]
            view[key] = json_type(value) + ("" if value else ":empty")
        else:
            view[key] = row[key]
    return json.dumps(view, sort_keys=True)


def constrained_state(files: Mapping[str, Any]) -> dict[str, list[str]]:
    """Return, per row kind, the sorted constrained views of its rows (or the raw file)."""
    state = {}
    for name, kind in ROW_FILES.items():
        rows = files[name].get(kind) if isinstance(files[name], dict) else None
        if isinstance(rows, list) and all(isinstance(r, dict) for r in rows):
            state[kind] = sorted(constrained_view(r, kind) for r in rows)
        else:
            state[kind] = [json.dumps(files[name], sort_keys=True)]
    return state


@dataclass(frozen=True)
class Mutation:
    """The mutated row files, shown in a failure report by what was changed."""

    description: str
    files: dict[str, Any] = field(repr=False)

    def __repr__(self) -> str:
        return f"Mutation({self.description})"


def mutate(draw: st.DrawFn, files: dict[str, Any]) -> str:
    """Apply one random mutation to one row file in place; return what it did."""
    name = draw(st.sampled_from(sorted(ROW_FILES)))
    rows: list[Any] = files[name][ROW_FILES[name]]
    if not rows:
        return f"{name}: no rows left"
    index = draw(st.integers(0, len(rows) - 1))
    row = rows[index]
    kinds = ["drop_key", "change_type", "swap", "delete_row", "duplicate_row"]
    kind = draw(st.sampled_from(kinds if row else ["delete_row", "duplicate_row"]))
    if kind == "drop_key":
        key = draw(st.sampled_from(sorted(row)))
        del row[key]
        return f"{name}[{index}]: drop {key}"
    if kind == "change_type":
        key = draw(st.sampled_from(sorted(row)))
        value = draw(
            st.sampled_from([v for v in OTHER_VALUES if json_type(v) != json_type(row[key])])
        )
        row[key] = value
        return f"{name}[{index}]: {key} -> {value!r}"
    if kind == "swap" and len(rows) > 1:
        other = draw(st.integers(0, len(rows) - 1).filter(lambda i: i != index))
        shared = sorted(set(row) & set(rows[other]))
        if shared:
            key = draw(st.sampled_from(shared))
            row[key], rows[other][key] = rows[other][key], row[key]
            return f"{name}: swap {key} of rows {index} and {other}"
    # A swap that found no second row or no shared key falls through to a duplicate.
    if kind == "delete_row":
        del rows[index]
        return f"{name}: delete row {index}"
    rows.insert(index, json.loads(json.dumps(row)))
    return f"{name}: duplicate row {index}"


@st.composite
def mutations(draw: st.DrawFn) -> Mutation:
    """Draw one to three mutations of the fixture's row files."""
    files = json.loads(json.dumps(BASE))
    steps = [mutate(draw, files) for _ in range(draw(st.integers(1, 3)))]
    return Mutation("; ".join(steps), files)


BASE_STATE = constrained_state(BASE)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutation=mutations())
def test_mutated_fixture_never_crashes_and_blocks_when_a_constraint_changed(
    mutation: Mutation,
) -> None:
    description, files = mutation.description, mutation.files
    with tempfile.TemporaryDirectory() as tmp:
        folder = copy_fixture(Path(tmp))
        for name, data in files.items():
            write_json(folder / name, data)
        outcome, records = replay_dir(folder)
    result = json.loads(records.result_bytes)
    assert result["status"] in ("pass", "blocked")
    assert result["status"] == outcome.status
    assert result["body_in_receipt"] is False
    if constrained_state(files) != BASE_STATE:
        assert result["status"] == "blocked", description
