"""The tool's version: the one place it is written (pyproject.toml reads it from here).

A literal rather than ``importlib.metadata.version``: that import and the lookup of the
installed distribution cost ~60 ms on every command, a fifth of the CLI's start-up.
"""

from __future__ import annotations

__version__ = "0.1.0"

TOOL_NAME = "sandbox-replay"
