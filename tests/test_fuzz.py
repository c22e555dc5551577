"""Fuzz the input files: whatever their bytes, a record is written and nothing unverified passes.

One input file of a passing folder (the fixture, or the built-in bundle when it exists) is
replaced by hypothesis-made content: random bytes, a truncation, a byte-level mutation,
a type confusion at a random place in the parsed file, or a mutation of its rows, and
about half the cases are replayed with the seeded escapes on (``--sensitivity``). The
replay must not raise, must write its records, and:

- a file the strict parser must refuse (independently re-checked here) blocks the run
  with a strict-load finding on that file;
- a run is ``pass`` only if no layer other than the negative cases found anything,
  every layer ran and every expected negative case fired;
- whenever a strict-load finding or any non-negative-case finding exists, it is blocked.

``benchmarks/fuzz_long.py`` runs the same ``cases`` and ``check_case`` with a large budget.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandbox_replay.checks.negative_cases import NEGATIVE_CASES
from sandbox_replay.checks.pipeline import ReplayConfig, replay
from sandbox_replay.load.run import BUNDLE_FILES, CORE_FILES, InputMode
from sandbox_replay.model.codes import Layer
from sandbox_replay.records.build import build_records, write_records

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {
    InputMode.FIXTURE: ROOT / "fixtures" / "first_wave",
    InputMode.BUNDLE: ROOT / "fixtures" / "bundles" / "exported_bundle",
}
FILES = {
    InputMode.FIXTURE: [*CORE_FILES, *(case.file_name for case in NEGATIVE_CASES)],
    InputMode.BUNDLE: [*CORE_FILES, *BUNDLE_FILES],
}
MODES = [mode for mode, folder in SOURCES.items() if folder.is_dir()]


@dataclass(frozen=True)
class Case:
    """One fuzz case: which folder, which file, what it now holds, and how it was made."""

    mode: InputMode
    name: str
    content: bytes
    kind: str


def original(mode: InputMode, name: str) -> bytes:
    return (SOURCES[mode] / name).read_bytes()


json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (the root excluded)."""
    found: list[tuple[Any, ...]] = []
    items: list[tuple[Any, Any]] = []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    for key, child in items:
        found.append((*prefix, key))
        found.extend(_paths(child, (*prefix, key)))
    return found


def _set(root: Any, path: tuple[Any, ...], new: Any) -> None:
    target = root
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """Draw one spoiled input file for one of the passing folders."""
    mode = draw(st.sampled_from(MODES))
    name = draw(st.sampled_from(FILES[mode]))
    raw = original(mode, name)
    kind = draw(
        st.sampled_from(["random", "truncate", "bytes", "confuse", "rows", "rows", "confuse"])
    )
    if kind == "random":
        content = draw(st.binary(max_size=300))
    elif kind == "truncate":
        content = raw[: draw(st.integers(0, max(len(raw) - 1, 0)))]
    elif kind == "bytes":
        data = bytearray(raw)
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(data) - 1))
            action = draw(st.sampled_from(["flip", "insert", "delete"]))
            if action == "flip":
                data[at] = draw(st.integers(0, 255))
            elif action == "insert":
                data[at:at] = draw(st.binary(min_size=1, max_size=4))
            else:
                del data[at]
        content = bytes(data)
    else:
        doc = json.loads(raw)
        paths = _paths(doc)
        if kind == "confuse" and paths:
            path = draw(st.sampled_from(paths))
            _set(doc, path, draw(json_values))
        elif kind == "rows":
            doc = _mutate_rows(draw, doc, CORE_FILES.get(name))
        content = json.dumps(doc, indent=draw(st.sampled_from([None, 2]))).encode()
    return Case(mode, name, content, kind)


def _mutate_rows(draw: st.DrawFn, doc: dict[str, Any], key: str | None) -> dict[str, Any]:
    rows = doc.get(key) if key else None
    if not isinstance(rows, list) or not rows:
        victim = draw(st.sampled_from(sorted(doc))) if doc else None
        if victim is not None:
            del doc[victim]
        return doc
    index = draw(st.integers(0, len(rows) - 1))
    action = draw(st.sampled_from(["drop_key", "drop_row", "dup_row", "swap", "set", "extra"]))
    row = rows[index]
    if action == "drop_key" and row:
        del row[draw(st.sampled_from(sorted(row)))]
    elif action == "drop_row":
        del rows[index]
    elif action == "dup_row":
        rows.insert(index, json.loads(json.dumps(row)))
    elif action == "swap" and row:
        other = rows[draw(st.integers(0, len(rows) - 1))]
        field = draw(st.sampled_from(sorted(row)))
        row[field] = other.get(field, draw(json_leaves))
    elif action == "set" and row:
        row[draw(st.sampled_from(sorted(row)))] = draw(json_values)
    else:
        row[draw(st.text(min_size=1, max_size=10))] = draw(json_values)
    return doc


def strictly_refused(content: bytes, rows_key: str | None) -> bool:
    """Say, independently of the loader, whether a strict loader must refuse ``content``."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({k for k, _ in items}) != len(items):
            raise ValueError("duplicate key")
        return dict(items)

    def constant(name: str) -> Any:
        raise ValueError("non-finite")

    def finite(text: str) -> float:
        value = float(text)
        if math.isinf(value):
            raise ValueError("overflow")
        return value

    if content.startswith(b"\xef\xbb\xbf"):
        return True
    try:
        doc = json.loads(
            content.decode("utf-8"),
            object_pairs_hook=pairs,
            parse_constant=constant,
            parse_float=finite,
        )
    except (ValueError, RecursionError):
        return True
    if not isinstance(doc, dict):
        return True
    if rows_key is None:
        return False
    rows = doc.get(rows_key)
    return not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows)


def check_case(case: Case, work: Path, sensitivity: bool = False) -> str:
    """Replay ``case`` in ``work`` (with the seeded escapes if asked), assert the
    properties, and return the run's status."""
    folder = work / "in"
    out = work / "out"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(SOURCES[case.mode], folder)
    (folder / case.name).write_bytes(case.content)

    outcome = replay(ReplayConfig(folder, case.mode, sensitivity=sensitivity))
    records = build_records(outcome)
    written = write_records(records, case.mode, out, None)
    assert written and all(path.is_file() for path in written)
    result = json.loads(written[0].read_text())
    assert result["status"] == outcome.status

    findings = outcome.findings
    strict = [f for f in findings if f.layer is Layer.STRICT_LOAD]
    floor = [f for f in findings if f.layer is not Layer.NEGATIVE_CASES]
    if strictly_refused(case.content, CORE_FILES.get(case.name) or BUNDLE_FILES.get(case.name)):
        assert outcome.status == "blocked"
        assert any(f.path == case.name for f in strict), [f.error_code for f in findings]
    if strict or floor:
        assert outcome.status == "blocked"
    if outcome.status == "pass":
        assert all(layer.ran for layer in outcome.layers)
        assert outcome.negative is None or not outcome.negative.missing
    return outcome.status


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases(), sensitivity=st.booleans())
def test_spoiled_input_never_crashes_and_fails_closed(case: Case, sensitivity: bool) -> None:
    # Durability is tested elsewhere; here fsync would only make the budget wait on disk.
    with tempfile.TemporaryDirectory() as scratch, mock.patch("os.fsync"):
        check_case(case, Path(scratch), sensitivity)


def test_every_fuzzed_folder_passes_unspoiled() -> None:
    """The fuzz starts from passing folders, so any block it sees comes from the spoiling."""
    for mode in MODES:
        with tempfile.TemporaryDirectory() as scratch:
            name = FILES[mode][0]
            assert check_case(Case(mode, name, original(mode, name), "none"), Path(scratch)) == (
                "pass"
            )
