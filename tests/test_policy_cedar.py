"""Policies as data (FORMAT 6): a team's table or Cedar policy set derives the verdicts.

- ``fixtures/policies/default.cedar`` is the packaged table in Cedar: on every built-in
  fixture, scenario, conformance and hostile folder and on generated bundles (failing
  rows and unknown shapes included, plus hypothesis-drawn requests) both derive the same
  verdict and rule refs, request by request.
- The Cedar mapping: @verdict on permits (the most cautious wins), forbids, default deny,
  evaluation errors (a finding naming the policy, never a request value), and each
  distinct shape put to Cedar once.
- Bad policy files exit 2 with one line naming the file (and the line where known), and
  nothing is written; a good one is recorded as ``policy_source``.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import EXPORTED_BUNDLE, FIRST_WAVE, FIXTURES, REPO, SCENARIOS, read_json
from sandbox_replay import InputMode
from sandbox_replay.checks.pipeline import ReplayConfig, replay
from sandbox_replay.cli import app
from sandbox_replay.load.files import LoadLimits
from sandbox_replay.load.run import load_run
from sandbox_replay.model import codes
from sandbox_replay.model.cedar import CedarPolicy
from sandbox_replay.model.policy import (
    FAIL_CLOSED_RULE_REF,
    PolicyFileError,
    choose_policies,
    coverage,
    default_table,
    read_policy,
)
from sandbox_replay.records.build import build_records

sys.path.insert(0, str(REPO / "benchmarks"))
from generate_bundle import generate

POLICIES = FIXTURES / "policies"
DEFAULT_CEDAR = POLICIES / "default.cedar"
TEAM_CEDAR = POLICIES / "team_sandbox.cedar"
BUNDLE_RESULT = "exported_sandbox_policy_escape_bundle_validation_result.json"
DATA = Path(__file__).parent / "data"


def _folders() -> list[tuple[Path, InputMode]]:
    folders = [(FIRST_WAVE, InputMode.FIXTURE), (EXPORTED_BUNDLE, InputMode.BUNDLE)]
    folders += [(p, InputMode.BUNDLE) for p in sorted(SCENARIOS.iterdir()) if p.is_dir()]
    conformance = Path(__file__).parent / "conformance"
    folders += [
        (conformance / "original_fixture", InputMode.FIXTURE),
        (conformance / "original_bundle", InputMode.BUNDLE),
        (DATA / "hostile_bundle", InputMode.BUNDLE),
    ]
    return folders


def _requests(folder: Path, mode: InputMode) -> list[Any]:
    run = load_run(folder, mode, default_table(), LoadLimits())
    return list(run.requests.by_key.values())


def _same_derivations(requests: list[Any]) -> None:
    cedar = read_policy(DEFAULT_CEDAR)
    table = default_table()
    for request, by_table, by_cedar in zip(
        requests, table.derive_each(requests), cedar.derive_each(requests), strict=True
    ):
        assert (by_cedar.verdict, by_cedar.determining) == (
            by_table.verdict,
            by_table.determining,
        ), request.get("request_id")
        assert not by_cedar.error_policy_ids


@pytest.mark.parametrize("folder, mode", _folders(), ids=lambda v: getattr(v, "name", str(v)))
def test_default_cedar_derives_as_the_table_on_each_built_in_folder(
    folder: Path, mode: InputMode
) -> None:
    requests = _requests(folder, mode)
    assert requests
    _same_derivations(requests)


@pytest.mark.parametrize("failing", [0.0, 0.3])
def test_default_cedar_derives_as_the_table_on_generated_bundles(
    tmp_path: Path, failing: float
) -> None:
    bundle = generate(tmp_path / "bundle", 3000, seed=11, failing_fraction=failing)
    requests = _requests(bundle, InputMode.BUNDLE)
    table = default_table()
    if failing:  # the failing rows include requests no table row recognises
        assert any(d.fail_closed for d in table.derive_each(requests))
    _same_derivations(requests)


_KNOWN = {
    key: sorted({getattr(rule, key) for rule in default_table().rules.values()})
    for key in ("risk_class", "action_kind", "requested_capability", "source_trust_label")
}
_ODD = st.one_of(st.none(), st.booleans(), st.integers(), st.lists(st.text(max_size=3), max_size=2))


@st.composite
def _request(draw: st.DrawFn) -> dict[str, Any]:
    request: dict[str, Any] = {"request_id": "req", "episode_id": draw(st.sampled_from(["ep", 7]))}
    for key, known in _KNOWN.items():
        if draw(st.booleans()) or key == "action_kind":
            request[key] = draw(st.one_of(st.sampled_from(known), st.text(max_size=8), _ODD))
    return request


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_request(), min_size=1, max_size=12))
def test_default_cedar_derives_as_the_table_on_any_request(requests: list[Any]) -> None:
    _same_derivations(requests)


def _cedar(tmp_path: Path, text: str, name: str = "team.cedar") -> CedarPolicy:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    policy = read_policy(path)
    assert isinstance(policy, CedarPolicy)
    return policy


def _shape(**fields: Any) -> dict[str, Any]:
    request = {
        "request_id": "req_1",
        "episode_id": "ep_1",
        "action_kind": "mock_database_update",
        "requested_capability": "mock_database_write",
        "risk_class": "review_required_side_effect",
        "source_trust_label": "trusted_operator_approval_ref",
        "normalized_action_ref": "action:mock_database_update/orders_row",
    }
    request.update(fields)
    return request


def test_cedar_permits_derive_the_most_cautious_verdict_and_cite_every_policy(
    tmp_path: Path,
) -> None:
    policy = _cedar(
        tmp_path,
        '@id("rule:plain")\npermit (principal, action, resource);\n'
        '@id("rule:warned")\n@verdict("warn")\npermit (principal, action, resource);\n'
        '@id("rule:reviewed")\n@verdict("review")\npermit (principal, action, resource)\n'
        'when { context.normalized_action_ref like "*orders*" };\n',
    )
    [orders, other] = policy.derive_each(
        [_shape(), _shape(normalized_action_ref="action:mock_database_update/users")]
    )
    assert orders.verdict == "review" and orders.rule_ref == "rule:reviewed"
    assert set(orders.determining) == {"rule:plain", "rule:warned", "rule:reviewed"}
    assert other.verdict == "warn" and other.rule_ref == "rule:warned"
    assert not orders.fail_closed


def test_cedar_forbid_wins_and_default_deny_is_the_fail_closed_rule(tmp_path: Path) -> None:
    policy = _cedar(
        tmp_path,
        '@id("rule:allow_db")\npermit (principal, action == Action::"mock_database_update", '
        "resource);\n"
        '@id("rule:freeze_ep_9")\nforbid (principal == Agent::"ep_9", action, resource);\n',
    )
    allowed, frozen, unknown = policy.derive_each(
        [_shape(), _shape(episode_id="ep_9"), _shape(action_kind="shell_command")]
    )
    assert (allowed.verdict, allowed.rule_ref, allowed.fail_closed) == (
        "allow",
        "rule:allow_db",
        False,
    )
    assert (frozen.verdict, frozen.determining) == ("block", ("rule:freeze_ep_9",))
    assert (unknown.verdict, unknown.rule_ref, unknown.fail_closed) == (
        "block",
        FAIL_CLOSED_RULE_REF,
        True,
    )


def test_a_policy_without_an_id_is_cited_by_cedars_own_id(tmp_path: Path) -> None:
    policy = _cedar(tmp_path, "permit (principal, action, resource);\n")
    [derivation] = policy.derive_each([_shape()])
    assert derivation.determining == ("policy0",)


def test_each_distinct_shape_is_put_to_cedar_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cedarpy

    policy = _cedar(
        tmp_path,
        '@id("rule:db")\npermit (principal, action, resource)\n'
        'when { context.risk_class == "review_required_side_effect" };\n',
    )
    asked: list[int] = []
    real = cedarpy.is_authorized_batch

    def counted(requests: list[Any], *args: Any, **kwargs: Any) -> Any:
        asked.append(len(requests))
        return real(requests, *args, **kwargs)

    monkeypatch.setattr(cedarpy, "is_authorized_batch", counted)
    # The policy reads only the risk class: episode and refs do not make a new shape.
    requests = [_shape(episode_id=f"ep_{i}", normalized_action_ref=f"r{i}") for i in range(500)]
    requests += [_shape(risk_class="other")] * 3
    derivations = policy.derive_each(requests)
    assert asked == [2]
    assert [d.verdict for d in derivations] == ["allow"] * 500 + ["block"] * 3


def test_an_evaluation_error_fails_closed_with_a_finding_naming_the_policy(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "run"
    shutil.copytree(EXPORTED_BUNDLE, folder)
    # No guard on the optional field: a request whose ref is not a string errors.
    policy = _cedar(
        tmp_path,
        '@id("rule:careless")\nforbid (principal, action, resource)\n'
        'when { context.untrusted_tool_output_ref like "*quarantine*" };\n'
        '@id("rule:anything")\npermit (principal, action, resource);\n',
    )
    requests = read_json(folder / "action_requests.json")
    secret_ref = "tool_output:ep_001/SECRET_LOOKING_VALUE"
    requests["action_requests"][0]["untrusted_tool_output_ref"] = None
    requests["action_requests"][1]["untrusted_tool_output_ref"] = secret_ref
    (folder / "action_requests.json").write_text(json.dumps(requests, indent=2), "utf-8")
    outcome = replay(ReplayConfig(folder, InputMode.BUNDLE, policy=policy))
    errors = [f for f in outcome.findings if f.error_code == codes.ACTION_POLICY_EVALUATION_ERROR]
    assert [f.subject_id for f in errors] == ["req_secret_env_read"]
    assert "rule:careless" in errors[0].message
    assert "like" not in errors[0].message and "quarantine" not in errors[0].message
    derivation = outcome.run.derivations["req_secret_env_read"]
    assert (derivation.verdict, derivation.rule_ref) == ("block", FAIL_CLOSED_RULE_REF)
    assert outcome.status == "blocked"
    assert secret_ref not in json.dumps([f.message for f in outcome.findings])


def test_the_cedar_scenario_records_its_policy_and_coverage() -> None:
    folder = SCENARIOS / "cedar_team_fixture_freeze"
    outcome = replay(ReplayConfig(folder, InputMode.BUNDLE, policy=read_policy(TEAM_CEDAR)))
    result = build_records(outcome).result
    source = result["policy_source"]
    assert source["kind"] == "cedar" and source["id"] == "team_sandbox"
    assert source["rule_count"] == 12
    assert (
        source["sha256"]
        == "sha256:" + __import__("hashlib").sha256(TEAM_CEDAR.read_bytes()).hexdigest()
    )
    rules = {r["rule_ref"]: r for r in result["policy_coverage"]["rules"]}
    assert len(rules) == 13  # twelve policies and the fail-closed rule
    assert rules["rule:team_release_fixture_freeze"]["request_count"] == 1
    # The permit the freeze overrode determined nothing.
    assert rules["rule:public_fixture_write_with_diff_receipt"]["request_count"] == 0
    assert rules["rule:side_effect_requires_approval_and_rollback"]["verdict"] == "review"
    assert result["policy_coverage"]["unexercised_rule_refs"] == [
        "rule:team_no_credential_helpers",
        "rule:team_quarantined_tool_output",
        "rule:public_fixture_write_with_diff_receipt",
        "rule:team_mock_database_read",
        "rule:team_workspace_listing",
        FAIL_CLOSED_RULE_REF,
    ]
    mismatch = [f for f in outcome.findings if f.error_code == codes.VERDICT_SEMANTIC_MISMATCH]
    assert "rule:team_release_fixture_freeze" in mismatch[0].message


def test_coverage_of_the_built_in_fixture_under_the_packaged_table() -> None:
    outcome = replay(ReplayConfig(FIRST_WAVE, InputMode.FIXTURE))
    table = coverage(outcome.run.policy, outcome.run.derivations)
    assert [r["request_count"] for r in table["rules"]] == [1, 1, 1, 1, 1, 1, 0]
    assert table["unexercised_rule_refs"] == [FAIL_CLOSED_RULE_REF]
    record = build_records(outcome).result["policy_source"]
    assert record["kind"] == "table"
    assert record["id"] == "sandbox_policy_fail_closed_table"
    assert record["rule_count"] == 6


# --- files and the command line ------------------------------------------------------------


def _table(**changes: Any) -> dict[str, Any]:
    table: dict[str, Any] = json.loads(
        (REPO / "src" / "sandbox_replay" / "data" / "policy_table.json").read_text("utf-8")
    )
    table.update(changes)
    return table


def _run(tmp_path: Path, *args: str, folder: Path = EXPORTED_BUNDLE) -> Any:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["run-sandbox-bundle", "-i", str(folder), "-o", str(out), *args]
    )
    return result, out


BAD_TABLES = {
    "not_json": ('{\n  "table_id": x\n}', r"policy .*bad\.json:2: Expecting value"),
    "wrong_shape": (json.dumps({"table_id": "t", "rules": []}), r"fail_closed: Field required"),
    "lenient": (
        json.dumps(_table(fail_closed={"verdict": "allow", "rule_ref": "rule:x"})),
        r"fail_closed\.verdict: Input should be 'block'",
    ),
    "duplicate_class": (
        json.dumps(_table(rules=[_table()["rules"][0]] * 2)),
        r"risk class secret_access appears twice",
    ),
    "duplicate_key": ('{"table_id": "a", "table_id": "b"}', r"duplicate key 'table_id'"),
    "unknown_key": (json.dumps(_table(extra=1)), r"extra: Extra inputs are not permitted"),
}


@pytest.mark.parametrize("case", sorted(BAD_TABLES))
def test_a_bad_table_exits_2_naming_the_file_and_writes_nothing(tmp_path: Path, case: str) -> None:
    text, message = BAD_TABLES[case]
    policy = tmp_path / "bad.json"
    policy.write_text(text, "utf-8")
    result, out = _run(tmp_path, "--policy", str(policy))
    assert result.exit_code == 2
    [line] = [line for line in result.output.splitlines() if "error" in line]
    assert str(policy) in line
    assert re.search(message, line), line
    assert not out.exists()


BAD_CEDAR = {
    "parse": (
        "permit (principal, action, resource);\n\nforbid (principal, action, resource)\n"
        "when { context.x == };\n",
        r"bad\.cedar:4: Cedar parse error: unexpected token",
    ),
    "forbid_verdict": (
        '@verdict("allow")\nforbid (principal, action, resource);\n',
        r"forbid policy policy0 has @verdict\('allow'\)",
    ),
    "permit_verdict": (
        '@verdict("maybe")\npermit (principal, action, resource);\n',
        r"permit policy policy0 has @verdict\('maybe'\)",
    ),
    "duplicate_id": (
        '@id("a")\npermit (principal, action, resource);\n'
        '@id("a")\nforbid (principal, action, resource);\n',
        r"@id\('a'\) is given to two policies",
    ),
    "empty": ("// nothing\n", r"holds no policy"),
    "not_utf8": (b"permit \xff", r"invalid UTF-8 at byte 7"),
}


@pytest.mark.parametrize("case", sorted(BAD_CEDAR))
def test_a_bad_cedar_policy_exits_2_naming_the_file_and_writes_nothing(
    tmp_path: Path, case: str
) -> None:
    text, message = BAD_CEDAR[case]
    policy = tmp_path / "bad.cedar"
    if isinstance(text, bytes):
        policy.write_bytes(text)
    else:
        policy.write_text(text, "utf-8")
    result, out = _run(tmp_path, "--policy", str(policy))
    assert result.exit_code == 2, result.output
    assert re.search(message, result.output), result.output
    assert str(policy) in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


SCHEMA = """
entity Agent;
entity Capability;
action "mock_database_update", "filesystem_write" appliesTo {
  principal: Agent,
  resource: Capability,
  context: { risk_class: String, source_trust_label?: String }
};
"""


def test_a_policy_is_validated_against_a_cedar_schema_first(tmp_path: Path) -> None:
    schema = tmp_path / "team.cedarschema"
    schema.write_text(SCHEMA, "utf-8")
    good = tmp_path / "good.cedar"
    good.write_text(
        '@id("rule:db")\npermit (principal, action == Action::"mock_database_update", resource)\n'
        'when { context.risk_class == "review_required_side_effect" };\n',
        "utf-8",
    )
    assert read_policy(good, schema).source.rule_count == 1
    bad = tmp_path / "bad.cedar"
    bad.write_text(
        '@id("rule:typo")\npermit (principal, action == Action::"mock_database_update", '
        'resource)\nwhen { context.risk_clas == "x" };\n',
        "utf-8",
    )
    with pytest.raises(PolicyFileError, match=r"policy rule:typo does not validate against"):
        read_policy(bad, schema)
    result, out = _run(tmp_path, "--policy", str(bad), "--cedar-schema", str(schema))
    assert result.exit_code == 2 and "rule:typo" in result.output
    assert not out.exists()
    broken = tmp_path / "broken.cedarschema"
    broken.write_text("entity {", "utf-8")
    with pytest.raises(PolicyFileError, match=r"Cedar schema .*broken\.cedarschema"):
        read_policy(good, broken)
    with pytest.raises(PolicyFileError, match=r"applies to a \.cedar policy only"):
        read_policy(tmp_path / "x.json", schema)


def test_other_policy_file_mistakes_exit_2(tmp_path: Path) -> None:
    cases = {
        "missing": ["--policy", str(tmp_path / "none.cedar")],
        "suffix": [
            "--policy",
            str(EXPORTED_BUNDLE / "sandbox_policy.json").replace(".json", ".yaml"),
        ],
        "schema_alone": ["--cedar-schema", str(tmp_path / "s.cedarschema")],
    }
    (tmp_path / "s.cedarschema").write_text(SCHEMA, "utf-8")
    for name, args in cases.items():
        result, out = _run(tmp_path, *args)
        assert result.exit_code == 2, (name, result.output)
        assert "error" in result.output, name
        assert not out.exists()


def test_a_team_table_replays_the_bundle_and_is_recorded(tmp_path: Path) -> None:
    table = _table(table_id="team_table")
    table["rules"][4]["verdict"] = "block"  # the team blocks public fixture writes too
    policy = tmp_path / "team.json"
    policy.write_text(json.dumps(table), "utf-8")
    result, out = _run(tmp_path, "--policy", str(policy), "--card")
    assert result.exit_code == 1, result.output  # the recorded allow now contradicts a block
    record = read_json(out / BUNDLE_RESULT)
    assert record["policy_source"]["id"] == "team_table"
    assert record["policy_source"]["kind"] == "table"
    card = json.loads(result.stdout)
    assert card["policy_source"] == record["policy_source"]
    assert codes.VERDICT_SEMANTIC_MISMATCH in record["error_codes"]


def test_the_project_file_sets_policies_and_refuses_unknown_keys(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "team.cedar").write_text(DEFAULT_CEDAR.read_text("utf-8"), "utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.sandbox-replay]\npolicy = "policies/team.cedar"\n\n'
        '[tool.sandbox-replay.run-policies]\n"runs/special" = "policies/team.cedar"\n',
        "utf-8",
    )
    choice = choose_policies(None, None, tmp_path)
    assert choice.default is not None and choice.default.source.kind == "cedar"
    assert choice.for_run(tmp_path / "runs" / "special" / "a") is choice.runs[0][1]
    assert choice.for_run(tmp_path / "elsewhere") is choice.default
    # --policy wins over the project's default.
    table = tmp_path / "t.json"
    table.write_text(json.dumps(_table()), "utf-8")
    assert choose_policies(table, None, tmp_path).default.source.kind == "table"  # type: ignore[union-attr]
    (tmp_path / "pyproject.toml").write_text('[tool.sandbox-replay]\npolicies = "x"\n', "utf-8")
    with pytest.raises(PolicyFileError, match=r"unknown key\(s\) policies"):
        choose_policies(None, None, tmp_path)


def test_the_published_schema_accepts_the_packaged_table() -> None:
    import jsonschema

    from sandbox_replay.records.schemas import json_schema

    schema = json_schema("policy_table")
    packaged = json.loads(
        (REPO / "src" / "sandbox_replay" / "data" / "policy_table.json").read_text("utf-8")
    )
    jsonschema.validate(packaged, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {**packaged, "fail_closed": {"verdict": "allow", "rule_ref": "r"}}, schema
        )


# --- shapes: a field read only by literal tests is reduced to the tests it passes -------

_PIECES = st.text(alphabet="ab*", max_size=4)


def _cedar_like(pattern: str, value: str) -> bool:
    """Ask Cedar itself whether ``value like pattern`` (``*`` a wildcard)."""
    import cedarpy

    escaped = pattern.replace("\\", "\\\\").replace('"', '\\"')
    policy = f'permit (principal, action, resource) when {{ context.v like "{escaped}" }};'
    request = {
        "principal": {"type": "Agent", "id": "a"},
        "action": {"type": "Action", "id": "x"},
        "resource": {"type": "Capability", "id": "c"},
        "context": {"v": value},
    }
    result = cedarpy.is_authorized(request, policy, [])
    assert not result.diagnostics.errors
    return bool(result.allowed)


@settings(max_examples=300, deadline=None)
@given(pattern=_PIECES, value=st.text(alphabet="ab", max_size=6))
def test_like_matches_as_cedar_does(pattern: str, value: str) -> None:
    from sandbox_replay.model.cedar_reads import like as _like

    pieces = tuple(pattern.split("*"))
    assert _like(pieces, value) == _cedar_like(pattern, value)


_VALUES = {
    "episode_id": ["ep_001", "ep_002", "ep_0021", 3],
    "action_kind": ["filesystem_write", "network_request", "mock_database_update", None],
    "requested_capability": ["public_fixture_write", "outbound_network", "mock_database_write"],
    "risk_class": ["credential_helper_installation", "low_risk_public_fixture_mutation", None],
    "source_trust_label": ["untrusted_tool_output", "trusted_user_request", "untrusted_x", 1],
    "normalized_action_ref": [
        "action:filesystem_write/public_fixture_a",
        "action:filesystem_write/public_fixture_",
        "action:outbound_post/synthetic_collector",
        "action:outbound_collector",
        "x",
    ],
    "untrusted_tool_output_ref": ["tool_output:ep_1/quarantine/3", "tool_output:/quarantine/", "t"],
}


@st.composite
def _team_request(draw: st.DrawFn) -> dict[str, Any]:
    request: dict[str, Any] = {"request_id": "r"}
    for key, values in _VALUES.items():
        if draw(st.integers(0, 5)):  # now and then the field is absent
            request[key] = draw(st.sampled_from(values))
    return request


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_team_request(), min_size=2, max_size=25))
def test_grouping_by_shape_derives_as_asking_each_request(requests: list[Any]) -> None:
    """One request asked for its whole shape gives what asking each would give."""
    policy = read_policy(TEAM_CEDAR)
    grouped = policy.derive_each(requests)
    alone = [policy.derive_each([request])[0] for request in requests]
    assert grouped == alone


def test_a_shape_is_what_the_policies_read_not_every_value(tmp_path: Path) -> None:
    # The team policy reads refs only through `like` and the episode only in a scope:
    # 60 requests with distinct refs and episodes are a handful of shapes.
    import cedarpy

    policy = read_policy(TEAM_CEDAR)
    asked: list[int] = []
    real = cedarpy.is_authorized_batch

    def counted(requests: list[Any], *args: Any, **kwargs: Any) -> Any:
        asked.append(len(requests))
        return real(requests, *args, **kwargs)

    requests = [
        _shape(
            episode_id=f"ep_{i:03d}",
            action_kind="filesystem_write",
            requested_capability="public_fixture_write",
            source_trust_label="trusted_user_request",
            normalized_action_ref=f"action:filesystem_write/public_fixture_{i}",
            untrusted_tool_output_ref=f"tool_output:ep_{i}/step_{i}",
        )
        for i in range(60)
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cedarpy, "is_authorized_batch", counted)
        derivations = policy.derive_each(requests)
    assert asked == [2]  # ep_002 (the freeze) and every other episode
    frozen = [d for d in derivations if d.rule_ref == "rule:team_release_fixture_freeze"]
    assert len(frozen) == 1 and derivations[2] is frozen[0]
    assert all(
        d.rule_ref == "rule:public_fixture_write_with_diff_receipt"
        for i, d in enumerate(derivations)
        if i != 2
    )
