"""Finding fingerprints: pinned for the built-in fixtures, and blind to wording and lines.

``tests/data/fingerprints.json`` holds every fixture finding's code, subject and
fingerprint as this version computes them. A change of the engine that changes one
changes what every baseline compares against: it must be made on purpose, with that
file (and docs/comparing.md's note on finding identity) updated in the same commit.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from conftest import FIXTURES, REPO, copy_fixture, project_policies, read_json
from sandbox_replay import ReplayConfig, replay
from sandbox_replay.exports import ExportRun, export_run
from sandbox_replay.exports.sarif import build_sarif
from sandbox_replay.model.fingerprints import FINGERPRINT_VERSION, finding_hash, fingerprints
from sandbox_replay.model.policy import PolicyChoice
from sandbox_replay.records.changes import snapshot_of_record
from sandbox_replay.report.discover import discover

PINNED = REPO / "tests" / "data" / "fingerprints.json"
INSPECT_RUN = "example-agent_run-e1"


def replayed_runs(path: Path, cwd: Path, policies: PolicyChoice | None = None) -> list[ExportRun]:
    """Replay every run ``build`` finds under ``path``, wrapped as its exports take them."""
    found = []
    for run in discover((path,), cwd).runs:
        policy = policies.for_run(run.path) if policies is not None else None
        outcome = replay(ReplayConfig(run.path, run.mode, policy=policy))
        found.append(export_run(run.name, outcome, cwd))
    return found


def pinned_lines(runs: list[ExportRun]) -> dict[str, list[str]]:
    found = {}
    for run in runs:
        snapshot = run.facts.snapshot(run.name, run.source_root, {})
        found[run.name] = [f"{f.code} {f.subject_id} {f.fingerprint}" for f in snapshot.findings]
    return found


def test_the_fixtures_fingerprints_are_pinned() -> None:
    runs = replayed_runs(FIXTURES, REPO, project_policies())
    assert len(runs) == 10
    # The built-in Inspect log's run is pinned too, from the site (its source is a log).
    pinned = {name: lines for name, lines in read_json(PINNED).items() if name != INSPECT_RUN}
    assert pinned_lines(runs) == pinned


def test_the_site_records_give_the_same_fingerprints_as_the_replay() -> None:
    """A baseline is read from result.json; a build compares from the replay: they agree."""
    manifest = read_json(REPO / "site" / "manifest.json")
    pinned = read_json(PINNED)
    for entry in manifest["runs"]:
        record = read_json(REPO / "site" / entry["result"])
        snapshot = snapshot_of_record(entry["name"], entry["source_path"], record, {})
        shown = [f"{f.code} {f.subject_id} {f.fingerprint}" for f in snapshot.findings]
        assert shown == pinned[entry["name"]], entry["name"]


def test_the_sarif_results_carry_the_fingerprints() -> None:
    runs = replayed_runs(FIXTURES, REPO, project_policies())
    log = build_sarif(runs)
    pinned = read_json(PINNED)
    for run, sarif_run in zip(runs, log["runs"], strict=True):
        carried = [r["partialFingerprints"][FINGERPRINT_VERSION] for r in sarif_run["results"]]
        assert carried == [line.rsplit(" ", 1)[1] for line in pinned[run.name]]


def test_wording_line_and_folder_do_not_change_a_fingerprint(tmp_path: Path) -> None:
    folder = copy_fixture(tmp_path)
    first = replayed_runs(folder, tmp_path)[0]
    base = first.facts.snapshot("first_wave", "a", {}).findings
    reworded = [
        dataclasses.replace(f, message="another wording", line=(f.line or 0) + 40)
        for layer in first.facts.layers
        for f in layer.findings
    ]
    facts = dataclasses.replace(
        first.facts,
        layers=tuple(
            dataclasses.replace(layer, findings=[f for f in reworded if f.layer is layer.layer])
            for layer in first.facts.layers
        ),
    )
    moved = facts.snapshot("first_wave", "somewhere/else", {}).findings
    assert [f.fingerprint for f in moved] == [f.fingerprint for f in base]
    assert all(f.message == "another wording" for f in moved)


def test_what_a_finding_is_about_changes_its_fingerprint() -> None:
    one = finding_hash("SANDBOX_POLICY_VERDICT_MISSING", "policy_verdicts", "a.json", "req_1")
    assert one != finding_hash(
        "SANDBOX_POLICY_VERDICT_MISSING", "policy_verdicts", "a.json", "req_2"
    )
    assert one != finding_hash(
        "SANDBOX_POLICY_VERDICT_INVALID", "policy_verdicts", "a.json", "req_1"
    )
    assert one != finding_hash(
        "SANDBOX_POLICY_VERDICT_MISSING", "policy_verdicts", "b.json", "req_1"
    )
    # No separator trick makes two identities one: each part ends with a NUL byte.
    assert finding_hash("A", "B", "C", "D") != finding_hash("A", "B", "CD", "")
    twice = fingerprints([("C", "L", "p", "s"), ("C", "L", "p", "s"), ("C", "L", "p", "t")])
    assert twice[0].endswith(":1") and twice[1].endswith(":2") and twice[2].endswith(":1")
    assert twice[0].split(":")[0] == twice[1].split(":")[0]
    assert json.dumps(twice)  # plain strings
