"""Projection protocol: what was projected from where, and what was left out."""

from __future__ import annotations

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
    result = LayerResult(Layer.PROJECTION_PROTOCOL)
    protocol = run.object(PROJECTION_PROTOCOL)
    if protocol is None:
        result.ran = False
        return result
    subject = protocol.get("protocol_id")
    subject_id = subject if isinstance(subject, str) and subject else PROJECTION_PROTOCOL
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
    if missing or not_lists or unverified:
        parts = []
        if missing:
            parts.append(f"missing or empty: {describe(missing)}")
        if not_lists:
            parts.append(f"wrong type: {describe(sorted(set(not_lists)))}")
        if unverified:
            parts.append(
                f"body_import_verification does not say verified (verification_status "
                f"{VERIFIED!r}, no verified other than true, no body_in_receipt other than false)"
            )
        result.add(
            codes.PROJECTION_DENSITY_MISSING,
            "projection protocol " + "; ".join(parts),
            FLOOR,
            subject_id,
            "projection_protocol",
            PROJECTION_PROTOCOL,
            run.key_line(
                PROJECTION_PROTOCOL,
                *missing,
                *not_lists,
                *(["body_import_verification"] if unverified else []),
            ),
        )
    overclaims = wrong_flags(protocol, FALSE_FLAGS)
    if overclaims:
        result.add(
            codes.PROJECTION_AUTHORITY_OVERCLAIM,
            f"projection protocol flags not exactly false: {describe(overclaims)}",
            FLOOR,
            subject_id,
            "projection_protocol",
            PROJECTION_PROTOCOL,
            run.key_line(PROJECTION_PROTOCOL, *overclaims),
        )
    result.counts = {
        "source_ref_count": _len(protocol.get("source_refs")),
        "omitted_material_count": _len(protocol.get("omitted_secret_or_live_access_material")),
    }
    return result


def _len(value: object) -> int:
    return len(value) if isinstance(value, list) else 0
