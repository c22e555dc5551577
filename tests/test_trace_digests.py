"""The trace's packed input digests read exactly as the spelled-out list they stand for."""

from __future__ import annotations

import hashlib

import pytest

from sandbox_replay.trace import PackedDigests, _input_digest, packed_input_digests


def spelled(count: int) -> list[str]:
    return ["sha256:" + hashlib.sha256(str(i).encode()).hexdigest() for i in range(count)]


def test_packed_digests_index_and_slice_like_a_list() -> None:
    full = spelled(10)
    packed = PackedDigests(b"".join(bytes.fromhex(d[7:]) for d in full))
    assert len(packed) == 10
    assert list(packed) == full
    for item in (slice(None), slice(2, 5), slice(7, 2), slice(-3, None), slice(None, None, 3)):
        assert packed[item] == full[item]
    assert packed[0] == full[0] and packed[-1] == full[-1]
    with pytest.raises(IndexError):
        packed[10]


def testpacked_input_digests_equal_the_digest_of_each_triple() -> None:
    """The bulk path (all strings) and the exact path (any other value) agree per triple."""
    actions = ["a", 'quote " and \\ back', "é", "x"]
    capabilities = ["cap", "cap", "\u2028", "y"]
    risks = ["r", "r", "r", "z"]
    bulk = packed_input_digests(actions, capabilities, risks)
    assert list(bulk) == [_input_digest(t) for t in zip(actions, capabilities, risks, strict=True)]
    mixed = packed_input_digests([*actions, None], [*capabilities, 1], [*risks, ["list"]])
    triples = zip([*actions, None], [*capabilities, 1], [*risks, ["list"]], strict=True)
    assert list(mixed) == [_input_digest(t) for t in triples]
