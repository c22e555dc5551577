"""A call on a thread of its own, for work in C that lets the GIL go (RE2, hashlib)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")


class OnThread(Generic[T]):
    """Call ``work(*args)`` on a thread of its own; ``result`` waits for it.

    ``result`` returns what the call returned or raises what it raised. A plain thread
    rather than a pool: once ``join`` returns, the thread has dropped its arguments
    (``Thread.run`` deletes them), so a caller holding the last other reference to them
    (a file's bytes) frees them when it lets go; a pool's worker may hold its last work
    item a moment past the future's result. And no thread outlives its ``result`` or
    ``join``.
    """

    def __init__(self, name: str, work: Callable[..., T], *args: Any) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(work, *args), name=name, daemon=True
        )
        self._thread.start()

    def _run(self, work: Callable[..., T], *args: Any) -> None:
        try:
            self._value = work(*args)
        except BaseException as error:  # raised in the waiting thread by result()
            self._error = error

    def join(self) -> None:
        """Wait for the call to end, and leave what it returned or raised where it is."""
        self._thread.join()

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return cast(T, self._value)
