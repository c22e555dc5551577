"""The fail-closed policy core: derive what a request's verdict should have been.

The table lives in ``data/policy_table.json`` (declared once, shipped as package data):
``fail_closed`` gives the verdict and rule ref for anything unrecognised, and each entry
of ``rules`` maps a ``risk_class`` to the action shape it requires (``action_kind``,
``requested_capability``, ``source_trust_label``) and the verdict and ``rule_ref`` it
derives. The derivation never looks at the recorded verdict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

SHAPE_FIELDS = ("action_kind", "requested_capability", "source_trust_label")
VERDICTS = ("allow", "warn", "block", "review")


@dataclass(frozen=True, slots=True)
class PolicyRule:
    """One row of the policy table."""

    risk_class: str
    action_kind: str
    requested_capability: str
    source_trust_label: str
    verdict: str
    rule_ref: str


@dataclass(frozen=True, slots=True)
class Derivation:
    """The verdict a request derives to, and why.

    ``recognized`` is False for an unknown risk class; ``mismatched_fields`` names the
    shape fields that differ from a known class's row. Either one means fail-closed.
    """

    verdict: str
    rule_ref: str
    recognized: bool
    mismatched_fields: tuple[str, ...] = ()

    @property
    def fail_closed(self) -> bool:
        return not self.recognized or bool(self.mismatched_fields)


@dataclass(frozen=True)
class PolicyTable:
    """The fail-closed table: rules by risk class plus the fallback."""

    rules: Mapping[str, PolicyRule]
    fail_closed_verdict: str
    fail_closed_rule_ref: str

    @property
    def fail_closed_derivation(self) -> Derivation:
        return Derivation(self.fail_closed_verdict, self.fail_closed_rule_ref, recognized=False)

    def derive(self, request: Mapping[str, Any]) -> Derivation:
        """Derive the verdict from the request's own shape; anything unrecognised blocks."""
        risk_class = request.get("risk_class")
        # A non-string risk class (a list, say) is unrecognised, not a lookup error.
        rule = self.rules.get(risk_class) if isinstance(risk_class, str) else None
        if rule is None:
            return self.fail_closed_derivation
        mismatched = tuple(f for f in SHAPE_FIELDS if request.get(f) != getattr(rule, f))
        if mismatched:
            return Derivation(self.fail_closed_verdict, self.fail_closed_rule_ref, True, mismatched)
        return Derivation(rule.verdict, rule.rule_ref, True)


@cache
def default_table() -> PolicyTable:
    """Return the table shipped with the package."""
    text = (resources.files("sandbox_replay") / "data" / "policy_table.json").read_text("utf-8")
    return parse_table(json.loads(text))


def parse_table(data: Mapping[str, Any]) -> PolicyTable:
    """Build a table from its JSON form, refusing duplicate risk classes and bad verdicts."""
    rules: dict[str, PolicyRule] = {}
    for entry in data["rules"]:
        rule = PolicyRule(**entry)
        if rule.risk_class in rules:
            raise ValueError(f"risk class {rule.risk_class} appears twice in the policy table")
        if rule.verdict not in VERDICTS:
            raise ValueError(f"risk class {rule.risk_class} has unknown verdict {rule.verdict}")
        rules[rule.risk_class] = rule
    fallback = data["fail_closed"]
    return PolicyTable(rules, fallback["verdict"], fallback["rule_ref"])
