"""Bundle manifest (bundle mode): names the bundle, which is the trace's session id."""

from __future__ import annotations

from sandbox_replay.checks.base import LayerResult, is_nonempty
from sandbox_replay.load.run import BUNDLE_MANIFEST, RunInputs
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer

FLOOR = "bundle_manifest_floor"


def bundle_id_of(run: RunInputs) -> str | None:
    """Return the bundle's id if the manifest names one."""
    manifest = run.object(BUNDLE_MANIFEST)
    value = manifest.get("bundle_id") if manifest is not None else None
    return value if isinstance(value, str) and is_nonempty(value) else None


def check(run: RunInputs) -> LayerResult:
    """Require a manifest with a bundle_id that claims no body in the receipt."""
    manifest = run.object(BUNDLE_MANIFEST)
    if manifest is None:
        return LayerResult(Layer.BUNDLE_MANIFEST, ran=False)
    result = LayerResult(Layer.BUNDLE_MANIFEST)

    def add(message: str, subject: str, key: str) -> None:
        line = run.key_line(BUNDLE_MANIFEST, key)
        code = codes.BUNDLE_MANIFEST_INVALID
        result.add(code, message, FLOOR, subject, "bundle_manifest", BUNDLE_MANIFEST, line)

    if bundle_id_of(run) is None:
        add("bundle manifest has no bundle_id string", BUNDLE_MANIFEST, "bundle_id")
    # Records carry refs, never bodies: a manifest that says otherwise is not believed
    # away (absent, as in older exports, is the same as false).
    if manifest.get("body_in_receipt", False) is not False:
        subject = bundle_id_of(run) or BUNDLE_MANIFEST
        add("bundle manifest body_in_receipt is not false", subject, "body_in_receipt")
    return result
