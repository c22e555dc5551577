"""A Cedar policy set as the policy in force (FORMAT 6), evaluated by the Cedar engine.

Each request becomes one authorization request: principal ``Agent::"<episode_id>"``,
action ``Action::"<action_kind>"``, resource ``Capability::"<requested_capability>"``,
and as context the request's string fields among ``CONTEXT_FIELDS``. Allow derives the
most cautious ``@verdict`` of the determining permits (``allow`` when absent); deny by a
forbid derives block by the forbids; Cedar's default deny (no determining policy)
derives block by the fail-closed rule, and so does an evaluation error, which the layers
report naming the policy. Rule refs are the policies' ``@id`` annotations (Cedar's own
``policy0``... ids where a policy has none).

Only the fields the policies read decide a request, so requests are grouped by those
fields' values (``_Reads``) and each group is put to Cedar once, in one batch call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from typing import Any

import cedarpy

from sandbox_replay.model.policy import (
    FAIL_CLOSED_RULE_REF,
    FAIL_CLOSED_VERDICT,
    Derivation,
    PolicyFileError,
    PolicySource,
    RequestFields,
    RuleInfo,
    sha256_text,
)

CONTEXT_FIELDS = (
    "risk_class",
    "source_trust_label",
    "normalized_action_ref",
    "untrusted_tool_output_ref",
    "intended_side_effect_ref",
    "action_kind",
    "requested_capability",
)
# What a permit may derive by its @verdict, most cautious first.
PERMIT_VERDICTS = ("review", "warn", "allow")
_ERROR_POLICY = re.compile(r"policy `([^`]+)`")
_ABSENT = object()  # a context field that is not a string: left out of the context


@dataclass(frozen=True)
class _Rule:
    cedar_id: str  # Cedar's own id: policy0, policy1, ...
    rule_ref: str  # its @id annotation, else the Cedar id
    verdict: str


# A literal test a field is put to: ``("eq", text)`` or ``("like", pieces)`` (``_like``).
_Test = tuple[str, Any]


@dataclass(frozen=True)
class _Reads:
    """Which request fields the policy set reads: only these can change a decision.

    ``tests`` holds, for a field (``"principal"``, ``"resource"`` or a context name) that
    every policy reads only by comparing it with a literal (``==`` or ``!=`` a string,
    ``like`` a pattern, ``has``; a principal or resource only by ``==`` in a scope), the
    literal tests it is put to. Two values that pass the same tests are alike to every
    policy, so a request is asked about by which tests its values pass, and one request
    stands for all of its class. A field read any other way is taken as it is.
    """

    principal: bool
    resource: bool
    context: tuple[str, ...]
    tests: Mapping[str, tuple[_Test, ...]] = field(default_factory=dict)

    def classes(self) -> tuple[tuple[_Test, ...] | None, ...]:
        """The tests of each part of a shape key, in ``CedarPolicy._key``'s order."""
        names = ("principal", "action", "resource", *self.context)
        return tuple(self.tests.get(name) for name in names)


@dataclass
class CedarPolicy:
    """A parsed Cedar policy set; ``text`` is kept so a worker process can parse it again."""

    text: str = field(repr=False)
    source: PolicySource
    rules: tuple[_Rule, ...] = field(repr=False)
    reads: _Reads
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

    @cached_property
    def _order(self) -> dict[str, int]:
        return {rule.cedar_id: at for at, rule in enumerate(self.rules)}

    def _policy_set(self) -> Any:
        if self._policies is None:
            self._policies = cedarpy.PolicySet.from_str(self.text)
        return self._policies

    def rules_in_force(self) -> tuple[RuleInfo, ...]:
        rules = {rule.rule_ref: rule.verdict for rule in self.rules}
        rules.setdefault(self.fail_closed_rule_ref, self.fail_closed_verdict)
        return tuple(RuleInfo(ref, verdict) for ref, verdict in rules.items())

    def recognized_classes(
        self, risk_classes: Collection[Any], decided: Iterable[tuple[Any, Derivation]]
    ) -> set[str]:
        """A Cedar policy names no risk classes: those of requests some policy decided."""
        return {name for name, d in decided if type(name) is str and d.recognized}

    def derive_each(self, requests: Sequence[RequestFields]) -> list[Derivation]:
        """Derive each request, in order, putting each distinct shape to Cedar once.

        A shape is the request's values of the fields the policies read (a string, or
        ``_ABSENT``), each reduced to the literal tests it passes where that is all a
        policy does with it (``_Reads.tests``). The first request of a shape is asked
        about, for all of it. Built a column (a field) at a time, each distinct value
        tested once.
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
        shapes = list(zip(*map(_reduced, values, classes), strict=True)) if requests else []
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
                    if value is not _ABSENT
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
        order = self._order
        deciding = sorted(
            (by_id[i] for i in result.diagnostics.reasons if i in by_id),
            key=lambda rule: order[rule.cedar_id],
        )
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


def _reduced(column: list[Any], tests: tuple[_Test, ...] | None) -> list[Any]:
    """Return a field's values reduced to the tests each passes (``_ABSENT`` stays)."""
    if tests is None:
        return column

    @cache
    def passed(value: Any) -> Any:
        if value is _ABSENT:
            return value
        return tuple(_passes(test, value) for test in tests)

    return list(map(passed, column))


def _passes(test: _Test, value: str) -> bool:
    kind, literal = test
    if kind == "eq":
        return bool(value == literal)
    return _like(literal, value)


def _text_or_absent(value: Any) -> Any:
    return value if type(value) is str else _ABSENT


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
    return CedarPolicy(text, source, rules, _reads(document.get("staticPolicies", {})))


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


_SCOPE_TYPES = {"principal": "Agent", "resource": "Capability"}


class _ReadsFinder:
    """Walk the policies' JSON form (Cedar's own) for which fields they read, and how.

    ``context.<name>`` and ``context has <name>`` read one field; ``context`` used any
    other way reads them all. The principal or resource is read where a policy's scope
    constrains it or a condition names it. A use is a literal test where it is ``==`` or
    ``!=`` between the field and a string, ``like`` on the field, or ``has``; any other
    use makes the field ``raw``.
    """

    def __init__(self) -> None:
        self.read: set[str] = set()
        self.raw: set[str] = set()
        self.tests: dict[str, list[_Test]] = {}
        self.whole_context = False

    def scope(self, name: str, scope: Mapping[str, Any]) -> None:
        op = scope.get("op", "All")
        if op == "All":
            return
        self.read.add(name)
        entity = scope.get("entity")
        if op == "==" and isinstance(entity, dict) and entity.get("type") == _SCOPE_TYPES[name]:
            self._test(name, ("eq", entity.get("id")))
        else:  # `in`, `is`, another entity type: taken as it is
            self.raw.add(name)

    def visit(self, node: Any) -> None:
        if isinstance(node, list):
            for child in node:
                self.visit(child)
            return
        if not isinstance(node, dict):
            return
        if len(node) == 1:
            [(op, body)] = node.items()
            if op in ("==", "!=") and isinstance(body, dict):
                if self._literal_test(body.get("left"), body.get("right")):
                    return
                if self._literal_test(body.get("right"), body.get("left")):
                    return
            elif op == "like" and isinstance(body, dict):
                name = _context_attr(body.get("left"))
                pattern = _like_pattern(body.get("pattern"))
                if name is not None and pattern is not None:
                    self._test(name, ("like", pattern))
                    return
            elif op == "has" and isinstance(body, dict) and body.get("left") == {"Var": "context"}:
                if isinstance(body.get("attr"), str):
                    self.read.add(body["attr"])  # presence: absent values stay apart
                    return
            elif op == "." and isinstance(body, dict) and body.get("left") == {"Var": "context"}:
                if isinstance(body.get("attr"), str):
                    self.read.add(body["attr"])
                    self.raw.add(body["attr"])
                    return
            elif op == "Var":
                if body == "context":
                    self.whole_context = True
                elif body in _SCOPE_TYPES:
                    self.read.add(body)
                    self.raw.add(body)
                return
        for child in node.values():
            self.visit(child)

    def _literal_test(self, field_node: Any, value_node: Any) -> bool:
        name = _context_attr(field_node)
        if name is None or not isinstance(value_node, dict):
            return False
        literal = value_node.get("Value") if len(value_node) == 1 else None
        if not isinstance(literal, str):
            return False
        self._test(name, ("eq", literal))
        return True

    def _test(self, name: str, test: _Test) -> None:
        self.read.add(name)
        self.tests.setdefault(name, []).append(test)

    def reads(self) -> _Reads:
        if self.whole_context:
            self.read.update(CONTEXT_FIELDS)
            self.raw.update(CONTEXT_FIELDS)
        context = tuple(n for n in CONTEXT_FIELDS if n in self.read)
        tests = {
            name: tuple(found)
            for name, found in self.tests.items()
            if name not in self.raw and (name in context or name in _SCOPE_TYPES)
        }
        return _Reads("principal" in self.read, "resource" in self.read, context, tests)


def _context_attr(node: Any) -> str | None:
    """Return ``A`` for the node ``context.A``, else None."""
    if isinstance(node, dict) and len(node) == 1 and "." in node:
        body = node["."]
        if isinstance(body, dict) and body.get("left") == {"Var": "context"}:
            attr = body.get("attr")
            return attr if isinstance(attr, str) else None
    return None


def _like_pattern(parts: Any) -> tuple[str, ...] | None:
    """Return a ``like`` pattern's JSON form as its literal pieces between wildcards.

    ``"a*b*"`` becomes ``("a", "b", "")``: a value matches when it starts with the first
    piece, ends with the last and holds the others in order between (``_like``).
    """
    if not isinstance(parts, list):
        return None
    pieces = [""]
    for part in parts:
        if part == "Wildcard":
            pieces.append("")
        elif isinstance(part, dict) and isinstance(part.get("Literal"), str):
            pieces[-1] += part["Literal"]
        else:
            return None
    return tuple(pieces)


def _like(pieces: tuple[str, ...], value: str) -> bool:
    """Say whether ``value`` matches a ``like`` pattern given by its pieces.

    With wildcards the only special character, taking each middle piece at its first
    place after the one before is never wrong: a later place leaves less room for the
    rest. So each piece is looked for once (linear in the value, no backtracking).
    """
    if len(pieces) == 1:
        return value == pieces[0]
    first, last = pieces[0], pieces[-1]
    if len(value) < len(first) + len(last):
        return False
    if not (value.startswith(first) and value.endswith(last)):
        return False
    position, end = len(first), len(value) - len(last)
    for piece in pieces[1:-1]:
        found = value.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True


def _reads(policies: Mapping[str, Any]) -> _Reads:
    """Find which request fields any policy reads, and how (``_ReadsFinder``)."""
    finder = _ReadsFinder()
    for policy in policies.values():
        for name in _SCOPE_TYPES:
            finder.scope(name, policy.get(name, {}))
        for condition in policy.get("conditions", []):
            finder.visit(condition.get("body"))
    return finder.reads()


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


def _error_line(text: str, message: str) -> int | None:
    """Return the line of a Cedar parse error: the first prefix of lines that fails alike.

    The engine's message carries no position; a prefix that stops before the error
    parses or fails otherwise (an unexpected end), and the first that fails with the
    same message ends on the error's line. Only for files of up to 2,000 lines.
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
