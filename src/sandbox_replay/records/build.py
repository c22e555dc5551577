"""Turn a replay into the records the tool writes: result, board, receipt, acceptance, card.

File formats (all UTF-8 JSON, 2-space indent, ASCII-escaped, one trailing newline; keys
in the order built here, so equal inputs give equal bytes):

- result record: the full account of the run; FORMAT.md section 4 lists its fields.
  Row lists carry only the format's known fields of each row, scalar values
  (``recorded_rows``) and the row's ``line`` in its input file. A bundle whose manifest
  holds a ``benchmark`` object gets a ``benchmark`` section after ``bundle_id``
  (``_benchmark_record``); any other record is as before.
- board: one entry per layer (status, finding count, codes) plus the run's totals.
- validation receipt: status, error codes, the sha256 of every input and of the result
  record's bytes, so the result can be checked against its inputs later.
- acceptance record: whether the run is accepted, with each pass-rule criterion.
- card: the compact projection printed by ``--card``; it lists the keys it omitted.

When the forbidden-material scan matched anything, every string in every record that
contains a matched text is replaced by ``REDACTED`` before anything is serialised.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import msgspec

from sandbox_replay.atomic import (
    dump_json,
    iter_json_chunks,
    struct_fields,
    write_bytes_atomic,
    write_chunks_atomic,
)
from sandbox_replay.checks import harness
from sandbox_replay.checks.base import LayerResult
from sandbox_replay.checks.negative_cases import NEGATIVE_CASES
from sandbox_replay.checks.pipeline import InputFileInfo, Replay
from sandbox_replay.checks.source_modules import ModuleBody
from sandbox_replay.load.run import InputMode, RunInputs
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.policy import coverage
from sandbox_replay.records.recorded_rows import column_of as column_of  # imported from here too
from sandbox_replay.records.recorded_rows import derived_rows, record_rows
from sandbox_replay.version import TOOL_NAME, __version__

SCHEMA_VERSION = "sandbox-replay.result/1"
REDACTED = "[redacted: forbidden material]"

RESULT_FILE = "agent_sandbox_policy_escape_replay_result.json"
BOARD_FILE = "agent_sandbox_policy_escape_replay_board.json"
RECEIPT_FILE = "agent_sandbox_policy_escape_replay_validation_receipt.json"
ACCEPTANCE_FILE = "agent_sandbox_policy_escape_replay_acceptance.json"
BUNDLE_RESULT_FILE = "exported_sandbox_policy_escape_bundle_validation_result.json"
# The benchmark section's keys that are flags (``BenchmarkRecord``); the others are texts.
FLAGS = frozenset({"utility", "security", "stopped_after_tool_result"})

AUTHORITY_CEILING = {
    name: False
    for name in (
        "live_agent_execution_authorized",
        "sandbox_escape_authorized",
        "live_secret_handling_authorized",
        "secret_export_authorized",
        "live_network_access_authorized",
        "host_filesystem_mutation_authorized",
        "executable_payload_export_authorized",
        "raw_environment_export_authorized",
        "tool_output_expands_authority",
        "security_benchmark_claim_authorized",
        "provider_calls_authorized",
        "source_body_export_authorized",
        "release_authorized",
    )
}

COUNT_KEYS = (
    "action_request_count",
    "policy_verdict_count",
    "allow_count",
    "block_count",
    "review_count",
    "derived_allow_count",
    "derived_block_count",
    "derived_review_count",
    "derived_policy_verdict_mismatch_count",
    "side_effect_receipt_count",
    "executed_action_count",
    "blocked_without_execution_count",
    "rollback_receipt_count",
    "rollback_verified_count",
    "cold_replay_count",
    "cold_replay_pass_count",
    "cold_replay_confirmed_count",
)


@dataclass(frozen=True)
class RunRecords:
    """The records of one run, ready to write.

    The result record's bytes are not kept (for a large run they are as big as its
    inputs): ``result_chunks()`` yields them piece by piece, ``result_bytes`` joins them
    on first use. The receipt, which holds their digest, is built on first use too.
    """

    result: dict[str, Any]
    board: dict[str, Any]
    acceptance: dict[str, Any]
    card: dict[str, Any]
    # False when no input held a float, so the fast serialiser gives the standard bytes.
    may_hold_floats: bool = True

    @cached_property
    def receipt(self) -> dict[str, Any]:
        """Return the validation receipt (it hashes the whole result record)."""
        digest = hashlib.sha256()
        for chunk in self.result_chunks():
            digest.update(chunk)
        return build_receipt(self.result, "sha256:" + digest.hexdigest())

    def result_chunks(self) -> Iterator[bytes | memoryview]:
        """Yield the result record as written, in pieces."""
        return iter_json_chunks(self.result, may_hold_floats=self.may_hold_floats)

    @cached_property
    def result_bytes(self) -> bytes:
        """Return the result record exactly as written."""
        return b"".join(self.result_chunks())


def merged_counts(replay: Replay) -> dict[str, int]:
    """Return the layers' counts merged, each of ``COUNT_KEYS`` (0 where no layer counts it)."""
    merged: dict[str, int] = {}
    for layer in replay.layers:
        merged.update(layer.counts)
    return {key: merged.get(key, 0) for key in COUNT_KEYS}


def build_result(replay: Replay) -> dict[str, Any]:
    """Build the full result record of one replay."""
    run = replay.run
    findings = replay.findings
    fixture = run.mode is InputMode.FIXTURE
    negative = replay.negative
    modules = replay.modules
    risk_classes = sorted({r.risk_class for r in run.requests if isinstance(r.risk_class, str)})
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "status": replay.status,
        "input_mode": run.mode.value,
        "bundle_id": replay.bundle_id,
        **_benchmark_record(run),
        "expected_negative_cases": [c.case_id for c in NEGATIVE_CASES] if fixture else [],
        "observed_negative_cases": dict(negative.observed) if negative else {},
        "missing_negative_cases": list(negative.missing) if negative else [],
        "error_codes": sorted({f.error_code for f in findings}),
        "finding_count": len(findings),
        "findings": [f.to_record() for f in findings],
        "layers": [_layer_record(layer) for layer in replay.layers],
        "secret_exclusion_scan": replay.scan.to_record(),
        "authority_ceiling": dict(AUTHORITY_CEILING),
        "public_agent_execution_trace": replay.trace.to_record(),
        "risk_classes": risk_classes,
        "policy_source": run.policy.source.record(),
        "policy_coverage": coverage(run.policy, run.derivations),
        **merged_counts(replay),
        "source_module_manifest_status": modules.status if modules else "not_applicable",
        "source_modules": [_module_record(body) for body in (modules.bodies if modules else [])],
        "input_files": [_input_file_record(replay, info) for info in replay.inputs],
        "request_rows": record_rows(run.requests),
        "policy_verdict_rows": record_rows(run.verdicts),
        "derived_policy_verdict_rows": derived_rows(run),
        "side_effect_rows": record_rows(run.effects),
        "rollback_rows": record_rows(run.rollbacks),
        "cold_replay_rows": record_rows(run.replays),
        "body_in_receipt": False,
    }
    if replay.sensitivity is not None:  # only when asked: a plain record is unchanged
        record["sensitivity"] = replay.sensitivity.to_record()
    redacted: dict[str, Any] = redact(record, replay.scan.matched_texts)
    return redacted


def _benchmark_record(run: RunInputs) -> dict[str, Any]:
    """Return the ``benchmark`` section: what the benchmark said, beside what the replay saw.

    Only the manifest's null values, flags that are true/false and other keys' texts are
    kept; none without a benchmark.
    """
    benchmark = harness.benchmark_of(run)
    if benchmark is None:
        return {}
    said = {
        key: value
        for key, value in benchmark.items()
        if value is None or isinstance(value, bool if key in FLAGS else str)
    }
    escaped = harness.untrusted_executed(run)
    return {
        "benchmark": {
            **said,
            "untrusted_executed_count": len(escaped),
            "untrusted_executed": escaped,
        }
    }


def _layer_record(layer: LayerResult) -> dict[str, Any]:
    return {
        "layer": layer.layer.value,
        "title": layer.layer.label,
        "status": layer.status,
        "finding_count": len(layer.findings),
        "counts": dict(layer.counts),
    }


def _module_record(body: ModuleBody) -> dict[str, Any]:
    return {
        "module_id": body.module_id,
        "path": body.path,
        "material_class": body.material_class,
        "sha256": body.sha256,
        "size": body.size,
        "required_anchor_count": len(body.anchors),
        "verified": body.verified,
    }


def _input_file_record(replay: Replay, info: InputFileInfo) -> dict[str, Any]:
    return {
        "path": info.path,
        "kind": info.kind,
        "size": info.size,
        "sha256": info.sha256,
        "loaded": info.loaded,
        "forbidden_material_found": info.path in replay.scan.flagged_paths,
    }


def redact(value: Any, matched: Iterable[bytes]) -> Any:
    """Replace every string that contains a matched forbidden text; return ``value`` if none."""
    needles = [m.decode("utf-8", errors="ignore") for m in matched]
    needles = [n for n in needles if n]
    if not needles:
        return value

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return REDACTED if any(n in item for n in needles) else item
        if isinstance(item, dict):
            return {walk(k): walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        if isinstance(item, msgspec.Struct):
            return walk(struct_fields(item))
        return item

    return walk(value)


def build_board(result: Mapping[str, Any]) -> dict[str, Any]:
    """Build the per-layer board from a result record."""
    by_layer: dict[str, list[str]] = {}
    for finding in result["findings"]:
        by_layer.setdefault(finding["layer"], []).append(finding["error_code"])
    return {
        "schema_version": SCHEMA_VERSION,
        "status": result["status"],
        "input_mode": result["input_mode"],
        "bundle_id": result["bundle_id"],
        "layers": [
            {
                "layer": layer["layer"],
                "title": layer["title"],
                "status": layer["status"],
                "finding_count": layer["finding_count"],
                "error_codes": sorted(set(by_layer.get(layer["layer"], []))),
            }
            for layer in result["layers"]
        ],
        "totals": {key: result[key] for key in COUNT_KEYS}
        | {"finding_count": result["finding_count"]},
        "body_in_receipt": False,
    }


def build_receipt(result: Mapping[str, Any], result_sha256: str) -> dict[str, Any]:
    """Build the validation receipt: what was checked, by digest (``sha256:<hex>``)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "status": result["status"],
        "input_mode": result["input_mode"],
        "bundle_id": result["bundle_id"],
        "tool": result["tool"],
        "input_digests": {f["path"]: f["sha256"] for f in result["input_files"]},
        "result_record_sha256": result_sha256,
        "error_codes": result["error_codes"],
        "finding_count": result["finding_count"],
        "expected_negative_case_count": len(result["expected_negative_cases"]),
        "missing_negative_case_count": len(result["missing_negative_cases"]),
        "body_in_receipt": False,
    }


def build_acceptance(replay: Replay, result: Mapping[str, Any]) -> dict[str, Any]:
    """Build the acceptance record: the pass rule, criterion by criterion."""
    other_findings = sum(
        len(layer.findings) for layer in replay.layers if layer.layer is not Layer.NEGATIVE_CASES
    )
    criteria = [
        ("no_expected_negative_case_missing", not result["missing_negative_cases"]),
        ("forbidden_material_scan_clean", replay.scan.blocking_hit_count == 0),
        ("every_layer_ran", all(layer.ran for layer in replay.layers)),
        ("no_finding_outside_negative_cases", other_findings == 0),
    ]
    if replay.run.mode is InputMode.BUNDLE:
        criteria.append(
            ("source_module_manifest_passed", result["source_module_manifest_status"] == "pass")
        )
    return {
        "schema_version": SCHEMA_VERSION,
        "accepted": replay.passed,
        "status": result["status"],
        "input_mode": result["input_mode"],
        "bundle_id": result["bundle_id"],
        "criteria": [{"criterion": name, "passed": ok} for name, ok in criteria],
        "body_in_receipt": False,
    }


CARD_KEYS = ("status", "input_mode", "bundle_id", *COUNT_KEYS)


def build_card(result: Mapping[str, Any]) -> dict[str, Any]:
    """Build the compact card: headline counts, validation counts and the authority boundary."""
    trace = result["public_agent_execution_trace"]
    card: dict[str, Any] = {key: result[key] for key in CARD_KEYS}
    card["validation"] = {
        "expected_negative_case_count": len(result["expected_negative_cases"]),
        "missing_negative_cases": result["missing_negative_cases"],
        "error_codes": result["error_codes"],
        "finding_count": result["finding_count"],
        "trace_status": trace["status"],
        "span_count": trace["span_count"],
        "outcome_counts": trace["summary"]["outcome_counts"],
        "source_module_manifest_status": result["source_module_manifest_status"],
        "forbidden_material_hit_count": result["secret_exclusion_scan"]["blocking_hit_count"],
    }
    card["authority_boundary"] = result["authority_ceiling"]
    card["policy_source"] = result["policy_source"]
    shown = {
        "policy_source",
        *CARD_KEYS,
        "error_codes",
        "finding_count",
        "missing_negative_cases",
        "source_module_manifest_status",
        "authority_ceiling",
    }
    card["omitted_keys"] = [key for key in result if key not in shown]
    return card


def build_records(replay: Replay) -> RunRecords:
    """Build every record of one replay."""
    result = build_result(replay)
    # Every value in the result is the tool's own (no floats) or copied from a loaded file.
    floats = any(loaded.may_hold_floats for loaded in replay.run.all_files())
    return RunRecords(
        result=result,
        board=build_board(result),
        acceptance=build_acceptance(replay, result),
        card=build_card(result),
        may_hold_floats=floats,
    )


def write_records(
    records: RunRecords, mode: InputMode, out_dir: Path, acceptance_out: Path | None = None
) -> list[Path]:
    """Write a run's records atomically into ``out_dir``; return the paths written.

    Fixture mode writes the result, board, validation receipt and acceptance record;
    bundle mode writes the bundle validation result.
    """
    if mode is InputMode.BUNDLE:
        target = out_dir / BUNDLE_RESULT_FILE
        write_chunks_atomic(target, records.result_chunks())
        return [target]
    write_chunks_atomic(out_dir / RESULT_FILE, records.result_chunks())
    written = [
        (out_dir / BOARD_FILE, dump_json(records.board)),
        (out_dir / RECEIPT_FILE, dump_json(records.receipt)),
        (acceptance_out or out_dir / ACCEPTANCE_FILE, dump_json(records.acceptance)),
    ]
    for path, data in written:
        write_bytes_atomic(path, data)
    return [out_dir / RESULT_FILE, *(path for path, _ in written)]
