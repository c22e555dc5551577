"""The benchmarks say which interpreter ran them, how its libpython is linked, and how fast
the machine was while they ran."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from bench_validate import interpreter, machine, speed_check, target_lines

SHARED_MAPS = """\
55d0c0a00000-55d0c0a01000 r--p 00000000 fe:01 1234 /root/.pyenv/versions/3.11.7/bin/python3.11
7f0ade800000-7f0adea00000 r-xp 00200000 fe:01 5678 /root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0
7f0adea00000-7f0adea10000 r--p 00400000 fe:01 5678 /root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0
7f0adec00000-7f0adec20000 r-xp 00000000 fe:01 9012 /usr/lib/x86_64-linux-gnu/libc.so.6
"""
STATIC_MAPS = """\
55d0c0a00000-55d0c0f00000 r-xp 00000000 fe:01 1234 /usr/bin/python3.11
7f0adec00000-7f0adec20000 r-xp 00000000 fe:01 9012 /usr/lib/x86_64-linux-gnu/libc.so.6
"""


def test_a_shared_libpython_is_named_once() -> None:
    said = interpreter(SHARED_MAPS)
    assert said.endswith("(libpython shared (libpython3.11.so.1.0))")
    assert said.startswith(str(Path(sys.executable).resolve()))


def test_an_interpreter_with_libpython_linked_in_says_so() -> None:
    assert interpreter(STATIC_MAPS).endswith("(libpython linked in)")


def test_no_maps_to_read_is_unknown_not_linked_in() -> None:
    assert interpreter("").endswith("(libpython linkage unknown)")


def test_the_machine_line_names_this_interpreter() -> None:
    assert f"interpreter: {Path(sys.executable).resolve()} (" in machine()


def test_the_speed_check_times_its_workload_in_milliseconds() -> None:
    said = speed_check()
    assert said.startswith("speed check: ")
    milliseconds = int(said.removeprefix("speed check: ").split(" ms ", 1)[0])
    assert 0 < milliseconds < 60_000


def test_the_targets_are_judged_on_each_best_run_in_decimal_units() -> None:
    said = target_lines({6_000: (0.5, 80.0), 60_000: (2.49, 430.0), 600_000: (30.0, 2_850.0)})
    assert said[0] == "against the targets (best run of each size):"
    # 450 MB is 429 MiB: a peak of 430 MiB misses it though 430 < 450.
    assert said[1] == (
        "  60,000 requests: 2.49 s against < 2.5 s: met; "
        "peak 430 MiB against < 450 MB (429 MiB): missed"
    )
    assert said[2] == (
        "  600,000 requests: 30.00 s against < 30 s: missed; "
        "peak 2,850 MiB against < 3,000 MB (2,861 MiB): met"
    )
    assert said[3:] == [
        "  60,000 requests took 5.0x the time of 6,000 (10x the requests)",
        "  600,000 requests took 12.0x the time of 60,000 (10x the requests)",
    ]


def test_sizes_without_a_target_print_no_verdict() -> None:
    assert target_lines({6_000: (0.5, 80.0)}) == []
    assert target_lines({}) == []
