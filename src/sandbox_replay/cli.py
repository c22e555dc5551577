"""The command line: thin typer commands, each one call into the library."""

from __future__ import annotations

import gc
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Annotated

import typer
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

from sandbox_replay.codes import REGISTRY, Layer, lookup
from sandbox_replay.exports import ExportTargets, export_run, write_exports
from sandbox_replay.exports.text import one_line, visible
from sandbox_replay.inputs import InputMode
from sandbox_replay.loader import LoadLimits
from sandbox_replay.pipeline import ReplayConfig, replay
from sandbox_replay.policy import Policy, PolicyChoice, PolicyFileError, choose_policies
from sandbox_replay.records import RunRecords, build_records, write_records
from sandbox_replay.scan import (
    ForbiddenClassesError,
    ForbiddenScanner,
    ForbiddenTable,
    read_forbidden_table,
    scanner_with,
)
from sandbox_replay.version import __version__

app = typer.Typer(
    name="sandbox-replay",
    help=(
        "Replay recorded AI-agent sandbox actions, re-derive what the fail-closed policy "
        "should have decided, and hold the recorded verdicts, side effects, rollbacks and "
        "replays to it. Exit status: 0 pass, 1 blocked, 2 usage error."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

EXIT_PASS, EXIT_BLOCKED, EXIT_USAGE = 0, 1, 2

# Set by ``main``: this process is the command's own, so its collector is ours to tune.
# Never set in the tests' in-process runner, nor for a library caller.
_process_is_ours = False


def progress(message: str) -> None:
    """Write one progress line to stderr, keeping stdout for machine-readable output.

    The message names folders and files, whose names are input too: it is printed on one
    line with its control and invisible characters shown as ``<U+XXXX>``.
    """
    print(f"sandbox-replay: {one_line(message)}", file=sys.stderr, flush=True)


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


def summary_lines(records: RunRecords) -> list[str]:
    """Return the human summary of a run: status, headline figures, codes."""
    r = records.result
    trace = r["public_agent_execution_trace"]
    # An outcome other than blocked/executed is the recorded verdict label: input text.
    outcomes = ", ".join(
        f"{n} {terminal_safe(k, 40)}" for k, n in trace["summary"]["outcome_counts"].items()
    )
    lines = [
        f"status: {r['status']}  ({r['input_mode']}, bundle {terminal_safe(r['bundle_id'])})",
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
    lines.append(f"findings: {r['finding_count']}  error codes: {len(r['error_codes'])}")
    lines.extend(f"  {code}" for code in r["error_codes"])
    return lines


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


def extra_scanner(table: ForbiddenTable | None) -> ForbiddenScanner | None:
    """Return the scanner of the packaged table plus ``table``; None for the packaged one."""
    return scanner_with(table.classes) if table is not None else None


def check_export_targets(targets: ExportTargets) -> None:
    for path in targets.paths():
        if path.is_dir():
            raise usage_error(f"export path {path} is a folder, not a file")
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
) -> None:
    check_input_dir(input_dir)
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
    config = ReplayConfig(input_dir, mode, limits, policy, scanner=scanner, progress=progress)
    outcome = replay(config)
    records = build_records(outcome)
    try:
        started = time.perf_counter()
        written = write_records(records, mode, out_dir, acceptance_out)
        progress(f"wrote the records in {time.perf_counter() - started:.1f}s")
        if targets.paths():
            summary = targets.markdown is not None  # only it shows headline and chart
            name = input_dir.resolve().name
            runs = [export_run(name, outcome, None, records.result, summary=summary)]
            written += write_exports(targets, runs)
    except OSError as error:
        where = f" {error.filename}" if error.filename else ""
        raise usage_error(f"cannot write{where}: {error.strerror or error}") from None
    for path in written:
        progress(f"wrote {path}")
    stream = sys.stderr if card else sys.stdout
    for line in summary_lines(records):
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
        min=1,
        help="Refuse any input file or copied body larger than this many MiB, unread.",
    ),
]
MaxRowsOpt = Annotated[
    int, typer.Option("--max-rows", min=1, help="Refuse a list file with more rows than this.")
]
MaxDepthOpt = Annotated[
    int,
    typer.Option(
        "--max-depth",
        min=1,
        max=512,
        help="Refuse a file whose arrays and objects nest deeper than this (checked before "
        "parsing).",
    ),
]
MaxStringOpt = Annotated[
    int,
    typer.Option("--max-string-chars", min=1, help="Refuse a file holding a longer string or key."),
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
        help="A Cedar schema the .cedar policy is validated against before any request "
        "is evaluated.",
        show_default=False,
    ),
]
ForbiddenClassesOpt = Annotated[
    Path | None,
    typer.Option(
        "--forbidden-classes",
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
) -> None:
    """Replay a fixture folder: the seven core files plus the eight negative-case files.

    Writes the result record, board, validation receipt and acceptance record. Every
    negative case must fire its code; a missing one blocks the run. A file over a limit
    (--max-*) is refused with SANDBOX_POLICY_INPUT_LIMIT_EXCEEDED, which blocks.
    Exit 0 pass, 1 blocked, 2 usage error.
    """
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
) -> None:
    """Replay an exported sandbox bundle: the seven core files, the bundle manifest,
    the source-module manifest and the copied bodies under source_modules/.

    Writes the bundle validation result. A file over a limit (--max-*) is refused with
    SANDBOX_POLICY_INPUT_LIMIT_EXCEEDED, which blocks. Exit 0 pass, 1 blocked, 2 usage error.
    """
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
    from sandbox_replay.schemas import SCHEMA_MODELS, schema_bytes, write_schemas

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
    """Pack a built site into a reproducible tar.gz and write SHA256SUMS beside it.

    Entries are sorted, owned by 0:0 with normalised modes, and dated SOURCE_DATE_EPOCH
    (0 when unset), so packing the same site twice gives the same bytes.
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
            help="Exit 1 when any run is 'blocked' (for CI gates); by default the "
            "command exits 0 whenever the site is built.",
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
) -> None:
    """Replay every run found and render the static report site.

    Exit 0 when the site is built, whatever the runs found; with --fail-on blocked,
    1 if any run was blocked or any folder that may hold a run was skipped (hidden,
    symbolic link, unreadable, too deep) and no --exclude names it; 2 on a usage error.
    """
    from sandbox_replay.report.build import BuildConfig, BuildError, build_site, epoch_from_env
    from sandbox_replay.report.discover import DiscoveryError, exported_runs
    from sandbox_replay.report.parallel import SchedulerError

    if fail_on not in (None, "blocked"):
        raise usage_error(f"--fail-on accepts only 'blocked', got {fail_on!r}")
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
    check_export_targets(targets)
    if jobs is not None and jobs < 1:
        raise usage_error(f"--jobs must be at least 1, got {jobs}")
    table = read_forbidden_classes(forbidden_classes)
    policies = read_policies(policy, cedar_schema)
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
            runs = exported_runs(
                config.paths,
                known=result.exports,
                summary=summary,
                scanner=extra_scanner(table),
                policies=policies,
            )
            exported = write_exports(targets, runs)
    except (BuildError, DiscoveryError, SchedulerError) as error:
        raise usage_error(str(error)) from None
    for path in exported:
        progress(f"wrote {path}")
    blocked = sum(1 for run in result.runs if run.status == "blocked")
    skipped = len(result.unexcluded)
    excluded = len(result.skipped) - skipped
    state = "unchanged" if result.unchanged else "written"
    progress(
        f"site {state}: {result.out_dir}/index.html "
        f"({len(result.runs)} runs, {blocked} blocked, {skipped} skipped"
        + (f", {excluded} excluded" if excluded else "")
        + f", {result.file_count} files)"
    )
    raise typer.Exit(EXIT_BLOCKED if fail_on == "blocked" and result.any_blocked else EXIT_PASS)


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
        report = verify_site(VerifyConfig(site_dir, inputs, progress=progress))
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


def _version(value: bool) -> None:
    if value:
        print(f"sandbox-replay {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Replay recorded AI-agent sandbox actions and check their containment claims."""


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
    """
    global _process_is_ours
    _process_is_ours = True
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
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
    except typer.Abort:
        print("sandbox-replay: aborted", file=sys.stderr)
        sys.exit(EXIT_BLOCKED)
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
    sys.exit(code)
