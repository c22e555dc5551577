"""The tool's version, read once from the installed distribution."""

from __future__ import annotations

from importlib import metadata

try:
    __version__ = metadata.version("sandbox-replay")
except metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

TOOL_NAME = "sandbox-replay"
