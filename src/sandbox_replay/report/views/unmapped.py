"""The run page's "Unmapped tool calls": the calls of a harness log no map rule matched."""

from __future__ import annotations

import json
import re

from sandbox_replay.importers.inspect_bundle import EXPORTER_REF
from sandbox_replay.importers.tool_map import UNCLASSIFIED
from sandbox_replay.load.run import BUNDLE_MANIFEST
from sandbox_replay.report.views.common import MAIN_PAGE, text
from sandbox_replay.report.views.index import RunIndex
from sandbox_replay.report.views.models import UnmappedTool, UnmappedView

FILL_IN = "FILL_IN"
# By the exporter_ref of a bundle an import wrote: the map's docs page, the command taking it.
HARNESSES = {
    EXPORTER_REF.format("inspect"): ("docs/inspect.md", "import inspect"),
    EXPORTER_REF.format("agentdojo"): ("docs/agentdojo.md", "import agentdojo"),
}
_GLOB_SPECIAL = re.compile(r"([*?\[])")


def unmapped(ix: RunIndex, from_page: str = MAIN_PAGE) -> UnmappedView | None:
    """Return the unmapped calls of a run imported from a harness log; None if there are none.

    The run is built from the log itself or from a bundle an import wrote: either way its
    manifest names the importer. An unclassified request's ``action_kind`` is its tool's name
    (``ToolMap.classify``).
    """
    manifest = ix.replay.run.object(BUNDLE_MANIFEST) or {}
    harness = HARNESSES.get(text(manifest.get("exporter_ref")))
    if harness is None:
        return None
    calls: dict[str, int] = {}
    first: dict[str, str] = {}
    for row in ix.requests:
        if row.get("requested_capability") != UNCLASSIFIED:
            continue
        name = text(row.get("action_kind"))
        calls[name] = calls.get(name, 0) + 1
        first.setdefault(name, text(row.get("request_id")))
    if not calls:
        return None
    names = sorted(calls)
    hrefs = ix.request_hrefs([first[name] for name in names], from_page)
    tools = tuple(UnmappedTool(n, calls[n], href) for n, href in zip(names, hrefs, strict=True))
    return UnmappedView(tools, map_snippet(names), *harness)


def map_snippet(names: list[str]) -> str:
    """Return a map file (JSON, ASCII) with one rule per tool name to fill in."""
    rules = [
        {
            "rule_id": f"my_{name}",
            # A glob: its special characters stand for themselves in brackets.
            "function": _GLOB_SPECIAL.sub(r"[\1]", name),
            "action_kind": FILL_IN,
            "requested_capability": FILL_IN,
            "risk_class": FILL_IN,
        }
        for name in names
    ]
    return json.dumps({"map_id": "map:my_tools", "rules": rules}, indent=2) + "\n"
