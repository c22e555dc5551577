"""The index page's totals and status chart count each run by its own status."""

from __future__ import annotations

from dataclasses import replace

from sandbox_replay.model.policy_coverage import PolicyCoverage
from sandbox_replay.report.inspect_runs import MISSING_EXTRA, UnreadLog
from sandbox_replay.report.site_views import IndexView, RunSummary, build_index_view
from sandbox_replay.report.views import RunCounts

PASSED = RunSummary(
    name="good",
    mode="fixture",
    mode_label="fixture",
    status="pass",
    headline="passed",
    counts=RunCounts(3, 1, 2, 0, 0, 0, 0),
    findings_by_layer=(),
    error_codes=(),
    expected_codes=(),
    source_path="fixtures/good",
    result_sha256="sha256:00",
    input_digests=(),
    policy=PolicyCoverage("table", "p", "sha256:11", 0, ()),
)
BLOCKED = replace(PASSED, name="bad", status="blocked", headline="blocked")
UNREAD = UnreadLog("example", "fixtures/inspect/example.eval", MISSING_EXTRA).summary()


def _index(*runs: RunSummary) -> IndexView:
    return build_index_view(runs, "2026-01-01T00:00:00Z", "0")


def _totals(view: IndexView) -> dict[str, str]:
    return {fact.label: fact.value for fact in view.totals}


def test_a_run_that_could_not_be_read_is_not_counted_blocked() -> None:
    view = _index(PASSED, BLOCKED, UNREAD)
    totals = _totals(view)
    assert (totals["Runs"], totals["Passed"], totals["Blocked"], totals["Not run"]) == (
        "3",
        "1",
        "1",
        "1",
    )
    status_chart = view.charts[0]
    assert status_chart.table is not None
    assert status_chart.table.rows == (("pass", ("1",)), ("blocked", ("1",)), ("not run", ("1",)))
    assert 'data-filter="status=not_run"' in status_chart.svg
    assert ("not_run", "Not run") in view.statuses


def test_without_an_unread_run_the_index_shows_no_not_run_figure() -> None:
    view = _index(PASSED, BLOCKED, BLOCKED)
    totals = _totals(view)
    assert list(totals)[:3] == ["Runs", "Passed", "Blocked"]
    assert (totals["Passed"], totals["Blocked"]) == ("1", "2")
    assert "Not run" not in totals
    assert view.statuses == (("", "All statuses"), ("pass", "Pass"), ("blocked", "Blocked"))
    assert view.charts[0].table is not None
    assert [label for label, _ in view.charts[0].table.rows] == ["pass", "blocked"]
