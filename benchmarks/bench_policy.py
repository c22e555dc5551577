"""Time a bundle's validation under the packaged table and under a Cedar policy, interleaved.

Run: .venv/bin/python benchmarks/bench_policy.py [--requests 60000] [--repeat 5]
         [--policy fixtures/policies/default.cedar]

Generates (or reuses, under ``benchmarks/.cache/``) a bundle of ``--requests`` requests
with 1% failing rows, then runs ``run-sandbox-bundle`` on it alternately without and with
``--policy``, each a fresh process (``bench_versions.run_once``), and prints each round,
the medians and the ratio. The default policy is the packaged table written in Cedar, so
both derive the same verdicts and the ratio is the cost of evaluating with Cedar. The
target: within 15% of the table's time. This is a script, not a timed test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_versions import run_once, warm  # noqa: E402
from generate_bundle import generate  # noqa: E402

REPO = HERE.parent
TOOL = REPO / ".venv" / "bin" / "sandbox-replay"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--policy", type=Path, default=REPO / "fixtures" / "policies" / "default.cedar"
    )
    args = parser.parse_args()
    bundle = HERE / ".cache" / f"bundle_{args.requests}_s7_f0.01"
    if not (bundle / "action_requests.json").is_file():
        print(f"generating {bundle} ...", flush=True)
        generate(bundle, args.requests, seed=7, failing_fraction=0.01)
    warm(bundle)
    variants = {"table": [], "cedar": ["--policy", str(args.policy)]}
    times: dict[str, list[float]] = {name: [] for name in variants}
    statuses: dict[str, set[int]] = {name: set() for name in variants}
    for round_number in range(1, args.repeat + 1):
        for name, extra in variants.items():
            wall, rss, status = run_once(str(TOOL), bundle, extra)
            times[name].append(wall)
            statuses[name].add(status)
            print(f"round {round_number} {name}: {wall:.2f} s, {rss:.0f} MiB, exit {status}")
    print(f"bundle: {bundle} ({args.repeat} interleaved rounds)")
    print(f"{'policy':>8}  {'median s':>8}  {'best s':>6}  exits")
    for name in variants:
        print(
            f"{name:>8}  {statistics.median(times[name]):8.2f}  {min(times[name]):6.2f}"
            f"  {sorted(statuses[name])}"
        )
    ratio = statistics.median(times["cedar"]) / statistics.median(times["table"])
    print(f"cedar / table (medians): {ratio:.3f}  (target: at most 1.15)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
