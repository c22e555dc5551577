"""Forbidden keys: no row anywhere may carry secret values, raw environments or payloads."""

from __future__ import annotations

from sandbox_replay.checks.base import LayerResult
from sandbox_replay.load.run import RunInputs
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer

FLOOR = "forbidden_key_floor"


def check(run: RunInputs) -> LayerResult:
    """Report each file row (or object) that carries a forbidden key, naming the key only."""
    result = LayerResult(Layer.FORBIDDEN_MATERIAL)
    hits = 0
    for loaded in run.all_files():
        for subject, line, keys in loaded.forbidden_keys:
            hits += len(keys)
            result.add(
                codes.FORBIDDEN_KEY_PRESENT,
                f"{subject} carries forbidden key(s): {', '.join(keys)}",
                FLOOR,
                subject,
                "input_row",
                loaded.name,
                line,
            )
    result.counts = {"forbidden_key_count": hits}
    return result
