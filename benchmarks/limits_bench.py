"""Print wall time and peak RSS of the CLI on the hostile sizes of issue 5 item 4.

Run: .venv/bin/python benchmarks/limits_bench.py [--work DIR]

Each case copies fixtures/first_wave, replaces action_requests.json with the hostile
file, runs ``sandbox-replay run`` in a child process that reports its own figures, prints
one line, and deletes the file. The cases: a sparse 1 GiB file, arrays nested 100,000
deep, one 50 MB string, and 10 million tiny rows.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "first_wave"
TARGET = "action_requests.json"

MEASURE = """
import json, resource, sys, time
from sandbox_replay.cli import app
start = time.perf_counter()
try:
    app(sys.argv[1:], prog_name="sandbox-replay")
    code = 0
except SystemExit as exc:
    code = exc.code
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("MEASURE " + json.dumps({"exit": code, "seconds": seconds, "peak_rss_mb": peak}),
      file=sys.stderr)
"""


def one_gib(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.truncate(1 << 30)


def deep(path: Path) -> None:
    path.write_text('{\n  "action_requests": [\n' + "[" * 100_000 + "]" * 100_000 + "\n]}\n")


def long_string(path: Path) -> None:
    with path.open("w") as handle:
        handle.write('{\n  "action_requests": [\n    {"request_id": "r1", "note": "')
        handle.write("s" * 50_000_000)
        handle.write('"}\n  ]\n}\n')


def many_rows(path: Path) -> None:
    with path.open("wb") as handle:
        handle.write(b'{"action_requests": [\n' + b"{},\n" * 9_999_999 + b"{}\n]}\n")


CASES: dict[str, Callable[[Path], None]] = {
    "1 GiB sparse file": one_gib,
    "nesting 100,000 deep": deep,
    "one 50 MB string": long_string,
    "10,000,000 tiny rows": many_rows,
}


def run_case(work: Path, make: Callable[[Path], None]) -> tuple[dict[str, float], str]:
    folder = work / "in"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(FIXTURE, folder)
    make(folder / TARGET)
    out = work / "out"
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, "run", "-i", str(folder), "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    shutil.rmtree(folder)
    figures = json.loads(proc.stderr.strip().splitlines()[-1].removeprefix("MEASURE "))
    result = json.loads((out / "agent_sandbox_policy_escape_replay_result.json").read_text())
    limited = [f for f in result["findings"] if f["path"] == TARGET]
    message = limited[0]["message"] if limited else "(no finding on the file)"
    return figures, message


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: tmp)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.work) as scratch:
        for label, make in CASES.items():
            figures, message = run_case(Path(scratch), make)
            print(
                f"{label:24} exit {figures['exit']}  {figures['seconds']:6.2f} s  "
                f"peak RSS {figures['peak_rss_mb']:7.1f} MB  {message}"
            )


if __name__ == "__main__":
    main()
