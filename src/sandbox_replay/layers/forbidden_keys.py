"""Forbidden keys: no row anywhere may carry secret values, raw environments or payloads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sandbox_replay import codes
from sandbox_replay.codes import Layer
from sandbox_replay.inputs import RunInputs
from sandbox_replay.layers.base import LayerResult

FORBIDDEN_KEYS = frozenset(
    {
        "credential_value",
        "secret_value",
        "raw_environment",
        "raw_env",
        "raw_tool_output_body",
        "executable_payload",
        "host_absolute_path",
        "provider_payload",
        "real_target_identifier",
    }
)
FLOOR = "forbidden_key_floor"


def _forbidden_in(value: Any) -> Iterator[str]:
    """Yield every forbidden key at any depth of ``value``."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not FORBIDDEN_KEYS.isdisjoint(item):
                yield from sorted(FORBIDDEN_KEYS.intersection(item))
            stack.extend(v for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, dict | list))


def check(run: RunInputs) -> LayerResult:
    """Report each file row (or object) that carries a forbidden key, naming the key only."""
    result = LayerResult(Layer.FORBIDDEN_MATERIAL)
    hits = 0
    for loaded in run.all_files():
        if loaded.data is None:
            continue
        if loaded.rows:
            row_keys = {k for k, v in loaded.data.items() if v is loaded.rows}
            top = {k: v for k, v in loaded.data.items() if k not in row_keys}
            units: list[tuple[Any, int | None, str]] = [(top, 1, loaded.name)]
            # Flat rows hold keys only at row level: their keys show whether any row has one.
            flat_keys = loaded.row_keys
            if flat_keys is None or not FORBIDDEN_KEYS.isdisjoint(flat_keys):
                units.extend(
                    (row, loaded.line_of(i), f"{loaded.name}#row{i}")
                    for i, row in enumerate(loaded.rows)
                )
        else:
            units = [(loaded.data, 1, loaded.name)]
        for value, line, subject in units:
            keys = sorted(set(_forbidden_in(value)))
            if keys:
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
