"""The benchmark's bundle generator: valid bundles, failing rows on request, same bytes per seed."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from sandbox_replay.checks.pipeline import ReplayConfig, replay
from sandbox_replay.load.run import InputMode
from sandbox_replay.model.policy import default_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from generate_bundle import generate


def _digests(folder: Path) -> dict[str, str]:
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_clean_bundle_passes_with_every_risk_class(tmp_path: Path) -> None:
    bundle = generate(tmp_path / "clean", 120, seed=1)
    outcome = replay(ReplayConfig(bundle, InputMode.BUNDLE))
    assert outcome.passed, [f.error_code for f in outcome.findings]
    classes = {request.risk_class for request in outcome.run.requests}
    assert classes == set(default_table().rules)
    assert len(outcome.run.requests) == 120
    assert outcome.modules is not None and outcome.modules.status == "pass"


def test_failing_fraction_blocks_with_the_planted_codes(tmp_path: Path) -> None:
    bundle = generate(tmp_path / "failing", 600, seed=2, failing_fraction=0.2)
    outcome = replay(ReplayConfig(bundle, InputMode.BUNDLE))
    assert not outcome.passed
    found = {f.error_code for f in outcome.findings}
    assert {
        "SANDBOX_POLICY_VERDICT_SEMANTIC_MISMATCH",
        "SANDBOX_POLICY_BLOCKED_ACTION_EXECUTED",
        "SANDBOX_POLICY_ROLLBACK_RECEIPT_MISSING",
        "SANDBOX_POLICY_VERDICT_MISSING",
        "SANDBOX_POLICY_ACTION_POLICY_SHAPE_MISMATCH",
    } <= found


def test_same_arguments_give_the_same_bytes(tmp_path: Path) -> None:
    first = _digests(generate(tmp_path / "a", 300, seed=5, failing_fraction=0.1))
    second = _digests(generate(tmp_path / "b", 300, seed=5, failing_fraction=0.1))
    other = _digests(generate(tmp_path / "c", 300, seed=6, failing_fraction=0.1))
    assert first == second
    assert first["action_requests.json"] != other["action_requests.json"]


def test_rows_are_strict_json_with_one_row_per_request(tmp_path: Path) -> None:
    bundle = generate(tmp_path / "rows", 50, seed=3)
    rows = json.loads((bundle / "action_requests.json").read_text())["action_requests"]
    assert len({row["request_id"] for row in rows}) == 50


def test_too_few_requests_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        generate(tmp_path / "tiny", 5, seed=0)
