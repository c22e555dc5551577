"""What a finding code is: its layer, severity, summary and document, and the table of them.

The codes are declared in ``codes``; a code's document is ``data/codes/<CODE>.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources


class Layer(StrEnum):
    """The validator stage a code belongs to, in pipeline order."""

    STRICT_LOAD = "strict_load"
    FORBIDDEN_MATERIAL = "forbidden_material"
    PROJECTION_PROTOCOL = "projection_protocol"
    SANDBOX_POLICY = "sandbox_policy"
    ACTION_REQUESTS = "action_requests"
    POLICY_VERDICTS = "policy_verdicts"
    SIDE_EFFECTS = "side_effects"
    ROLLBACKS = "rollbacks"
    COLD_REPLAY = "cold_replay"
    PUBLIC_TRACE = "public_trace"
    NEGATIVE_CASES = "negative_cases"
    SOURCE_MODULES = "source_modules"
    BUNDLE_MANIFEST = "bundle_manifest"
    SENSITIVITY = "sensitivity"

    @property
    def label(self) -> str:
        """Return the layer's human name."""
        return self.value.replace("_", " ").capitalize()


class Severity(StrEnum):
    """How bad a finding is, worst first; every finding blocks, severity only ranks them."""

    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def meaning(self) -> str:
        """Return what a finding of this severity says about the run, in one sentence."""
        return _SEVERITY_MEANINGS[self]


_SEVERITY_MEANINGS = {
    Severity.CRITICAL: (
        "Containment failed or a boundary was crossed: a blocked action executed, a declared "
        "verdict contradicts the policy, forbidden material, an authority overclaim, a path "
        "out of the input folder."
    ),
    Severity.HIGH: (
        "Evidence for containment is missing or could not be checked: no verdict, receipt "
        "or rollback, or a file, row or key that could not be read and so went unchecked."
    ),
    Severity.MEDIUM: (
        "The run covers too little to show containment: too few risk classes, verdict "
        "labels or rollbacks, or a missing cold replay."
    ),
    Severity.LOW: (
        "A row's floor or a field's format is wrong where the tool still checked what it "
        "needed; whatever such a row means for containment raises its own, worse code."
    ),
}


@dataclass(frozen=True)
class FindingCode:
    """One registered finding code."""

    code: str
    layer: Layer
    severity: Severity
    summary: str

    @property
    def doc(self) -> str:
        """Return the code's Markdown document ("" where it has none)."""
        return _doc_text(self.code)

    @property
    def anchor(self) -> str:
        """Return the code's fragment id, stable across versions."""
        return self.code.lower().replace("_", "-")


class DuplicateCodeError(ValueError):
    """A code was registered twice, or a retired code again."""


class CodeRegistry:
    """An ordered, duplicate-refusing table of finding codes; ``retired`` are refused too."""

    def __init__(self, retired: Mapping[str, str] = {}) -> None:
        self._codes: dict[str, FindingCode] = {}
        self.retired = retired

    def register(self, code: str, layer: Layer, severity: Severity, summary: str) -> str:
        if code in self._codes or code in self.retired:
            raise DuplicateCodeError(f"finding code {code} is already declared or retired")
        self._codes[code] = FindingCode(code, layer, severity, summary)
        return code

    def declarer(self, layer: Layer) -> Callable[[str, Severity, str], str]:
        """Return ``register`` with ``layer`` given: ``(code, severity, summary) -> code``."""
        return lambda code, severity, summary: self.register(code, layer, severity, summary)

    def __getitem__(self, code: str) -> FindingCode:
        return self._codes[code]

    def get(self, code: str) -> FindingCode | None:
        return self._codes.get(code)

    def __contains__(self, code: object) -> bool:
        return code in self._codes

    def __iter__(self) -> Iterator[FindingCode]:
        return iter(self._codes.values())

    def __len__(self) -> int:
        return len(self._codes)

    def by_layer(self, layer: Layer) -> list[FindingCode]:
        return [c for c in self._codes.values() if c.layer is layer]


@cache
def _doc_text(code: str) -> str:
    ref = resources.files("sandbox_replay") / "data" / "codes" / f"{code}.md"
    try:
        return ref.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
