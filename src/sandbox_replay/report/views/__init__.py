"""View-models of a run's pages: everything a template shows, decided here.

The site-wide pages (the index and the finding-code catalog) are ``site_views``.

Templates only loop, branch and escape; every URL, CSS class, sort key, percentage and
sentence is computed in this package. Figures come from each run's result record, which
is already redacted (see ``records``), so a page can only show what the record shows;
the few values taken from the replay itself (module anchors, input bytes) are redacted
or scan-checked here too.

One module per part of the run page, each a part of the builder (``base.RunBase``
holds what they share: the record, its indexes, the links between pages):
``summary`` (headline, facts, flowchart), ``joins`` (the join table), ``findings``,
``calibration``, ``layer_tables`` (layers and the scan), ``trace_table``, ``input_files``
(inputs and source modules), and ``run``, which puts them together with the provenance
and the listing sub-pages. ``models`` holds the view-models the templates read,
``cells`` the join table's cells, ``common`` what the site pages share with them.
"""

from sandbox_replay.report.views.common import (
    MAX_SHOWN_BYTES,
    PAGE_ROWS,
    Badge,
    Cell,
    Chrome,
    PageNav,
    badge,
    breakable,
    chrome,
    plural,
)
from sandbox_replay.report.views.models import (
    FindingLink,
    JoinRow,
    ListingPageView,
    RunCounts,
    RunView,
    SpanRow,
)
from sandbox_replay.report.views.run import (
    RunPages,
    _RunBuilder,
    build_run_pages,
    build_run_view,
    subpage_paths,
)

__all__ = [
    "MAX_SHOWN_BYTES",
    "PAGE_ROWS",
    "Badge",
    "Cell",
    "Chrome",
    "FindingLink",
    "JoinRow",
    "ListingPageView",
    "PageNav",
    "RunCounts",
    "RunPages",
    "RunView",
    "SpanRow",
    "_RunBuilder",
    "badge",
    "breakable",
    "build_run_pages",
    "build_run_view",
    "chrome",
    "plural",
    "subpage_paths",
]
