"""What every part of a run page's builder shares: the record, its indexes, links and inputs.

The input files are highlighted first, as the builder starts: a finding links to a line
only where that line is on the page.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from markupsafe import Markup

from sandbox_replay.checks.pipeline import Replay
from sandbox_replay.load.files import FileChangedError, read_same_file
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.rows import first_of_each
from sandbox_replay.records.build import RunRecords, column_of
from sandbox_replay.report.discover import DiscoveredRun
from sandbox_replay.report.highlight import file_slug, highlight_json, line_id
from sandbox_replay.report.views.cells import _expected_alarm, _layer_status
from sandbox_replay.report.views.common import (
    ACTIONS_FILE,
    MAIN_PAGE,
    MAX_EXCERPTS,
    MAX_SHOWN_BYTES,
    Pager,
    _is_count,
    finding_anchors,
    first_rows,
    plural,
    relative_href,
    request_anchor,
)
from sandbox_replay.report.views.models import InputView


class RunBase:
    """What each part of the run page's builder reads: the run, its record and indexes."""

    def __init__(
        self,
        run: DiscoveredRun,
        replay: Replay,
        records: RunRecords,
        build_time: str,
        version: str,
    ) -> None:
        self.run = run
        self.replay = replay
        self.records = records
        self.result: Mapping[str, Any] = records.result
        self.build_time = build_time
        self.version = version
        self.slugs = _unique_slugs(
            [f["path"] for f in self.result["input_files"] if f["kind"] == "input"]
        )
        # The opening lines of the rows the pages link to, by input file: each finding's,
        # and each request's (``JoinTable``). The highlighted files mark their extents.
        self.linked_rows: dict[Any, set[Any]] = {}
        for finding in self.result["findings"]:
            self.linked_rows.setdefault(finding["path"], set()).add(finding["line"])
        requests = self.linked_rows.setdefault(ACTIONS_FILE, set())
        requests.update(column_of(self.result["request_rows"], "line"))
        # Highlight first: a finding links to a line only where that line is on the page.
        self.input_views = self._input_views()
        self.highlighted = {v.path for v in self.input_views if v.html is not None}
        self.withheld = {
            f["path"]
            for f in self.result["input_files"]
            if f["kind"] == "input" and f["forbidden_material_found"]
        }
        self.findings = self.result["findings"]
        self.layer_status = {
            layer["layer"]: _layer_status(layer, self.result) for layer in self.result["layers"]
        }
        # The position of each request id's first row.
        request_rows = self.result["request_rows"]
        self.request_index: dict[str, int] = first_of_each(
            column_of(request_rows, "request_id"), range(len(request_rows))
        )
        # Findings are shown grouped by layer; a finding's page follows that order.
        self.layer_groups: list[tuple[Layer, list[int]]] = []
        for layer in Layer:
            members = [i for i, f in enumerate(self.findings) if f["layer"] == layer]
            if members:
                self.layer_groups.append((layer, members))
        self.finding_order = [i for _, members in self.layer_groups for i in members]
        # Each finding's permalink anchor, from its content (``finding_anchors``).
        self.finding_anchor = finding_anchors(self.findings)
        self.finding_position = {i: n for n, i in enumerate(self.finding_order)}
        # Which findings each join row links to, by subject and by input line.
        self.by_subject: dict[Any, list[int]] = {}
        self.by_line: dict[tuple[Any, Any], list[int]] = {}
        self.flagged_spans: set[Any] = set()
        self.flagged_replays: set[Any] = set()
        for i, f in enumerate(self.findings):
            if f["layer"] == Layer.PUBLIC_TRACE.value:
                self.flagged_spans.add(f["subject_id"])
            if f["error_code"] == codes.COLD_REPLAY_INVALID:
                self.flagged_replays.add(f["subject_id"])
            if not _expected_alarm(f):
                self.by_subject.setdefault(f["subject_id"], []).append(i)
                self.by_line.setdefault((f["path"], f["line"]), []).append(i)
        # The lines findings are about, by input file (``_hot_rows``).
        self.finding_lines: dict[Any, set[Any]] = {}
        for path, line in self.by_line:
            self.finding_lines.setdefault(path, set()).add(line)
        # A file too large to show whole shows the rows findings cite (the first
        # ``MAX_EXCERPTS``, by line): their opening lines are linked wherever cited. The
        # excerpts themselves are read for the run page alone (``InputFiles.shown_inputs``).
        self.excerpted: dict[str, frozenset[int]] = {}
        for info in self.result["input_files"]:
            path = info["path"]
            if info["kind"] != "input" or path in self.withheld or path in self.highlighted:
                continue
            if info["size"] > MAX_SHOWN_BYTES:
                cited = sorted(
                    n for n in self.finding_lines.get(path, ()) if _is_count(n) and n >= 1
                )
                if cited:
                    self.excerpted[path] = frozenset(cited[:MAX_EXCERPTS])
        self.spans = self.result["public_agent_execution_trace"]["spans"]
        # The rows a join row joins are the record's, where the replay's own join put them
        # (``Joined``; the record lists a file's rows in its order, and the derived rows and
        # spans one per joined request): the pages show the join the checks judged, and
        # index no list again. A receipt's rollback is found by the id its ref names.
        self.joined = replay.run.joined
        self.span_at = replay.trace.span_at
        self.rollback_index = first_rows(self.result["rollback_rows"], "rollback_id")
        self.join_pager, self.findings_pager, self.trace_pager = _pagers(self.result)

    # -- helpers

    @staticmethod
    def root_of(from_page: str) -> str:
        """Return the site root seen from a run-relative page."""
        return "../../../" if "/" in from_page else "../../"

    def line_href(self, path: Any, line: Any, from_page: str) -> str:
        """Link an input line where it is shown, else the file's entry; "" if withheld."""
        if not isinstance(path, str) or path not in self.slugs or path in self.withheld:
            return ""
        slug = self.slugs[path]
        if _is_count(line) and (
            (path in self.highlighted and line >= 1) or line in self.excerpted.get(path, ())
        ):
            return relative_href(MAIN_PAGE, line_id(slug, line), from_page)
        return relative_href(MAIN_PAGE, "file-" + slug, from_page)

    def request_href(self, rid: str, from_page: str) -> str:
        index = self.request_index.get(rid)
        if index is None:
            return ""
        return relative_href(self.join_pager.page_of(index), request_anchor(rid), from_page)

    def request_hrefs(self, rids: Iterable[str], from_page: str) -> list[str]:
        """Return ``request_href`` of each of ``rids``, as seen from one page.

        The link to a page is worked out once per page linked: ``relative_href`` ends with
        the anchor it is given, so the link to any anchor there is that prefix and it.
        """
        pager = self.join_pager
        prefixes: dict[int, str] = {}
        hrefs = []
        for rid in rids:
            index = self.request_index.get(rid)
            if index is None:
                hrefs.append("")
                continue
            page = index // pager.page_rows
            prefix = prefixes.get(page)
            if prefix is None:
                prefix = prefixes[page] = relative_href(pager.page_of(index), "", from_page)
            hrefs.append(prefix + request_anchor(rid))
        return hrefs

    def finding_href(self, index: int, from_page: str) -> str:
        page = self.findings_pager.page_of(self.finding_position[index])
        return relative_href(page, self.finding_anchor[index], from_page)

    def location(self, path: Any, line: Any) -> str:
        if not isinstance(path, str):
            return ""
        return f"{path}:{line}" if _is_count(line) else path

    # -- the input files, highlighted as the builder starts

    def _input_views(self) -> tuple[InputView, ...]:
        views = []
        flagged_classes: dict[str, list[str]] = {}
        for hit in self.result["secret_exclusion_scan"]["hits"]:
            flagged_classes.setdefault(hit["path"], []).append(hit["class_id"])
        for info in self.result["input_files"]:
            if info["kind"] != "input":
                continue
            path = info["path"]
            html: Markup | None = None
            if info["forbidden_material_found"]:
                notice = (
                    "Withheld: the forbidden-material scan matched this file ("
                    + ", ".join(flagged_classes.get(path, []))
                    + "), so its text is not reproduced here. Its digest is in Provenance."
                )
            else:
                html, notice = self._highlighted(path, info)
            views.append(
                InputView(
                    anchor="file-" + self.slugs[path],
                    path=path,
                    kind=info["kind"],
                    size=plural(info["size"], "byte"),
                    sha256=info["sha256"],
                    html=html,
                    notice=notice,
                )
            )
        return tuple(views)

    def _highlighted(self, path: str, info: Mapping[str, Any]) -> tuple[Markup | None, str]:
        """Return the file highlighted, if its bytes are still the ones replayed and scanned."""
        if info["size"] > MAX_SHOWN_BYTES:
            return None, (
                f"Not shown whole: larger than {MAX_SHOWN_BYTES // 1024} KB; see its digest."
            )
        try:  # no symlink followed, no FIFO waited on, nothing read past the limit
            raw = read_same_file(self.run.path / path, None, MAX_SHOWN_BYTES)
        except FileChangedError:
            return None, "Not shown: the file changed after it was replayed."
        except OSError:
            return None, "Not shown: the file could not be read again."
        if "sha256:" + hashlib.sha256(raw).hexdigest() != info["sha256"]:
            return None, "Not shown: the file changed after it was replayed."
        try:
            body = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None, "Not shown: the file is not valid UTF-8 (see Strict load)."
        notice = "" if info["loaded"] else "This file did not load; see its strict-load finding."
        rows = {n for n in self.linked_rows.get(path, ()) if _is_count(n)}
        return highlight_json(body, self.slugs[path], 1, rows), notice


def _unique_slugs(paths: Sequence[str]) -> dict[str, str]:
    """Give each input file a fragment-id stem, numbering any that would repeat."""
    slugs: dict[str, str] = {}
    used: set[str] = set()
    for path in sorted(paths):
        base = file_slug(path)
        slug, n = base, 2
        while slug in used:
            slug, n = f"{base}-{n}", n + 1
        used.add(slug)
        slugs[path] = slug
    return slugs


def _pagers(result: Mapping[str, Any]) -> tuple[Pager, Pager, Pager]:
    """Return the pagers of a run's join table, findings and trace."""
    return (
        Pager("join", len(result["request_rows"])),
        Pager("findings", len(result["findings"])),
        Pager("trace", len(result["public_agent_execution_trace"]["spans"])),
    )
