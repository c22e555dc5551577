"""Row lists built a chunk at a time whenever they are read, instead of held.

The result record's row lists and the trace's spans hold one dict per input row: about
400,000 dicts at 60,000 requests, more memory than the loaded rows themselves. A
``LazyRows`` keeps only what its rows are made from and builds them when read (as the
record is written, or as a page reads them). Each read builds fresh dicts, equal every
time; an index gives a dict, a slice a list, iteration goes ``ROWS_PER_CHUNK`` at a time,
``rows_at`` builds the rows at given positions together, and ``column`` reads one field
of every row (without building the rows, where a subclass can).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from operator import eq, index
from typing import Any, overload

# Rows are built this many at a time when a row list is iterated.
ROWS_PER_CHUNK = 4096


class LazyRows(Sequence[dict[str, Any]]):
    """A read-only list of rows; a subclass says how many and how to build a run of them."""

    def __len__(self) -> int:
        raise NotImplementedError

    def build(self, start: int, stop: int) -> list[dict[str, Any]]:
        """Return rows ``start`` to ``stop`` (``0 <= start <= stop <= len(self)``)."""
        raise NotImplementedError

    def rows_at(self, positions: Sequence[int]) -> list[dict[str, Any]]:
        """Return ``[self[p] for p in positions]`` (each ``0 <= p < len(self)``), in bulk.

        A subclass builds them as one run of rows, from only what those rows are made of:
        a page's rows joined from another list, without building that whole list.
        """
        return [self.build(at, at + 1)[0] for at in positions]

    def column(self, name: str) -> list[Any]:
        """Return ``[row.get(name) for row in self]``; a subclass may read it without the rows."""
        return [row.get(name) for row in self]

    def column_at(self, positions: Sequence[int], name: str) -> list[Any]:
        """Return ``[self[p].get(name) for p in positions]``; a subclass may skip the rows."""
        return [row.get(name) for row in self.rows_at(positions)]

    @overload
    def __getitem__(self, position: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, position: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, position: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(position, slice):
            start, stop, step = position.indices(len(self))
            if step == 1:
                return self.build(start, max(start, stop))
            return [self[i] for i in range(start, stop, step)]
        at = index(position)
        if at < 0:
            at += len(self)
        if not 0 <= at < len(self):
            raise IndexError("row index out of range")
        return self.build(at, at + 1)[0]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        total = len(self)
        for start in range(0, total, ROWS_PER_CHUNK):
            yield from self.build(start, min(start + ROWS_PER_CHUNK, total))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes | bytearray):
            return NotImplemented
        return len(self) == len(other) and all(map(eq, self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {len(self)} rows>"


def column_of(rows: Sequence[Mapping[str, Any]], name: str) -> list[Any]:
    """Return ``[row.get(name) for row in rows]``; of a ``LazyRows``, through its ``column``."""
    if isinstance(rows, LazyRows):
        return rows.column(name)
    return [row.get(name) for row in rows]


class PickedRows(Sequence[Mapping[str, Any]]):
    """The rows of a row list at some of its positions, read a column at a time.

    A page that joins its requests to other lists reads a few fields of each joined row:
    ``column`` reads one field at every position without building the rows (of a
    ``LazyRows``, through ``column_at``); indexing builds the one row asked for.
    """

    def __init__(self, rows: Sequence[Mapping[str, Any]], positions: Sequence[int]) -> None:
        self.rows = rows
        self.positions = positions

    def __len__(self) -> int:
        return len(self.positions)

    @overload
    def __getitem__(self, position: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, position: slice) -> Sequence[Mapping[str, Any]]: ...

    def __getitem__(self, position: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        if isinstance(position, slice):
            return PickedRows(self.rows, self.positions[position])
        at = self.positions[position]
        if isinstance(self.rows, LazyRows):
            return self.rows.rows_at([at])[0]
        return self.rows[at]

    def column(self, name: str) -> list[Any]:
        """Return ``[row.get(name) for row in self]``, without building the rows."""
        if isinstance(self.rows, LazyRows):
            return self.rows.column_at(self.positions, name)
        return [self.rows[at].get(name) for at in self.positions]
