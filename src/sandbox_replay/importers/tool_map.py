"""The map file: which request shape a harness's tool call is, decided by the first matching rule.

A map file is JSON (``import inspect --map FILE``; docs/inspect.md, "The map file")::

    {"map_id": "map:<name>",
     "rules": [{"rule_id": "<name>",
                "function": MATCHER,
                "arguments": {"<argument name>": MATCHER, ...},        (optional)
                "action_kind": "...", "requested_capability": "...", "risk_class": "...",
                "source_trust_label": "...",                            (optional)
                "follows_output_of": ["<function glob>", ...]}]}        (optional)

Without ``--map`` the packaged map of Inspect's standard tools is in force
(``data/inspect_tool_map.json``; docs/inspect.md, "The packaged map"). A user's map extends
it: its rules are tried first, and a packaged rule of the same ``rule_id`` is dropped.

A MATCHER is a glob string (``fnmatch``, whole value, case-sensitive), ``{"glob": "..."}``
or ``{"glob": [...]}`` (any of them), or ``{"regex": "..."}`` (RE2, searched anywhere).
An argument that is not a string is matched as its compact JSON; a rule naming an
argument the call lacks does not match. The first rule whose function and named arguments
all match decides the call's shape; its trust label is ``untrusted_tool_output`` right
after the output of a tool ``follows_output_of`` names (by glob), else ``source_trust_label``
(default ``model_generated``). A call no rule matches is ``unclassified``, which the
default policy derives to block. The maps are evidence: every bundle carries their bytes,
and each classified call names the map and rule that decided it.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import re2

from sandbox_replay.small_inputs import DuplicateKeyError, read_small, unique_keys

UNCLASSIFIED = "unclassified"
MODEL_GENERATED = "model_generated"
UNTRUSTED_TOOL_OUTPUT = "untrusted_tool_output"
NO_MAP_ID = "map:none"
PACKAGED_MAP = "inspect_tool_map.json"
MAX_MAP_BYTES = 1024 * 1024

_REQUIRED_TEXT = ("rule_id", "action_kind", "requested_capability", "risk_class")
_OPTIONAL = ("arguments", "source_trust_label", "follows_output_of")
_RULE_KEYS = frozenset({*_REQUIRED_TEXT, "function", *_OPTIONAL})


class MapFileError(ValueError):
    """A map file that cannot be used; the message is one line naming the file."""


@dataclass(frozen=True)
class Matcher:
    """Globs (any of them matches the whole value) or one RE2 pattern (searched)."""

    globs: tuple[str, ...] = ()
    regex: Any = None

    def matches(self, value: str) -> bool:
        if self.regex is not None:
            return self.regex.search(value) is not None
        return any(fnmatch.fnmatchcase(value, glob) for glob in self.globs)


@dataclass(frozen=True)
class MapRule:
    """One rule of a map file."""

    rule_id: str
    function: Matcher
    arguments: tuple[tuple[str, Matcher], ...]
    action_kind: str
    requested_capability: str
    risk_class: str
    source_trust_label: str
    follows_output_of: tuple[str, ...]  # globs of functions
    map_id: str  # of the map that holds the rule

    def follows(self, previous_function: str | None) -> bool:
        return previous_function is not None and any(
            fnmatch.fnmatchcase(previous_function, glob) for glob in self.follows_output_of
        )


@dataclass(frozen=True)
class Classification:
    """The request shape of one tool call and the map rule that decided it ("" for none)."""

    action_kind: str
    requested_capability: str
    risk_class: str
    source_trust_label: str
    rule_ref: str


@dataclass(frozen=True)
class ToolMap:
    """A map's rules (with those of the map it extends), and its bytes (bundle evidence)."""

    map_id: str
    rules: tuple[MapRule, ...]
    body: bytes
    # The file it was read from, as given (None for the packaged and the empty map).
    path: Path | None = None
    extends: ToolMap | None = None

    def extending(self, base: ToolMap) -> ToolMap:
        """Return this map tried before ``base``, whose rules of the same ids it replaces."""
        own = {rule.rule_id for rule in self.rules}
        kept = tuple(rule for rule in base.rules if rule.rule_id not in own)
        return replace(self, rules=self.rules + kept, extends=base)

    def rebased(self, base: ToolMap) -> ToolMap:
        """Return a user's map file (its own rules, from its bytes) tried before ``base``
        instead of the map it extends; ``base`` alone for a packaged map."""
        if self.path is None:
            return base
        return replace(_parse(json.loads(self.body), self.body), path=self.path).extending(base)

    @property
    def sha256(self) -> str:
        return "sha256:" + hashlib.sha256(self.body).hexdigest()

    def classify(
        self, function: str, arguments: Mapping[str, Any], previous_function: str | None
    ) -> Classification:
        """Return the shape the first matching rule gives the call, else an unclassified one."""
        for rule in self.rules:
            if not rule.function.matches(function):
                continue
            if not all(
                name in arguments and matcher.matches(argument_text(arguments[name]))
                for name, matcher in rule.arguments
            ):
                continue
            return Classification(
                rule.action_kind,
                rule.requested_capability,
                rule.risk_class,
                UNTRUSTED_TOOL_OUTPUT
                if rule.follows(previous_function)
                else rule.source_trust_label,
                f"{rule.map_id}#{rule.rule_id}",
            )
        return Classification(function, UNCLASSIFIED, UNCLASSIFIED, MODEL_GENERATED, "")


def argument_text(value: Any) -> str:
    """Return an argument's value as the text a matcher reads: itself, or compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def empty_map() -> ToolMap:
    """Return a map of no rule, under which every call is unclassified."""
    body = b'{\n  "map_id": "map:none",\n  "rules": []\n}\n'
    return ToolMap(NO_MAP_ID, (), body)


@functools.cache
def packaged_map(name: str = PACKAGED_MAP) -> ToolMap:
    """Return a packaged map (of Inspect's standard tools unless named), in force without ``--map``."""
    body = (resources.files("sandbox_replay") / "data" / name).read_bytes()
    return _parse(json.loads(body), body)


def read_tool_map(path: Path, *, packaged: bool = True) -> ToolMap:
    """Read and check a map file, extending the packaged map unless ``packaged`` is false.

    A bad map file is refused with ``MapFileError``.
    """
    body = read_small(
        path,
        MAX_MAP_BYTES,
        MapFileError,
        too_large="map file {path} is {size} bytes; at most {limit}",
        unreadable="map file {path} cannot be read: {reason}",
    )
    try:
        document = json.loads(body.decode("utf-8"), object_pairs_hook=unique_keys)
    except UnicodeDecodeError:
        raise MapFileError(f"map file {path} is not UTF-8") from None
    except json.JSONDecodeError as error:
        raise MapFileError(
            f"map file {path}:{error.lineno}: not valid JSON ({error.msg})"
        ) from None
    except DuplicateKeyError as error:
        key = json.dumps(error.key)
        raise MapFileError(f"map file {path}: key {key} appears twice in one object") from None
    try:
        read = replace(_parse(document, body), path=path)
    except _Invalid as error:
        raise MapFileError(f"map file {path}: {error}") from None
    return read.extending(packaged_map()) if packaged else read


class _Invalid(ValueError):
    pass


def _parse(document: Any, body: bytes) -> ToolMap:
    if not isinstance(document, dict):
        raise _Invalid("the top level is not an object")
    unknown = sorted(set(document) - {"map_id", "rules"})
    if unknown:
        raise _Invalid(f"unknown key(s) {', '.join(unknown)} at the top level")
    map_id = document.get("map_id")
    if not isinstance(map_id, str) or not map_id.strip():
        raise _Invalid("map_id is missing or not a non-empty string")
    rules = document.get("rules")
    if not isinstance(rules, list):
        raise _Invalid("rules is missing or not a list")
    parsed = tuple(_rule(rule, f"rules[{index}]", map_id) for index, rule in enumerate(rules))
    seen: set[str] = set()
    for rule in parsed:
        if rule.rule_id in seen:
            raise _Invalid(f"rule_id {json.dumps(rule.rule_id)} is given twice")
        seen.add(rule.rule_id)
    return ToolMap(map_id, parsed, body)


def _rule(rule: Any, where: str, map_id: str) -> MapRule:
    if not isinstance(rule, dict):
        raise _Invalid(f"{where} is not an object")
    unknown = sorted(set(rule) - _RULE_KEYS)
    if unknown:
        raise _Invalid(f"{where}: unknown key(s) {', '.join(unknown)}")
    for key in _REQUIRED_TEXT:
        if not isinstance(rule.get(key), str) or not rule[key].strip():
            raise _Invalid(f"{where}.{key} is missing or not a non-empty string")
    if "function" not in rule:
        raise _Invalid(f"{where}.function is missing")
    arguments = rule.get("arguments", {})
    if not isinstance(arguments, dict):
        raise _Invalid(f"{where}.arguments is not an object")
    trust = rule.get("source_trust_label", MODEL_GENERATED)
    if not isinstance(trust, str) or not trust.strip():
        raise _Invalid(f"{where}.source_trust_label is not a non-empty string")
    follows = rule.get("follows_output_of", [])
    if not isinstance(follows, list) or not all(isinstance(f, str) and f for f in follows):
        raise _Invalid(f"{where}.follows_output_of is not a list of function names")
    return MapRule(
        rule["rule_id"],
        _matcher(rule["function"], f"{where}.function"),
        tuple(
            (name, _matcher(value, f"{where}.arguments.{name}"))
            for name, value in sorted(arguments.items())
        ),
        rule["action_kind"],
        rule["requested_capability"],
        rule["risk_class"],
        trust,
        tuple(follows),
        map_id,
    )


def _matcher(value: Any, where: str) -> Matcher:
    if isinstance(value, str):
        return Matcher(globs=(value,))
    if not isinstance(value, dict) or len(value) != 1:
        raise _Invalid(f"{where} is not a glob string, {{'glob': ...}} or {{'regex': ...}}")
    (kind, pattern), *_ = value.items()
    if kind == "glob":
        globs: Sequence[Any] = [pattern] if isinstance(pattern, str) else pattern
        if (
            not isinstance(globs, list | tuple)
            or not globs
            or not all(isinstance(glob, str) for glob in globs)
        ):
            raise _Invalid(f"{where}.glob is not a string or a non-empty list of strings")
        return Matcher(globs=tuple(globs))
    if kind == "regex":
        if not isinstance(pattern, str):
            raise _Invalid(f"{where}.regex is not a string")
        try:
            return Matcher(regex=re2.compile(pattern, _regex_options()))
        except re2.error:
            raise _Invalid(f"{where}.regex is not a pattern RE2 accepts") from None
    raise _Invalid(f"{where}: unknown matcher {json.dumps(kind)} (glob or regex)")


def _regex_options() -> Any:
    options = re2.Options()
    options.log_errors = False
    return options
