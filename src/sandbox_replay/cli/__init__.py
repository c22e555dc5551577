"""The command line: thin typer commands, each one call into the library.

``app`` holds the app, its exit codes and how a command speaks; ``options`` the options
several commands share; every other module is one command.
"""

# ruff: noqa: I001  (the commands are imported in the order --help lists them)
from __future__ import annotations

from sandbox_replay.cli import run, codes, schema, pack, build, verify, diff  # noqa: F401
from sandbox_replay.cli import import_inspect  # noqa: F401
from sandbox_replay.cli.app import app, main
from sandbox_replay.cli.run import SHOWN_FINDINGS

__all__ = ["SHOWN_FINDINGS", "app", "main"]
