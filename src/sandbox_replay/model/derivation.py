"""What the policy in force derives for a request, and the fail-closed table that derives it.

A derivation reads only the request's own shape, never its recorded verdict. ``Policy``
(FORMAT 2 and 6) is met by ``PolicyTable`` (rules by risk class, each requiring an action
shape; anything else blocks) and ``cedar.CedarPolicy``. Each distinct shape is derived
once and its ``Derivation`` shared by every request of it.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any, Protocol

SHAPE_FIELDS = ("action_kind", "requested_capability", "source_trust_label")
# All that a table derivation reads of a request.
DERIVATION_FIELDS = ("risk_class", *SHAPE_FIELDS)
VERDICTS = ("allow", "warn", "block", "review")
FAIL_CLOSED_VERDICT = "block"
FAIL_CLOSED_RULE_REF = "rule:sandbox_policy_fail_closed_unrecognized_action"


class RequestFields(Protocol):
    """A request as a policy reads it: each field by name, None where it is not held."""

    def get(self, name: str, /) -> Any: ...


@dataclass(frozen=True, slots=True)
class Derivation:
    """The verdict a request derives to, and why.

    ``rule_ref`` is the first determining rule; ``rule_refs`` all of them where a policy
    has several (Cedar), else empty. ``recognized`` is False where only the fail-closed
    rule applied; ``mismatched_fields`` names the shape fields that differ from a known
    risk class's row; ``error_policy_ids`` the policies whose evaluation failed.
    """

    verdict: str
    rule_ref: str
    recognized: bool
    mismatched_fields: tuple[str, ...] = ()
    rule_refs: tuple[str, ...] = ()
    error_policy_ids: tuple[str, ...] = ()
    # Every rule ref that determined the verdict (a verdict row must cite one).
    determining: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "determining", self.rule_refs or (self.rule_ref,))

    @property
    def fail_closed(self) -> bool:
        return not self.recognized or bool(self.mismatched_fields)


@dataclass(frozen=True, slots=True)
class RuleInfo:
    """One rule of a policy, as policy coverage lists it."""

    rule_ref: str
    verdict: str


@dataclass(frozen=True, slots=True)
class PolicySource:
    """Which policy was in force; ``path`` (None for the packaged table) is not recorded."""

    kind: str  # "table" or "cedar"
    policy_id: str
    sha256: str
    rule_count: int
    path: str | None = None

    def record(self) -> dict[str, Any]:
        """Return the result record's ``policy_source`` (FORMAT 6)."""
        return {
            "kind": self.kind,
            "id": self.policy_id,
            "sha256": self.sha256,
            "rule_count": self.rule_count,
        }


class Policy(Protocol):
    """What the layers, the records and the report ask of the policy in force."""

    @property
    def source(self) -> PolicySource: ...

    @property
    def fail_closed_verdict(self) -> str: ...

    def with_path(self, path: str) -> Policy:
        """Return this policy with ``source.path`` set to ``path``."""

    def derive_each(self, requests: Sequence[RequestFields]) -> list[Derivation]:
        """Derive each request, in order (once per distinct shape)."""

    def rules_in_force(self) -> tuple[RuleInfo, ...]:
        """Return every rule of the policy in its order, then the fail-closed rule."""

    def recognized_classes(
        self, risk_classes: Collection[Any], decided: Iterable[tuple[Any, Derivation]]
    ) -> set[str]:
        """Return the risk classes recognised among ``risk_classes`` (the requests' own);
        ``decided`` pairs each derived request's risk class with its derivation."""


@dataclass(frozen=True, slots=True)
class PolicyRule:
    """One row of the policy table."""

    risk_class: str
    action_kind: str
    requested_capability: str
    source_trust_label: str
    verdict: str
    rule_ref: str


@dataclass(frozen=True)
class PolicyTable:
    """The fail-closed table: rules by risk class plus the fallback."""

    rules: Mapping[str, PolicyRule]
    fail_closed_verdict: str
    fail_closed_rule_ref: str
    source: PolicySource = PolicySource("table", "", "", 0)

    def with_path(self, path: str) -> PolicyTable:
        return replace(self, source=replace(self.source, path=path))

    def derive(self, request: RequestFields) -> Derivation:
        """Derive the verdict from the request's own shape; anything unrecognised blocks."""
        risk_class = request.get("risk_class")
        # A non-string risk class (a list, say) is unrecognised, not a lookup error.
        rule = self.rules.get(risk_class) if isinstance(risk_class, str) else None
        if rule is None:
            return Derivation(self.fail_closed_verdict, self.fail_closed_rule_ref, False)
        mismatched = tuple(f for f in SHAPE_FIELDS if request.get(f) != getattr(rule, f))
        if mismatched:
            return Derivation(self.fail_closed_verdict, self.fail_closed_rule_ref, True, mismatched)
        return Derivation(rule.verdict, rule.rule_ref, True)

    def derive_each(self, requests: Sequence[RequestFields]) -> list[Derivation]:
        """Derive each request, in order, once per distinct ``DERIVATION_FIELDS`` of strings."""
        by_shape = _ByShape(self)
        derivations = []
        for request in requests:
            key = tuple(map(request.get, DERIVATION_FIELDS))
            try:
                derivations.append(by_shape[key])
            except TypeError:  # a list or object: derived on its own
                derivations.append(self.derive(request))
        return derivations

    def rules_in_force(self) -> tuple[RuleInfo, ...]:
        return rules_in_force(
            self.rules.values(), self.fail_closed_rule_ref, self.fail_closed_verdict
        )

    def recognized_classes(
        self, risk_classes: Collection[Any], decided: Iterable[tuple[Any, Derivation]]
    ) -> set[str]:
        return {name for name in self.rules if name in risk_classes}


def rules_in_force(
    rules: Iterable[Any], fail_closed_ref: str, fail_closed: str
) -> tuple[RuleInfo, ...]:
    """Return each rule's ref and verdict, then the fail-closed rule's, each ref once."""
    found = {rule.rule_ref: rule.verdict for rule in rules}
    found.setdefault(fail_closed_ref, fail_closed)
    return tuple(RuleInfo(ref, verdict) for ref, verdict in found.items())


class _ByShape(dict[tuple[Any, ...], Derivation]):
    """Derivations by their four fields' values, derived on first lookup.

    Only keys of four strings are kept: among JSON values only a string equals a string.
    """

    def __init__(self, table: PolicyTable) -> None:
        super().__init__()
        self.table = table

    def __missing__(self, key: tuple[Any, ...]) -> Derivation:
        derivation = self.table.derive(dict(zip(DERIVATION_FIELDS, key, strict=True)))
        if all(type(value) is str for value in key):
            self[key] = derivation
        return derivation


def sha256_text(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@cache
def default_table() -> PolicyTable:
    """Return the table shipped with the package (``data/policy_table.json``)."""
    data = (resources.files("sandbox_replay") / "data" / "policy_table.json").read_bytes()
    return parse_table(json.loads(data), sha256_text(data))


def parse_table(data: Mapping[str, Any], sha256: str = "", path: str | None = None) -> PolicyTable:
    """Build a table from its JSON form.

    Raises ``ValueError`` (a one-line reason) for what the JSON Schema cannot state: a
    risk class twice, an unknown verdict, or a fail-closed verdict other than block.
    """
    rules: dict[str, PolicyRule] = {}
    for entry in data["rules"]:
        rule = PolicyRule(**entry)
        if rule.risk_class in rules:
            raise ValueError(f"risk class {rule.risk_class} appears twice in the policy table")
        if rule.verdict not in VERDICTS:
            raise ValueError(f"risk class {rule.risk_class} has unknown verdict {rule.verdict}")
        rules[rule.risk_class] = rule
    fallback = data["fail_closed"]
    if fallback["verdict"] != FAIL_CLOSED_VERDICT:
        raise ValueError(
            f"fail_closed.verdict is {fallback['verdict']!r}; a policy must fail closed to block"
        )
    source = PolicySource("table", data.get("table_id", ""), sha256, len(rules), path)
    return PolicyTable(rules, fallback["verdict"], fallback["rule_ref"], source)


def coverage(policy: Policy, derivations: Mapping[str, Derivation]) -> dict[str, Any]:
    """Return the result record's ``policy_coverage`` (FORMAT 6); a request determined by
    several rules counts for each."""
    # Requests of one shape share one Derivation: counted by identity, then by rule.
    shared = {id(derivation): derivation for derivation in derivations.values()}
    times = Counter(map(id, derivations.values()))
    counts: Counter[str] = Counter()
    for key, derivation in shared.items():
        for ref in derivation.determining:
            counts[ref] += times[key]
    rules = [
        {"rule_ref": rule.rule_ref, "verdict": rule.verdict, "request_count": counts[rule.rule_ref]}
        for rule in policy.rules_in_force()
    ]
    return {
        "rules": rules,
        "unexercised_rule_refs": [rule["rule_ref"] for rule in rules if not rule["request_count"]],
    }
