"""Small input files: read within a limit and refused in the words their caller passes in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox_replay.small_inputs import DuplicateKeyError, read_small, unique_keys

WORDS = {"too_large": "{path}: {size} > {limit}", "unreadable": "{path}: {reason}"}


def test_a_file_within_the_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(b"{}")
    assert read_small(path, 2, ValueError, **WORDS) == b"{}"


def test_refusals_are_worded_by_the_caller(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(b"[1]")
    with pytest.raises(ValueError, match=r"^.*f\.json: 3 > 2$"):
        read_small(path, 2, ValueError, **WORDS)
    with pytest.raises(RuntimeError, match="No such file or directory"):
        read_small(tmp_path / "missing", 2, RuntimeError, **WORDS)
    with pytest.raises(ValueError, match=r"^not a file: .*missing$"):
        read_small(tmp_path / "missing", 2, ValueError, **WORDS, not_file="not a file: {path}")


def test_a_key_given_twice_is_refused_and_named() -> None:
    assert json.loads('{"a": 1, "b": {"a": 2}}', object_pairs_hook=unique_keys) == {
        "a": 1,
        "b": {"a": 2},
    }
    with pytest.raises(DuplicateKeyError, match="duplicate key 'a'") as raised:
        json.loads('{"a": 1, "a": 2}', object_pairs_hook=unique_keys)
    assert raised.value.key == "a"
