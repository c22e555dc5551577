"""The layers table and the forbidden-material scan summary."""

from __future__ import annotations

from sandbox_replay.model.codes import Layer
from sandbox_replay.report.views.base import RunBase
from sandbox_replay.report.views.common import badge, text
from sandbox_replay.report.views.models import LayerRow, ScanClassRow, ScanView


class LayerTables(RunBase):
    def layer_rows(self) -> tuple[LayerRow, ...]:
        rows = []
        for layer in self.result["layers"]:
            status = self.layer_status[layer["layer"]]
            note = ""
            if layer["layer"] == Layer.NEGATIVE_CASES.value and status == "pass":
                note = f"{layer['finding_count']:,} expected alarms fired"
            elif layer["status"] == "not_run":
                note = "its input did not load"
            rows.append(
                LayerRow(
                    anchor=f"layer-{layer['layer']}",
                    title=text(layer["title"]),
                    status=badge(status),
                    finding_count=layer["finding_count"],
                    note=note,
                    counts=tuple(
                        (k.replace("_", " ").removesuffix(" count"), str(v))
                        for k, v in layer["counts"].items()
                    ),
                )
            )
        return tuple(rows)

    def scan(self) -> ScanView:
        scan = self.result["secret_exclusion_scan"]
        labels = {c["class_id"]: c for c in scan["classes_hit"]}
        by_class = tuple(
            ScanClassRow(
                class_id,
                text(labels.get(class_id, {}).get("label", "")),
                count,
                text(labels.get(class_id, {}).get("remediation", "")),
            )
            for class_id, count in scan["hits_by_class"].items()
        )
        flagged: dict[str, list[str]] = {}
        for hit in scan["hits"]:
            flagged.setdefault(hit["path"], []).append(f"{hit['class_id']} × {hit['count']:,}")
        return ScanView(
            status=badge(scan["status"]),
            files_scanned=scan["files_scanned"],
            bytes_scanned=f"{scan['bytes_scanned']:,}",
            class_count=scan["class_count"],
            hit_count=scan["blocking_hit_count"],
            by_class=by_class,
            flagged=tuple((path, ", ".join(hits)) for path, hits in sorted(flagged.items())),
        )
