"""The trace's fast paths give what the plain code they stand for gives, value for value."""

from __future__ import annotations

import inspect
import random
from collections import Counter
from functools import partial
from typing import Any

from sandbox_replay.trace import (
    Spans,
    _input_digest,
    _sorted_span,
    _span,
    _text,
    _text_counts,
    canonical_digest,
    packed_input_digests,
    spans_digest,
)

# Strings that need escaping or sit next to the quotes and commas the fast paths cut at.
TEXTS = ["", "a", ",", '"', '","', "\\", "é", "\u2028", "\x00", "\x1f", "\x7f", "[", "null"]


def test_sorted_span_is_span_with_its_keys_sorted() -> None:
    assert inspect.signature(_sorted_span) == inspect.signature(_span)
    for version in ("2026.1", None, 3):
        args: list[Any] = ["r1", "s", {"b": 1}, 7, "e", None, version, "x", "executed", [1]]
        args += ["sha256:00", None]
        plain, ordered = _span(*args), _sorted_span(*args)
        assert ordered == plain
        assert list(ordered) == sorted(plain)


def test_packed_input_digests_equal_the_digest_of_each_triple_whatever_the_text() -> None:
    rnd = random.Random(7)
    for _ in range(2000):
        count = rnd.randint(0, 5)
        columns: list[list[Any]] = [
            [rnd.choice(TEXTS) + rnd.choice(TEXTS) for _ in range(count)] for _ in range(3)
        ]
        if rnd.random() < 0.5:  # actions with nothing to escape take the orjson path
            columns[0] = [t.replace("\\", "").replace('"', "") for t in columns[0]]
        if rnd.random() < 0.1 and count:
            columns[rnd.randrange(3)][0] = rnd.choice([None, 1, ["a"], {"b": 2}])
        expected = [_input_digest(values) for values in zip(*columns, strict=True)]
        assert list(packed_input_digests(*columns)) == expected


def test_packed_input_digests_cut_the_actions_a_chunk_at_a_time() -> None:
    actions = [f"action,{i}" for i in range(10_000)]
    capabilities = ["cap"] * len(actions)
    risks = [",", '"'] * (len(actions) // 2)
    packed = packed_input_digests(actions, capabilities, risks)
    for at in (0, 4095, 4096, 8191, 8192, 9999):
        assert packed[at] == _input_digest((actions[at], capabilities[at], risks[at]))


def _column(rnd: random.Random, values: list[Any], count: int) -> list[Any]:
    return [rnd.choice(values) for _ in range(count)]


def test_spans_digest_is_the_canonical_digest_whatever_the_values() -> None:
    rnd = random.Random(11)
    values: list[Any] = [*TEXTS, None, 0, True, {"b": [1, {"z": 1, "a": 2}], "a": "x"}, [","]]
    for _ in range(200):
        count = rnd.randint(1, 6)
        column = partial(_column, rnd, values, count)
        spans = Spans(
            rnd.choice(TEXTS),
            [f"r{i}{rnd.choice(TEXTS)}" for i in range(count)],
            column(),
            column(),
            column(),
            column(),
            [rnd.choice([None, "x"]) for _ in range(count)],
            ["executed"] * count,
            column(),
            packed_input_digests(["a"] * count, ["b"] * count, ["c"] * count),
            [rnd.choice([None, "x"]) for _ in range(count)],
        )
        expected = canonical_digest(list(spans))
        assert spans_digest(spans, may_hold_floats=False) == expected


def test_text_counts_count_every_other_value_as_empty_text() -> None:
    for values in (["b", "a", "b"], ["b", None, 1, "a", "", ["x"]]):
        expected = dict(sorted(Counter(map(_text, values)).items()))
        assert _text_counts(values) == expected
