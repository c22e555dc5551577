"""The tool's version: the one place it is written (pyproject.toml reads it from here).

A literal, so no command pays for ``importlib.metadata`` looking up the installed distribution.
"""

from __future__ import annotations

__version__ = "0.1.0"

TOOL_NAME = "sandbox-replay"
