"""``joined`` finds each key's row as a lookup would, whatever the two orders."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from sandbox_replay.inputs import RowRef, _index_by
from sandbox_replay.layers.base import NO_ROW, joined

IDS = [f"r{n}" for n in range(8)]


def _index(ids: list[Any]) -> dict[str, RowRef]:
    refs = [RowRef("f.json", n, n + 3, {"id": value}) for n, value in enumerate(ids)]
    return _index_by(refs, "id")


@given(
    ids=st.lists(st.one_of(st.sampled_from(IDS), st.integers(0, 2), st.none())),
    keys=st.lists(st.one_of(st.sampled_from(IDS), st.integers(0, 2), st.none())),
)
@example(ids=IDS, keys=IDS)  # in step throughout
@example(ids=IDS[:3] + IDS[4:], keys=IDS)  # a row missing
@example(ids=IDS, keys=IDS[:3] + IDS[4:])  # a row more
@example(ids=IDS, keys=[*IDS[4:], *IDS[:4]])  # the keys rotated: found behind the walk
@example(ids=["r1", "r2", "r1", "r3"], keys=["r1", "r2", "r3", "r1"])  # a repeated id
def test_joined_is_a_lookup_per_key(ids: list[Any], keys: list[Any]) -> None:
    index = _index(ids)
    assert joined(index, keys) == [index.get(key, NO_ROW) for key in keys]
    assert all(
        map(lambda a, b: a is b, joined(index, keys), map(index.get, keys, [NO_ROW] * len(keys)))
    )


def test_joined_refuses_a_key_that_cannot_be_hashed_as_a_lookup_does() -> None:
    index = _index(IDS)
    with pytest.raises(TypeError):
        joined(index, ["r0", ["r1"], "r2"])
    with pytest.raises(TypeError):
        joined(index, [*IDS[:7], ["r1"]])


class _Counting(dict[str, RowRef]):
    """An index that counts its lookups."""

    lookups = 0

    def get(self, key: Any, default: Any = None) -> Any:
        self.lookups += 1
        return super().get(key, default)


@pytest.mark.parametrize(
    ("ids", "keys", "lookups"),
    [
        (IDS, IDS, 0),
        (IDS[:3] + IDS[4:], IDS, 1),  # the missing row's key
        (IDS, IDS[:3] + IDS[4:], 1),  # the key after the row no key names, then in step
        (IDS, [*IDS[4:], *IDS[:4]], 5),  # the first key, then in step, then the four behind
    ],
)
def test_joined_walks_in_step_past_rows_missing_or_added(
    ids: list[str], keys: list[str], lookups: int
) -> None:
    index = _Counting(_index(ids))
    assert joined(index, keys) == [dict.get(index, key, NO_ROW) for key in keys]
    assert index.lookups == lookups
