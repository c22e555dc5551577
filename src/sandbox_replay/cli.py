"""The command line: thin typer commands, each one call into the library."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

from sandbox_replay.atomic import write_bytes_atomic
from sandbox_replay.checks.pipeline import ReplayConfig, replay
from sandbox_replay.exports import (
    ExportTargets,
    attach_changes,
    export_run,
    outside_root,
    write_exports,
)
from sandbox_replay.exports.text import one_line, visible
from sandbox_replay.load.files import LoadLimits
from sandbox_replay.load.run import CORE_FILES, InputMode
from sandbox_replay.load.scan import (
    ForbiddenClassesError,
    ForbiddenScanner,
    ForbiddenTable,
    read_forbidden_table,
    scanner_with,
)
from sandbox_replay.model.codes import REGISTRY, Layer, lookup
from sandbox_replay.model.policy import (
    Policy,
    PolicyChoice,
    PolicyFileError,
    choose_policies,
    project_defaults,
)
from sandbox_replay.records.build import RunRecords, build_records, write_records
from sandbox_replay.records.changes import Changes
from sandbox_replay.version import __version__

if TYPE_CHECKING:
    from sandbox_replay.importers.inspect_logs import ImportOptions

app = typer.Typer(
    name="sandbox-replay",
    help=(
        "Replay recorded AI-agent sandbox actions, re-derive what the fail-closed policy "
        "should have decided, and hold the recorded verdicts, side effects, rollbacks and "
        "replays to it. run and run-sandbox-bundle exit 0 pass, 1 blocked, 2 usage error; "
        "build exits 0 once the site is built (1 with --fail-on blocked when a run blocked), "
        "2 on a usage error. Defaults of most options can be set in SANDBOX_REPLAY_* "
        "environment variables (each option's help names its own)."
    ),
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

EXIT_PASS, EXIT_BLOCKED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it

# Set by ``main``: this process is the command's own, so its collector is ours to tune.
# Never set in the tests' in-process runner, nor for a library caller.
_process_is_ours = False


@dataclass
class _Output:
    """How much a command says, set by its -q/-v options (each command sets it anew)."""

    quiet: bool = False
    verbose: bool = False


_output = _Output()


def set_output(quiet: bool, verbose: bool) -> None:
    if quiet and verbose:
        raise usage_error("-q and -v ask for opposite things; give one")
    _output.quiet, _output.verbose = quiet, verbose


def progress(message: str) -> None:
    """Write one progress line to stderr, keeping stdout for machine-readable output.

    The message names folders and files, whose names are input too: it is printed on one
    line with its control and invisible characters shown as ``<U+XXXX>``. With ``-q``
    nothing is said but errors and the summary.
    """
    if not _output.quiet:
        print(f"sandbox-replay: {one_line(message)}", file=sys.stderr, flush=True)


def colour(text: str, code: str, stream: TextIO) -> str:
    """Wrap ``text`` in an ANSI colour on a terminal: never with NO_COLOR set, always with
    FORCE_COLOR set (https://no-color.org, https://force-color.org), else when ``stream``
    is a TTY."""
    if os.environ.get("NO_COLOR"):
        return text
    if not os.environ.get("FORCE_COLOR") and not (hasattr(stream, "isatty") and stream.isatty()):
        return text
    return f"\033[{code}m{text}\033[0m"


def usage_error(message: str) -> typer.Exit:
    print(f"sandbox-replay: error: {one_line(message)}", file=sys.stderr, flush=True)
    return typer.Exit(EXIT_USAGE)


def check_input_dir(path: Path) -> None:
    if not path.exists():
        raise usage_error(f"input folder {path} does not exist")
    if not path.is_dir():
        raise usage_error(f"input {path} is not a folder")


def check_out_dir(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise usage_error(f"output path {path} exists and is not a folder")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise usage_error(f"output path {path} lies under {parent}, which is a file")


def check_out_file(path: Path, what: str) -> None:
    if path.is_dir():
        raise usage_error(f"{what} {path} is a folder, not a file")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise usage_error(f"{what} {path} lies under {parent}, which is a file")


def terminal_safe(text: object, limit: int = 120) -> str:
    """Return input-derived text fit for a terminal: one line, nothing hidden.

    Every character ``visible`` marks, and any other one that is not printable (a line
    break, a tab, a no-break space, an unassigned code point), is shown as ``<U+XXXX>``.
    """
    shown = "".join(
        c if c.isprintable() else f"<U+{ord(c):04X}>" for c in visible(str(text)[:limit])
    )
    return shown + ("..." if len(str(text)) > limit else "")


# At most this many findings are listed after a run (``-v``: all of them).
SHOWN_FINDINGS = 10


def expected_alarms(result: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Return the findings that are a fixture's planted negative cases firing, by design."""
    observed = result["observed_negative_cases"]
    return [
        f
        for f in result["findings"]
        if f["layer"] == Layer.NEGATIVE_CASES.value
        and f["error_code"] in observed.get(f.get("negative_case_id"), ())
    ]


def finding_lines(
    result: Mapping[str, Any], where: str, limit: int | None = SHOWN_FINDINGS
) -> list[str]:
    """Return the run's findings as ``path:line: CODE message`` lines (as ruff prints them).

    The expected negative-case alarms are left out (they are counted on their own);
    ``where`` is the input folder as given, so a line's path opens from the working
    directory. Past ``limit``, one line says how many more the result record holds.
    """
    expected = {id(f) for f in expected_alarms(result)}
    shown = [f for f in result["findings"] if id(f) not in expected]
    lines = []
    for finding in shown[:limit] if limit is not None else shown:
        path = f"{where.rstrip('/')}/{finding['path']}" if finding.get("path") else where
        line = f":{finding['line']}" if finding.get("line") else ""
        lines.append(
            f"{terminal_safe(path, 200)}{line}: {finding['error_code']} "
            f"{terminal_safe(finding['message'], 200)}"
        )
    if limit is not None and len(shown) > limit:
        lines.append(f"... and {len(shown) - limit} more in the result record (-v lists all)")
    return lines


def summary_lines(records: RunRecords, stream: TextIO | None = None) -> list[str]:
    """Return the human summary of a run: status, headline figures, codes."""
    r = records.result
    trace = r["public_agent_execution_trace"]
    # An outcome other than blocked/executed is the recorded verdict label: input text.
    outcomes = ", ".join(
        f"{n} {terminal_safe(k, 40)}" for k, n in trace["summary"]["outcome_counts"].items()
    )
    status = r["status"]
    if stream is not None:
        status = colour(status, "32" if status == "pass" else "1;31", stream)
    lines = [
        f"status: {status}  ({r['input_mode']}, bundle {terminal_safe(r['bundle_id'])})",
        f"requests: {r['action_request_count']}  derived: {r['derived_block_count']} block, "
        f"{r['derived_allow_count']} allow, {r['derived_review_count']} review  "
        f"mismatches: {r['derived_policy_verdict_mismatch_count']}",
        f"side effects: {r['side_effect_receipt_count']} rows, "
        f"{r['blocked_without_execution_count']} blocked without execution  "
        f"rollbacks: {r['rollback_verified_count']}/{r['rollback_receipt_count']} verified  "
        f"cold replays: {r['cold_replay_confirmed_count']}/{r['cold_replay_count']} confirmed "
        f"({r['cold_replay_pass_count']} labelled pass)",
        f"trace: {trace['span_count']} spans ({outcomes or 'none'})  "
        f"scan: {r['secret_exclusion_scan']['blocking_hit_count']} forbidden hit(s)",
    ]
    if r["expected_negative_cases"]:
        lines.append(
            f"negative cases: {len(r['observed_negative_cases'])}/"
            f"{len(r['expected_negative_cases'])} fired"
            + (
                f"  missing: {', '.join(r['missing_negative_cases'])}"
                if r["missing_negative_cases"]
                else ""
            )
        )
    alarms = expected_alarms(r)
    alarm_codes = {f["error_code"] for f in alarms}
    other_codes = [c for c in r["error_codes"] if c not in alarm_codes or _also_a_gap(r, c)]
    expected = f" ({len(alarms)} of them the expected negative-case alarms)" if alarms else ""
    lines.append(f"findings: {r['finding_count']}{expected}  error codes: {len(other_codes)}")
    lines.extend(f"  {code}" for code in other_codes)
    return lines


def _also_a_gap(result: Mapping[str, Any], code: str) -> bool:
    """Say whether ``code`` is raised by a finding other than an expected alarm too."""
    alarms = {id(f) for f in expected_alarms(result)}
    return any(f["error_code"] == code and id(f) not in alarms for f in result["findings"])


def read_forbidden_classes(path: Path | None) -> ForbiddenTable | None:
    """Read and check a ``--forbidden-classes`` table (either shape); None when none is given."""
    if path is None:
        return None
    if not path.is_file():
        raise usage_error(f"forbidden-classes table {path} is not a file")
    try:
        return read_forbidden_table(path)
    except ForbiddenClassesError as error:
        raise usage_error(str(error)) from None
    except OSError as error:
        raise usage_error(f"cannot read forbidden-classes table {path}: {error.strerror}") from None


def read_policies(policy: Path | None, cedar_schema: Path | None) -> PolicyChoice:
    """Read ``--policy``/``--cedar-schema`` or ``[tool.sandbox-replay]`` of ./pyproject.toml."""
    try:
        return choose_policies(policy, cedar_schema, Path.cwd())
    except PolicyFileError as error:
        raise usage_error(str(error)) from None


def _shown_folder(folder: Path) -> str:
    try:
        return folder.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return folder.name


def say_policy(policy: Policy, applies_to: str = "") -> None:
    """Say which policy a replay derives with (nothing for the packaged table)."""
    source = policy.source
    progress(
        f"policy: {source.kind} {source.policy_id} from {source.path} "
        f"({source.rule_count} rules, {source.sha256[:19]}...){applies_to}"
    )


def import_options(
    map_file: Path | None,
    rollback_from_teardown: bool,
    table: ForbiddenTable | None,
    per_log: bool = False,
) -> ImportOptions:
    """Return how Inspect AI logs are imported; a bad map file is a usage error."""
    from sandbox_replay.importers.inspect_logs import ImportOptions
    from sandbox_replay.importers.tool_map import MapFileError, empty_map, read_tool_map

    try:
        tool_map = read_tool_map(map_file) if map_file is not None else empty_map()
    except MapFileError as error:
        raise usage_error(terminal_safe(error, 400)) from None
    return ImportOptions(
        tool_map,
        per_log=per_log,
        rollback_from_teardown=rollback_from_teardown,
        scanner=extra_scanner(table),
    )


def extra_scanner(table: ForbiddenTable | None) -> ForbiddenScanner | None:
    """Return the scanner of the packaged table plus ``table``; None for the packaged one."""
    return scanner_with(table.classes) if table is not None else None


def check_export_targets(targets: ExportTargets, site_dir: Path | None = None) -> None:
    """Refuse export paths that cannot be written, or that a build would lose.

    ``site_dir`` is the site folder of ``build``: every build replaces it whole, so an
    export inside it would vanish on the next build and fail ``verify`` meanwhile.
    """
    from sandbox_replay.exports.sarif import part_number

    site = site_dir.resolve() if site_dir is not None else None
    sarif = targets.sarif.resolve() if targets.sarif is not None else None
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
                f"export path {path} is a name the SARIF log {targets.sarif} "
                "takes when split; choose another"
            )
    if targets.site_url is not None:
        from sandbox_replay.exports.markdown import check_site_url  # its chart code, only here

        try:
            check_site_url(targets.site_url)
        except ValueError as error:
            raise usage_error(str(error)) from None


def _execute(
    input_dir: Path,
    out_dir: Path,
    mode: InputMode,
    card: bool,
    acceptance_out: Path | None,
    targets: ExportTargets,
    limits: LoadLimits,
    jobs: int | None,
    forbidden_classes: Path | None,
    policy_file: Path | None,
    cedar_schema: Path | None,
    root: Path | None = None,
) -> None:
    check_input_dir(input_dir)
    if not any((input_dir / name).exists() for name in CORE_FILES):
        # A wrong path in CI must not look like a containment failure (exit 1).
        raise usage_error(
            f"{input_dir} holds none of the seven core files ({', '.join(CORE_FILES)}): "
            "not a fixture or bundle folder"
        )
    scanner = extra_scanner(read_forbidden_classes(forbidden_classes))
    policy = read_policies(policy_file, cedar_schema).for_run(input_dir)
    check_out_dir(out_dir)
    if acceptance_out is not None:
        check_out_file(acceptance_out, "acceptance path")
    check_export_targets(targets)
    if jobs is not None and jobs < 1:
        raise usage_error(f"--jobs must be at least 1, got {jobs}")
    if _process_is_ours:
        # One replay in a process that ends with it: nothing it builds is in a reference
        # cycle worth collecting, and walking its rows cost 0.6 s of a 60,000-request run
        # (2.96 against 3.58 s, medians of 7 interleaved) over ``main``'s threshold.
        gc.disable()
    if policy is not None:
        say_policy(policy)
    progress(f"replaying {input_dir} ({'fixture' if mode is InputMode.FIXTURE else 'bundle'} mode)")
    detail = progress if _output.verbose else None
    config = ReplayConfig(
        input_dir, mode, limits, policy, scanner=scanner, progress=progress, detail=detail
    )
    outcome = replay(config)
    records = build_records(outcome)
    try:
        started = time.perf_counter()
        written = write_records(records, mode, out_dir, acceptance_out)
        progress(f"wrote the records in {time.perf_counter() - started:.1f}s")
        if targets.paths():
            summary = targets.markdown is not None  # only it shows headline and chart
            name = input_dir.resolve().name
            warning = outside_root(input_dir, root)
            if warning is not None:
                progress(warning)
            runs = [export_run(name, outcome, root, records.result, summary=summary)]
            written += write_exports(targets, runs)
    except OSError as error:
        where = f" {error.filename}" if error.filename else ""
        raise usage_error(f"cannot write{where}: {error.strerror or error}") from None
    for path in written:
        progress(f"wrote {path}")
    stream = sys.stderr if card else sys.stdout
    said = summary_lines(records, stream)
    if _output.quiet:
        said = said[:1]
    else:
        limit = None if _output.verbose else SHOWN_FINDINGS
        said += finding_lines(records.result, str(input_dir), limit)
    for line in said:
        print(line, file=stream)
    if card:
        print(json.dumps(records.card, indent=2))
    raise typer.Exit(EXIT_PASS if outcome.passed else EXIT_BLOCKED)


InputOpt = Annotated[
    Path,
    typer.Option("--input", "-i", help="Folder holding the input files.", show_default=False),
]
OutOpt = Annotated[
    Path,
    typer.Option(
        "--out",
        "-o",
        help="Folder to write the records into (created if absent).",
        show_default=False,
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
    typer.Option(
        "--sarif",
        help="Also write the findings as a SARIF 2.1.0 log (for code scanning) to this file.",
        show_default=False,
    ),
]
JunitOpt = Annotated[
    Path | None,
    typer.Option(
        "--junit",
        help="Also write the layer checks as JUnit XML (for CI test reports) to this file.",
        show_default=False,
    ),
]
MarkdownOpt = Annotated[
    Path | None,
    typer.Option(
        "--markdown",
        help="Also write a Markdown summary (for a CI job summary or PR comment) to this file.",
        show_default=False,
    ),
]
_DEFAULT_LIMITS = LoadLimits()
_MB = 1024 * 1024
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
    typer.Option(
        "--jobs",
        "-j",
        help="Accepted for older scripts and ignored: one run replays in one process.",
        show_default=False,
        hidden=True,
    ),
]


PolicyOpt = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        envvar="SANDBOX_REPLAY_POLICY",
        help="The policy to derive verdicts with: a .json table (sandbox-replay schema "
        "policy_table) or a .cedar policy set; default: policy in [tool.sandbox-replay] "
        "of ./pyproject.toml, else the packaged table.",
        show_default=False,
    ),
]
CedarSchemaOpt = Annotated[
    Path | None,
    typer.Option(
        "--cedar-schema",
        envvar="SANDBOX_REPLAY_CEDAR_SCHEMA",
        help="A Cedar schema the .cedar policy is validated against before any request "
        "is evaluated.",
        show_default=False,
    ),
]
ForbiddenClassesOpt = Annotated[
    Path | None,
    typer.Option(
        "--forbidden-classes",
        envvar="SANDBOX_REPLAY_FORBIDDEN_CLASSES",
        help="A forbidden-classes table (ours, or the original implementation's "
        "classes[].terms[].token shape) whose classes are added to the packaged ones; "
        "a hit of any class blocks the run.",
        show_default=False,
    ),
]


def load_limits(
    max_file_mb: int, max_rows: int, max_depth: int, max_string_chars: int
) -> LoadLimits:
    """Build the loader's limits from the command-line options."""
    return LoadLimits(
        max_file_bytes=max_file_mb * _MB,
        max_rows=max_rows,
        max_string_chars=max_string_chars,
        max_depth=max_depth,
    )


RootOpt = Annotated[
    Path | None,
    typer.Option(
        "--root",
        envvar="SANDBOX_REPLAY_ROOT",
        help="Folder the exports' file paths are relative to (default: the repository the "
        "working folder lies in, found by its .git, else the working folder).",
        show_default=False,
    ),
]
MapOpt = Annotated[
    Path | None,
    typer.Option(
        "--map",
        help="Map file classifying Inspect AI tool calls into request shapes (README, "
        "Replaying Inspect AI logs); without it every call is unclassified and derives to block.",
        show_default=False,
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
    typer.Option(
        "--exclude",
        help="Accept a skipped folder (hidden, symbolic link, unreadable or too deep) as not "
        "replayed, so it no longer counts as blocked: a folder path relative to the working "
        "directory, or a glob of such paths ('*' also matches '/'); it names that folder and "
        "every folder under it. Repeatable.",
        show_default=False,
    ),
]
SiteUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--site-url",
        envvar="SANDBOX_REPLAY_SITE_URL",
        help="Absolute URL of the published report site; the Markdown summary links codes "
        "to its catalog.",
        show_default=False,
    ),
]


@app.command("run")
def run_fixture(
    input_dir: InputOpt,
    out_dir: OutOpt,
    acceptance_out: Annotated[
        Path | None,
        typer.Option(
            "--acceptance-out",
            help="Where to write the acceptance record (default: inside --out).",
            show_default=False,
        ),
    ] = None,
    card: CardOpt = False,
    sarif: SarifOpt = None,
    junit: JunitOpt = None,
    markdown: MarkdownOpt = None,
    site_url: SiteUrlOpt = None,
    max_file_mb: MaxFileMbOpt = _DEFAULT_LIMITS.max_file_bytes // _MB,
    max_rows: MaxRowsOpt = _DEFAULT_LIMITS.max_rows,
    max_depth: MaxDepthOpt = _DEFAULT_LIMITS.max_depth,
    max_string_chars: MaxStringOpt = _DEFAULT_LIMITS.max_string_chars,
    jobs: ReplayJobsOpt = None,
    forbidden_classes: ForbiddenClassesOpt = None,
    policy: PolicyOpt = None,
    cedar_schema: CedarSchemaOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    root: RootOpt = None,
) -> None:
    """Replay a fixture folder: the seven core files plus the eight negative-case files.

    Writes the result record, board, validation receipt and acceptance record. Every
    negative case must fire its code; a missing one blocks the run. A file over a limit
    (--max-*) is refused with SANDBOX_POLICY_INPUT_LIMIT_EXCEEDED, which blocks.
    Exit 0 pass, 1 blocked, 2 usage error.
    """
    set_output(quiet, verbose)
    targets = ExportTargets(sarif, junit, markdown, site_url)
    limits = load_limits(max_file_mb, max_rows, max_depth, max_string_chars)
    _execute(
        input_dir,
        out_dir,
        InputMode.FIXTURE,
        card,
        acceptance_out,
        targets,
        limits,
        jobs,
        forbidden_classes,
        policy,
        cedar_schema,
        root,
    )


@app.command("run-sandbox-bundle")
def run_bundle(
    input_dir: InputOpt,
    out_dir: OutOpt,
    card: CardOpt = False,
    sarif: SarifOpt = None,
    junit: JunitOpt = None,
    markdown: MarkdownOpt = None,
    site_url: SiteUrlOpt = None,
    max_file_mb: MaxFileMbOpt = _DEFAULT_LIMITS.max_file_bytes // _MB,
    max_rows: MaxRowsOpt = _DEFAULT_LIMITS.max_rows,
    max_depth: MaxDepthOpt = _DEFAULT_LIMITS.max_depth,
    max_string_chars: MaxStringOpt = _DEFAULT_LIMITS.max_string_chars,
    jobs: ReplayJobsOpt = None,
    forbidden_classes: ForbiddenClassesOpt = None,
    policy: PolicyOpt = None,
    cedar_schema: CedarSchemaOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    root: RootOpt = None,
) -> None:
    """Replay an exported sandbox bundle: the seven core files, the bundle manifest,
    the source-module manifest and the copied bodies under source_modules/.

    Writes the bundle validation result. A file over a limit (--max-*) is refused with
    SANDBOX_POLICY_INPUT_LIMIT_EXCEEDED, which blocks. Exit 0 pass, 1 blocked, 2 usage error.
    """
    set_output(quiet, verbose)
    targets = ExportTargets(sarif, junit, markdown, site_url)
    limits = load_limits(max_file_mb, max_rows, max_depth, max_string_chars)
    _execute(
        input_dir,
        out_dir,
        InputMode.BUNDLE,
        card,
        None,
        targets,
        limits,
        jobs,
        forbidden_classes,
        policy,
        cedar_schema,
        root,
    )


import_app = typer.Typer(
    help="Turn another harness's logs into bundle folders that run-sandbox-bundle and build replay.",
    no_args_is_help=True,
)
app.add_typer(import_app, name="import")


@import_app.command("inspect")
def import_inspect(
    logs: Annotated[
        list[Path],
        typer.Argument(
            help="Inspect AI .eval logs, or folders searched for them.", show_default=False
        ),
    ],
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Folder to write the bundle folders into.", show_default=False
        ),
    ],
    map_file: MapOpt = None,
    per_log: Annotated[
        bool, typer.Option("--per-log", help="One bundle per log instead of one per sample.")
    ] = False,
    rollback_from_teardown: TeardownOpt = False,
    forbidden_classes: ForbiddenClassesOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Import Inspect AI evaluation logs as bundle folders, one per sample (or per log).

    Reads the logs with Inspect's own API (the extra sandbox-replay[inspect]). Bundles
    carry refs and sha256 digests, never argument, output or command bodies. Exit 0 when
    every bundle is written, 2 on a usage error or a log that cannot be read.
    """
    from sandbox_replay.importers.inspect_logs import (
        InspectImportError,
        find_logs,
        import_logs,
        write_bundles,
    )

    set_output(quiet, False)
    options = import_options(
        map_file, rollback_from_teardown, read_forbidden_classes(forbidden_classes), per_log
    )
    try:
        found = find_logs(logs)
        if not found:
            shown = ", ".join(str(path) for path in logs)
            raise InspectImportError(f"no .eval log found under {shown}")
        bundles = import_logs(found, options)
        written = write_bundles(bundles, out_dir)
    except InspectImportError as error:
        raise usage_error(terminal_safe(error, 400)) from None
    for bundle, folder in zip(bundles, written, strict=True):
        if bundle.secret_matches:
            counts = ", ".join(f"{c}: {n}" for c, n in sorted(bundle.secret_matches.items()))
            progress(
                f"{terminal_safe(folder)}: forbidden material in tool bodies ({counts}); not written"
            )
        progress(f"wrote {terminal_safe(folder)}")
    progress(
        f"imported {len(found)} log(s) as {len(written)} bundle(s) into {terminal_safe(out_dir)}"
    )


@app.command("codes")
def explain_codes(
    code: Annotated[
        str | None,
        typer.Argument(
            help="A finding code to explain; omit to list every code.", show_default=False
        ),
    ] = None,
) -> None:
    """List every finding code by layer, or print one code's full documentation.

    Writes to stdout only: the list (code, severity, one-line message), or the code's
    layer, severity and Markdown doc (what it checks, why, an example, the fix).
    Exit 0, or 2 for an unknown code.
    """
    if code is None:
        for layer in Layer:
            entries = REGISTRY.by_layer(layer)
            if not entries:
                continue
            print(f"{layer.label}:")
            for entry in entries:
                print(f"  {entry.code}  [{entry.severity.value}]  {entry.summary}")
        return
    found = lookup(code.strip().upper())
    if found is None:
        raise usage_error(f"unknown finding code {code!r}; run 'sandbox-replay codes' to list them")
    print(found.code)
    print(f"layer: {found.layer.label}  severity: {found.severity.value}")
    print(found.summary)
    print()
    print(found.doc.strip())


@app.command("schema")
def print_schema(
    name: Annotated[
        str | None,
        typer.Argument(help="A schema to print; omit to list them.", show_default=False),
    ] = None,
    write: Annotated[
        Path | None,
        typer.Option(
            "--write",
            help="Write every schema as <name>.schema.json into this folder instead.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Print the JSON Schema of an input file or of the result record, or list them."""
    # Imported here: building the pydantic models costs every other command ~0.15 s.
    from sandbox_replay.records.schemas import SCHEMA_MODELS, schema_bytes, write_schemas

    if write is not None:
        if write.exists() and not write.is_dir():
            raise usage_error(f"schema folder {write} is a file")
        for path in write_schemas(write):
            progress(f"wrote {path}")
        return
    if name is None:
        for known, model in SCHEMA_MODELS.items():
            print(f"{known}  {(model.__doc__ or '').strip().splitlines()[0]}")
        return
    if name not in SCHEMA_MODELS:
        raise usage_error(f"unknown schema {name!r}; run 'sandbox-replay schema' to list them")
    sys.stdout.write(schema_bytes(name).decode("ascii"))


@app.command("pack")
def pack(
    site_dir: Annotated[
        Path, typer.Argument(help="The built report site folder.", show_default=False)
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Archive to write (default: <site folder>.tar.gz beside the folder).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Pack a site built by build into a reproducible tar.gz and list it in SHA256SUMS.

    Entries are sorted, owned by 0:0 with normalised modes, and dated SOURCE_DATE_EPOCH
    (0 when unset), so packing the same site twice gives the same bytes. SHA256SUMS beside
    the archive is merged: other files' lines are kept, this archive's line replaced.
    """
    from sandbox_replay.exports.pack import (
        PackConfig,
        PackError,
        default_archive,
        pack_site,
        source_date_epoch,
    )

    try:
        config = PackConfig(site_dir, out or default_archive(site_dir), source_date_epoch())
        written = pack_site(config)
    except PackError as error:
        raise usage_error(str(error)) from None
    for path in written:
        progress(f"wrote {path}")


@app.command("build")
def build(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Fixture or bundle folders, or folders to search for them (default: ./fixtures).",
            show_default=False,
        ),
    ] = None,
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", help="Folder to write the site into.")
    ] = Path("site"),
    fail_on: Annotated[
        str | None,
        typer.Option(
            "--fail-on",
            help="Exit 1 when any run is 'blocked' (for CI gates); with --baseline, "
            "'regression' when a run that passed in the baseline is blocked, 'new' when "
            "there is a regression or any finding the baseline did not have. By default "
            "the command exits 0 whenever the site is built.",
            show_default=False,
        ),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            help="A previous build to compare with: its site folder or a pack archive of "
            "it. The site then shows what changed since (regressions, new and fixed "
            "findings, changed inputs) and records the baseline's digest.",
            show_default=False,
        ),
    ] = None,
    label: Annotated[
        str | None,
        typer.Option(
            "--label",
            help="This build's label in history.json and the trend (default: the build "
            "time from SOURCE_DATE_EPOCH, if set).",
            show_default=False,
        ),
    ] = None,
    templates: Annotated[
        Path | None,
        typer.Option(
            "--templates",
            help="Folder of templates (and assets/) searched before the built-in ones.",
            show_default=False,
        ),
    ] = None,
    sarif: SarifOpt = None,
    junit: JunitOpt = None,
    markdown: MarkdownOpt = None,
    site_url: SiteUrlOpt = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            envvar="SANDBOX_REPLAY_JOBS",
            help="Runs replayed and rendered at once, in separate processes "
            "(default: the number of cores; 1 builds in this process).",
            show_default=False,
        ),
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            help="Address of a Dask distributed scheduler (tcp://host:8786) to replay and "
            "render the runs on; needs the extra sandbox-replay[dask].",
            show_default=False,
        ),
    ] = None,
    single_file: Annotated[
        bool,
        typer.Option(
            "--single-file",
            help="Also write single/<run>.html: each run page as one self-contained file "
            "(stylesheet and script inlined) to attach to a release.",
        ),
    ] = False,
    rebuild: Annotated[
        bool,
        typer.Option(
            "--rebuild",
            help="Replay and render every run, even those whose inputs, templates and "
            "version are unchanged since the last build into --out.",
        ),
    ] = False,
    forbidden_classes: ForbiddenClassesOpt = None,
    policy: PolicyOpt = None,
    cedar_schema: CedarSchemaOpt = None,
    exclude: ExcludeOpt = None,
    map_file: MapOpt = None,
    rollback_from_teardown: TeardownOpt = False,
    quiet: QuietOpt = False,
    root: RootOpt = None,
) -> None:
    """Replay every run found and render the static report site.

    Inspect AI .eval logs given as PATH, or found under a PATH folder, are imported as
    `import inspect` imports them (--map, --rollback-from-teardown) and shown with the log
    as their source.

    Exit 0 when the site is built, whatever the runs found; with --fail-on blocked,
    1 if any run was blocked or any folder that may hold a run was skipped (hidden,
    symbolic link, unreadable, too deep) and no --exclude names it; 2 on a usage error.
    """
    set_output(quiet, False)
    from sandbox_replay.importers.inspect_logs import InspectImportError
    from sandbox_replay.report.baseline import BaselineError, read_baseline
    from sandbox_replay.report.build import BuildConfig, BuildError, build_site, epoch_from_env
    from sandbox_replay.report.discover import DiscoveryError, discover_runs, exported_runs
    from sandbox_replay.report.inspect_runs import importing_logs
    from sandbox_replay.report.parallel import SchedulerError

    if fail_on not in (None, "blocked", "regression", "new"):
        raise usage_error(
            f"--fail-on accepts 'blocked', 'regression' or 'new', got {terminal_safe(fail_on)!r}"
        )
    if fail_on in ("regression", "new") and baseline is None:
        raise usage_error(f"--fail-on {fail_on} needs --baseline: a build to compare with")
    if label is not None and (not label.strip() or len(label) > 100 or not label.isprintable()):
        raise usage_error("--label must be 1 to 100 printable characters")
    if not paths:
        paths = [Path("fixtures")]
        if not paths[0].is_dir():
            raise usage_error(
                "no PATH given and there is no fixtures/ folder here; "
                "pass the fixture or bundle folders to build"
            )
    if templates is not None and not templates.is_dir():
        raise usage_error(f"templates folder {templates} does not exist")
    targets = ExportTargets(sarif, junit, markdown, site_url)
    check_export_targets(targets, out_dir)
    if jobs is not None and jobs < 1:
        raise usage_error(f"--jobs must be at least 1, got {jobs}")
    table = read_forbidden_classes(forbidden_classes)
    policies = read_policies(policy, cedar_schema)
    inspect = import_options(map_file, rollback_from_teardown, table)
    try:
        previous = read_baseline(baseline) if baseline is not None else None
    except BaselineError as error:
        raise usage_error(terminal_safe(error, 400)) from None
    try:
        config = BuildConfig(
            tuple(paths),
            out_dir,
            templates,
            epoch_from_env(),
            progress=progress,
            jobs=jobs,
            scheduler=scheduler,
            single_file=single_file,
            rebuild=rebuild,
            forbidden=table,
            policies=policies,
            exclude=tuple(exclude or ()),
            baseline=previous,
            label=label,
            inspect=inspect,
        )
        result = build_site(config)
        if policies.default is not None:
            say_policy(policies.default, " for every run")
        for folder, run_policy in policies.runs:
            say_policy(run_policy, f" for runs under {_shown_folder(folder)}")
        # One SARIF run / test suite / summary section per run, named as the site names it.
        exported = []
        if targets.paths():
            summary = targets.markdown is not None
            with importing_logs(config.paths, Path.cwd(), inspect) as logs:
                runs = exported_runs(
                    logs.paths,
                    known=result.exports,
                    summary=summary,
                    scanner=extra_scanner(table),
                    policies=policies,
                    root=root,
                    logs=logs.logs,
                )
                if result.changes is not None:
                    runs = attach_changes(runs, result.changes)
                # A run imported from a log is named by the log, not by its passing folder.
                named = {logs.logs.get(r.path.resolve(), r.path) for r in discover_runs(logs.paths)}
                for path in sorted(named):
                    warning = outside_root(path.parent if path.is_file() else path, root)
                    if warning is not None:
                        progress(warning)
                exported = write_exports(targets, runs)
    except (BuildError, DiscoveryError, SchedulerError, InspectImportError) as error:
        raise usage_error(str(error)) from None
    for path in exported:
        progress(f"wrote {path}")
    blocked = sum(1 for run in result.runs if run.status == "blocked")
    skipped = len(result.unexcluded)
    excluded = len(result.skipped) - skipped
    state = "unchanged" if result.unchanged else "written"
    progress(
        f"site {state}: {result.out_dir}/index.html "
        f"({len(result.runs)} run{'' if len(result.runs) == 1 else 's'}, "
        f"{blocked} blocked, {skipped} skipped"
        + (f", {excluded} excluded" if excluded else "")
        + f", {result.file_count} files)"
    )
    changes = result.changes
    if changes is not None:
        progress(changes.summary())
    if fail_on == "blocked":
        failed = result.any_blocked
    else:
        failed = fail_on is not None and changes is not None and changes.fails(fail_on)
    raise typer.Exit(EXIT_BLOCKED if failed else EXIT_PASS)


@app.command("verify")
def verify(
    site_dir: Annotated[
        Path, typer.Argument(help="The published report site folder.", show_default=False)
    ],
    inputs: Annotated[
        Path | None,
        typer.Option(
            "--inputs",
            help="Folder the site's recorded source paths are relative to "
            "(default: the working directory).",
            show_default=False,
        ),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            help="The baseline the site was built with (--baseline of build): a site "
            "folder or pack archive. Needed, and must be the very same, when the site "
            "records one.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Re-run every validator on the inputs a site records and check the site follows.

    Prints each difference on stdout, one line each. Exit 0 when every input, result
    record and page re-derives byte for byte; 1 on any difference or anything that
    cannot be checked; 2 on a usage error.
    """
    from sandbox_replay.report.verify import VerifyConfig, VerifyError, verify_site

    if not site_dir.is_dir():
        raise usage_error(f"site folder {site_dir} does not exist")
    if inputs is not None and not inputs.is_dir():
        raise usage_error(f"inputs folder {inputs} does not exist")
    try:
        config = VerifyConfig(site_dir, inputs, progress=progress, baseline=baseline)
        report = verify_site(config)
    except VerifyError as error:
        progress(f"cannot verify: {terminal_safe(error, 400)}")
        raise typer.Exit(EXIT_BLOCKED) from None
    for line in report.differences:
        print(terminal_safe(line, 400))
    if report.ok:
        progress(f"verified: {len(report.runs)} runs, {report.files_checked} files re-derive")
        raise typer.Exit(EXIT_PASS)
    progress(f"NOT verified: {len(report.differences)} difference(s)")
    raise typer.Exit(EXIT_BLOCKED)


@app.command("diff")
def diff(
    old: Annotated[
        Path, typer.Argument(help="The earlier site folder or pack archive.", show_default=False)
    ],
    new: Annotated[
        Path, typer.Argument(help="The later site folder or pack archive.", show_default=False)
    ],
    markdown: Annotated[
        Path | None,
        typer.Option(
            "--markdown",
            help="Also write the changes as Markdown, for a pull-request comment.",
            show_default=False,
        ),
    ] = None,
    fail_on: Annotated[
        str | None,
        typer.Option(
            "--fail-on",
            help="Exit 1 on a 'regression' (a run that passed in OLD is blocked in NEW), or "
            "on 'new' (a regression or any finding OLD did not have).",
            show_default=False,
        ),
    ] = None,
    site_url: SiteUrlOpt = None,
) -> None:
    """Print what changed from one build to another: regressions and new findings.

    Each new finding is a path:line: CODE message line (paths from the working
    directory, as the sites record their inputs), then a summary line. Exit 0, or 1 with
    --fail-on when there is what it names; 2 on a usage error (a site or archive that
    cannot be read or checked included).
    """
    from sandbox_replay.exports.markdown import diff_markdown
    from sandbox_replay.records.changes import compare
    from sandbox_replay.report.baseline import BaselineError, read_baseline

    if fail_on not in (None, "regression", "new"):
        raise usage_error(
            f"--fail-on accepts 'regression' or 'new', got {terminal_safe(fail_on)!r}"
        )
    if markdown is not None:
        check_out_file(markdown, "--markdown")
    try:
        before, after = read_baseline(old), read_baseline(new)
    except BaselineError as error:
        raise usage_error(terminal_safe(error, 400)) from None
    changes = compare(before.runs, after.runs, before.manifest_sha256, before.label)
    for line in diff_lines(changes):
        print(line)
    if markdown is not None:
        try:
            data = diff_markdown(changes, site_url)
        except ValueError as error:
            raise usage_error(str(error)) from None
        write_bytes_atomic(markdown, data)
        progress(f"wrote {markdown}")
    progress(changes.summary())
    raise typer.Exit(EXIT_BLOCKED if fail_on and changes.fails(fail_on) else EXIT_PASS)


def diff_lines(changes: Changes) -> list[str]:
    """Return the regressions and new findings as ``path:line: CODE message`` lines."""
    lines = []
    for run in changes.regressions:
        lines.append(
            f"{terminal_safe(run.after.source_path, 200)}: REGRESSION run "
            f"{terminal_safe(run.name)} passed in the baseline and is blocked now"
        )
    for run, finding in changes.new_findings:
        folder = run.after.source_path.rstrip("/")
        path = f"{folder}/{finding.path}" if finding.path else folder
        line = f":{finding.line}" if finding.line else ""
        lines.append(
            f"{terminal_safe(path, 200)}{line}: {finding.code} "
            f"{terminal_safe(finding.message, 200)}"
        )
    return lines


def _version(value: bool) -> None:
    if value:
        print(f"sandbox-replay {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Replay recorded AI-agent sandbox actions and check their containment claims.

    Option defaults may also be set in [tool.sandbox-replay] of ./pyproject.toml (README,
    Commands); a command-line option or a SANDBOX_REPLAY_* variable wins over them.
    """
    set_output(quiet=False, verbose=False)  # each command says as much as its own options ask
    try:
        ctx.default_map = project_defaults(Path.cwd())
    except PolicyFileError as error:
        raise usage_error(str(error)) from None


# glibc's mallopt parameters: the size from which a block gets a mapping of its own, and
# how much free memory at the heap's top is kept rather than handed back.
_M_MMAP_THRESHOLD = -3
_M_TRIM_THRESHOLD = -1


def _large_buffers_apart() -> None:
    """Have the C allocator map every block of 1 MiB or more on its own, where it can,
    and keep up to 8 MiB of free memory at its heap's top.

    A replay reads each input file whole into one buffer and lets it go once parsed.
    glibc maps such a block apart, but after freeing one it raises that size limit to the
    block's size, so the next files' buffers land in the heap, and the holes they leave
    there stay in the process's memory under the rows parsed after them: 23 MiB of the
    60,000-request run's peak (317 MiB without this, 294 with it, the code of 4848df7).
    Fixing the limit keeps every large buffer a mapping of its own, returned to the system
    when freed.

    Fixing it also fixes the trim threshold, at glibc's 128 KiB, and the record's pieces
    (1 to 3 MB each, encoded and laid out one after another) then hand the heap's top back
    and fault it in again for every piece: about 60 ms of system time to encode a
    60,000-request record, none with 8 MiB kept. Elsewhere (no glibc) nothing changes.
    """
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, 1 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 8 << 20)


def main() -> None:
    """Run the CLI: a usage error is one line, and no error ever prints a traceback.

    A traceback could quote input text; an internal error names only its type and place,
    and exits 1 (never pass) without a record. A full, read-only or forbidden disk
    (``build.WRITE_FAULTS``) is no bug: a usage error naming the path.

    The collector's pace is the command's process's alone, so it is set here and nowhere
    in the library: a replay builds millions of rows, refs and record pieces, none in a
    reference cycle, and with the default threshold (a collection every 700 new
    containers) the collector would walk the live ones thousands of times (0.4 to 0.5 s
    of a 60,000-request run, measured interleaved). What the imports made is frozen out
    of its view, and it runs every 100,000 new containers instead, so cyclic garbage is
    still collected; a replay command turns it off for its one replay (``_execute``).
    So is the C allocator's (``_large_buffers_apart``).
    """
    global _process_is_ours
    _process_is_ours = True
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    _large_buffers_apart()
    try:
        code = app(standalone_mode=False)
    except NoArgsIsHelpError as error:
        error.show()
        sys.exit(EXIT_USAGE)
    except UsageError as error:
        print(f"sandbox-replay: error: {error.format_message()}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except ClickException as error:
        print(f"sandbox-replay: error: {error.format_message()}", file=sys.stderr)
        sys.exit(error.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        code = EXIT_INTERRUPTED
    except Exception as error:
        from sandbox_replay.report.build import WRITE_FAULTS

        if isinstance(error, OSError) and error.errno in WRITE_FAULTS:
            # A full, read-only or forbidden disk is the user's to fix, not a bug.
            where = f": {terminal_safe(error.filename, 400)}" if error.filename else ""
            print(f"sandbox-replay: error: {error.strerror}{where}", file=sys.stderr)
            sys.exit(EXIT_USAGE)
        place = traceback.extract_tb(error.__traceback__)[-1]
        print(
            f"sandbox-replay: internal error: {type(error).__name__} at "
            f"{Path(place.filename).name}:{place.lineno}; no record was written. "
            "This is a bug: please report it (see SECURITY.md).",
            file=sys.stderr,
        )
        sys.exit(EXIT_BLOCKED)
    code = code if isinstance(code, int) else EXIT_PASS
    if code == EXIT_INTERRUPTED:  # typer turns Ctrl-C into this exit status
        # Records and sites are written whole or not at all: nothing is left half-written.
        print(
            "sandbox-replay: interrupted; no record or site was left half-written",
            file=sys.stderr,
        )
    sys.exit(code)
