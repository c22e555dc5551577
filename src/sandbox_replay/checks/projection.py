"""Projection protocol: what was projected from where, and what was left out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox_replay.checks.base import LayerResult, describe, missing_fields, wrong_flags
from sandbox_replay.load.run import PROJECTION_PROTOCOL, RunInputs
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer

REQUIRED = (
    "protocol_id",
    "source_refs",
    "source_pattern_ids",
    "projection_receipt_refs",
    "target_refs",
    "target_symbols",
    "public_runtime_refs",
    "omitted_secret_or_live_access_material",
    "body_import_status",
    "body_import_verification",
)
LISTS = REQUIRED[1:8]
FALSE_FLAGS = {
    name: False
    for name in (
        "body_in_receipt",
        "copied_credential_or_account_bound_source",
        "exports_secret_or_live_access_material",
        "exports_executable_payloads",
        "authorizes_live_network",
        "authorizes_sandbox_escape",
    )
}
FLOOR = "projection_protocol_floor"
VERIFIED = "verified"


def check(run: RunInputs) -> LayerResult:
    """Hold the protocol to its density floor and its authority ceiling."""
    protocol = run.object(PROJECTION_PROTOCOL)
    if protocol is None:
        return LayerResult(Layer.PROJECTION_PROTOCOL, ran=False)
    result = LayerResult(Layer.PROJECTION_PROTOCOL)
    subject = protocol.get("protocol_id")
    subject_id = subject if isinstance(subject, str) and subject else PROJECTION_PROTOCOL

    def add(code: str, message: str, keys: list[str]) -> None:
        line = run.key_line(PROJECTION_PROTOCOL, *keys)
        kind = "projection_protocol"
        result.add(code, message, FLOOR, subject_id, kind, PROJECTION_PROTOCOL, line)

    gaps, keys = _density_gaps(protocol)
    if gaps:
        add(codes.PROJECTION_DENSITY_MISSING, "projection protocol " + "; ".join(gaps), keys)
    overclaims = wrong_flags(protocol, FALSE_FLAGS)
    if overclaims:
        message = f"projection protocol flags not exactly false: {describe(overclaims)}"
        add(codes.PROJECTION_AUTHORITY_OVERCLAIM, message, overclaims)
    result.counts = {
        "source_ref_count": _len(protocol.get("source_refs")),
        "omitted_material_count": _len(protocol.get("omitted_secret_or_live_access_material")),
    }
    return result


def _density_gaps(protocol: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """Return what the protocol lacks of its density floor, and the keys it concerns."""
    missing = missing_fields(protocol, REQUIRED)
    not_lists = [n for n in LISTS if n not in missing and not isinstance(protocol.get(n), list)]
    verification = protocol.get("body_import_verification")
    if not isinstance(verification, dict):
        not_lists.append("body_import_verification")
    # Ids and statuses are text.
    for name in ("protocol_id", "body_import_status"):
        if name not in missing and not isinstance(protocol.get(name), str):
            not_lists.append(name)
    # The original implementation's floor (FORMAT 7.4): a body import that does not say
    # it was verified has not been. A flag beside the status that says otherwise (a
    # `verified` that is not true, a `body_in_receipt` that is not false) is believed.
    unverified = isinstance(verification, dict) and (
        verification.get("verification_status") != VERIFIED
        or verification.get("verified", True) is not True
        or verification.get("body_in_receipt", False) is not False
    )
    gaps = []
    if missing:
        gaps.append(f"missing or empty: {describe(missing)}")
    if not_lists:
        gaps.append(f"wrong type: {describe(sorted(set(not_lists)))}")
    if unverified:
        gaps.append(
            f"body_import_verification does not say verified (verification_status "
            f"{VERIFIED!r}, no verified other than true, no body_in_receipt other than false)"
        )
    return gaps, [*missing, *not_lists, *(["body_import_verification"] if unverified else [])]


def _len(value: object) -> int:
    return len(value) if isinstance(value, list) else 0
