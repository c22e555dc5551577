"""Which request fields a Cedar policy set reads, and how: only these can change a decision.

Read from the policies' JSON form (Cedar's own). Two values that pass the same literal
tests are alike to every policy, so ``CedarPolicy`` asks Cedar once per class of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

CONTEXT_FIELDS = (
    "risk_class",
    "source_trust_label",
    "normalized_action_ref",
    "untrusted_tool_output_ref",
    "intended_side_effect_ref",
    "action_kind",
    "requested_capability",
)
ABSENT = object()  # a context field that is not a string: left out of the context

# A literal test a field is put to: ``("eq", text)`` or ``("like", pieces)`` (``like``).
Test = tuple[str, Any]


@dataclass(frozen=True)
class Reads:
    """Which request fields the policy set reads; ``tests``, for each field read only by
    literal tests (``_ReadsFinder``), those tests."""

    principal: bool
    resource: bool
    context: tuple[str, ...]
    tests: Mapping[str, tuple[Test, ...]] = field(default_factory=dict)

    def classes(self) -> tuple[tuple[Test, ...] | None, ...]:
        """Return the tests of each part of a shape key, in ``CedarPolicy.derive_each``'s order."""
        names = ("principal", "action", "resource", *self.context)
        return tuple(self.tests.get(name) for name in names)


def reduced(column: list[Any], tests: tuple[Test, ...] | None) -> list[Any]:
    """Return a field's values reduced to the tests each passes (``ABSENT`` stays)."""
    if tests is None:
        return column

    @cache
    def passed(value: Any) -> Any:
        if value is ABSENT:
            return value
        return tuple(_passes(test, value) for test in tests)

    return list(map(passed, column))


def _passes(test: Test, value: str) -> bool:
    kind, literal = test
    if kind == "eq":
        return bool(value == literal)
    return like(literal, value)


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
        self.tests: dict[str, list[Test]] = {}
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

    def _test(self, name: str, test: Test) -> None:
        self.read.add(name)
        self.tests.setdefault(name, []).append(test)

    def reads(self) -> Reads:
        if self.whole_context:
            self.read.update(CONTEXT_FIELDS)
            self.raw.update(CONTEXT_FIELDS)
        context = tuple(n for n in CONTEXT_FIELDS if n in self.read)
        tests = {
            name: tuple(found)
            for name, found in self.tests.items()
            if name not in self.raw and (name in context or name in _SCOPE_TYPES)
        }
        return Reads("principal" in self.read, "resource" in self.read, context, tests)


def _context_attr(node: Any) -> str | None:
    """Return ``A`` for the node ``context.A``, else None."""
    if isinstance(node, dict) and len(node) == 1 and "." in node:
        body = node["."]
        if isinstance(body, dict) and body.get("left") == {"Var": "context"}:
            attr = body.get("attr")
            return attr if isinstance(attr, str) else None
    return None


def _like_pattern(parts: Any) -> tuple[str, ...] | None:
    """Return a ``like`` pattern's JSON form as its literal pieces between wildcards:
    ``"a*b*"`` becomes ``("a", "b", "")``."""
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


def like(pieces: tuple[str, ...], value: str) -> bool:
    """Say whether ``value`` matches a ``like`` pattern given by its pieces.

    Taking each middle piece at its first place after the one before is never wrong (a
    later place leaves less room for the rest), so there is no backtracking.
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


def reads_of(policies: Mapping[str, Any]) -> Reads:
    """Find which request fields any policy reads, and how (``_ReadsFinder``)."""
    finder = _ReadsFinder()
    for policy in policies.values():
        for name in _SCOPE_TYPES:
            finder.scope(name, policy.get(name, {}))
        for condition in policy.get("conditions", []):
            finder.visit(condition.get("body"))
    return finder.reads()
