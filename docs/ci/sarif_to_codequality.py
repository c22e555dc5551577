"""Turn sandbox-replay's SARIF into a GitLab Code Quality report (standard library only).

Usage: python3 sarif_to_codequality.py IN.sarif [IN-2.sarif ...] OUT.json

Every SARIF file given is read (a build of more than 20 runs writes ``replay.sarif``,
``replay-2.sarif``, ...), and one report holds the results of all of them.

GitLab reads no SARIF: its SAST report is a JSON format of its own, with a versioned
schema, so the merge-request widget that fits a converted SARIF is Code Quality. OUT is a
JSON array with one object per unsuppressed result: ``description`` (the message),
``check_name`` (the finding code), ``fingerprint`` (a SHA-256 of the SARIF run's
automation id, the code and the result's own fingerprint, so runs never merge),
``severity`` (error -> critical, warning -> major, note -> minor, else info) and
``location`` (``path`` and ``lines.begin``). Suppressed results (fixture mode's planted
negative cases) are left out, as code scanning leaves them out.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

SEVERITY = {"error": "critical", "warning": "major", "note": "minor"}


def code_quality_issue(run_id: str, result: dict[str, Any]) -> dict[str, Any]:
    """One Code Quality issue for one SARIF result."""
    location = result.get("locations", [{}])[0].get("physicalLocation", {})
    fingerprints = "|".join(sorted(result.get("partialFingerprints", {}).values()))
    code = result.get("ruleId", "")
    return {
        "description": result.get("message", {}).get("text", code),
        "check_name": code,
        "fingerprint": hashlib.sha256(f"{run_id}|{code}|{fingerprints}".encode()).hexdigest(),
        "severity": SEVERITY.get(result.get("level", "warning"), "info"),
        "location": {
            "path": location.get("artifactLocation", {}).get("uri", ""),
            "lines": {"begin": location.get("region", {}).get("startLine", 1)},
        },
    }


def convert(sarif: dict[str, Any]) -> list[dict[str, Any]]:
    """Every unsuppressed result of every run, in the SARIF's order."""
    return [
        code_quality_issue(run.get("automationDetails", {}).get("id", ""), result)
        for run in sarif.get("runs", [])
        for result in run.get("results", [])
        if not result.get("suppressions")
    ]


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    issues = []
    for name in argv[1:-1]:
        issues += convert(json.loads(Path(name).read_text(encoding="utf-8")))
    out = Path(argv[-1])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(issues, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
