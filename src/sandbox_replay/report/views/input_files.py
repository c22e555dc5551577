"""The inputs as the run page shows them (whole, or excerpts of the rows findings cite),
and the copied source modules: path, digest, class and anchors, never their bodies."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from markupsafe import Markup

from sandbox_replay.checks.pipeline import InputFileInfo
from sandbox_replay.load.files import FileChangedError, open_same_file, read_same_file
from sandbox_replay.load.scan import ScanReport
from sandbox_replay.report.highlight import highlight_json, line_id, row_end
from sandbox_replay.report.views.common import (
    EXCERPT_BEFORE,
    EXCERPT_LINES,
    MAX_EXCERPTS,
    MAX_SHOWN_BYTES,
    check_badge,
    is_count,
    plural,
    text,
)
from sandbox_replay.report.views.models import InputView, ModuleView

if TYPE_CHECKING:
    from sandbox_replay.report.views.index import RunIndex

_LARGER = f"larger than {MAX_SHOWN_BYTES // 1024} KB"


def read_lines(handle: BinaryIO, wanted: set[int]) -> tuple[dict[int, bytes], str]:
    """Return the lines of ``handle`` numbered in ``wanted`` (from 1, without their line
    end) and the sha256 hex digest of all of its bytes."""
    digest = hashlib.sha256()
    found = {}
    for number, line in enumerate(handle, 1):
        digest.update(line)
        if number in wanted:
            found[number] = line.removesuffix(b"\n")
    return found, digest.hexdigest()


def input_views(
    folder: Path,
    inputs: Sequence[InputFileInfo],
    slugs: Mapping[str, str],
    linked: Mapping[Any, set[Any]],
    scan: ScanReport,
) -> tuple[InputView, ...]:
    """Return the view of each input file, highlighted whole where it may be shown, with
    anchors on the ``linked`` lines (by file)."""
    flagged_classes: dict[str, list[str]] = {}
    for hit in scan.hits:
        flagged_classes.setdefault(hit.path, []).append(hit.class_id)
    views = []
    for info in inputs:
        html: Markup | None = None
        if info.withheld:
            notice = (
                "Withheld: the forbidden-material scan matched this file ("
                + ", ".join(flagged_classes.get(info.path, []))
                + "), so its text is not reproduced here. Its digest is in Provenance."
            )
        else:
            rows = {n for n in linked.get(info.path, ()) if is_count(n)}
            html, notice = highlighted(folder, info, slugs[info.path], rows)
        views.append(
            InputView(
                anchor="file-" + slugs[info.path],
                path=info.path,
                kind=info.kind,
                size=plural(info.size, "byte"),
                sha256=info.sha256,
                html=html,
                notice=notice,
            )
        )
    return tuple(views)


def highlighted(
    folder: Path, info: InputFileInfo, slug: str, rows: set[int]
) -> tuple[Markup | None, str]:
    """Return the file highlighted, if its bytes are still the ones replayed and scanned."""
    if info.size > MAX_SHOWN_BYTES:
        return None, f"Not shown whole: larger than {MAX_SHOWN_BYTES // 1024} KB; see its digest."
    try:  # no symlink followed, no FIFO waited on, nothing read past the limit
        raw = read_same_file(folder / info.path, None, MAX_SHOWN_BYTES)
    except FileChangedError:
        return None, "Not shown: the file changed after it was replayed."
    except OSError:
        return None, "Not shown: the file could not be read again."
    if "sha256:" + hashlib.sha256(raw).hexdigest() != info.sha256:
        return None, "Not shown: the file changed after it was replayed."
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "Not shown: the file is not valid UTF-8 (see Strict load)."
    notice = "" if info.loaded else "This file did not load; see its strict-load finding."
    return highlight_json(body, slug, 1, rows), notice


def shown_inputs(ix: RunIndex) -> tuple[InputView, ...]:
    """Return the input views, a large file's with the excerpts of its cited rows, read
    again and checked against its digest (else the notice says why, and the cited lines
    keep an anchor each)."""
    sizes = {info.path: info for info in ix.replay.inputs if info.kind == "input"}
    views = []
    for view in ix.inputs:
        cited = ix.excerpted.get(view.path)
        if cited is not None:
            html, notice = _excerpts(ix, sizes[view.path], sorted(cited))
            view = replace(view, html=html, notice=notice)
        views.append(view)
    return tuple(views)


def _excerpts(ix: RunIndex, info: InputFileInfo, cited: list[int]) -> tuple[Markup, str]:
    slug = ix.slugs[info.path]
    wanted: set[int] = set()
    for line in cited:
        wanted.update(range(max(1, line - EXCERPT_BEFORE), line + EXCERPT_LINES))
    lines: dict[int, str] = {}
    problem = ""
    try:
        with open_same_file(ix.run.path / info.path, None, info.size) as handle:
            found, digest = read_lines(handle, wanted)
        lines = {n: raw.decode("utf-8").rstrip("\r\n") for n, raw in found.items()}
    except FileChangedError:
        problem = "the file changed after it was replayed"
    except UnicodeDecodeError:
        problem = "the file is not valid UTF-8 (see Strict load)"
    except OSError:
        problem = "the file could not be read again"
    if not problem and "sha256:" + digest != info.sha256:
        problem = "the file changed after it was replayed"
    if problem:
        anchors = "".join(f'<span id="{line_id(slug, n)}"></span>' for n in cited)
        return Markup(anchors), f"Not shown: {_LARGER}, and {problem}."
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
    notice = (
        f"Larger than {MAX_SHOWN_BYTES // 1024} KB: shown as the {plural(len(cited), 'row')} findings cite, "
        "each from just before its opening line to its closing bracket."
    )
    more = len(ix.finding_lines.get(info.path, ())) - len(cited)
    if more > 0:
        notice += f" {more:,} more cited rows are not shown (at most {MAX_EXCERPTS})."
    return Markup(html), notice


def modules(ix: RunIndex) -> tuple[ModuleView, ...]:
    """Return the copied source modules as the record shows them (never their bodies)."""
    bodies = ix.replay.modules.bodies if ix.replay.modules is not None else []
    # Looked up by the id the record shows: a redacted id shows no anchors.
    anchors = {body.module_id: tuple(ix.shown(list(body.anchors))) for body in bodies}
    return tuple(
        ModuleView(
            module_id=text(ix.shown(body.module_id)),
            path=text(ix.shown(body.path)),
            material_class=text(ix.shown(body.material_class)),
            sha256=body.sha256,
            size=plural(body.size, "byte"),
            anchors=anchors.get(ix.shown(body.module_id), ()),
            verified=check_badge(body.verified, "verified", "not verified"),
        )
        for body in bodies
    )
