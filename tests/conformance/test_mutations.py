"""No mutant of the original-convention folders that breaks a rule of FORMAT ever passes.

Each mutation below breaks a rule the format states (a required field deleted or of the
wrong type, a required flag flipped, a declared verdict changed away from the derived
one, an execution flipped, a row repeated so that a join is ambiguous, a sentinel
planted): whatever else the mutant holds, the replay must block it. The rules are
written out here from FORMAT.md, not read from the code under test.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import replay_dir
from sandbox_replay import InputMode

from .cases import (
    LIST_KEYS,
    ORIGINAL_BUNDLE,
    ORIGINAL_FIXTURE,
    SENTINELS,
    edit_object,
    edit_rows,
    first_body,
    read,
    refresh_module,
)

TEXT, FLAG_TRUE, FLAG_FALSE, BOOL, COUNT, REFS = "text", True, False, "bool", "count", "refs"
# FORMAT section 1: each list file's required fields and what each must be.
ROW_RULES: dict[str, dict[str, Any]] = {
    "action_requests.json": {
        **dict.fromkeys(
            (
                "request_id",
                "episode_id",
                "action_kind",
                "normalized_action_ref",
                "source_trust_label",
                "untrusted_tool_output_ref",
                "requested_capability",
                "risk_class",
                "intended_side_effect_ref",
            ),
            TEXT,
        ),
        "body_redacted": FLAG_TRUE,
        "secret_like_data_synthetic": FLAG_TRUE,
        "raw_payload_exported": FLAG_FALSE,
        "live_network_target": FLAG_FALSE,
    },
    "policy_verdicts.json": {
        **dict.fromkeys(("request_id", "policy_version", "verdict", "decision_reason_ref"), TEXT),
        "rule_refs": REFS,
        "pre_execution": FLAG_TRUE,
        "body_redacted": FLAG_TRUE,
    },
    "side_effect_receipts.json": {
        **dict.fromkeys(
            (
                "request_id",
                "filesystem_diff_ref",
                "network_diff_ref",
                "database_diff_ref",
                "rollback_receipt_ref",
            ),
            TEXT,
        ),
        "execution_attempted": BOOL,
        "side_effect_diff_count": COUNT,
        "body_redacted": FLAG_TRUE,
    },
    "rollback_receipts.json": {
        **dict.fromkeys(("rollback_id", "request_id", "rollback_command_ref"), TEXT),
        "rollback_required": FLAG_TRUE,
        "rollback_verified": FLAG_TRUE,
        "body_redacted": FLAG_TRUE,
    },
    "cold_replay.json": {
        **dict.fromkeys(("replay_id", "request_id", "replay_command", "receipt_ref"), TEXT),
        "verdict_reproduced": FLAG_TRUE,
        "side_effect_state_reproduced": FLAG_TRUE,
        "pass_label": FLAG_TRUE,
        "body_redacted": FLAG_TRUE,
    },
}
# Values of another JSON type than each rule allows.
WRONG_TYPES: dict[Any, list[Any]] = {
    TEXT: [7, None, ["x"], {"ref": "x"}, True, ""],
    FLAG_TRUE: ["true", 1, None, False],
    FLAG_FALSE: ["false", 0, None, True],
    BOOL: ["true", 1, None, [True]],
    COUNT: ["1", 1.5, None, True, -1],
    REFS: ["rule:no_live_network_from_untrusted_context", [], [7], None],
}
PROTOCOL_FALSE_FLAGS = (
    "body_in_receipt",
    "copied_credential_or_account_bound_source",
    "exports_secret_or_live_access_material",
    "exports_executable_payloads",
    "authorizes_live_network",
    "authorizes_sandbox_escape",
)
POLICY_FALSE_FLAGS = (
    "live_secret_handling_authorized",
    "live_network_access_authorized",
    "host_filesystem_mutation_authorized",
    "tool_output_expands_authority",
    "executable_payload_export_authorized",
    "security_benchmark_claim_authorized",
    "provider_calls_authorized",
    "release_authorized",
)
VERDICTS = ("allow", "warn", "block", "review")
BASES = {InputMode.FIXTURE: ORIGINAL_FIXTURE, InputMode.BUNDLE: ORIGINAL_BUNDLE}
# Both bases hold the same rows.
ROW_COUNTS = {name: len(read(ORIGINAL_FIXTURE / name)[key]) for name, key in LIST_KEYS.items()}
Mutate = Callable[[Path], None]
# What a mutation changes (file, row, field), so that no two mutations of one example
# touch one place and undo each other; a label for the failure message; the change.
Mutation = tuple[tuple[Any, ...], str, Mutate]


def _row_edit(name: str, at: int, change: Callable[[dict[str, Any]], None]) -> Mutate:
    def edit(folder: Path) -> None:
        edit_rows(folder, name, lambda rows: change(rows[at]))

    return edit


@st.composite
def row_mutations(draw: st.DrawFn) -> Mutation:
    name = draw(st.sampled_from(sorted(ROW_RULES)))
    at = draw(st.integers(0, ROW_COUNTS[name] - 1))
    rules = ROW_RULES[name]
    field = draw(st.sampled_from(sorted(rules)))
    kind = draw(st.sampled_from(["delete", "retype", "flip"]))
    target = (name, at, field)
    if kind == "delete":
        label = f"delete {name}[{at}].{field}"
        return target, label, _row_edit(name, at, lambda row: row.pop(field))
    if kind == "retype" or rules[field] in (TEXT, COUNT, REFS):
        value = draw(st.sampled_from(WRONG_TYPES[rules[field]]))
        label = f"set {name}[{at}].{field} = {value!r}"
        return target, label, _row_edit(name, at, lambda row: row.__setitem__(field, value))
    # A flag or a bool flipped: a required flag breaks its floor; an execution flipped
    # contradicts the verdict the request derives to.
    label = f"flip {name}[{at}].{field}"
    return target, label, _row_edit(name, at, lambda row: row.__setitem__(field, not row[field]))


@st.composite
def verdict_flips(draw: st.DrawFn) -> Mutation:
    name = "policy_verdicts.json"
    at = draw(st.integers(0, ROW_COUNTS[name] - 1))
    verdict = draw(st.sampled_from(VERDICTS))

    def flip(row: dict[str, Any]) -> None:
        row["verdict"] = verdict if verdict != row["verdict"] else "warn"

    return (name, at, "verdict"), f"declare {name}[{at}] {verdict}", _row_edit(name, at, flip)


@st.composite
def duplicates(draw: st.DrawFn) -> Mutation:
    name = draw(st.sampled_from(sorted(LIST_KEYS)))
    at = draw(st.integers(0, ROW_COUNTS[name] - 1))

    def edit(folder: Path) -> None:
        edit_rows(folder, name, lambda rows: rows.append(dict(rows[at])))

    return (name, "repeat"), f"repeat {name}[{at}]", edit


@st.composite
def planted_sentinels(draw: st.DrawFn) -> Mutation:
    token = draw(st.sampled_from(sorted(SENTINELS)))
    name = draw(st.sampled_from(sorted(ROW_RULES)))
    at = draw(st.integers(0, ROW_COUNTS[name] - 1))
    field = draw(st.sampled_from([f for f, rule in ROW_RULES[name].items() if rule == TEXT]))
    label = f"plant {token} in {name}[{at}].{field}"
    plant = _row_edit(name, at, lambda row: row.__setitem__(field, f"{row[field]}/{token}"))
    return (name, at, field), label, plant


@st.composite
def object_mutations(draw: st.DrawFn) -> Mutation:
    which = draw(st.sampled_from(["protocol_flag", "policy_flag", "unverified_import"]))
    if which == "protocol_flag":
        flag = draw(st.sampled_from(PROTOCOL_FALSE_FLAGS))
        value = draw(st.sampled_from([True, None, "false"]))
        return (
            ("projection_protocol.json", flag),
            f"projection_protocol.{flag} = {value!r}",
            lambda folder: edit_object(folder, "projection_protocol.json", **{flag: value}),
        )
    if which == "policy_flag":
        flag = draw(st.sampled_from(POLICY_FALSE_FLAGS))
        return (
            ("sandbox_policy.json", flag),
            f"sandbox_policy.{flag} = true",
            lambda folder: edit_object(folder, "sandbox_policy.json", **{flag: True}),
        )
    status = draw(st.sampled_from(["pending", "", None, "VERIFIED"]))
    return (
        ("projection_protocol.json", "body_import_verification"),
        f"verification_status = {status!r}",
        lambda folder: edit_object(
            folder,
            "projection_protocol.json",
            body_import_verification={"verification_status": status},
        ),
    )


@st.composite
def bundle_mutations(draw: st.DrawFn) -> Mutation:
    token = draw(st.sampled_from(sorted(SENTINELS)))
    where = draw(st.sampled_from(["body", "manifest"]))
    if where == "body":
        return (
            (where,),
            f"plant {token} in a copied body",
            lambda folder: refresh_module(folder, 0, first_body(folder) + token.encode("ascii")),
        )
    return (
        (where,),
        f"plant {token} in the bundle manifest",
        lambda folder: edit_object(folder, "bundle_manifest.json", exporter_ref=token),
    )


MUTATIONS = st.one_of(
    row_mutations(), verdict_flips(), duplicates(), planted_sentinels(), object_mutations()
)


def _replays_blocked(mode: InputMode, mutations: list[Mutation]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "run"
        shutil.copytree(BASES[mode], folder)
        for _, _, mutate in mutations:
            mutate(folder)
        outcome, records = replay_dir(folder, mode)
        described = "; ".join(label for _, label, _ in mutations)
        assert records.result["status"] == "blocked", f"a mutant passed: {described}"
        assert not outcome.passed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mode=st.sampled_from(list(BASES)),
    mutations=st.lists(MUTATIONS, min_size=1, max_size=3, unique_by=lambda m: m[0]),
)
def test_no_mutant_that_breaks_a_rule_passes(mode: InputMode, mutations: list[Mutation]) -> None:
    _replays_blocked(mode, mutations)


@settings(max_examples=30, deadline=None)
@given(mutation=bundle_mutations())
def test_no_bundle_mutant_with_a_planted_sentinel_passes(mutation: Mutation) -> None:
    _replays_blocked(InputMode.BUNDLE, [mutation])


def test_the_unmutated_folders_pass() -> None:
    # The property above would be empty if the bases themselves blocked.
    for mode, folder in BASES.items():
        outcome, _ = replay_dir(folder, mode)
        assert outcome.passed, folder.name
    assert read(ORIGINAL_BUNDLE / "expected.json")["status"] == "pass"
