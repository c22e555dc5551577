"""Deriving a run's requests together gives what deriving each on its own gives.

``PolicyTable.derive_each`` reads the four fields of every request in one pass and
derives each distinct (risk class, shape) once; a request that lacks a field or holds a
list or object there sends the whole run through the per-request lookup. Lookalike
values (1 for true, 0.0 for 0) and non-strings must never share a derivation with the
strings they resemble.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_replay.model.policy import DERIVATION_FIELDS, default_table

TABLE = default_table()
RULES = list(TABLE.rules.values())
DELETE = object()
ODD = [None, "", " ", 1, 0, 1.0, True, False, [], ["x"], {}, {"k": "v"}, "unknown_class"]


def _plain(rule_index: int) -> dict[str, Any]:
    rule = RULES[rule_index % len(RULES)]
    return {name: getattr(rule, name) for name in DERIVATION_FIELDS} | {"request_id": "r"}


REQUEST = st.builds(
    lambda rule_index, edits: _edited(_plain(rule_index), edits),
    st.integers(0, 50),
    st.lists(
        st.tuples(
            st.sampled_from(DERIVATION_FIELDS),
            st.one_of(
                st.sampled_from([*ODD, DELETE]),
                st.sampled_from([getattr(r, f) for r in RULES for f in DERIVATION_FIELDS]),
            ),
        ),
        max_size=2,
    ),
)


def _edited(request: dict[str, Any], edits: list[tuple[str, Any]]) -> dict[str, Any]:
    for name, value in edits:
        if value is DELETE:
            request.pop(name, None)
        else:
            request[name] = value
    return request


@settings(max_examples=300, deadline=None)
@given(requests=st.lists(REQUEST, max_size=12))
def test_derive_each_is_derive_of_each(requests: list[dict[str, Any]]) -> None:
    assert TABLE.derive_each(requests) == [TABLE.derive(request) for request in requests]


def test_plain_requests_of_one_shape_share_one_derivation() -> None:
    requests = [_plain(0), _plain(1), _plain(0)]
    first, _, third = TABLE.derive_each(requests)
    assert first is third
