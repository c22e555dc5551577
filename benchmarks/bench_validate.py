"""Time ``sandbox-replay run-sandbox-bundle`` on generated bundles of growing size.

Run: .venv/bin/python benchmarks/bench_validate.py [--sizes 6000 60000 600000]
     [--seed 7] [--failing-fraction 0.01] [--cache DIR] [--repeat 1] [--total-memory] [--jobs N]

Bundles come from ``generate_bundle.py`` and are kept under ``benchmarks/.cache/``
(gitignored) keyed by size, seed and failing fraction, so a second run only validates.
Each bundle is read once before it is timed (``warm``), so every run finds it in memory.
Each validation is a fresh subprocess; its wall time is measured around it and its peak
RSS read from ``resource.getrusage(RUSAGE_CHILDREN)`` after it exits (children are
waited for one at a time, so the maximum is the largest child so far, hence sizes run
smallest first); with ``--total-memory`` the peak total PSS of the validation's
processes is polled too (``memwatch.py``). Each row also gives the CPU steal during the
run it shows (time this VM's host gave its CPUs to other guests, ``/proc/stat``), and
with ``--repeat`` every run's wall time, the best of which is shown. The table is printed
with the machine it ran on, then how the best runs stand against the scale issue's targets
(``TARGETS``; MB and GB read as decimal units, the stricter reading of a figure in MiB).
This is a script, not a timed test: compare its figures, do not assert on them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import memwatch
from generate_bundle import generate
from memwatch import run_timed

HERE = Path(__file__).resolve().parent
DEFAULT_SIZES = (6_000, 60_000, 600_000)

# The scale issue's targets on this project's 2-core machine: requests, then the most wall
# seconds and the most peak RSS in decimal megabytes for one validation of that size.
TARGETS = {60_000: (2.5, 450), 600_000: (30.0, 3_000)}
MIB = 1024 * 1024


def target_lines(best: dict[int, tuple[float, float]]) -> list[str]:
    """Say how each size's best run (wall seconds, peak RSS in MiB) stands against
    ``TARGETS``, and how the time grew from one size to the next (linear cost)."""
    lines = []
    for size, (wall, peak_mib) in sorted(best.items()):
        if size not in TARGETS:
            continue
        most_s, most_mb = TARGETS[size]
        most_mib = most_mb * 1e6 / MIB
        lines.append(
            f"  {size:,} requests: {wall:.2f} s against < {most_s:g} s: "
            f"{'met' if wall < most_s else 'missed'}; peak {peak_mib:,.0f} MiB against "
            f"< {most_mb:,} MB ({most_mib:,.0f} MiB): {'met' if peak_mib < most_mib else 'missed'}"
        )
    sizes = sorted(best)
    for small, large in pairwise(sizes):
        lines.append(
            f"  {large:,} requests took {best[large][0] / best[small][0]:.1f}x the time of "
            f"{small:,} ({large / small:g}x the requests)"
        )
    return ["against the targets (best run of each size):", *lines] if lines else []


def machine() -> str:
    """Describe the machine: cores, memory, CPU model, Python."""
    cpu = "unknown CPU"
    meminfo = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                meminfo = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores ({cpu}), {meminfo or 'unknown'} memory, "
        f"Python {platform.python_version()} on {platform.system()} {platform.release()}; "
        f"interpreter: {interpreter()}"
    )


def interpreter(maps: str | None = None) -> str:
    """Say which Python runs the validations and how libpython is linked into it.

    The build matters as much as the version: on our machines pyenv's default build (libpython
    as a shared library, no profile-guided or link-time optimisation) took 16% longer on
    average to replay than Debian's python3.11 (built with both, libpython linked in). Read from
    ``/proc/self/maps`` (``maps`` in tests): a shared libpython shows as a mapped file.
    """
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text()
        except OSError:
            maps = ""
    libraries = sorted(
        {Path(line.split()[-1]).name for line in maps.splitlines() if "/libpython" in line}
    )
    if libraries:
        linked = f"libpython shared ({', '.join(libraries)})"
    elif maps:
        linked = "libpython linked in"
    else:
        linked = "libpython linkage unknown"
    return f"{os.path.realpath(sys.executable)} ({linked})"


def speed_check() -> str:
    """Time a fixed workload in this process, to tell this VM's fast hours from slow ones.

    The same code's figures drift by 20 to 30% within hours here, with or without CPU steal.
    The workload (the standard library parsing 50,000 small rows, then Python reading one
    field of each) does not change, so its time, printed before and after the runs, says
    how fast the machine was while they ran: compare figures only across similar checks on
    the same interpreter (Debian's python3.11 runs it in about two thirds of pyenv's time).
    """
    rows = [
        {"id": f"row_{i}", "n": i, "flag": i % 2 == 0, "tags": ["a", "b"]} for i in range(50_000)
    ]
    text = json.dumps({"rows": rows})
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        total = sum(len(row["id"]) for row in json.loads(text)["rows"])
        best = min(best, time.perf_counter() - start)
    assert total > 0
    return f"speed check: {best * 1000:.0f} ms (a fixed parse and walk, best of 5; lower is faster)"


def bundle_for(cache: Path, requests: int, seed: int, fraction: float) -> Path:
    """Return a cached generated bundle, generating it on first use."""
    folder = cache / f"bundle_{requests}_s{seed}_f{fraction:g}"
    done = folder / ".complete"
    if not done.exists():
        print(f"generating {requests} requests into {folder} ...", file=sys.stderr, flush=True)
        generate(folder, requests, seed, fraction)
        done.touch()
    return folder


def warm(folder: Path) -> None:
    """Read every file of ``folder`` once, so that the first timed run finds them in memory.

    This VM's kernel pages out file cache left idle for about a minute (a DAMON scheme), so
    the first run after a pause otherwise also pays for reading the bundle from disk: 3.5 s against
    2.2 to 2.9 s for the next four at 60,000 requests, 36 s against 27 to 29 s at 600,000.
    Runs after the first find the files in memory either way.
    """
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            with path.open("rb") as stream:
                while stream.read(1 << 24):
                    pass


def folder_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def validate(
    bundle: Path, out: Path, watch: bool, jobs: int | None = None
) -> tuple[float, float, int, float | None, float | None]:
    """Run one validation subprocess; return wall seconds, peak RSS in MiB, exit status,
    (with ``watch``) the peak total PSS of its processes in MB, and the CPU steal in %."""
    command = [
        sys.executable,
        "-c",
        "from sandbox_replay.cli import main; main()",
        "run-sandbox-bundle",
        "--input",
        str(bundle),
        "--out",
        str(out),
        *(["--jobs", str(jobs)] if jobs else []),
    ]
    with memwatch.StealWatch() as steal:
        wall, status, stderr, total = run_timed(command, watch=watch)
    if status not in (0, 1):
        raise SystemExit(f"validation failed with exit {status}:\n{stderr}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return wall, peak, status, total, steal.percent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--failing-fraction", type=float, default=0.01)
    parser.add_argument("--cache", type=Path, default=HERE / ".cache")
    parser.add_argument("--repeat", type=int, default=1, help="runs per size; the best is shown")
    parser.add_argument(
        "--total-memory",
        action="store_true",
        help="also poll the peak total PSS of the validation's processes (Linux; slows it a little)",
    )
    parser.add_argument(
        "--jobs", type=int, default=None, help="passed on to the validation (default: its own)"
    )
    args = parser.parse_args()
    if args.total_memory and not memwatch.available():
        raise SystemExit("--total-memory needs /proc/<pid>/smaps_rollup (Linux)")

    print(f"machine: {machine()}")
    print(memwatch.compile_package())
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(speed_check(), flush=True)
    header = (
        f"{'requests':>9} {'MB':>7} {'wall s':>8} {'req/s':>9} {'peak RSS MiB':>12} {'status':>8}"
        + (f" {'total PSS MB':>13}" if args.total_memory else "")
        + f" {'steal %':>7}"
        + ("  every run's wall s" if args.repeat > 1 else "")
    )
    print(header)
    print("-" * len(header))
    best_runs: dict[int, tuple[float, float]] = {}
    for size in sorted(args.sizes):
        bundle = bundle_for(args.cache, size, args.seed, args.failing_fraction)
        warm(bundle)
        out = args.cache / f"out_{size}"
        walls, totals, steals = [], [], []
        for _ in range(args.repeat):
            wall, peak, status, total, steal = validate(bundle, out, args.total_memory, args.jobs)
            walls.append(wall)
            totals.append(total or 0.0)
            steals.append(steal)
        best = min(walls)
        steal = steals[walls.index(best)]  # during the run shown
        best_runs[size] = (best, peak)
        print(
            f"{size:>9} {folder_mb(bundle):>7.1f} {best:>8.2f} {size / best:>9.0f} "
            f"{peak:>12.0f} {'pass' if status == 0 else 'blocked':>8}"
            + (f" {max(totals):>13.0f}" if args.total_memory else "")
            + (f" {steal:>7.1f}" if steal is not None else f" {'n/a':>7}")
            + ("  " + " ".join(f"{w:.2f}" for w in walls) if args.repeat > 1 else ""),
            flush=True,
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(speed_check())
    for line in target_lines(best_runs):
        print(line)


if __name__ == "__main__":
    main()
