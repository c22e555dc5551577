"""What decoded JSON values hold, counted one nesting level at a time.

The loader counts the strings, keys included, to prove that no key was dropped as a
duplicate, and asks whether any value is a float. The same pass gives the shape of the
values at one level (``ValueShape``), which tells the records whether a row file's values
stand in the result as they are.
"""

from __future__ import annotations

from itertools import chain, compress, repeat
from operator import is_, length_hint
from typing import Any, NamedTuple


class ValueShape(NamedTuple):
    """The kinds and lengths (``length_hint``) of some values, and of their lists' and
    objects' items."""

    kinds: frozenset[type]
    longest: int  # the greatest length among the values
    widest: int  # the most items of a list or object among them
    item_kinds: frozenset[type]  # those items' kinds (a list's items, an object's values)
    longest_item: int  # the greatest length among those items


NO_VALUES = ValueShape(frozenset(), 0, 0, frozenset(), 0)


class Census(NamedTuple):
    strings: int  # each string, and each key of each object, at any depth
    floats: bool  # whether any value is a float
    shape: ValueShape  # the shape of the values at the level asked for


def census(values: list[Any], shape_at: int = 0) -> Census:
    """Count the strings (keys included) decoded JSON ``values`` hold, say whether any is a
    float, and give the shape of the values ``shape_at`` levels down (0: ``values``)."""
    strings, floats, level = 0, False, 0
    measured: list[tuple[frozenset[type], int, int]] = []  # levels shape_at and the next
    while values:
        types = list(map(type, values))
        kinds = set(types)
        strings += types.count(str)
        floats = floats or float in kinds
        objects: list[dict[str, Any]] = []
        lists: list[list[Any]] = []
        if dict in kinds:
            objects = list(compress(values, map(is_, types, repeat(dict))))
            strings += sum(map(len, objects))
        if list in kinds:
            lists = list(compress(values, map(is_, types, repeat(list))))
        if shape_at <= level <= shape_at + 1:
            widest = max(map(len, chain(objects, lists)), default=0)
            measured.append((frozenset(kinds), max(map(length_hint, values)), widest))
        values = [*chain.from_iterable(map(dict.values, objects)), *chain.from_iterable(lists)]
        level += 1
    return Census(strings, floats, _shape(measured))


def _shape(measured: list[tuple[frozenset[type], int, int]]) -> ValueShape:
    if not measured:
        return NO_VALUES
    kinds, longest, widest = measured[0]
    if len(measured) == 1:  # nothing below them
        return ValueShape(kinds, longest, widest, frozenset(), 0)
    item_kinds, longest_item, _ = measured[1]
    return ValueShape(kinds, longest, widest, item_kinds, longest_item)
