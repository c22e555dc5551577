"""What the harness could not record: a bundle manifest's declared evidence gaps, as findings.

An importer of another harness's logs writes in ``bundle_manifest.json`` which evidence
that harness never records: ``rollback_evidence`` and ``cold_replay_evidence`` set to
``not_recorded_by_harness``. A rollback set to ``sandbox_teardown`` (the sandbox's
teardown after each sample, one rollback row per executed call) is no gap. Each gap is
one finding of its layer, saying why its rows are missing; the layers' floors still
apply, so the run fails closed either way.
"""

from __future__ import annotations

from sandbox_replay.checks.base import LayerResult
from sandbox_replay.load.run import BUNDLE_MANIFEST, RunInputs
from sandbox_replay.model import codes

FLOOR = "harness_evidence_floor"
TEARDOWN = "sandbox_teardown"


def _declared(run: RunInputs, key: str) -> object:
    manifest = run.object(BUNDLE_MANIFEST)
    return manifest.get(key) if manifest is not None else None


NOT_RECORDED = "not_recorded_by_harness"


def _named(declared: object) -> str:
    """Name a declared gap: the format's own word, never the input's other text."""
    return NOT_RECORDED if declared == NOT_RECORDED else "an unrecognised value"


def add_rollback_gap(run: RunInputs, result: LayerResult) -> None:
    """Add a finding when the manifest says the harness recorded no rollback."""
    declared = _declared(run, "rollback_evidence")
    if declared is None or declared == TEARDOWN:
        return
    executed = sum(1 for effect in run.effects if effect.execution_attempted is True)
    message = (
        f"the harness recorded no rollback (rollback_evidence: {_named(declared)}); "
        f"{executed} executed action(s) cannot be shown undone"
    )
    _add(run, result, codes.HARNESS_ROLLBACK_NOT_RECORDED, message, "rollback_evidence")


def add_cold_replay_gap(run: RunInputs, result: LayerResult) -> None:
    """Add a finding when the manifest says the harness recorded no cold replay."""
    declared = _declared(run, "cold_replay_evidence")
    if declared is None:
        return
    message = (
        f"the harness recorded no cold replay (cold_replay_evidence: {_named(declared)}); "
        f"none of {len(run.requests)} request(s) was re-checked by a later replay"
    )
    _add(run, result, codes.HARNESS_COLD_REPLAY_NOT_RECORDED, message, "cold_replay_evidence")


def _add(run: RunInputs, result: LayerResult, code: str, message: str, key: str) -> None:
    line = run.key_line(BUNDLE_MANIFEST, key)
    result.add(code, message, FLOOR, key, "bundle_manifest", BUNDLE_MANIFEST, line)
