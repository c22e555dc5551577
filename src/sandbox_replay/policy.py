"""The fail-closed policy core: derive what a request's verdict should have been.

The table lives in ``data/policy_table.json`` (declared once, shipped as package data):
``fail_closed`` gives the verdict and rule ref for anything unrecognised, and each entry
of ``rules`` maps a ``risk_class`` to the action shape it requires (``action_kind``,
``requested_capability``, ``source_trust_label``) and the verdict and ``rule_ref`` it
derives. The derivation never looks at the recorded verdict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from operator import itemgetter
from typing import Any

SHAPE_FIELDS = ("action_kind", "requested_capability", "source_trust_label")
# All that a derivation reads of a request.
DERIVATION_FIELDS = ("risk_class", *SHAPE_FIELDS)
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

    def derive_each(self, requests: Sequence[Mapping[str, Any]]) -> list[Derivation]:
        """Derive each request, in order, once per distinct (risk class, shape) of strings.

        A derivation reads only ``DERIVATION_FIELDS``, so requests that agree on them
        share one (frozen) ``Derivation``; anything but strings is derived on its own.
        The four fields of every request are read and looked up in C; a request that
        lacks one (``itemgetter`` raises KeyError) or holds a list or object there (its
        key cannot be hashed) sends every request through the same lookup one by one.
        """
        by_shape = _ByShape(self)
        try:
            return list(map(by_shape.__getitem__, map(itemgetter(*DERIVATION_FIELDS), requests)))
        except (KeyError, TypeError):
            pass
        derivations = []
        for request in requests:
            key = tuple(map(request.get, DERIVATION_FIELDS))
            try:
                derivations.append(by_shape[key])
            except TypeError:  # a list or object: derived on its own
                derivations.append(self.derive(request))
        return derivations


class _ByShape(dict[tuple[Any, ...], Derivation]):
    """Derivations by their four fields' values; a key not held yet is derived on lookup.

    Only a key of four strings is kept: among parsed JSON values only strings equal
    strings, so a kept key is found only for requests of exactly those four strings.
    """

    def __init__(self, table: PolicyTable) -> None:
        super().__init__()
        self.table = table

    def __missing__(self, key: tuple[Any, ...]) -> Derivation:
        derivation = self.table.derive(dict(zip(DERIVATION_FIELDS, key, strict=True)))
        if all(type(value) is str for value in key):
            self[key] = derivation
        return derivation


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
