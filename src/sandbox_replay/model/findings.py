"""The finding record every layer returns."""

from __future__ import annotations

from dataclasses import dataclass

from sandbox_replay.model.codes import REGISTRY, Layer


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the replay holds against the claim; ``path`` (relative to the input folder)
    and ``line`` (1-based) locate its input row where known."""

    error_code: str
    message: str
    negative_case_id: str
    subject_id: str
    subject_kind: str
    path: str | None = None
    line: int | None = None

    def __post_init__(self) -> None:
        if self.error_code not in REGISTRY:
            raise ValueError(f"unregistered finding code {self.error_code}")

    @property
    def layer(self) -> Layer:
        return REGISTRY[self.error_code].layer

    def sort_key(self) -> tuple[str, str, str, str, int, str]:
        return (
            self.layer.value,
            self.error_code,
            self.path or "",
            self.subject_id,
            self.line or 0,
            self.message,
        )

    def to_record(self) -> dict[str, object]:
        return {
            "error_code": self.error_code,
            "message": self.message,
            "negative_case_id": self.negative_case_id,
            "subject_id": self.subject_id,
            "subject_kind": self.subject_kind,
            "layer": self.layer.value,
            "path": self.path,
            "line": self.line,
            "body_redacted": True,
        }
