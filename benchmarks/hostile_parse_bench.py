"""Time strict loading of resource-bomb files against a plain ``orjson.loads`` of the same bytes.

Run: .venv/bin/python benchmarks/hostile_parse_bench.py [--keys 3000000] [--rows 10000000]

Two files the red team used (issue #28, items 6 and 7), each loaded by the tool's strict
loader (``loader.parse_input``) in a child process, so that its peak RSS is its own:

- an object file with ``--keys`` top-level keys (about 40 MB at 3 million): each key's
  line used to be counted from the start of the file, quadratic in the keys;
- a list file with ``--rows`` empty rows (30 MB at 10 million), over the row limit
  (2,000,000): the limit used to apply only after every row was decoded.

Prints, per file, the strict load's wall time and peak RSS beside ``orjson.loads`` of the
same bytes, and their ratio. This is a script, not a timed test: compare its figures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
path, rows_key, how = sys.argv[1], sys.argv[2] or None, sys.argv[3]
raw = Path(path).read_bytes()
started = time.perf_counter()
if how == "orjson":
    import orjson
    orjson.loads(raw)
    outcome = "parsed"
else:
    from sandbox_replay.load.files import LoadLimits
    from sandbox_replay.load.decode import LoadedFile, parse_input
    loaded = parse_input(raw, LoadedFile(Path(path).name), rows_key, LoadLimits())
    outcome = "loaded" if loaded.ok else loaded.findings[0].error_code
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mib": peak, "outcome": outcome}))
"""


def measure(path: Path, rows_key: str, how: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), rows_key, how],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=3_000_000)
    parser.add_argument("--rows", type=int, default=10_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        # Written a chunk at a time: a child's peak RSS starts from this process's (Linux
        # keeps it across exec), so this one stays small.
        keys = Path(scratch) / "projection_protocol.json"
        with keys.open("w") as out:
            out.write("{\n")
            for start in range(0, args.keys, 10_000):
                stop = min(start + 10_000, args.keys)
                last = stop == args.keys
                out.write(",\n".join(f'"k{n}": {n}' for n in range(start, stop)))
                out.write("\n}\n" if last else ",\n")
        rows = Path(scratch) / "action_requests.json"
        with rows.open("wb") as out:
            out.write(b'{"action_requests": [{}')
            for start in range(1, args.rows, 100_000):
                out.write(b",{}" * (min(start + 100_000, args.rows) - start))
            out.write(b"]}")
        cases = [
            (f"{args.keys:,} top-level keys", keys, ""),
            (f"{args.rows:,} empty rows", rows, "action_requests"),
        ]
        for label, path, rows_key in cases:
            size = path.stat().st_size / 1e6
            strict = measure(path, rows_key, "strict")
            plain = measure(path, rows_key, "orjson")
            ratio = float(strict["seconds"]) / float(plain["seconds"])  # type: ignore[arg-type]
            print(f"{label} ({size:.1f} MB):")
            print(
                f"  strict load {strict['seconds']:.2f} s, {strict['peak_mib']:.0f} MiB, "
                f"{strict['outcome']}"
            )
            print(f"  orjson.loads {plain['seconds']:.2f} s, {plain['peak_mib']:.0f} MiB")
            print(f"  ratio {ratio:.1f} (issue #28 asks at most 2)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
