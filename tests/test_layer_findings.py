"""Where a layer's findings point: the row file a layer checks names each finding alike."""

from __future__ import annotations

from sandbox_replay.checks.base import LayerResult, RowFile
from sandbox_replay.load import forbidden_table, scan
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.rows import UNSET, Rollback


def _rollback(rollback_id: object) -> Rollback:
    return Rollback(rollback_id=rollback_id, request_id="req-1", line=7)


def test_a_row_finding_is_named_by_the_rows_id_or_where_it_sits() -> None:
    rows = RowFile("rollback_receipts.json", "rollback_floor", "rollback_receipt", "rollback_id")
    result = LayerResult(Layer.ROLLBACKS)
    rows.add(result, codes.ROLLBACK_RECEIPT_INVALID, "first", _rollback("rb-1"), 0)
    rows.add(result, codes.ROLLBACK_RECEIPT_INVALID, "second", _rollback(""), 3)
    rows.add(result, codes.ROLLBACK_RECEIPT_INVALID, "third", _rollback(UNSET), 4, subject="req-1")
    assert [
        (f.subject_id, f.subject_kind, f.path, f.negative_case_id, f.line) for f in result.findings
    ] == [
        ("rb-1", "rollback_receipt", "rollback_receipts.json", "rollback_floor", 7),
        (
            "rollback_receipts.json#row3",
            "rollback_receipt",
            "rollback_receipts.json",
            "rollback_floor",
            7,
        ),
        ("req-1", "rollback_receipt", "rollback_receipts.json", "rollback_floor", 7),
    ]
    assert result.status == "blocked"


def test_a_file_finding_names_the_file_and_points_at_its_first_line() -> None:
    result = LayerResult(Layer.ROLLBACKS)
    result.add_for_file(
        codes.ROLLBACK_RECEIPTS_INSUFFICIENT, "1 row", "rollback_floor", "rollback_receipts.json"
    )
    (finding,) = result.findings
    assert (finding.subject_id, finding.subject_kind, finding.path, finding.line) == (
        "rollback_receipts",
        "input_file",
        "rollback_receipts.json",
        1,
    )


def test_a_layer_that_did_not_run_says_so() -> None:
    assert LayerResult(Layer.ROLLBACKS, ran=False).status == "not_run"


def test_the_table_names_are_still_imported_from_the_scan() -> None:
    for name in ("ForbiddenClass", "ForbiddenClassesError", "ForbiddenTable"):
        assert getattr(scan, name) is getattr(forbidden_table, name)
    assert scan.read_forbidden_table is forbidden_table.read_forbidden_table
    assert scan.load_forbidden_classes is forbidden_table.load_forbidden_classes
