"""What the seeded escapes cost: ``run-sandbox-bundle`` with and without ``--sensitivity``.

Run: .venv/bin/python benchmarks/bench_sensitivity.py [--sizes 6000 60000] [--rounds 5]

For each size, a generated bundle (``generate_bundle.py``, cached under
``benchmarks/.cache/`` as ``bench_validate.py`` caches it) is replayed ``--rounds`` times
each way, plain and with ``--sensitivity``, interleaved so both see the same machine; each
replay is a fresh subprocess. Printed are the median wall seconds of each, their ratio
(issue #44 allows at most 3x) and, from one replay with ``-v``, the seconds the escapes
themselves took as the replay reports them. This is a script, not a timed test.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_validate import bundle_for, machine, warm
from memwatch import run_timed

HERE = Path(__file__).resolve().parent
COMMAND = [sys.executable, "-c", "from sandbox_replay.cli import main; main()"]
LIMIT = 3.0


def replay(bundle: Path, out: Path, *extra: str) -> float:
    """Replay ``bundle`` once in a subprocess; return its wall seconds."""
    args = ["run-sandbox-bundle", "--input", str(bundle), "--out", str(out), *extra]
    wall, status, stderr, _ = run_timed([*COMMAND, *args])
    if status not in (0, 1):
        raise SystemExit(f"replay failed with exit {status}:\n{stderr}")
    return wall


def escape_seconds(bundle: Path, out: Path) -> str:
    """Return the replay's own line on the escapes (``-v``)."""
    args = ["run-sandbox-bundle", "--input", str(bundle), "--out", str(out), "--sensitivity"]
    done = subprocess.run([*COMMAND, *args, "-v"], capture_output=True, text=True, check=False)
    found = re.search(r"replayed \d+ seeded escapes .*", done.stderr)
    return found.group(0) if found else "(no line)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[6000, 60000])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(machine())
    print(f"{'requests':>9} {'plain s':>8} {'seeded s':>9} {'ratio':>6}  escapes")
    failed = False
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "out"
        for size in args.sizes:
            bundle = bundle_for(HERE / ".cache", size, 7, 0.0)
            warm(bundle)
            plain, seeded = [], []
            for _ in range(args.rounds):
                plain.append(replay(bundle, out))
                seeded.append(replay(bundle, out, "--sensitivity"))
            ratio = statistics.median(seeded) / statistics.median(plain)
            failed |= ratio > LIMIT
            print(
                f"{size:>9} {statistics.median(plain):>8.2f} {statistics.median(seeded):>9.2f} "
                f"{ratio:>5.2f}x  {escape_seconds(bundle, out)}"
            )
    print(f"limit: {LIMIT:g}x a plain replay" + ("; OVER THE LIMIT" if failed else "; met"))


if __name__ == "__main__":
    main()
