"""Read a small file a user names (a policy, a map, a table), refused in its caller's words."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class DuplicateKeyError(ValueError):
    """A JSON object names ``key`` twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Return an object's pairs as a dict (a ``json.loads`` hook), refusing a key given twice."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise DuplicateKeyError(key)
        found[key] = value
    return found


def read_small(
    path: Path,
    limit: int,
    refuse: type[Exception],
    *,
    too_large: str,
    unreadable: str,
    not_file: str | None = None,
) -> bytes:
    """Return the bytes of the file at ``path``, or raise ``refuse`` with a message made from
    a template: ``too_large`` (over ``limit`` bytes) takes ``{path}``, ``{size}`` and
    ``{limit}``; ``unreadable`` ``{path}`` and ``{reason}``; ``not_file`` (checked first when
    given) ``{path}``."""
    try:
        if not_file is not None and not path.is_file():
            raise refuse(not_file.format(path=path))
        size = path.stat().st_size
        if size > limit:
            raise refuse(too_large.format(path=path, size=size, limit=limit))
        return path.read_bytes()
    except OSError as error:
        raise refuse(unreadable.format(path=path, reason=error.strerror or error)) from None
