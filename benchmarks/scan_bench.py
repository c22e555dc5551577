"""Time the forbidden-material scan over generated JSON rows; prints MB/s and hit counts.

Run: .venv/bin/python benchmarks/scan_bench.py [--sizes 40 120] [--repeat 3]

Rows look like exported action requests (ids, refs, sha256 digests, flags, prose
labels) so that the matcher sees the kind of text it meets in a real bundle. The "hits"
variant plants one credential-shaped string or sentinel every ~500 KB; every planted
string is assembled here at run time, so this file holds no literal credential.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import time
from collections.abc import Callable

from sandbox_replay.load.scan import ForbiddenScanner

_MB = 1024 * 1024
_KINDS = ("environment_secret_read", "network_request", "filesystem_delete", "shell_command")
_WORDS = (
    "policy",
    "verdict",
    "rollback",
    "receipt",
    "replay",
    "sandbox",
    "request",
    "diff",
    "mock",
)


def _row(rng: random.Random, index: int) -> str:
    digest = hashlib.sha256(index.to_bytes(8, "little")).hexdigest()
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 14)))
    return (
        "    {\n"
        f'      "request_id": "req_{index:08d}_secret_env_read",\n'
        f'      "episode_id": "episode_{index // 7:06d}",\n'
        f'      "action_kind": "{rng.choice(_KINDS)}",\n'
        f'      "normalized_action_ref": "action://normalized/{index:08d}",\n'
        '      "source_trust_label": "untrusted_tool_output",\n'
        f'      "untrusted_tool_output_ref": "tool-output://episode/{index:08d}",\n'
        '      "requested_capability": "environment_read",\n'
        f'      "intended_side_effect_ref": "diff://filesystem/{index:08d}",\n'
        f'      "input_digest": "sha256:{digest}",\n'
        f'      "decision_reason_ref": "reason:{words.replace(" ", "_")}",\n'
        f'      "note": "{words}",\n'
        f'      "side_effect_diff_count": {rng.randint(0, 9)},\n'
        '      "body_redacted": true,\n'
        '      "secret_like_data_synthetic": true,\n'
        '      "raw_payload_exported": false,\n'
        '      "live_network_target": false\n'
        "    }"
    )


def _planted() -> list[str]:
    alnum = "aB3dE5fG7hJ9kL2mN4pQ6rS8tU0vW1xY"
    return [
        "SRX_SENTINEL_" + "LIVE_SECRET_7Q2W",
        "AK" + "IA" + "Q3EGUQ2CZD7XLMNV",
        "gh" + "p_" + (alnum + "0123")[:36],
        "github" + "_pat_" + alnum[:22] + "_" + (alnum * 2)[:59],
        "-----BEGIN " + "RSA PRIVATE" + " KEY-----",
        "postgres" + "://svc:" + "Tr0ub4dor" + "@db.internal/app",
        "sk" + "_live_" + alnum[:24],
        "x" + "oxb-" + "1234567890-0987654321-" + alnum[:24],
        "AI" + "za" + (alnum + "abc")[:35],
    ]


def generate(size_mb: int, with_hits: bool) -> bytes:
    """Return about ``size_mb`` MB of a JSON list of rows, with planted hits if asked."""
    rng = random.Random(size_mb)
    planted = _planted()
    parts: list[str] = ['{\n  "action_requests": [\n']
    size = 0
    index = 0
    next_plant = 250_000
    while size < size_mb * _MB:
        row = _row(rng, index)
        if with_hits and size >= next_plant:
            secret = planted[index % len(planted)]
            row = row.replace('"note": "', f'"note": "{secret} ', 1)
            next_plant += 500_000
        parts.append(row + (",\n" if index else "\n"))
        size += len(row) + 2
        index += 1
    parts.append("  ]\n}\n")
    return "".join(parts).encode("utf-8")


def _best(run: Callable[[], int], repeat: int) -> tuple[float, int]:
    best = float("inf")
    hits = 0
    for _ in range(repeat):
        started = time.perf_counter()
        hits = run()
        best = min(best, time.perf_counter() - started)
    return best, hits


def main() -> None:
    """Print scan throughput for in-memory bytes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[40, 120])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    started = time.perf_counter()
    scanner = ForbiddenScanner.default()
    print(
        f"compile: {(time.perf_counter() - started) * 1000:.0f} ms, {len(scanner.classes)} classes"
    )
    for size_mb in args.sizes:
        for with_hits in (False, True):
            data = generate(size_mb, with_hits)
            label = f"{len(data) / _MB:6.1f} MB {'hits ' if with_hits else 'clean'}"

            def in_memory(data: bytes = data) -> int:
                return sum(scanner.scan_bytes(data)[0].values())

            seconds, hits = _best(in_memory, args.repeat)
            print(f"{label} scan_bytes: {len(data) / _MB / seconds:7.0f} MB/s  hits={hits}")


if __name__ == "__main__":
    main()
