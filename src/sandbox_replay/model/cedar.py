"""A Cedar policy set as the policy in force (FORMAT 6), evaluated by the Cedar engine.

A request is asked as principal ``Agent::"<episode_id>"``, action
``Action::"<action_kind>"``, resource ``Capability::"<requested_capability>"``, with its
string fields among ``cedar_reads.CONTEXT_FIELDS`` as context. Allow derives the most
cautious ``@verdict`` of the determining permits (default ``allow``); a forbid derives
block; Cedar's default deny and an evaluation error derive block by the fail-closed rule.
Rule refs are the ``@id`` annotations, else Cedar's ``policy0``... ids. Requests alike in
the fields the policies read (``cedar_reads``) are put to Cedar once, in one batch call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import cedarpy

from sandbox_replay.model.cedar_reads import ABSENT, Reads, reads_of, reduced
from sandbox_replay.model.derivation import (
    FAIL_CLOSED_RULE_REF,
    FAIL_CLOSED_VERDICT,
    Derivation,
    PolicySource,
    RequestFields,
    RuleInfo,
    rules_in_force,
    sha256_text,
)
from sandbox_replay.model.policy import PolicyFileError

# What a permit may derive by its @verdict, most cautious first.
PERMIT_VERDICTS = ("review", "warn", "allow")
_ERROR_POLICY = re.compile(r"policy `([^`]+)`")


@dataclass(frozen=True)
class _Rule:
    cedar_id: str  # Cedar's own id: policy0, policy1, ...
    rule_ref: str  # its @id annotation, else the Cedar id
    verdict: str


@dataclass
class CedarPolicy:
    """A parsed Cedar policy set; ``text`` is kept so a worker process can parse it again."""

    text: str = field(repr=False)
    source: PolicySource
    rules: tuple[_Rule, ...] = field(repr=False)
    reads: Reads
    fail_closed_verdict: str = FAIL_CLOSED_VERDICT
    fail_closed_rule_ref: str = FAIL_CLOSED_RULE_REF
    _policies: Any = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_policies"] = None  # the engine's handle does not pickle; parsed again
        return state

    def with_path(self, path: str) -> CedarPolicy:
        return replace(self, source=replace(self.source, path=path), _policies=None)

    @cached_property
    def _by_id(self) -> dict[str, _Rule]:
        return {rule.cedar_id: rule for rule in self.rules}

    def _policy_set(self) -> Any:
        if self._policies is None:
            self._policies = cedarpy.PolicySet.from_str(self.text)
        return self._policies

    def rules_in_force(self) -> tuple[RuleInfo, ...]:
        return rules_in_force(self.rules, self.fail_closed_rule_ref, self.fail_closed_verdict)

    def recognized_classes(
        self, risk_classes: Collection[Any], decided: Iterable[tuple[Any, Derivation]]
    ) -> set[str]:
        """A Cedar policy names no risk classes: those of requests some policy decided."""
        return {name for name, d in decided if type(name) is str and d.recognized}

    def derive_each(self, requests: Sequence[RequestFields]) -> list[Derivation]:
        """Derive each request, in order, putting each distinct shape to Cedar once.

        A shape is the request's values of the fields the policies read, each reduced to
        the literal tests it passes where that is all a policy does with it.
        """
        reads = self.reads
        fields = (
            ("episode_id", reads.principal),
            ("action_kind", True),
            ("requested_capability", reads.resource),
            *((name, True) for name in reads.context),
        )
        values = [
            [_text_or_absent(request.get(name)) for request in requests]
            if used
            else [""] * len(requests)
            for name, used in fields
        ]
        classes = reads.classes()
        shapes = list(zip(*map(reduced, values, classes), strict=True)) if requests else []
        first: dict[tuple[Any, ...], int] = {}
        for at, shape in enumerate(shapes):
            first.setdefault(shape, at)
        keys = {shape: tuple(column[at] for column in values) for shape, at in first.items()}
        asked = [shape for shape, key in keys.items() if _askable(key)]
        decided: dict[tuple[Any, ...], Derivation] = dict(
            zip(asked, self._decide([keys[shape] for shape in asked]), strict=True)
        )
        unaskable = Derivation(self.fail_closed_verdict, self.fail_closed_rule_ref, False)
        return [decided.get(shape, unaskable) for shape in shapes]

    def _decide(self, keys: list[tuple[Any, ...]]) -> Iterator[Derivation]:
        if not keys:
            return iter(())
        names = self.reads.context
        requests = [
            {
                "principal": {"type": "Agent", "id": key[0]},
                "action": {"type": "Action", "id": key[1]},
                "resource": {"type": "Capability", "id": key[2]},
                "context": {
                    name: value
                    for name, value in zip(names, key[3:], strict=True)
                    if value is not ABSENT
                },
            }
            for key in keys
        ]
        results = cedarpy.is_authorized_batch(requests, self._policy_set(), [])
        return map(self._derivation, results)

    def _derivation(self, result: Any) -> Derivation:
        by_id = self._by_id
        errors = result.diagnostics.errors
        if errors:
            failed = []
            for error in errors:
                for cedar_id in _ERROR_POLICY.findall(str(error)):
                    rule = by_id.get(cedar_id)
                    failed.append(rule.rule_ref if rule is not None else cedar_id)
            failed_ids = tuple(dict.fromkeys(failed)) or ("(policy set)",)
            return Derivation(
                self.fail_closed_verdict,
                self.fail_closed_rule_ref,
                False,
                error_policy_ids=failed_ids,
            )
        reasons = set(result.diagnostics.reasons)
        deciding = [rule for rule in self.rules if rule.cedar_id in reasons]
        if not deciding:  # Cedar's default deny: nothing applied
            return Derivation(self.fail_closed_verdict, self.fail_closed_rule_ref, False)
        if result.allowed:
            verdict = next(v for v in PERMIT_VERDICTS if any(r.verdict == v for r in deciding))
        else:
            verdict = FAIL_CLOSED_VERDICT
        first = [r.rule_ref for r in deciding if r.verdict == verdict]
        rest = [r.rule_ref for r in deciding if r.verdict != verdict]
        refs = tuple(dict.fromkeys(first + rest))
        return Derivation(verdict, refs[0], True, rule_refs=refs)


def _text_or_absent(value: Any) -> Any:
    return value if type(value) is str else ABSENT


def _askable(key: tuple[Any, ...]) -> bool:
    """A request Cedar can be asked about: principal, action and resource are strings."""
    return type(key[0]) is str and type(key[1]) is str and type(key[2]) is str


def read_cedar(
    data: bytes, shown: str, policy_id: str, schema: bytes | None, schema_path: Any
) -> CedarPolicy:
    """Parse (and, with ``schema``, validate) a Cedar policy set; ``PolicyFileError`` if bad."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PolicyFileError(f"policy {shown}: invalid UTF-8 at byte {error.start}") from None
    try:
        document = json.loads(cedarpy.policies_to_json_str(text))
    except ValueError as error:
        message = _one_line(str(error))
        line = _error_line(text, str(error))
        where = f"{shown}:{line}" if line else shown
        raise PolicyFileError(f"policy {where}: Cedar parse error: {message}") from None
    if document.get("templates"):
        raise PolicyFileError(f"policy {shown}: policy templates are not supported")
    rules = _rules(document.get("staticPolicies", {}), shown)
    if not rules:
        raise PolicyFileError(f"policy {shown}: holds no policy (everything would be denied)")
    if schema is not None:
        _validate(text, schema, shown, schema_path, rules)
    source = PolicySource("cedar", policy_id, sha256_text(data), len(rules), shown)
    return CedarPolicy(text, source, rules, reads_of(document.get("staticPolicies", {})))


def _rules(policies: Mapping[str, Any], shown: str) -> tuple[_Rule, ...]:
    rules = []
    seen: set[str] = set()
    for cedar_id in sorted(policies, key=_policy_number):
        policy = policies[cedar_id]
        notes = policy.get("annotations") or {}
        rule_ref = notes.get("id") or cedar_id
        if rule_ref in seen:
            raise PolicyFileError(f"policy {shown}: @id({rule_ref!r}) is given to two policies")
        seen.add(rule_ref)
        declared = notes.get("verdict")
        if policy.get("effect") == "forbid":
            if declared not in (None, FAIL_CLOSED_VERDICT):
                raise PolicyFileError(
                    f"policy {shown}: forbid policy {rule_ref} has @verdict({declared!r}); "
                    "a forbid derives block"
                )
            verdict = FAIL_CLOSED_VERDICT
        else:
            if declared is not None and declared not in PERMIT_VERDICTS:
                raise PolicyFileError(
                    f"policy {shown}: permit policy {rule_ref} has @verdict({declared!r}); "
                    f"a permit derives one of {', '.join(PERMIT_VERDICTS)}"
                )
            verdict = declared or "allow"
        rules.append(_Rule(cedar_id, rule_ref, verdict))
    return tuple(rules)


def _policy_number(cedar_id: str) -> tuple[int, str]:
    digits = cedar_id.removeprefix("policy")
    return (int(digits), cedar_id) if digits.isdigit() else (1 << 30, cedar_id)


def _validate(
    text: str, schema: bytes, shown: str, schema_path: Any, rules: Sequence[_Rule]
) -> None:
    try:
        schema_text = schema.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PolicyFileError(
            f"Cedar schema {schema_path}: invalid UTF-8 at byte {error.start}"
        ) from None
    result = cedarpy.validate_policies(text, schema_text)
    if result.validation_passed:
        return
    first = result.errors[0]
    refs = {rule.cedar_id: rule.rule_ref for rule in rules}
    if not first.policy_id:
        raise PolicyFileError(f"Cedar schema {schema_path}: {_one_line(first.error)}")
    rule_ref = refs.get(first.policy_id, first.policy_id)
    more = f" (and {len(result.errors) - 1} more)" if len(result.errors) > 1 else ""
    raise PolicyFileError(
        f"policy {shown}: policy {rule_ref} does not validate against {schema_path}: "
        f"{_one_line(first.error)}{more}"
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


def _error_line(text: str, message: str) -> int | None:
    """Return the line of a Cedar parse error: the first prefix of lines that fails alike.

    The engine's message carries no position. Only for files of up to 2,000 lines.
    """
    lines = text.splitlines(keepends=True)
    if len(lines) > 2000:
        return None
    for count in range(1, len(lines) + 1):
        try:
            cedarpy.policies_to_json_str("".join(lines[:count]))
        except ValueError as error:
            if str(error) == message:
                return count
    return None
