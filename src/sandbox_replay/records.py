"""Turn a replay into the records the tool writes: result, board, receipt, acceptance, card.

File formats (all UTF-8 JSON, 2-space indent, ASCII-escaped, one trailing newline; keys
in the order built here, so equal inputs give equal bytes):

- result record: the full account of the run; FORMAT.md section 4 lists its fields.
  Row lists carry only the format's known fields of each row, scalar values (longer
  strings cut at ``MAX_TEXT``) and the row's ``line`` in its input file.
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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain, compress, repeat
from operator import is_, itemgetter, length_hint
from pathlib import Path
from typing import Any

from sandbox_replay.atomic import (
    dump_json,
    iter_json_chunks,
    write_bytes_atomic,
    write_chunks_atomic,
)
from sandbox_replay.codes import Layer
from sandbox_replay.inputs import (
    ACTION_REQUESTS,
    COLD_REPLAY,
    POLICY_VERDICTS,
    ROLLBACK_RECEIPTS,
    SIDE_EFFECT_RECEIPTS,
    InputMode,
    RowRef,
    RunInputs,
)
from sandbox_replay.layers.negative_cases import NEGATIVE_CASES
from sandbox_replay.layers.rows import (
    ACTION_FIELDS,
    ACTION_FLAGS,
    EFFECT_FIELDS,
    REPLAY_FIELDS,
    REPLAY_FLAGS,
    ROLLBACK_FIELDS,
    ROLLBACK_FLAGS,
    VERDICT_FIELDS,
)
from sandbox_replay.layers.verdicts import derivation_passes
from sandbox_replay.lazyrows import LazyRows
from sandbox_replay.pipeline import Replay
from sandbox_replay.policy import Derivation, coverage
from sandbox_replay.version import TOOL_NAME, __version__

SCHEMA_VERSION = "sandbox-replay.result/1"
MAX_TEXT = 512
REDACTED = "[redacted: forbidden material]"

RESULT_FILE = "agent_sandbox_policy_escape_replay_result.json"
BOARD_FILE = "agent_sandbox_policy_escape_replay_board.json"
RECEIPT_FILE = "agent_sandbox_policy_escape_replay_validation_receipt.json"
ACCEPTANCE_FILE = "agent_sandbox_policy_escape_replay_acceptance.json"
BUNDLE_RESULT_FILE = "exported_sandbox_policy_escape_bundle_validation_result.json"

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

# The row lists copied from one input file each (``ProjectedRows``): their key, the file
# and the fields they keep.
COPIED_LISTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("request_rows", ACTION_REQUESTS, (*ACTION_FIELDS, *ACTION_FLAGS)),
    ("policy_verdict_rows", POLICY_VERDICTS, (*VERDICT_FIELDS, "approval_ref")),
    ("side_effect_rows", SIDE_EFFECT_RECEIPTS, EFFECT_FIELDS),
    ("rollback_rows", ROLLBACK_RECEIPTS, (*ROLLBACK_FIELDS, *ROLLBACK_FLAGS)),
    ("cold_replay_rows", COLD_REPLAY, (*REPLAY_FIELDS, *REPLAY_FLAGS)),
)

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

    The result record's bytes are not kept: for a large run they are as big as its
    inputs. ``result_chunks()`` yields them piece by piece (as ``write_records`` writes
    them); ``result_bytes`` joins them on first use. The receipt, which holds their
    digest, is built on first use too (bundle mode never writes it). Nor are its row
    lists and trace spans: they are ``LazyRows``, built a chunk at a time when read
    (indexing, slicing, iterating); the record as written holds plain lists.
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


def _scalar(value: Any) -> Any:
    if type(value) is str and len(value) <= MAX_TEXT:  # the common case, first
        return value
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + "...[truncated]"
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value) and len(value) <= 64:
        return [_scalar(v) for v in value]
    return f"<{type(value).__name__}>"


_KEPT_AS_IS = frozenset({bool, int, float, type(None)})
_SCALAR_KINDS = frozenset({str, *_KEPT_AS_IS})
_STR_ONLY = frozenset({str})


def _project(ref: RowRef, fields: Iterable[str]) -> dict[str, Any]:
    # ``_scalar`` of every field, with its common cases inlined: the exact projection of
    # one row, for rows the bulk check of ``project_rows`` does not clear.
    source = ref.row
    row = {}
    for name in fields:
        if name in source:
            value = source[name]
            kind = type(value)
            if kind is str:
                row[name] = value if len(value) <= MAX_TEXT else _scalar(value)
            elif kind in _KEPT_AS_IS:
                row[name] = value
            else:
                row[name] = _scalar(value)
    row["line"] = ref.line
    return row


def _kept_as_is(values: Sequence[Any]) -> bool:
    """Say whether ``_scalar`` returns every one of ``values`` unchanged (or an equal copy).

    True when each is a str of at most ``MAX_TEXT`` characters, a bool, int, float or
    None, or a list of at most 64 such strings, which ``_scalar`` copies unchanged.
    Checked in C, in one pass over the types and, for strings, one over their lengths:
    a column of one field's values is mostly of one kind, so that is all most take.
    """
    kinds = set(map(type, values))
    if kinds <= _KEPT_AS_IS:
        return True
    if kinds == _STR_ONLY:
        return max(map(len, values)) <= MAX_TEXT
    # ``length_hint`` is a str's length and 0 for the others.
    if not kinds <= _SCALAR_KINDS | {list} or max(map(length_hint, values)) > MAX_TEXT:
        return False
    if list not in kinds:
        return True
    lists = list(compress(values, map(is_, map(type, values), repeat(list))))
    items = list(chain.from_iterable(lists))
    return (
        max(map(len, lists)) <= 64
        and set(map(type, items)) <= _STR_ONLY
        and max(map(len, items), default=0) <= MAX_TEXT
    )


def _scalars(values: list[Any]) -> list[Any]:
    """Return ``[_scalar(v) for v in values]``; ``values`` itself when that changes nothing."""
    return values if _kept_as_is(values) else [_scalar(v) for v in values]


def _row_builder(names: tuple[str, ...]) -> Callable[[tuple[Any, ...], int | None], dict[str, Any]]:
    """Return ``lambda values, line: {names[i]: values[i] for each i, "line": line}``."""

    def build(values: tuple[Any, ...], line: int | None) -> dict[str, Any]:
        return dict(zip(names, values, strict=True), line=line)

    return build


def _values_getter(names: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """Return ``lambda row: tuple(row[name] for name in names)`` (for two names or more, in C)."""
    if len(names) == 1:
        name = names[0]
        return lambda row: (row[name],)
    return itemgetter(*names)


def project_rows(refs: Sequence[RowRef], names: tuple[str, ...]) -> list[dict[str, Any]]:
    """Return ``[_project(ref, names) for ref in refs]``, built in bulk when the rows allow.

    ``_project`` keeps a row's present fields in ``names`` order, each value through
    ``_scalar``, then its line. When every row holds every field (the getter raises
    otherwise) and ``_scalar`` keeps every value (``_kept_as_is``, checked field by
    field), that is exactly each row's fields copied in ``names`` order, then its line; a
    list value is then shared with the input row instead of copied (the records are only
    read). Otherwise each row is projected exactly.
    """
    try:
        values = list(map(_values_getter(names), map(itemgetter(3), refs)))  # RowRef.row
    except KeyError:
        return [_project(ref, names) for ref in refs]
    if not all(map(_kept_as_is, zip(*values, strict=True))):
        return [_project(ref, names) for ref in refs]
    return list(map(_row_builder(names), values, map(itemgetter(2), refs)))  # RowRef.line


class ProjectedRows(LazyRows):
    """The rows of one input list as the result record shows them (see ``_project``)."""

    def __init__(self, refs: Sequence[RowRef], fields: Iterable[str]) -> None:
        self.refs = refs
        self.names = tuple(dict.fromkeys(fields))  # first place of a field named twice

    def __len__(self) -> int:
        return len(self.refs)

    def build(self, start: int, stop: int) -> list[dict[str, Any]]:
        return project_rows(self.refs[start:stop], self.names)

    def rows_at(self, positions: Sequence[int]) -> list[dict[str, Any]]:
        return project_rows(list(map(self.refs.__getitem__, positions)), self.names)

    def column(self, name: str) -> list[Any]:
        """Return ``[row.get(name) for row in self]`` without building the rows.

        ``_project`` gives a row the field only when its input row holds it, as
        ``_scalar`` of its value; ``_scalar(None)`` is None, as ``get`` of a missing field.
        """
        if name == "line":
            return list(map(itemgetter(2), self.refs))  # RowRef.line
        if name not in self.names:
            return [None] * len(self.refs)
        return _scalars(list(map(dict.get, map(itemgetter(3), self.refs), repeat(name))))

    def column_at(self, positions: Sequence[int], name: str) -> list[Any]:
        """Return ``column(name)`` at ``positions`` only (read as ``column`` reads it)."""
        refs = list(map(self.refs.__getitem__, positions))
        if name == "line":
            return list(map(itemgetter(2), refs))  # RowRef.line
        if name not in self.names:
            return [None] * len(refs)
        return _scalars(list(map(dict.get, map(itemgetter(3), refs), repeat(name))))


def _counts(replay: Replay) -> dict[str, int]:
    merged: dict[str, int] = {}
    for layer in replay.layers:
        merged.update(layer.counts)
    return {key: merged.get(key, 0) for key in COUNT_KEYS}


# The derived-row fields ``DerivedRows.column`` reads without building the rows.
_DERIVED_COLUMNS = frozenset(
    {
        "derived_verdict",
        "derived_rule_ref",
        "fail_closed",
        "declared_verdict",
        "policy_derivation_passed",
    }
)


class DerivedRows(LazyRows):
    """One row per derived request: the request's shape, its derivation and its verdict."""

    def __init__(self, run: RunInputs) -> None:
        self.run = run
        self.request_ids = list(run.derivations)
        self.columns: dict[str, list[Any]] = {}
        self.verdict_rows: list[Any] | None = None

    def __len__(self) -> int:
        return len(self.request_ids)

    def build(self, start: int, stop: int) -> list[dict[str, Any]]:
        return self._rows_of(self.request_ids[start:stop])

    def rows_at(self, positions: Sequence[int]) -> list[dict[str, Any]]:
        return self._rows_of(list(map(self.request_ids.__getitem__, positions)))

    def column(self, name: str) -> list[Any]:
        """Return ``[row.get(name) for row in self]``; the verdict columns without the rows.

        Those are what a run page's headline and calibration matrix read of every row.
        """
        run = self.run
        if name == "request_id":  # each row's key: its request id
            return list(self.request_ids)
        if name not in self.columns:  # each kept: the headline and the matrix both read it
            column: list[Any]
            if name == "derived_verdict":
                column = [derivation.verdict for derivation in run.derivations.values()]
            elif name == "derived_rule_ref":
                column = [derivation.rule_ref for derivation in run.derivations.values()]
            elif name == "fail_closed":
                column = [derivation.fail_closed for derivation in run.derivations.values()]
            elif name == "declared_verdict":
                column = _scalars(list(map(_field_of, self._verdict_rows(), repeat("verdict"))))
            elif name == "policy_derivation_passed":
                derivations = run.derivations.values()
                column = list(map(derivation_passes, derivations, self._verdict_rows()))
            else:
                return super().column(name)
            self.columns[name] = column
        return list(self.columns[name])

    def column_at(self, positions: Sequence[int], name: str) -> list[Any]:
        """Return ``column(name)`` at ``positions``; the verdict columns read whole once."""
        if name in _DERIVED_COLUMNS:
            if name not in self.columns:
                self.column(name)
            return list(map(self.columns[name].__getitem__, positions))
        return super().column_at(positions, name)

    def _verdict_rows(self) -> list[Any]:
        """Return each request's verdict row, or None where it has none."""
        if self.verdict_rows is None:
            refs = map(self.run.verdict_by_request.get, self.request_ids)
            self.verdict_rows = [ref.row if ref is not None else None for ref in refs]
        return self.verdict_rows

    def _rows_of(self, keys: list[str]) -> list[dict[str, Any]]:
        """Build the rows of ``keys`` column by column (each column as ``_scalar`` has it).

        Requests that derive alike share one ``Derivation``, so what a row shows of it
        is read once per distinct derivation; its rows then share the one list of
        mismatched fields (the records are only read).
        """
        run = self.run
        requests: list[Any] = [ref.row for ref in map(run.request_by_id.__getitem__, keys)]
        derivations = list(map(run.derivations.__getitem__, keys))
        distinct = dict(zip(map(id, derivations), derivations, strict=True))
        shown = {key: _shown(derivation) for key, derivation in distinct.items()}
        verdict_refs = map(run.verdict_by_request.get, keys)
        verdicts = [ref.row if ref is not None else None for ref in verdict_refs]
        declared = [v.get("verdict") if v is not None else None for v in verdicts]
        declared_refs = [v.get("rule_refs") if v is not None else None for v in verdicts]
        return list(
            map(
                _derived_row,
                keys,
                _scalars(list(map(dict.get, requests, repeat("action_kind")))),
                _scalars(list(map(dict.get, requests, repeat("requested_capability")))),
                _scalars(list(map(dict.get, requests, repeat("risk_class")))),
                map(shown.__getitem__, map(id, derivations)),
                _scalars(declared),
                _scalars(declared_refs),
                map(derivation_passes, derivations, verdicts),
            )
        )


def _field_of(row: Mapping[str, Any] | None, name: str) -> Any:
    """Return ``row.get(name)``, or None where there is no row."""
    return row.get(name) if row is not None else None


def _shown(derivation: Derivation) -> tuple[str, str, bool, list[str]]:
    """Return what a derived row shows of a derivation, in the row's order."""
    return (
        derivation.verdict,
        derivation.rule_ref,
        derivation.fail_closed,
        list(derivation.mismatched_fields),
    )


def _derived_row(
    request_id: str,
    action_kind: Any,
    requested_capability: Any,
    risk_class: Any,
    derivation: tuple[str, str, bool, list[str]],
    declared_verdict: Any,
    declared_rule_refs: Any,
    passed: bool,
) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "action_kind": action_kind,
        "requested_capability": requested_capability,
        "risk_class": risk_class,
        "derived_verdict": derivation[0],
        "derived_rule_ref": derivation[1],
        "fail_closed": derivation[2],
        "mismatched_fields": derivation[3],
        "declared_verdict": declared_verdict,
        "declared_rule_refs": declared_rule_refs,
        "policy_derivation_passed": passed,
    }


def build_result(replay: Replay) -> dict[str, Any]:
    """Build the full result record of one replay."""
    run = replay.run
    findings = replay.findings
    fixture = run.mode is InputMode.FIXTURE
    negative = replay.negative
    modules = replay.modules
    requests = map(itemgetter(3), run.requests)  # RowRef.row
    declared = map(dict.get, requests, repeat("risk_class"))
    risk_classes = sorted({c for c in declared if isinstance(c, str)})
    copied = {key: fields for key, _, fields in COPIED_LISTS}
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "status": replay.status,
        "input_mode": run.mode.value,
        "bundle_id": replay.bundle_id,
        "expected_negative_cases": [c.case_id for c in NEGATIVE_CASES] if fixture else [],
        "observed_negative_cases": dict(negative.observed) if negative else {},
        "missing_negative_cases": list(negative.missing) if negative else [],
        "error_codes": sorted({f.error_code for f in findings}),
        "finding_count": len(findings),
        "findings": [f.to_record() for f in findings],
        "layers": [
            {
                "layer": layer.layer.value,
                "title": layer.layer.label,
                "status": layer.status,
                "finding_count": len(layer.findings),
                "counts": dict(layer.counts),
            }
            for layer in replay.layers
        ],
        "secret_exclusion_scan": replay.scan.to_record(),
        "authority_ceiling": dict(AUTHORITY_CEILING),
        "public_agent_execution_trace": replay.trace.to_record(),
        "risk_classes": risk_classes,
        "policy_source": run.policy.source.record(),
        "policy_coverage": coverage(run.policy, run.derivations),
        **_counts(replay),
        "source_module_manifest_status": modules.status if modules else "not_applicable",
        "source_modules": [
            {
                "module_id": b.module_id,
                "path": b.path,
                "material_class": b.material_class,
                "sha256": b.sha256,
                "size": b.size,
                "required_anchor_count": len(b.anchors),
                "verified": b.verified,
            }
            for b in (modules.bodies if modules else [])
        ],
        "input_files": [
            {
                "path": info.path,
                "kind": info.kind,
                "size": info.size,
                "sha256": info.sha256,
                "loaded": info.loaded,
                "forbidden_material_found": info.path in replay.scan.flagged_paths,
            }
            for info in replay.inputs
        ],
        "request_rows": ProjectedRows(run.requests, copied["request_rows"]),
        "policy_verdict_rows": ProjectedRows(run.verdicts, copied["policy_verdict_rows"]),
        "derived_policy_verdict_rows": DerivedRows(run),
        "side_effect_rows": ProjectedRows(run.effects, copied["side_effect_rows"]),
        "rollback_rows": ProjectedRows(run.rollbacks, copied["rollback_rows"]),
        "cold_replay_rows": ProjectedRows(run.replays, copied["cold_replay_rows"]),
        "body_in_receipt": False,
    }
    redacted: dict[str, Any] = redact(record, replay.scan.matched_texts)
    return redacted


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
        if isinstance(item, list | LazyRows):
            return [walk(v) for v in item]
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
