"""The gap headline reads the record's row lists by column, with what a hostile row holds."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import orjson

from conftest import REPO
from sandbox_replay.checks.pipeline import ReplayConfig, replay
from sandbox_replay.load.run import InputMode
from sandbox_replay.records.build import build_records
from sandbox_replay.records.headline import gap_headline

sys.path.insert(0, str(REPO / "benchmarks"))

from generate_bundle import generate


def _edit(folder: Path, name: str, key: str, change: Any) -> None:
    path = folder / f"{name}.json"
    data = json.loads(path.read_text())
    change(data[key])
    path.write_text(json.dumps(data))


def _all_allow(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        row["verdict"] = "allow"


def _block_ids(folder: Path) -> list[str]:
    """Return the requests that derive block against a declared verdict, in row order."""
    record = orjson.loads(
        build_records(replay(ReplayConfig(folder, InputMode.BUNDLE))).result_bytes
    )
    return [
        row["request_id"]
        for row in record["derived_policy_verdict_rows"]
        if row["derived_verdict"] == "block" and not row["policy_derivation_passed"]
    ]


def test_headline_of_lazy_rows_equals_that_of_the_written_record(tmp_path: Path) -> None:
    folder = tmp_path / "bundle"
    generate(folder, 30, seed=4, failing_fraction=0.2)
    _edit(folder, "policy_verdicts", "policy_verdicts", _all_allow)
    block_ids = _block_ids(folder)
    assert len(block_ids) >= 3

    def executed_with_odd_values(rows: list[dict[str, Any]]) -> None:
        for row in rows:
            row["execution_attempted"] = True
            row["side_effect_diff_count"] = 2
            if row["request_id"] == block_ids[0]:
                row["request_id"] = ["not", "hashable"]  # names no request
            elif row["request_id"] == block_ids[1]:
                row["side_effect_diff_count"] = True  # executed, but not a count

    _edit(folder, "side_effect_receipts", "side_effect_receipts", executed_with_odd_values)
    records = build_records(replay(ReplayConfig(folder, InputMode.BUNDLE)))
    lazy = gap_headline(records.result)
    assert lazy == gap_headline(orjson.loads(records.result_bytes))
    blocked = [gap for gap in lazy.gaps if "to block" in gap]
    assert len(blocked) == 1, lazy.text
    assert blocked[0].startswith(f"{len(block_ids)} declared allow derive to block")
    assert blocked[0].endswith(f"and left {2 * (len(block_ids) - 2)} side effects"), blocked[0]


def _headline(folder: Path) -> str:
    record = orjson.loads(
        build_records(replay(ReplayConfig(folder, InputMode.BUNDLE))).result_bytes
    )
    return gap_headline(record).text


def test_a_run_with_no_recorded_decision_says_so_first(tmp_path: Path) -> None:
    folder = tmp_path / "bundle"
    generate(folder, 9, seed=4)
    _edit(folder, "policy_verdicts", "policy_verdicts", lambda rows: rows.clear())
    text = _headline(folder)
    assert text.startswith("The harness recorded no policy decision for 9 of 9 calls; ")
    # The missing verdict rows are that one gap, not listed again.
    assert "no verdict row" not in text


def test_a_run_missing_some_decisions_names_them_as_before(tmp_path: Path) -> None:
    folder = tmp_path / "bundle"
    generate(folder, 9, seed=4)
    _edit(folder, "policy_verdicts", "policy_verdicts", lambda rows: rows.pop())
    text = _headline(folder)
    assert "recorded no policy decision" not in text
    assert "1 request has no verdict row" in text
