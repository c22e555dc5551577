"""Time two builds of the tool on one bundle, their runs interleaved, and print the medians.

Run: .venv/bin/python benchmarks/bench_versions.py --bundle DIR --repeat 7 \\
         --tool before=/path/to/old/.venv/bin/sandbox-replay --tool after=.venv/bin/sandbox-replay

Each round runs every tool once, in the order given, on the same bundle
(``run-sandbox-bundle --input DIR --out <scratch>``), so that a slow spell of the machine
falls on both alike. Each run is a fresh process; its wall time is measured around it and
its peak RSS read from ``os.wait4`` for that very process. The bundle is read once first,
so every run finds it in the page cache. Extra arguments after ``--`` go to every run
(``-- --jobs 1``). Every run starts in its scratch folder, so no tool reads the settings
of a ``pyproject.toml`` where the script is started (this repository's names a Cedar
policy for one scenario folder, which would be read and compiled on every run). This is
a script, not a timed test: compare its figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def warm(folder: Path) -> None:
    """Read every file of ``folder`` once, so that no run pays for the disk."""
    for path in folder.rglob("*"):
        if path.is_file():
            with path.open("rb") as handle:
                while handle.read(1 << 24):
                    pass


def run_once(tool: str, bundle: Path, extra: list[str]) -> tuple[float, float, int]:
    """Return the wall seconds, peak RSS (MiB) and exit status of one validation."""
    out = Path(tempfile.mkdtemp(prefix="bench-versions-"))
    try:
        command = [tool, "run-sandbox-bundle", "--input", str(bundle), "--out", str(out), *extra]
        started = time.perf_counter()
        process = subprocess.Popen(
            command, cwd=out, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        return wall, usage.ru_maxrss / 1024, process.returncode
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _absolute(tool: str) -> str:
    """Return a tool given as a path as an absolute one (runs start in another folder)."""
    return os.path.abspath(tool) if os.sep in tool else tool


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--tool", action="append", required=True, help="NAME=EXECUTABLE")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("extra", nargs="*", help="arguments for every run (after --)")
    args = parser.parse_args()
    tools = {name: _absolute(tool) for name, tool in (item.split("=", 1) for item in args.tool)}
    args.bundle = args.bundle.resolve()
    warm(args.bundle)
    walls: dict[str, list[float]] = {name: [] for name in tools}
    peaks: dict[str, list[float]] = {name: [] for name in tools}
    statuses: dict[str, set[int]] = {name: set() for name in tools}
    for round_number in range(1, args.repeat + 1):
        for name, tool in tools.items():
            wall, peak, status = run_once(tool, args.bundle, args.extra)
            walls[name].append(wall)
            peaks[name].append(peak)
            statuses[name].add(status)
            print(f"round {round_number} {name}: {wall:.2f} s, {peak:.0f} MiB, exit {status}")
    print(f"bundle: {args.bundle} ({args.repeat} interleaved rounds)")
    print(f"{'tool':>10} {'median s':>9} {'best s':>7} {'worst s':>8} {'median MiB':>11} exits")
    for name in tools:
        print(
            f"{name:>10} {statistics.median(walls[name]):9.2f} {min(walls[name]):7.2f} "
            f"{max(walls[name]):8.2f} {statistics.median(peaks[name]):11.0f} "
            f"{sorted(statuses[name])}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
