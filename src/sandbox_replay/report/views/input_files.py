"""The inputs as the run page shows them (whole, or excerpts of the rows findings cite),
and the copied source modules: path, digest, class and anchors, never their bodies."""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from dataclasses import replace
from typing import Any, BinaryIO

from markupsafe import Markup

from sandbox_replay.load.files import FileChangedError, open_same_file
from sandbox_replay.records.build import redact
from sandbox_replay.report.highlight import highlight_json, line_id, row_end
from sandbox_replay.report.views.base import RunBase
from sandbox_replay.report.views.common import (
    EXCERPT_BEFORE,
    EXCERPT_LINES,
    MAX_EXCERPTS,
    MAX_SHOWN_BYTES,
    Badge,
    plural,
    text,
)
from sandbox_replay.report.views.models import InputView, ModuleView

# Bytes read at a time when a large input is read again for excerpts.
READ_CHUNK = 8 * 1024 * 1024


def read_lines(
    handle: BinaryIO, wanted: set[int], chunk_size: int = READ_CHUNK
) -> tuple[dict[int, bytes], str]:
    """Return the lines of ``handle`` numbered in ``wanted`` (from 1, without their line
    end) and the sha256 hex digest of all of its bytes.

    Read ``chunk_size`` bytes at a time, each hashed and its line ends counted in C; a
    chunk is split into lines only as far as the last wanted line ending in it, and only
    the pieces of a wanted line are kept across chunks. A last line with no line end is a
    line if it is not empty.
    """
    digest = hashlib.sha256()
    found: dict[int, bytes] = {}
    ordered = sorted(wanted)
    number = 1  # the line the next byte read belongs to
    partial: list[bytes] = []  # what was read of line ``number``, kept where it is wanted
    while chunk := handle.read(chunk_size):
        digest.update(chunk)
        if not ordered or number > ordered[-1]:
            continue  # every wanted line found: the rest is only hashed
        ends = chunk.count(b"\n")
        ending = ordered[bisect_left(ordered, number) : bisect_left(ordered, number + ends)]
        if ending:  # wanted lines that end in this chunk
            pieces = chunk.split(b"\n", ending[-1] - number + 1)
            pieces[0] = b"".join([*partial, pieces[0]])
            for n in ending:
                found[n] = pieces[n - number]
            start = pieces[-1]  # after the last of them: the next line starts after its last end
            start = start[start.rfind(b"\n") + 1 :]
        else:
            start = chunk[chunk.rfind(b"\n") + 1 :] if ends else chunk
        if ends:
            partial = []
        number += ends
        if number in wanted:
            partial.append(start)
    if any(partial):
        found[number] = b"".join(partial)
    return found, digest.hexdigest()


class InputFiles(RunBase):
    def shown_inputs(self) -> tuple[InputView, ...]:
        """Return the input views, a large file's with the excerpts of its cited rows.

        Read here, for the run page alone: a large file is read once more (``read_lines``)
        and its digest checked, so an excerpt shows the bytes that were replayed and
        scanned. Where it cannot be (changed, unreadable, not UTF-8) the notice says so,
        and the cited lines keep an anchor each, at the file's entry.
        """
        views = []
        for view in self.input_views:
            cited = self.excerpted.get(view.path)
            if cited is None:
                views.append(view)
                continue
            info = next(f for f in self.result["input_files"] if f["path"] == view.path)
            html, notice = self._excerpts(view.path, info, sorted(cited))
            views.append(replace(view, html=html, notice=notice))
        return tuple(views)

    def _excerpts(self, path: str, info: dict[str, Any], cited: list[int]) -> tuple[Markup, str]:
        slug = self.slugs[path]
        wanted: set[int] = set()
        for line in cited:
            wanted.update(range(max(1, line - EXCERPT_BEFORE), line + EXCERPT_LINES))
        lines: dict[int, str] = {}
        problem = ""
        try:
            with open_same_file(self.run.path / path, None, info["size"]) as handle:
                found, digest = read_lines(handle, wanted)
            lines = {n: raw.decode("utf-8").rstrip("\r\n") for n, raw in found.items()}
        except FileChangedError:
            problem = "the file changed after it was replayed"
        except UnicodeDecodeError:
            problem = "the file is not valid UTF-8 (see Strict load)"
        except OSError:
            problem = "the file could not be read again"
        if not problem and "sha256:" + digest != info["sha256"]:
            problem = "the file changed after it was replayed"
        if problem:
            anchors = "".join(f'<span id="{line_id(slug, n)}"></span>' for n in cited)
            return Markup(
                anchors
            ), f"Not shown: larger than {MAX_SHOWN_BYTES // 1024} KB, and {problem}."
        blocks: list[tuple[int, int]] = []
        for line in cited:
            start = max(1, line - EXCERPT_BEFORE)
            end = row_end(lines, line, line + EXCERPT_LINES - 1)
            if blocks and start <= blocks[-1][1] + 1:
                blocks[-1] = (blocks[-1][0], max(blocks[-1][1], end))
            else:
                blocks.append((start, end))
        html = "".join(
            highlight_json("\n".join(lines[n] for n in range(a, b + 1)) + "\n", slug, a, cited)
            for a, b in blocks
        )
        more = len(self.finding_lines.get(path, ())) - len(cited)
        notice = (
            f"Larger than {MAX_SHOWN_BYTES // 1024} KB: shown as the {plural(len(cited), 'row')} findings cite, "
            "each from just before its opening line to its closing bracket."
        )
        if more > 0:
            notice += f" {more:,} more cited rows are not shown (at most {MAX_EXCERPTS})."
        return Markup(html), notice

    def modules(self) -> tuple[ModuleView, ...]:
        anchors: dict[str, tuple[str, ...]] = {}
        if self.replay.modules is not None:
            for body in self.replay.modules.bodies:
                shown = redact(list(body.anchors), self.replay.scan.matched_texts)
                anchors[body.module_id] = tuple(shown)
        return tuple(
            ModuleView(
                module_id=text(m["module_id"]),
                path=text(m["path"]),
                material_class=text(m["material_class"]),
                sha256=text(m["sha256"]),
                size=plural(m["size"], "byte"),
                anchors=anchors.get(m["module_id"], ()),
                verified=Badge("verified", "badge status-pass")
                if m["verified"]
                else Badge("not verified", "badge status-blocked"),
            )
            for m in self.result["source_modules"]
        )
