"""The layers table and the forbidden-material scan summary."""

from __future__ import annotations

from sandbox_replay.model.codes import Layer
from sandbox_replay.report.views.common import badge, text
from sandbox_replay.report.views.index import RunIndex
from sandbox_replay.report.views.models import LayerRow, ScanClassRow, ScanView


def layer_rows(ix: RunIndex) -> tuple[LayerRow, ...]:
    """Return each layer's row: its status as shown, its findings and its counts."""
    rows = []
    for layer in ix.replay.layers:
        status = ix.layer_status[layer.layer.value]
        note = ""
        if layer.layer is Layer.NEGATIVE_CASES and status == "pass":
            note = f"{len(layer.findings):,} expected alarms fired"
        elif layer.status == "not_run":
            note = "its input did not load"
        rows.append(
            LayerRow(
                anchor=f"layer-{layer.layer.value}",
                title=layer.layer.label,
                status=badge(status),
                finding_count=len(layer.findings),
                note=note,
                counts=tuple(
                    (k.replace("_", " ").removesuffix(" count"), str(v))
                    for k, v in layer.counts.items()
                ),
            )
        )
    return tuple(rows)


def scan(ix: RunIndex) -> ScanView:
    """Return the forbidden-material scan: its classes hit and the files they matched in."""
    report = ix.replay.scan
    by_class: dict[str, int] = {}
    flagged: dict[str, list[str]] = {}
    for hit in report.hits:
        by_class[hit.class_id] = by_class.get(hit.class_id, 0) + hit.count
        path = text(ix.shown(hit.path))
        flagged.setdefault(path, []).append(f"{hit.class_id} × {hit.count:,}")
    classes = {c.class_id: (c.label, c.remediation) for c in report.classes}
    return ScanView(
        status=badge("blocked" if report.hits else "pass"),
        files_scanned=report.files_scanned,
        bytes_scanned=f"{report.bytes_scanned:,}",
        class_count=len(report.classes),
        hit_count=report.blocking_hit_count,
        by_class=tuple(
            ScanClassRow(class_id, text(ix.shown(label)), count, text(ix.shown(remediation)))
            for class_id, count in sorted(by_class.items())
            for label, remediation in [classes.get(class_id, ("", ""))]
        ),
        flagged=tuple((path, ", ".join(hits)) for path, hits in sorted(flagged.items())),
    )
