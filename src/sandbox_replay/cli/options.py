"""The options more than one command takes, declared once, and the checks of their values."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sandbox_replay.cli.app import option, progress, usage_error, usage_errors
from sandbox_replay.exports import ExportTargets
from sandbox_replay.load.files import LoadLimits
from sandbox_replay.load.scan import (
    ForbiddenClassesError,
    ForbiddenScanner,
    ForbiddenTable,
    read_forbidden_table,
    scanner_with,
)
from sandbox_replay.model.policy import Policy, PolicyChoice, PolicyFileError, choose_policies

if TYPE_CHECKING:
    from sandbox_replay.importers.inspect_logs import ImportOptions

DEFAULT_LIMITS = LoadLimits()
MB = 1024 * 1024

InputOpt = Annotated[
    Path,
    option("--input", "-i", help="Folder holding the input files."),
]
OutOpt = Annotated[
    Path,
    option(
        "--out",
        "-o",
        help="Folder to write the records into (created if absent).",
    ),
]
CardOpt = Annotated[
    bool,
    typer.Option(
        "--card", help="Print the compact JSON card to stdout (the summary moves to stderr)."
    ),
]
SarifOpt = Annotated[
    Path | None,
    option(
        "--sarif",
        help="Also write the findings as a SARIF 2.1.0 log (for code scanning) to this file.",
    ),
]
JunitOpt = Annotated[
    Path | None,
    option(
        "--junit",
        help="Also write the layer checks as JUnit XML (for CI test reports) to this file.",
    ),
]
MarkdownOpt = Annotated[
    Path | None,
    option(
        "--markdown",
        help="Also write a Markdown summary (for a CI job summary or PR comment) to this file.",
    ),
]
MaxFileMbOpt = Annotated[
    int,
    typer.Option(
        "--max-file-mb",
        envvar="SANDBOX_REPLAY_MAX_FILE_MB",
        min=1,
        help="Refuse any input file or copied body larger than this many MiB, unread.",
    ),
]
MaxRowsOpt = Annotated[
    int,
    typer.Option(
        "--max-rows",
        min=1,
        envvar="SANDBOX_REPLAY_MAX_ROWS",
        help="Refuse a list file with more rows than this.",
    ),
]
MaxDepthOpt = Annotated[
    int,
    typer.Option(
        "--max-depth",
        envvar="SANDBOX_REPLAY_MAX_DEPTH",
        min=1,
        max=512,
        help="Refuse a file whose arrays and objects nest deeper than this (checked before "
        "parsing).",
    ),
]
MaxStringOpt = Annotated[
    int,
    typer.Option(
        "--max-string-chars",
        min=1,
        envvar="SANDBOX_REPLAY_MAX_STRING_CHARS",
        help="Refuse a file holding a longer string or key.",
    ),
]
ReplayJobsOpt = Annotated[
    int | None,
    option(
        "--jobs",
        "-j",
        help="Accepted for older scripts and ignored: one run replays in one process.",
        hidden=True,
    ),
]


PolicyOpt = Annotated[
    Path | None,
    option(
        "--policy",
        envvar="SANDBOX_REPLAY_POLICY",
        help="The policy to derive verdicts with: a .json table (sandbox-replay schema "
        "policy_table) or a .cedar policy set; default: policy in [tool.sandbox-replay] "
        "of ./pyproject.toml, else the packaged table.",
    ),
]
CedarSchemaOpt = Annotated[
    Path | None,
    option(
        "--cedar-schema",
        envvar="SANDBOX_REPLAY_CEDAR_SCHEMA",
        help="A Cedar schema the .cedar policy is validated against before any request "
        "is evaluated.",
    ),
]
ForbiddenClassesOpt = Annotated[
    Path | None,
    option(
        "--forbidden-classes",
        envvar="SANDBOX_REPLAY_FORBIDDEN_CLASSES",
        help="A forbidden-classes table (ours, or the original implementation's "
        "classes[].terms[].token shape) whose classes are added to the packaged ones; "
        "a hit of any class blocks the run.",
    ),
]


RootOpt = Annotated[
    Path | None,
    option(
        "--root",
        envvar="SANDBOX_REPLAY_ROOT",
        help="Folder the exports' file paths are relative to (default: the repository the "
        "working folder lies in, found by its .git, else the working folder).",
    ),
]
MapOpt = Annotated[
    Path | None,
    option(
        "--map",
        help="Map file classifying tool calls into request shapes, tried before the packaged "
        "map of the log's harness (docs/inspect.md); a call no rule matches derives to block.",
    ),
]
TeardownOpt = Annotated[
    bool,
    typer.Option(
        "--rollback-from-teardown",
        help="Count each Inspect AI sample's sandbox teardown as the rollback of every "
        "executed call (labelled as such in the bundle and on the site).",
    ),
]
SensitivityOpt = Annotated[
    bool,
    typer.Option(
        "--sensitivity/--no-sensitivity",
        help="Also plant each seeded escape in a few of the run's own rows, in memory, and "
        "show whether the replay caught it (docs/sensitivity.md).",
    ),
]
RequireSensitivityOpt = Annotated[
    bool,
    typer.Option(
        "--require-sensitivity",
        help="As --sensitivity, and block a run on which a seeded escape was missed "
        "(SANDBOX_POLICY_SEEDED_ESCAPE_MISSED).",
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option(
        "--quiet", "-q", envvar="SANDBOX_REPLAY_QUIET", help="Say only the summary line and errors."
    ),
]
VerboseOpt = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="Also say each layer's time and list every finding."),
]
ExcludeOpt = Annotated[
    list[str] | None,
    option(
        "--exclude",
        help="Accept a skipped folder (hidden, symbolic link, unreadable or too deep) as not "
        "replayed, so it no longer counts as blocked: a folder path relative to the working "
        "directory, or a glob of such paths ('*' also matches '/'); it names that folder and "
        "every folder under it. Repeatable.",
    ),
]
SiteUrlOpt = Annotated[
    str | None,
    option(
        "--site-url",
        envvar="SANDBOX_REPLAY_SITE_URL",
        help="Absolute URL of the published report site; the Markdown summary links codes "
        "to its catalog.",
    ),
]


@dataclass(frozen=True)
class ExportOptions:
    """``--sarif``, ``--junit``, ``--markdown`` and ``--site-url``."""

    sarif: Path | None = None
    junit: Path | None = None
    markdown: Path | None = None
    site_url: str | None = None

    def targets(self, site_dir: Path | None = None) -> ExportTargets:
        """Return the exports to write, refusing paths that cannot be written or that a
        build would lose: inside ``site_dir``, which every build replaces whole."""
        from sandbox_replay.exports.sarif import part_number

        targets = ExportTargets(self.sarif, self.junit, self.markdown, self.site_url)
        site = site_dir.resolve() if site_dir is not None else None
        sarif = self.sarif.resolve() if self.sarif is not None else None
        for path in targets.paths():
            if path.is_dir():
                raise usage_error(f"export path {path} is a folder, not a file")
            if site is not None and path.resolve().is_relative_to(site):
                raise usage_error(
                    f"export path {path} lies inside the site folder {site_dir}, which every "
                    "build replaces whole; write exports outside --out"
                )
            if sarif is not None and part_number(sarif, path.resolve()) is not None:
                raise usage_error(
                    f"export path {path} is a name the SARIF log {self.sarif} "
                    "takes when split; choose another"
                )
        if self.site_url is not None:
            from sandbox_replay.exports.markdown import check_site_url  # its chart code, only here

            with usage_errors(ValueError):
                check_site_url(self.site_url)
        return targets


@dataclass(frozen=True)
class PolicyOptions:
    """``--forbidden-classes``, ``--policy`` and ``--cedar-schema``."""

    forbidden_classes: Path | None = None
    policy: Path | None = None
    cedar_schema: Path | None = None

    def table(self) -> ForbiddenTable | None:
        """Read the forbidden-classes table (either shape); None when none is given."""
        path = self.forbidden_classes
        if path is None:
            return None
        if not path.is_file():
            raise usage_error(f"forbidden-classes table {path} is not a file")
        try:
            with usage_errors(ForbiddenClassesError):
                return read_forbidden_table(path)
        except OSError as error:
            raise usage_error(
                f"cannot read forbidden-classes table {path}: {error.strerror}"
            ) from None

    def choice(self) -> PolicyChoice:
        """Read ``--policy``/``--cedar-schema`` or ``[tool.sandbox-replay]`` of ./pyproject.toml."""
        with usage_errors(PolicyFileError):
            return choose_policies(self.policy, self.cedar_schema, Path.cwd())


@dataclass(frozen=True)
class InspectOptions:
    """``--map`` and ``--rollback-from-teardown``: how Inspect AI logs are imported."""

    map_file: Path | None = None
    rollback_from_teardown: bool = False

    def import_options(self, table: ForbiddenTable | None, per_log: bool = False) -> ImportOptions:
        from sandbox_replay.importers.inspect_logs import ImportOptions
        from sandbox_replay.importers.tool_map import MapFileError, packaged_map, read_tool_map

        with usage_errors(MapFileError, safe=True):
            tool_map = read_tool_map(self.map_file) if self.map_file is not None else packaged_map()
        return ImportOptions(
            tool_map,
            per_log=per_log,
            rollback_from_teardown=self.rollback_from_teardown,
            scanner=extra_scanner(table),
        )


def extra_scanner(table: ForbiddenTable | None) -> ForbiddenScanner | None:
    """Return the scanner of the packaged table plus ``table``; None for the packaged one."""
    return scanner_with(table.classes) if table is not None else None


def check_jobs(jobs: int | None) -> None:
    if jobs is not None and jobs < 1:
        raise usage_error(f"--jobs must be at least 1, got {jobs}")


def say_policy(policy: Policy, applies_to: str = "") -> None:
    """Say which policy a replay derives with (nothing for the packaged table)."""
    source = policy.source
    progress(
        f"policy: {source.kind} {source.policy_id} from {source.path} "
        f"({source.rule_count} rules, {source.sha256[:19]}...){applies_to}"
    )
