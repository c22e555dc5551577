"""View-models of a run's pages: everything a template shows, decided here.

``index.index_run`` makes one typed ``RunIndex`` per run; each part of the run page is
built from it by its own module (``summary``, ``joins``, ``findings``, ``calibration``,
``layer_tables``, ``trace_table``, ``input_files``, ``search``); ``run`` puts them
together into the run page and its sub-pages, ``single`` into the single file.
"""

from sandbox_replay.report.views.common import MAX_SHOWN_BYTES as MAX_SHOWN_BYTES
from sandbox_replay.report.views.common import PAGE_ROWS as PAGE_ROWS
from sandbox_replay.report.views.common import Badge as Badge
from sandbox_replay.report.views.common import Cell as Cell
from sandbox_replay.report.views.common import Chrome as Chrome
from sandbox_replay.report.views.common import PageNav as PageNav
from sandbox_replay.report.views.common import badge as badge
from sandbox_replay.report.views.common import breakable as breakable
from sandbox_replay.report.views.common import chrome as chrome
from sandbox_replay.report.views.common import plural as plural
from sandbox_replay.report.views.index import RunIndex as RunIndex
from sandbox_replay.report.views.index import index_run as index_run
from sandbox_replay.report.views.models import FindingLink as FindingLink
from sandbox_replay.report.views.models import JoinRow as JoinRow
from sandbox_replay.report.views.models import ListingPageView as ListingPageView
from sandbox_replay.report.views.models import RunCounts as RunCounts
from sandbox_replay.report.views.models import RunView as RunView
from sandbox_replay.report.views.models import SpanRow as SpanRow
from sandbox_replay.report.views.run import RunPages as RunPages
from sandbox_replay.report.views.run import build_run_pages as build_run_pages
from sandbox_replay.report.views.run import subpage_paths as subpage_paths
