"""Keep a path a site records inside the inputs root ``verify`` was given.

A hostile site's manifest may name any path. ``resolve_inside`` walks one recorded path
under the root a part at a time, following a symbolic link only while its target stays
inside, so nothing outside the root is ever looked at: whether a file there exists, or
what it holds, cannot change the answer. ``refusal`` adds that only a regular file or a
folder may be read (no FIFO, device, socket, nor anything under /proc, /sys or /dev).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

_MAX_LINKS = 40  # as the kernel's own limit on links in one lookup
_SPECIAL_TREES = (Path("/proc"), Path("/sys"), Path("/dev"))


def inside(relative: str) -> bool:
    """Say whether a recorded relative path stays inside the folder it is relative to."""
    path = PurePosixPath(relative)
    return not path.is_absolute() and ".." not in path.parts and "\\" not in relative


def resolve_inside(root: Path, relative: str) -> Path | None:
    """Return the real path ``relative`` names under the resolved ``root``; None if it leaves.

    A missing part ends the walk: the rest is joined as it stands, inside the root. A link
    loop ends it too, on the link, which ``refusal`` then refuses as not a regular file.
    """
    if not inside(relative):
        return None
    current, todo, links = root, list(PurePosixPath(relative).parts), 0
    while todo:
        part = todo.pop(0)
        if part == "..":  # only from a link's target; the recorded path has none
            current = current.parent
            if not current.is_relative_to(root):
                return None
            continue
        step = current / part
        try:
            info = os.lstat(step)
        except OSError:  # missing, or under something that is not a folder
            return step.joinpath(*todo)
        if not stat.S_ISLNK(info.st_mode):
            current = step
            continue
        links += 1
        if links > _MAX_LINKS:
            return step
        target = PurePosixPath(os.readlink(step))
        if target.is_absolute():
            if not target.is_relative_to(root):  # judged by its text: nothing outside is read
                return None
            current, target = root, target.relative_to(root)
        todo[:0] = target.parts
    return current


def under(root: Path, relative: str) -> Path | None:
    """Return ``root / relative`` if it leads inside the resolved ``root``; else None."""
    return root / relative if resolve_inside(root.resolve(), relative) is not None else None


def refusal(root: Path, relative: str) -> str | None:
    """Return why ``verify`` must not read ``relative`` under the resolved ``root``, or None.

    A path that is missing is not refused: it is reported as missing when it is read.
    """
    found = resolve_inside(root, relative)
    if found is None:
        return "a path outside the inputs root"
    if any(found.is_relative_to(tree) for tree in _SPECIAL_TREES):
        return "a path that is neither a regular file nor a folder"
    try:
        mode = os.lstat(found).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return "a path that is neither a regular file nor a folder"
