"""View-models of a run's pages: everything a template shows, decided here.

The site-wide pages (the index, the catalog, the policy page) are ``site_views``.
Templates only loop, branch and escape; every URL, CSS class, sort key, percentage and
sentence is computed in this package.

``index.RunIndex`` is made once per run (``index_run``): the typed replay, the result
record's rows and the indexes over them. Each part of the run page is built by functions
that take it: ``summary`` (headline, facts, flowchart), ``joins`` (the join table and the
gaps), ``findings``, ``calibration`` (verdict matrix, negative cases, policy coverage),
``layer_tables`` (layers and the scan), ``trace_table``, ``input_files`` (inputs and
source modules) and ``search``. ``run`` puts them together into the run page and its
listing sub-pages, ``single`` into the single file. ``models`` holds the view-models the
templates read, ``cells`` the join table's cells, ``common`` what the site pages share.
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
from sandbox_replay.report.views.index import RunIndex, index_run
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
    build_run_pages,
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
    "RunIndex",
    "RunPages",
    "RunView",
    "SpanRow",
    "badge",
    "breakable",
    "build_run_pages",
    "chrome",
    "index_run",
    "plural",
    "subpage_paths",
]
