"""Run the input-file fuzz of tests/test_fuzz.py for a long time and print what it found.

Run: .venv/bin/python benchmarks/fuzz_long.py [--minutes 5] [--batch 500]

Same case strategy and same properties as the test (no uncaught exception, a record is
always written, anything unverifiable is blocked), in batches of fresh hypothesis runs
until the time is up. A failing case does not stop the run: it is counted by exception
type and place (first seen example kept), so one crash cannot hide another. Prints the
cases run, the cases by kind and status, and the crashes found.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_fuzz import Case, cases, check_case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()

    ran: Counter[str] = Counter()
    crashes: dict[str, tuple[int, Case, str]] = {}

    @settings(
        max_examples=args.batch,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases())
    def batch(case: Case) -> None:
        with tempfile.TemporaryDirectory() as scratch:
            try:
                status = check_case(case, Path(scratch))
            except Exception as exc:  # counted, not raised: one crash must not hide the next
                frame = traceback.extract_tb(exc.__traceback__)[-1]
                key = f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}"
                count, first, text = crashes.get(key, (0, case, traceback.format_exc()))
                crashes[key] = (count + 1, first, text)
                status = "crash"
        ran[f"{case.kind}/{status}"] += 1
        ran["total"] += 1

    deadline = time.monotonic() + args.minutes * 60
    batches = 0
    with mock.patch("os.fsync"):
        while time.monotonic() < deadline:
            batch()
            batches += 1
    print(f"cases run: {ran['total']} in {batches} batches of up to {args.batch}")
    for key, count in sorted(ran.items()):
        if key != "total":
            print(f"  {key}: {count}")
    print(f"crashes found: {sum(c for c, _, _ in crashes.values())} ({len(crashes)} distinct)")
    for key, (count, first, text) in crashes.items():
        print(f"--- {key}: {count} case(s); first: {first.mode.value} {first.name} {first.kind}")
        print(text)


if __name__ == "__main__":
    main()
