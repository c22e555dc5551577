"""Read the policy in force: a team's table or Cedar set, chosen per run, or the packaged table.

``choose_policies`` reads ``--policy`` or the ``[tool.sandbox-replay]`` table of
``pyproject.toml``, which ``project_defaults`` reads for the commands' option defaults.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

# Re-exported: the layers, records and report name the policy's core from here.
from sandbox_replay.model.derivation import DERIVATION_FIELDS as DERIVATION_FIELDS
from sandbox_replay.model.derivation import FAIL_CLOSED_RULE_REF as FAIL_CLOSED_RULE_REF
from sandbox_replay.model.derivation import SHAPE_FIELDS as SHAPE_FIELDS
from sandbox_replay.model.derivation import VERDICTS as VERDICTS
from sandbox_replay.model.derivation import Derivation as Derivation
from sandbox_replay.model.derivation import Policy as Policy
from sandbox_replay.model.derivation import PolicySource, PolicyTable, parse_table, sha256_text
from sandbox_replay.model.derivation import coverage as coverage
from sandbox_replay.model.derivation import default_table as default_table
from sandbox_replay.small_inputs import DuplicateKeyError, read_small, unique_keys

# Policy files are small; a larger one is refused before it is read.
MAX_POLICY_BYTES = 4 * 1024 * 1024


class PolicyFileError(ValueError):
    """A policy file that cannot be used; the message is one line naming the file."""


def read_policy(path: Path, cedar_schema: Path | None = None) -> Policy:
    """Read a ``.json`` table (checked against its JSON Schema) or a ``.cedar`` policy set
    (validated against ``cedar_schema`` where given); raise ``PolicyFileError`` if unusable."""
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
        from sandbox_replay.model.cedar import read_cedar  # cedarpy: only for a Cedar set

        schema = _read_small(cedar_schema, "Cedar schema") if cedar_schema is not None else None
        policy: Policy = read_cedar(data, shown, path.stem, schema, cedar_schema)
    else:
        policy = _read_table(data, shown)
    return policy.with_path(recorded)


def _read_small(path: Path, what: str) -> bytes:
    return read_small(
        path,
        MAX_POLICY_BYTES,
        PolicyFileError,
        not_file=f"{what} {{path}} is not a file",
        too_large=f"{what} {{path}} is over {MAX_POLICY_BYTES // (1024 * 1024)} MiB; it was not read",
        unreadable=f"cannot read {what} {{path}}: {{reason}}",
    )


def _read_table(data: bytes, shown: str) -> PolicyTable:
    try:
        document = json.loads(data.decode("utf-8"), object_pairs_hook=unique_keys)
    except UnicodeDecodeError as error:
        raise PolicyFileError(f"policy {shown}: invalid UTF-8 at byte {error.start}") from None
    except json.JSONDecodeError as error:
        raise PolicyFileError(f"policy {shown}:{error.lineno}: {error.msg}") from None
    except DuplicateKeyError as error:
        raise PolicyFileError(f"policy {shown}: duplicate key {error.key[:48]!r}") from None
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


@dataclass(frozen=True)
class PolicyChoice:
    """Which policy each run is replayed with: the deepest of ``runs`` (resolved folder,
    policy) the run lies under, else ``default`` (None: the packaged table)."""

    default: Policy | None = None
    runs: tuple[tuple[Path, Policy], ...] = ()

    def for_run(self, folder: Path) -> Policy | None:
        resolved = folder.resolve()
        under = [(len(root.parts), p) for root, p in self.runs if resolved.is_relative_to(root)]
        return max(under, key=itemgetter(0))[1] if under else self.default

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
        "sensitivity",
        "require-sensitivity",
    }
)
BUILD_DEFAULTS = frozenset(
    {
        "jobs",
        "fail-on",
        "site-url",
        "forbidden-classes",
        "root",
        "exclude",
        "quiet",
        "sensitivity",
        "require-sensitivity",
    }
)
_PATH_DEFAULTS = frozenset({"forbidden-classes", "root"})
_PROJECT_KEYS = {"policy", "cedar-schema", "run-policies"} | RUN_DEFAULTS | BUILD_DEFAULTS


def read_project_settings(folder: Path) -> tuple[dict[str, Any], Path | None]:
    """Return ``[tool.sandbox-replay]`` of ``folder/pyproject.toml`` and that file's path
    (``{}, None`` without one); raise ``PolicyFileError`` if unreadable or for an unknown key."""
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
    """Return the option defaults ``[tool.sandbox-replay]`` sets, as click's ``default_map``;
    a path there is relative to the project file's folder."""
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
    """Read ``--policy`` (and ``--cedar-schema``), else the project table's ``policy``, and
    its ``run-policies`` (run folder = policy file); raise ``PolicyFileError`` if unusable."""
    settings, project = read_project_settings(folder)
    base = project.parent if project is not None else folder

    def setting_path(key: str, value: Any) -> Path:
        if not isinstance(value, str) or not value:
            raise PolicyFileError(f"{project}: {key} must be a path (a string)")
        given = Path(value)
        return given if given.is_absolute() else _relative_to_cwd(base / given)

    if policy is None and "policy" in settings:
        policy = setting_path("policy", settings["policy"])
    if policy is not None and cedar_schema is None and "cedar-schema" in settings:
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
