"""The copied source modules: path, digest, class and anchors, never their bodies."""

from __future__ import annotations

from sandbox_replay.records.build import redact
from sandbox_replay.report.views.base import RunBase
from sandbox_replay.report.views.common import Badge, plural, text
from sandbox_replay.report.views.models import ModuleView


class InputFiles(RunBase):
    def modules(self) -> tuple[ModuleView, ...]:
        anchors: dict[str, tuple[str, ...]] = {}
        if self.replay.modules is not None:
            for body in self.replay.modules.bodies:
                shown = redact(list(body.anchors), self.replay.scan.matched_texts)
                anchors[body.module_id] = tuple(shown)
        return tuple(
            ModuleView(
                module_id=text(m["module_id"]),
                path=text(m["path"]),
                material_class=text(m["material_class"]),
                sha256=text(m["sha256"]),
                size=plural(m["size"], "byte"),
                anchors=anchors.get(m["module_id"], ()),
                verified=Badge("verified", "badge status-pass")
                if m["verified"]
                else Badge("not verified", "badge status-blocked"),
            )
            for m in self.result["source_modules"]
        )
