"""The policy in force: derive what each request's verdict should have been.

A derivation reads only the request's own shape, never its recorded verdict. Two kinds
of policy implement it (FORMAT sections 2 and 6), both behind ``Policy``:

- ``PolicyTable``: a table of rules by risk class, each requiring an action shape
  (``action_kind``, ``requested_capability``, ``source_trust_label``); anything
  unrecognised or mismatched derives to the fail-closed verdict, block. The packaged
  table lives in ``data/policy_table.json``; a team's own is read by ``read_policy``.
- ``cedar.CedarPolicy``: a Cedar policy set, where Cedar's default deny is the
  fail-closed rule.

Each distinct shape is derived once and shared by every request of that shape, so a
policy's cost grows with the number of shapes, not of requests. ``read_policy`` reads a
policy file and refuses a bad one with ``PolicyFileError`` (one line naming the file and,
where known, the line).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

SHAPE_FIELDS = ("action_kind", "requested_capability", "source_trust_label")
# All that a table derivation reads of a request.
DERIVATION_FIELDS = ("risk_class", *SHAPE_FIELDS)
VERDICTS = ("allow", "warn", "block", "review")
FAIL_CLOSED_VERDICT = "block"
FAIL_CLOSED_RULE_REF = "rule:sandbox_policy_fail_closed_unrecognized_action"
# Policy files are small; a larger one is refused before it is read.
MAX_POLICY_BYTES = 4 * 1024 * 1024


class RequestFields(Protocol):
    """A request as a policy reads it: each field by name, None where it is not held."""

    def get(self, name: str, /) -> Any: ...


@dataclass(frozen=True, slots=True)
class Derivation:
    """The verdict a request derives to, and why.

    ``rule_ref`` is the first determining rule (what a derived row shows); ``rule_refs``
    all of them where a policy has more than one (Cedar), else empty. ``recognized`` is
    False where no rule applied (the fail-closed rule decided); ``mismatched_fields``
    names the shape fields that differ from a known risk class's table row;
    ``error_policy_ids`` the policies whose evaluation failed. Any of these means
    fail-closed.
    """

    verdict: str
    rule_ref: str
    recognized: bool
    mismatched_fields: tuple[str, ...] = ()
    rule_refs: tuple[str, ...] = ()
    error_policy_ids: tuple[str, ...] = ()
    # Every rule ref that determined this verdict (a verdict row must cite one): made
    # once, since requests of one shape share a derivation and each row is held to it.
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
    """Which policy was in force: its kind, id, file digest and rule count.

    ``path`` is where it was read from (None for the packaged table); the record keeps
    the other four (FORMAT 6), the site manifest the path too.
    """

    kind: str  # "table" or "cedar"
    policy_id: str
    sha256: str
    rule_count: int
    path: str | None = None

    def record(self) -> dict[str, Any]:
        """Return the result record's ``policy_source``."""
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
        ...

    def derive_each(self, requests: Sequence[RequestFields]) -> list[Derivation]:
        """Derive each request, in order (once per distinct shape)."""
        ...

    def rules_in_force(self) -> tuple[RuleInfo, ...]:
        """Every rule of the policy in its order, then the fail-closed rule."""
        ...

    def recognized_classes(
        self, risk_classes: Collection[Any], decided: Iterable[tuple[Any, Derivation]]
    ) -> set[str]:
        """Return the risk classes the policy recognises.

        ``risk_classes`` holds the request rows' distinct risk classes that are strings;
        ``decided`` pairs each derived request's risk class with its derivation (read only
        where needed).
        """
        ...


class PolicyFileError(ValueError):
    """A policy file that cannot be used; the message is one line naming the file."""


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

    @property
    def fail_closed_derivation(self) -> Derivation:
        return Derivation(self.fail_closed_verdict, self.fail_closed_rule_ref, recognized=False)

    def derive(self, request: RequestFields) -> Derivation:
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

    def derive_each(self, requests: Sequence[RequestFields]) -> list[Derivation]:
        """Derive each request, in order, once per distinct (risk class, shape) of strings.

        A derivation reads only ``DERIVATION_FIELDS``, so requests that agree on them
        share one (frozen) ``Derivation``; anything but strings is derived on its own.
        """
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
        rules = {rule.rule_ref: rule.verdict for rule in self.rules.values()}
        rules.setdefault(self.fail_closed_rule_ref, self.fail_closed_verdict)
        return tuple(RuleInfo(ref, verdict) for ref, verdict in rules.items())

    def recognized_classes(
        self, risk_classes: Collection[Any], decided: Iterable[tuple[Any, Derivation]]
    ) -> set[str]:
        return {name for name in self.rules if name in risk_classes}


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


def sha256_text(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@cache
def default_table() -> PolicyTable:
    """Return the table shipped with the package."""
    data = (resources.files("sandbox_replay") / "data" / "policy_table.json").read_bytes()
    return parse_table(json.loads(data), sha256_text(data))


def parse_table(data: Mapping[str, Any], sha256: str = "", path: str | None = None) -> PolicyTable:
    """Build a table from its JSON form, refusing duplicate risk classes and bad verdicts.

    Raises ``ValueError`` (a one-line reason) for a table that breaks the rules the JSON
    Schema cannot state: a risk class twice, or a fail-closed verdict other than block.
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
    table_id = data.get("table_id", "")
    source = PolicySource("table", table_id, sha256, len(rules), path)
    return PolicyTable(rules, fallback["verdict"], fallback["rule_ref"], source)


def read_policy(path: Path, cedar_schema: Path | None = None) -> Policy:
    """Read a policy file: a ``.json`` table or a ``.cedar`` policy set.

    The table is checked against the published JSON Schema (``sandbox-replay schema
    policy_table``); the Cedar set is parsed and, with ``cedar_schema``, validated
    against it. Raises ``PolicyFileError`` with one line naming the file for anything
    that cannot be used, before any request is evaluated.
    """
    suffix = path.suffix.lower()
    if suffix not in (".json", ".cedar"):
        raise PolicyFileError(f"policy {path}: a policy file is a .json table or a .cedar set")
    if cedar_schema is not None and suffix != ".cedar":
        raise PolicyFileError(f"--cedar-schema {cedar_schema} applies to a .cedar policy only")
    data = _read_small(path, "policy")
    shown = path.as_posix()
    # Recorded (and re-read by ``verify``) relative to the working directory, the inputs
    # root; a file outside it by its name alone: no absolute host path in a record.
    inside = path.resolve().is_relative_to(Path.cwd().resolve())
    recorded = Path(os.path.relpath(path)).as_posix() if inside else path.name
    if suffix == ".cedar":
        from sandbox_replay.model.cedar import (
            read_cedar,  # cedarpy is loaded only for a Cedar policy
        )

        schema = _read_small(cedar_schema, "Cedar schema") if cedar_schema is not None else None
        policy: Policy = read_cedar(data, shown, path.stem, schema, cedar_schema)
    else:
        policy = _read_table(data, shown)
    return policy.with_path(recorded)


def _read_small(path: Path, what: str) -> bytes:
    try:
        if not path.is_file():
            raise PolicyFileError(f"{what} {path} is not a file")
        if path.stat().st_size > MAX_POLICY_BYTES:
            raise PolicyFileError(
                f"{what} {path} is over {MAX_POLICY_BYTES // (1024 * 1024)} MiB; it was not read"
            )
        return path.read_bytes()
    except OSError as error:
        raise PolicyFileError(f"cannot read {what} {path}: {error.strerror or error}") from None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key[:48]!r}")
            seen.add(key)
    return obj


def _read_table(data: bytes, shown: str) -> PolicyTable:
    try:
        document = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError as error:
        raise PolicyFileError(f"policy {shown}: invalid UTF-8 at byte {error.start}") from None
    except json.JSONDecodeError as error:
        raise PolicyFileError(f"policy {shown}:{error.lineno}: {error.msg}") from None
    except ValueError as error:
        raise PolicyFileError(f"policy {shown}: {error}") from None
    from sandbox_replay.model.policy_schema import check_policy_table  # pydantic: only for a table

    problem = check_policy_table(document)
    if problem is not None:
        raise PolicyFileError(
            f"policy {shown}: {problem} (see `sandbox-replay schema policy_table`)"
        )
    try:
        return parse_table(document, sha256_text(data), shown)
    except ValueError as error:
        raise PolicyFileError(f"policy {shown}: {error}") from None


def coverage(policy: Policy, derivations: Mapping[str, Derivation]) -> dict[str, Any]:
    """Return the result record's ``policy_coverage`` (FORMAT 6).

    Each rule of the policy in force with how many requests it determined, and the rules
    no request exercised. A request determined by several rules counts for each.
    """
    counts: dict[str, int] = {}
    for derivation, times in _tally(derivations.values()).items():
        for ref in derivation.determining:
            counts[ref] = counts.get(ref, 0) + times
    rules = [
        {
            "rule_ref": rule.rule_ref,
            "verdict": rule.verdict,
            "request_count": counts.get(rule.rule_ref, 0),
        }
        for rule in policy.rules_in_force()
    ]
    return {
        "rules": rules,
        "unexercised_rule_refs": [rule["rule_ref"] for rule in rules if not rule["request_count"]],
    }


def _tally(derivations: Collection[Derivation]) -> dict[Derivation, int]:
    """Count equal derivations (requests of one shape share one object: counted by id)."""
    by_id: dict[int, list[Any]] = {}
    for derivation in derivations:
        entry = by_id.get(id(derivation))
        if entry is None:
            by_id[id(derivation)] = [derivation, 1]
        else:
            entry[1] += 1
    tally: dict[Derivation, int] = {}
    for derivation, times in by_id.values():
        tally[derivation] = tally.get(derivation, 0) + times
    return tally


@dataclass(frozen=True)
class PolicyChoice:
    """Which policy each run is replayed with: a default, and some for given run folders.

    ``runs`` pairs a folder (absolute, resolved) with its policy; a run under one of them
    takes the deepest such folder's policy, any other run ``default`` (None: the packaged
    table).
    """

    default: Policy | None = None
    runs: tuple[tuple[Path, Policy], ...] = ()

    def for_run(self, folder: Path) -> Policy | None:
        resolved = folder.resolve()
        best: tuple[int, Policy] | None = None
        for root, policy in self.runs:
            if resolved == root or resolved.is_relative_to(root):
                depth = len(root.parts)
                if best is None or depth > best[0]:
                    best = (depth, policy)
        return best[1] if best is not None else self.default

    def sources(self) -> list[PolicySource]:
        """Every policy a user gave (the default first), for digests and manifests."""
        given = [self.default] if self.default is not None else []
        given += [policy for _, policy in self.runs]
        return [policy.source for policy in given]


PROJECT_FILE = "pyproject.toml"
PROJECT_TABLE = "sandbox-replay"
# Option defaults the table may set, by command (``project_defaults``); the policy keys are
# read by ``choose_policies``.
RUN_DEFAULTS = frozenset(
    {
        "max-file-mb",
        "max-rows",
        "max-depth",
        "max-string-chars",
        "site-url",
        "forbidden-classes",
        "root",
        "quiet",
    }
)
BUILD_DEFAULTS = frozenset(
    {"jobs", "fail-on", "site-url", "forbidden-classes", "root", "exclude", "quiet"}
)
_PATH_DEFAULTS = frozenset({"forbidden-classes", "root"})
_PROJECT_KEYS = {"policy", "cedar-schema", "run-policies"} | RUN_DEFAULTS | BUILD_DEFAULTS


def read_project_settings(folder: Path) -> tuple[dict[str, Any], Path | None]:
    """Return ``[tool.sandbox-replay]`` of ``folder/pyproject.toml`` and that file's path.

    An empty table and None where there is no such file. Raises ``PolicyFileError`` for a
    file that cannot be read or parsed, or a table with keys this tool does not know (a
    misspelt key would otherwise be ignored without a word).
    """
    import tomllib

    path = folder / PROJECT_FILE
    if not path.is_file():
        return {}, None
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except OSError as error:
        raise PolicyFileError(f"cannot read {path}: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise PolicyFileError(f"{path}: {error}") from None
    table = document.get("tool", {}).get(PROJECT_TABLE, {})
    if not isinstance(table, dict):
        raise PolicyFileError(f"{path}: [tool.{PROJECT_TABLE}] is not a table")
    unknown = sorted(set(table) - _PROJECT_KEYS)
    if unknown:
        known = ", ".join(sorted(_PROJECT_KEYS))
        raise PolicyFileError(
            f"{path}: [tool.{PROJECT_TABLE}] has unknown key(s) {', '.join(unknown)}; "
            f"known: {known}"
        )
    return table, path


def project_defaults(folder: Path) -> dict[str, dict[str, Any]]:
    """Return the option defaults ``[tool.sandbox-replay]`` of ``folder/pyproject.toml``
    sets, by command, as click's ``default_map`` takes them (keys as option names with
    underscores). A path is taken relative to the project file's folder. A command-line
    option or a ``SANDBOX_REPLAY_*`` variable still wins over it.
    """
    settings, project = read_project_settings(folder)
    if project is None:
        return {}
    values: dict[str, Any] = {}
    for key in RUN_DEFAULTS | BUILD_DEFAULTS:
        if key in settings:
            value = settings[key]
            if key in _PATH_DEFAULTS:
                if not isinstance(value, str) or not value:
                    raise PolicyFileError(f"{project}: {key} must be a path (a string)")
                value = str(_relative_to_cwd(project.parent / value))
            values[key] = value

    def for_command(keys: frozenset[str]) -> dict[str, Any]:
        return {k.replace("-", "_"): v for k, v in values.items() if k in keys}

    run = for_command(RUN_DEFAULTS)
    return {"run": run, "run-sandbox-bundle": dict(run), "build": for_command(BUILD_DEFAULTS)}


def choose_policies(policy: Path | None, cedar_schema: Path | None, folder: Path) -> PolicyChoice:
    """Read the policies a command replays with: ``--policy`` (and ``--cedar-schema``),
    else ``policy`` in ``[tool.sandbox-replay]`` of ``folder/pyproject.toml``, plus that
    table's ``run-policies`` (run folder = policy file). Paths in the project file are
    relative to its folder. Raises ``PolicyFileError`` for anything that cannot be used.
    """
    settings, project = read_project_settings(folder)
    base = project.parent if project is not None else folder

    def setting_path(key: str, value: Any) -> Path:
        if not isinstance(value, str) or not value:
            raise PolicyFileError(f"{project}: {key} must be a path (a string)")
        given = Path(value)
        return given if given.is_absolute() else _relative_to_cwd(base / given)

    if policy is None and "policy" in settings:
        policy = setting_path("policy", settings["policy"])
        if cedar_schema is None and "cedar-schema" in settings:
            cedar_schema = setting_path("cedar-schema", settings["cedar-schema"])
    elif cedar_schema is None and "cedar-schema" in settings and policy is not None:
        cedar_schema = setting_path("cedar-schema", settings["cedar-schema"])
    if cedar_schema is not None and policy is None:
        raise PolicyFileError("--cedar-schema needs a Cedar policy (--policy FILE.cedar)")
    schema_for = cedar_schema if policy is not None and policy.suffix == ".cedar" else None
    default = read_policy(policy, schema_for) if policy is not None else None
    runs = []
    mapping = settings.get("run-policies", {})
    if not isinstance(mapping, dict):
        raise PolicyFileError(f"{project}: run-policies must be a table of folder = policy file")
    for run_folder, run_policy in sorted(mapping.items()):
        folder_path = setting_path(f"run-policies.{run_folder!r}", run_folder)
        runs.append((folder_path.resolve(), read_policy(setting_path("run-policies", run_policy))))
    return PolicyChoice(default, tuple(runs))


def _relative_to_cwd(path: Path) -> Path:
    """Return ``path`` relative to the working directory where it lies under it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path
