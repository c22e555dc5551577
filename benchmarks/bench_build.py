"""Time ``sandbox-replay build``: one large run, and many small runs with --jobs and reuse.

Run: .venv/bin/python benchmarks/bench_build.py [--sizes 6000 60000 600000] [--jobs 2]
     [--total-memory]
     .venv/bin/python benchmarks/bench_build.py --many [--count 200] [--requests 600]

Without ``--many``: for each size, a generated bundle (``generate_bundle.py``, cached
under ``benchmarks/.cache/`` as ``bench_validate.py`` caches it, and read once first as
it does) is built into a fresh site; printed are the wall time, peak RSS of the build's
processes, the number of pages and the largest page, and the CPU steal during the build (as ``bench_validate.py``).

With ``--many``: ``--count`` bundles of ``--requests`` requests (seeds 1..count) are built
into a fresh site with ``--jobs 1`` and with ``--jobs 2``; the two sites must be byte for
byte equal (with ``--dask`` also built through a two-worker Dask ``LocalCluster`` on this
machine, and compared). Then one bundle is regenerated with another seed and the site rebuilt in place
(every other run is reused from the status file), and the bundle is put back. With
``--exports`` a fresh site is then built with SARIF, JUnit and Markdown exports and rebuilt
unchanged with them (the exports of both must be equal).

Each build is a fresh subprocess; its peak RSS is read from ``resource.getrusage
(RUSAGE_CHILDREN)`` after it exits, which is the largest of any process waited for so
far (hence the sizes run smallest first). With ``--total-memory`` the peak total PSS of
the build and the page helpers it forks is polled too (``memwatch.py``): a single run
built with ``--jobs 2`` is two processes sharing memory copy-on-write, and this is their
sum. This is a script, not a timed test.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import memwatch
from bench_validate import bundle_for, folder_mb, machine, speed_check, warm
from generate_bundle import generate
from memwatch import run_timed

HERE = Path(__file__).resolve().parent


def build(
    paths: list[Path],
    out: Path,
    jobs: int,
    scheduler: str | None = None,
    watch: bool = False,
    extra: tuple[str, ...] = (),
) -> tuple[float, float, str, float | None]:
    """Run one build subprocess (``extra``: more options); return wall seconds, peak RSS in
    MiB, its last line and (with ``watch``) the peak total PSS of its processes in MB."""
    command = [
        sys.executable,
        "-c",
        "from sandbox_replay.cli import main; main()",
        "build",
        *map(str, paths),
        "--out",
        str(out),
        "--jobs",
        str(jobs),
        *(["--scheduler", scheduler] if scheduler else []),
        *extra,
    ]
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    wall, status, stderr, total = run_timed(command, env=env, watch=watch)
    if status != 0:
        raise SystemExit(f"build failed with exit {status}:\n{stderr[-3000:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    summary = [line for line in stderr.splitlines() if " runs: " in line]
    return wall, peak, summary[-1].removeprefix("sandbox-replay: ") if summary else "", total


def pages(site: Path) -> tuple[int, int, str]:
    """Return the number of HTML pages, the largest page's size and its path."""
    sizes = [(p.stat().st_size, p) for p in site.rglob("*.html")]
    largest, path = max(sizes)
    return len(sizes), largest, path.relative_to(site).as_posix()


def tree_digest(site: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(site.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(site).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def one_large(args: argparse.Namespace) -> None:
    header = (
        f"{'requests':>9} {'MB':>7} {'jobs':>4} {'wall s':>8} {'peak RSS MiB':>12} "
        + (f"{'total PSS MB':>13} " if args.total_memory else "")
        + f"{'steal %':>7} {'pages':>6} {'largest page':>13}"
    )
    print(header)
    print("-" * len(header))
    for size in sorted(args.sizes):
        bundle = bundle_for(args.cache, size, args.seed, args.failing_fraction)
        warm(bundle)
        out = args.cache / f"site_{size}"
        shutil.rmtree(out, ignore_errors=True)
        with memwatch.StealWatch() as steal:
            wall, peak, _, total = build([bundle], out, args.jobs, watch=args.total_memory)
        count, largest, where = pages(out)
        stolen = f"{steal.percent:>7.1f}" if steal.percent is not None else f"{'n/a':>7}"
        print(
            f"{size:>9} {folder_mb(bundle):>7.1f} {args.jobs:>4} {wall:>8.2f} {peak:>12.0f} "
            + (f"{total or 0:>13.0f} " if args.total_memory else "")
            + f"{stolen} {count:>6} {largest / 1e6:>10.2f} MB  ({where})",
            flush=True,
        )


def many(args: argparse.Namespace) -> None:
    root = args.cache / f"many_{args.count}x{args.requests}"
    done = root / ".complete"
    if not done.exists():
        print(f"generating {args.count} bundles into {root} ...", file=sys.stderr, flush=True)
        for seed in range(1, args.count + 1):
            generate(root / f"bundle_{seed:03d}", args.requests, seed, args.failing_fraction)
        done.touch()
    sites = {}
    walls = {}
    for jobs in (1, 2):
        out = args.cache / f"many_site_j{jobs}"
        shutil.rmtree(out, ignore_errors=True)
        walls[jobs], peak, summary, _ = build([root], out, jobs)
        sites[jobs] = tree_digest(out)
        print(
            f"full build, --jobs {jobs}: {walls[jobs]:7.2f} s, peak RSS {peak:.0f} MiB ({summary})"
        )
    print(f"speed-up with 2 jobs: {walls[1] / walls[2]:.2f}x")
    print(f"sites byte-identical: {sites[1] == sites[2]}")
    if args.dask:
        from distributed import LocalCluster

        with LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster:
            out = args.cache / "many_site_dask"
            shutil.rmtree(out, ignore_errors=True)
            wall, _, summary, _ = build([root], out, 1, cluster.scheduler_address)
        print(f"full build on a 2-worker LocalCluster: {wall:7.2f} s ({summary})")
        print(f"site byte-identical to --jobs 1: {tree_digest(out) == sites[1]}")
    out = args.cache / "many_site_j2"
    again, _, summary, _ = build([root], out, 2)
    print(f"rebuild, nothing changed: {again:7.2f} s ({summary})")
    touched = root / "bundle_001"
    generate(touched, args.requests, 10_000, args.failing_fraction)
    try:
        rebuild, _, summary, _ = build([root], out, 2)
    finally:
        generate(touched, args.requests, 1, args.failing_fraction)
    print(
        f"rebuild after changing 1 bundle of {args.count}: {rebuild:7.2f} s "
        f"= {100 * rebuild / walls[2]:.1f}% of the full build ({summary})"
    )
    if args.exports:
        exported = []
        out = args.cache / "many_site_exports"
        shutil.rmtree(out, ignore_errors=True)
        for step in ("full build", "rebuild, nothing changed"):
            files = [out.with_name(f"{out.name}.{suffix}") for suffix in ("sarif", "xml", "md")]
            options = ("--sarif", "--junit", "--markdown")
            extra = tuple(
                item for pair in zip(options, map(str, files), strict=True) for item in pair
            )
            wall, _, summary, _ = build([root], out, 2, extra=extra)
            exported.append([path.read_bytes() for path in files])
            print(f"{step} with SARIF, JUnit and Markdown, --jobs 2: {wall:7.2f} s ({summary})")
        print(f"exports byte-identical after the rebuild: {exported[0] == exported[1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[6_000, 60_000, 600_000])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--many", action="store_true")
    parser.add_argument("--dask", action="store_true", help="with --many: also on a LocalCluster")
    parser.add_argument(
        "--exports",
        action="store_true",
        help="with --many: also a build and an unchanged rebuild that write all three exports",
    )
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--failing-fraction", type=float, default=0.01)
    parser.add_argument("--cache", type=Path, default=HERE / ".cache")
    parser.add_argument(
        "--total-memory",
        action="store_true",
        help="also poll the peak total PSS of the build's processes (Linux; slows it a little)",
    )
    args = parser.parse_args()
    if args.total_memory and not memwatch.available():
        raise SystemExit("--total-memory needs /proc/<pid>/smaps_rollup (Linux)")
    print(f"machine: {machine()}")
    print(memwatch.compile_package())
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(speed_check(), flush=True)
    if args.many:
        many(args)
    else:
        one_large(args)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(speed_check())


if __name__ == "__main__":
    main()
