"""A run's policy in force and its coverage, as one typed value read from the result record.

The record carries them as ``policy_source`` and ``policy_coverage`` (FORMAT 6); ``build``
keeps the value in its status file (``to_json``), so a reused run's policy is shown
without a replay. Policy id and rule refs come from the user's file: readers escape them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# How many never-exercised rules the gap headline names before "and N more".
MAX_NAMED_RULES = 3


@dataclass(frozen=True, slots=True)
class RuleUse:
    """One rule of the policy in force and how many requests it determined."""

    rule_ref: str
    verdict: str
    request_count: int


@dataclass(frozen=True, slots=True)
class PolicyCoverage:
    """Which policy derived a run's verdicts, and how many requests each rule determined.

    ``rule_count`` counts the policy's own rules; ``rules`` adds the fail-closed rule last.
    """

    kind: str
    policy_id: str
    sha256: str
    rule_count: int
    rules: tuple[RuleUse, ...]

    @property
    def key(self) -> tuple[str, str, str]:
        """What tells one policy from another: its kind, id and file digest."""
        return (self.kind, self.policy_id, self.sha256)

    @property
    def unexercised(self) -> tuple[str, ...]:
        """The rule refs no request exercised, in the policy's order."""
        return tuple(rule.rule_ref for rule in self.rules if not rule.request_count)

    def never_exercised_text(self, limit: int = MAX_NAMED_RULES) -> str:
        """Return "2 of 11 rules never exercised: rule:a, rule:b" ("" when none is), naming
        at most ``limit`` rules, then "and N more"."""
        unexercised = self.unexercised
        if not unexercised:
            return ""
        total = len(self.rules)
        named = ", ".join(unexercised[:limit])
        if len(unexercised) > limit:
            named += f" and {len(unexercised) - limit} more"
        noun = "rule" if total == 1 else "rules"
        return f"{len(unexercised)} of {total} {noun} never exercised: {named}"

    @classmethod
    def of_record(cls, result: Mapping[str, Any]) -> PolicyCoverage:
        """Return the policy and coverage a result record carries."""
        source = result["policy_source"]
        return cls(
            kind=source["kind"],
            policy_id=source["id"],
            sha256=source["sha256"],
            rule_count=source["rule_count"],
            rules=tuple(
                RuleUse(rule["rule_ref"], rule["verdict"], rule["request_count"])
                for rule in result["policy_coverage"]["rules"]
            ),
        )

    def to_json(self) -> dict[str, Any]:
        """Return the value as JSON values (``from_json`` reads them back)."""
        return {
            "kind": self.kind,
            "id": self.policy_id,
            "sha256": self.sha256,
            "rule_count": self.rule_count,
            "rules": [[r.rule_ref, r.verdict, r.request_count] for r in self.rules],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PolicyCoverage:
        """Read ``to_json``'s values back, each checked for type (a status file may be edited);
        raise KeyError, TypeError or ValueError if malformed."""
        rules = []
        for rule_ref, verdict, request_count in data["rules"]:
            rules.append(RuleUse(_text(rule_ref), _text(verdict), _count(request_count)))
        return cls(
            kind=_text(data["kind"]),
            policy_id=_text(data["id"]),
            sha256=_text(data["sha256"]),
            rule_count=_count(data["rule_count"]),
            rules=tuple(rules),
        )


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise TypeError(f"expected a count, got {value!r}")
    return value
