"""The typer app, its exit codes, and how every command speaks: progress, colour, errors."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

from sandbox_replay import runtime
from sandbox_replay.exports.text import one_line, visible
from sandbox_replay.model.policy import PolicyFileError, project_defaults
from sandbox_replay.version import __version__

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
# A build that could not read every run it was given (an Inspect log without the extra).
EXIT_INCOMPLETE = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


@dataclass
class _Output:
    """How much a command says, set by its -q/-v options."""

    quiet: bool = False
    verbose: bool = False


output = _Output()


def set_output(quiet: bool, verbose: bool) -> None:
    if quiet and verbose:
        raise usage_error("-q and -v ask for opposite things; give one")
    output.quiet, output.verbose = quiet, verbose


def progress(message: str) -> None:
    """Write one progress line to stderr (nothing with ``-q``), input text made visible."""
    if not output.quiet:
        print(f"sandbox-replay: {one_line(message)}", file=sys.stderr, flush=True)


def colour(text: str, code: str, stream: TextIO) -> str:
    """Wrap ``text`` in an ANSI colour: never with NO_COLOR, always with FORCE_COLOR, else
    when ``stream`` is a TTY (https://no-color.org, https://force-color.org)."""
    if os.environ.get("NO_COLOR"):
        return text
    if not os.environ.get("FORCE_COLOR") and not (hasattr(stream, "isatty") and stream.isatty()):
        return text
    return f"\033[{code}m{text}\033[0m"


def usage_error(message: str) -> typer.Exit:
    print(f"sandbox-replay: error: {one_line(message)}", file=sys.stderr, flush=True)
    return typer.Exit(EXIT_USAGE)


@contextmanager
def usage_errors(*errors: type[Exception], safe: bool = False) -> Iterator[None]:
    """Turn any of the library's ``errors`` raised in the block into a usage error.

    With ``safe`` the message quotes input text, shown as ``terminal_safe`` shows it.
    """
    try:
        yield
    except errors as error:
        raise usage_error(terminal_safe(error, 400) if safe else str(error)) from None


def terminal_safe(text: object, limit: int = 120) -> str:
    """Return input-derived text on one line, each character ``visible`` marks or that is
    not printable shown as ``<U+XXXX>``."""
    shown = "".join(
        c if c.isprintable() else f"<U+{ord(c):04X}>" for c in visible(str(text)[:limit])
    )
    return shown + ("..." if len(str(text)) > limit else "")


def option(*names: str, **settings: Any) -> Any:
    """Return a typer option whose --help shows no default."""
    return typer.Option(*names, show_default=False, **settings)


def argument(**settings: Any) -> Any:
    """Return a typer argument whose --help shows no default."""
    return typer.Argument(show_default=False, **settings)


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
    """Read option defaults from [tool.sandbox-replay] of ./pyproject.toml (options and
    SANDBOX_REPLAY_* variables win over them)."""
    set_output(quiet=False, verbose=False)  # each command says as much as its own options ask
    try:
        ctx.default_map = project_defaults(Path.cwd())
    except PolicyFileError as error:
        raise usage_error(str(error)) from None


def main() -> None:
    """Run the CLI in a process of its own (``runtime``): a usage error is one line, and no
    error prints a traceback, which could quote input text."""
    runtime.tune_process(sys.argv[1] if len(sys.argv) > 1 else None)
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
        _internal_error(error)
    code = code if isinstance(code, int) else EXIT_PASS
    if code == EXIT_INTERRUPTED:  # typer turns Ctrl-C into this exit status
        # Records and sites are written whole or not at all: nothing is left half-written.
        print(
            "sandbox-replay: interrupted; no record or site was left half-written",
            file=sys.stderr,
        )
    sys.exit(code)


def _internal_error(error: Exception) -> None:
    """Exit 2 for a disk the user must fix, else 1 naming the bug's type and place only."""
    from sandbox_replay.report.build import WRITE_FAULTS

    if isinstance(error, OSError) and error.errno in WRITE_FAULTS:
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
