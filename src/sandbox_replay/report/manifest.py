"""The records of a site that span its runs: ``manifest.json`` and ``history.json``.

``manifest.json`` is written the way every record is (``atomic.dump_json``), so a later
``verify`` can check a published site against its inputs:

    {"schema_version": "sandbox-replay.site/1",
     "tool": {"name", "version"}, "build_time": <ISO 8601 UTC or null>,
     "forbidden_classes": {"path", "sha256"} (only with --forbidden-classes),
     "inspect_import": {"map": {"path", "sha256"} (null without --map),
                        "packaged_map": {"map_id", "sha256"} (the Inspect map --map
                        extends, or the one in force without it), "rollback_from_teardown",
                        "agentdojo_packaged_map": {"map_id", "sha256"} (only with runs
                        from AgentDojo logs: the map --map extends for them)}
                       (only with runs from logs),
     "runs": [{"name", "mode", "status", "source_path" (relative to the working
               directory), "page", "result", "result_sha256",
               "source_sha256": "sha256:<hex>" (only for a run imported from an Inspect
               AI log, whose path is then source_path: ``inspect_runs``),
               "input_digests": {path: "sha256:<hex>"},
               "policy": {...} (only for a run given a policy file),
               "single_file": "single/<run>.html" (only with --single-file)}],
     "baseline": {"manifest_sha256", "history_sha256" (null when it had none),
                  "label"} (only with --baseline: ``baseline.Baseline.record``),
     "label": <--label> (only with --label),
     "sensitivity": {"required": <bool>} (only with --sensitivity or --require-sensitivity)}
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sandbox_replay.importers.agentdojo_logs import agentdojo_map
from sandbox_replay.importers.inspect_logs import LOG_SUFFIX, ImportOptions
from sandbox_replay.records.changes import HISTORY_LIMIT, RunSnapshot, history_entry
from sandbox_replay.report.baseline import HISTORY_SCHEMA, Baseline
from sandbox_replay.report.discover import DiscoveredRun, display_path
from sandbox_replay.report.publish import SITE_SCHEMA
from sandbox_replay.report.single_file import single_file_path
from sandbox_replay.report.site_views import RunSummary
from sandbox_replay.version import TOOL_NAME, __version__

if TYPE_CHECKING:
    from sandbox_replay.report.build import BuildConfig


def pages_digest(config: BuildConfig, runs: Sequence[DiscoveredRun]) -> str:
    """Digest the policy of each run, the baseline and the label ("" for none of them).

    A policy is named by the run's shown path and the file's sha256, so the digest does
    not depend on where the folders are: a site rebuilt elsewhere (``verify``) hashes the same.
    """
    chosen = []
    for run in runs:
        policy = config.policies.for_run(run.path)
        if policy is not None:
            chosen.append([run.display_path, policy.source.kind, policy.source.sha256])
    policies = hashlib.sha256(json.dumps(chosen).encode()).hexdigest() if chosen else ""
    if config.baseline is None and config.label is None:
        return policies
    record = config.baseline.record() if config.baseline is not None else None
    return policies + hashlib.sha256(json.dumps([record, config.label]).encode()).hexdigest()


def history(
    baseline: Baseline | None, label: str | None, snapshots: Sequence[RunSnapshot]
) -> dict[str, Any]:
    """Return ``history.json``: the baseline's builds (the last ones) and this one.

    ``{"schema_version": "sandbox-replay.history/1", "builds": [...]}``, oldest first, at
    most ``changes.HISTORY_LIMIT`` builds, each ``{"label": <--label, else the build time,
    else null>, "runs", "passed", "blocked", "findings", "findings_by_severity":
    {"critical", "high", "medium", "low"}, "findings_by_layer": {<layer>: n}}`` (expected
    negative-case alarms not counted). Every build writes it; a baseline's builds are
    carried forward, so a chain of builds each given the one before keeps the trend.
    """
    earlier = list(baseline.history) if baseline is not None else []
    builds = [*earlier, history_entry(label, snapshots)][-HISTORY_LIMIT:]
    return {"schema_version": HISTORY_SCHEMA, "builds": builds}


def _inspect_import(config: BuildConfig, runs: Sequence[DiscoveredRun]) -> dict[str, object]:
    """Record how the runs imported from logs were imported, when there are any."""
    logs = [run.display_path for run in runs if run.source_sha256 is not None]
    if not logs:
        return {}
    options = config.inspect or ImportOptions()
    tool_map = options.tool_map
    shown = None
    if tool_map.path is not None:
        where = display_path(tool_map.path, config.cwd or Path.cwd())
        shown = {"path": where, "sha256": tool_map.sha256}
    base = tool_map.extends or (tool_map if tool_map.path is None else None)
    packaged = {"map_id": base.map_id, "sha256": base.sha256} if base is not None else None
    recorded = {
        "map": shown,
        "packaged_map": packaged,
        "rollback_from_teardown": options.rollback_from_teardown,
    }
    if any(not path.endswith(LOG_SUFFIX) for path in logs):  # AgentDojo's (``inspect_runs``)
        dojo = agentdojo_map()
        recorded["agentdojo_packaged_map"] = {"map_id": dojo.map_id, "sha256": dojo.sha256}
    return {"inspect_import": recorded}


def manifest(
    config: BuildConfig,
    runs: Sequence[DiscoveredRun],
    summaries: Sequence[RunSummary],
    build_time: str | None,
) -> dict[str, object]:
    """Return ``manifest.json`` (its format is in the module docstring)."""
    forbidden = config.forbidden
    table = {"path": forbidden.path, "sha256": forbidden.sha256} if forbidden else None

    def entry(run: DiscoveredRun, summary: RunSummary) -> dict[str, object]:
        policy = config.policies.for_run(run.path)
        source = policy.source if policy is not None else None
        return {
            "name": summary.name,
            "mode": run.mode.value,
            "status": summary.status,
            "source_path": run.display_path,
            **({"source_sha256": run.source_sha256} if run.source_sha256 is not None else {}),
            "page": f"runs/{summary.name}/index.html",
            "result": f"runs/{summary.name}/result.json",
            "result_sha256": summary.result_sha256,
            "input_digests": dict(summary.input_digests),
            **({"policy": {**source.record(), "path": source.path}} if source else {}),
            **({"single_file": single_file_path(summary.name)} if config.single_file else {}),
        }

    return {
        "schema_version": SITE_SCHEMA,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "build_time": build_time,
        **({"forbidden_classes": table} if table is not None else {}),
        **_inspect_import(config, runs),
        "runs": [entry(run, summary) for run, summary in zip(runs, summaries, strict=True)],
        **({"baseline": config.baseline.record()} if config.baseline is not None else {}),
        **({"label": config.label} if config.label is not None else {}),
        **(
            {"sensitivity": {"required": config.require_sensitivity}}
            if config.sensitivity or config.require_sensitivity
            else {}
        ),
    }
