"""Draw the index page's small inline-SVG charts, and shade the calibration heatmap.

Each chart's ``<desc>`` states every number in words, for a screen reader and a printout.
Bars carry CSS classes from a fixed list, never colours: ``assets/site.css`` colours them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from markupsafe import Markup

from sandbox_replay.drawing.svg import (
    check_id_prefix,
    clean_text,
    escape,
    fit_text,
    num,
    text_width,
)
from sandbox_replay.figures import count

CSS_CLASSES: Final = frozenset(
    {"", "layer", "finding"}
    | {f"status-{s}" for s in ("pass", "blocked", "not_run", "not_applicable")}
    | {f"verdict-{v}" for v in ("allow", "block", "review", "missing")}
    | {f"sev-{s}" for s in ("critical", "high", "medium", "low")}
)
_FILTER: Final = re.compile(r"[a-z]+=[A-Za-z0-9_.~%-]{1,400}")
HEATMAP_LEVELS: Final = 5  # heat_level returns 0 .. HEATMAP_LEVELS - 1

WIDTH: Final = 320.0
FONT: Final = 12.0
ROW: Final = 22.0
BAR: Final = 14.0
PAD: Final = 6.0
LABEL_MAX: Final = 118.0
LABEL_ABOVE: Final = 15.0
VALUE_PAD: Final = 6.0
LEGEND_ROW: Final = 18.0


@dataclass(frozen=True)
class BarDatum:
    """One bar, or one segment of a stacked bar."""

    label: str
    value: int
    css_class: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int) or self.value < 0:
            raise ValueError(f"bar value must be a non-negative int, got {self.value!r}")
        if self.css_class not in CSS_CLASSES:
            raise ValueError(
                f"css_class must be one of {sorted(CSS_CLASSES)}, got {self.css_class!r}"
            )


def heat_level(value: int, maximum: int) -> int:
    """Return the shade 0..4 of a calibration-matrix cell: 0 only for 0, 4 for the maximum."""
    if value < 0 or value > maximum:
        raise ValueError(f"need 0 <= value <= maximum, got {value} of {maximum}")
    if value == 0:
        return 0
    top = HEATMAP_LEVELS - 1
    return max(1, min(top, -(-value * top // maximum)))


def bar_chart(
    data: Sequence[BarDatum],
    *,
    title: str,
    id_prefix: str,
    filters: Sequence[str] = (),
) -> Markup:
    """Draw one horizontal bar per datum, each with its value beside it."""
    return stacked_bar_chart(
        [(datum.label, [datum]) for datum in data],
        title=title,
        id_prefix=id_prefix,
        legend=False,
        filters=filters,
    )


def stacked_bar_chart(
    rows: Sequence[tuple[str, Sequence[BarDatum]]],
    *,
    title: str,
    id_prefix: str,
    legend: bool = True,
    filters: Sequence[str] = (),
    legend_filters: Mapping[str, str] | None = None,
) -> Markup:
    """Draw one horizontal bar per row, split into its segments, with the row's total beside it.

    Labels too wide to sit beside the bars are drawn above them. ``filters`` (one per row)
    and ``legend_filters`` (by segment label) are the index's fragment filters
    (``status=blocked``) that a click on a bar or a key applies.
    """
    prefix = check_id_prefix(id_prefix)
    for value in (*filters, *(legend_filters or {}).values()):
        if not _FILTER.fullmatch(value):
            raise ValueError(f"a chart filter must match {_FILTER.pattern}, got {value!r}")
    keys = _legend_keys(rows) if legend else []
    totals = [sum(d.value for d in segments) for _, segments in rows]
    values = [count(total) for total in totals]
    value_room = max((text_width(v, FONT) for v in values), default=0.0) + VALUE_PAD
    widest = max((text_width(clean_text(label), FONT) for label, _ in rows), default=0.0)
    above = widest > LABEL_MAX
    bar_left = PAD if above else PAD + widest + PAD
    row_height = ROW + LABEL_ABOVE if above else ROW
    largest = max(totals, default=0)
    scale = (WIDTH - bar_left - value_room - PAD) / largest if largest else 0.0
    top = PAD + (LEGEND_ROW * -(-len(keys) // _legend_columns(len(keys))) if keys else 0.0)
    body = [_legend(keys, legend_filters or {})] if keys else []
    for index, (label, segments) in enumerate(rows):
        y = top + index * row_height
        row_filter = filters[index] if index < len(filters) else ""
        body.append(_bar_row(label, segments, values[index], y, bar_left, scale, above, row_filter))
    if not rows:
        body.append(
            f'<text class="chart-empty" x="{num(WIDTH / 2)}" y="{num(top + ROW * 0.7)}" '
            f'text-anchor="middle" font-size="{num(FONT)}">No data</text>'
        )
    height = top + max(len(rows), 1) * row_height + PAD
    return _svg(height, prefix, title, _describe(rows), body)


def _svg(height: float, prefix: str, title: str, description: str, body: list[str]) -> Markup:
    """Wrap a chart's body in its ``<svg>``, titled and described for a screen reader."""
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'width="{num(WIDTH)}" height="{num(height)}" viewBox="0 0 {num(WIDTH)} {num(height)}" '
        f'aria-labelledby="{prefix}-title" aria-describedby="{prefix}-desc" '
        f'font-family="sans-serif">'
        f'<title id="{prefix}-title">{escape(title)}</title>'
        f'<desc id="{prefix}-desc">{escape(description)}</desc>'
        f"{''.join(body)}</svg>"
    )


def _legend_keys(rows: Sequence[tuple[str, Sequence[BarDatum]]]) -> list[tuple[str, str]]:
    keys: list[tuple[str, str]] = []
    for _, segments in rows:
        for datum in segments:
            key = (clean_text(datum.label), datum.css_class)
            if key not in keys:
                keys.append(key)
    return keys


def _filter_attribute(value: str) -> str:
    return f' data-filter="{value}"' if value else ""


def _legend_columns(keys: int) -> int:
    """Four keys (the four severities) share one line; otherwise three to a line."""
    return 4 if keys == 4 else 3


def _legend(keys: list[tuple[str, str]], filters: Mapping[str, str] | None = None) -> str:
    columns = _legend_columns(len(keys))
    column = (WIDTH - 2 * PAD) / columns
    parts = ['<g class="chart-legend">']
    for index, (label, css_class) in enumerate(keys):
        x = PAD + (index % columns) * column
        y = PAD + (index // columns) * LEGEND_ROW
        parts.append(
            f'<g class="chart-key"{_filter_attribute((filters or {}).get(label, ""))}>'
            f"<title>{escape(label)}</title>"
            f'<rect class="{_bar_class(css_class)}" x="{num(x)}" y="{num(y + 2)}" '
            f'width="10" height="10" stroke="currentColor" stroke-width="0.5"/>'
            + _text(x + 14, y + 11, FONT - 1, escape(fit_text(label, FONT - 1, column - 18)))
            + "</g>"
        )
    parts.append("</g>")
    return "".join(parts)


def _bar_class(css_class: str) -> str:
    return f"bar {css_class}" if css_class else "bar"


def _bar_row(
    label: str,
    segments: Sequence[BarDatum],
    value: str,
    y: float,
    bar_left: float,
    scale: float,
    above: bool,
    row_filter: str,
) -> str:
    name = clean_text(label)
    if above:
        shown = escape(fit_text(name, FONT, WIDTH - 2 * PAD))
        label_text = _text(PAD, y + FONT, FONT, shown, "chart-label")
        y += LABEL_ABOVE
    else:
        label_text = _text(
            bar_left - PAD, y + ROW / 2 + FONT * 0.35, FONT, escape(name), "chart-label", "end"
        )
    parts = [
        f'<g class="chart-row"{_filter_attribute(row_filter)}>'
        f"<title>{escape(f'{name}: {_amounts(segments)}')}</title>{label_text}"
    ]
    left = bar_left
    for datum in segments:
        if not datum.value:
            continue
        width = datum.value * scale
        parts.append(
            f'<rect class="{_bar_class(datum.css_class)}" x="{num(left)}" '
            f'y="{num(y + (ROW - BAR) / 2)}" width="{num(width)}" height="{num(BAR)}" '
            f'stroke="currentColor" stroke-width="0.5">'
            f"<title>{escape(f'{name}: {clean_text(datum.label)} {count(datum.value)}')}</title>"
            f"</rect>"
        )
        left += width
    parts.append(_text(left + 4, y + ROW / 2 + FONT * 0.35, FONT, value, "chart-value") + "</g>")
    return "".join(parts)


def _text(x: float, y: float, size: float, body: str, css: str = "", anchor: str = "") -> str:
    """Return a ``<text>`` in the current colour (``body`` is escaped already)."""
    css = f' class="{css}"' if css else ""
    anchor = f' text-anchor="{anchor}"' if anchor else ""
    return (
        f'<text{css} x="{num(x)}" y="{num(y)}"{anchor} font-size="{num(size)}" '
        f'fill="currentColor">{body}</text>'
    )


def _amounts(segments: Sequence[BarDatum]) -> str:
    if len(segments) == 1:
        return count(segments[0].value)
    if not segments:
        return "0"
    listed = ", ".join(f"{clean_text(d.label)} {count(d.value)}" for d in segments)
    return f"{listed} (total {count(sum(d.value for d in segments))})"


def _describe(rows: Sequence[tuple[str, Sequence[BarDatum]]]) -> str:
    """Every number of the chart in words, row by row."""
    if not rows:
        return "No data."
    return " ".join(f"{clean_text(label)}: {_amounts(segments)}." for label, segments in rows)


@dataclass(frozen=True)
class TrendPoint:
    """One build of the trend: its label and figures."""

    label: str
    passed: int
    blocked: int
    findings: int


TREND_HEIGHT: Final = 150.0
TREND_LEFT: Final = 30.0
TREND_BOTTOM: Final = 34.0


def trend_chart(points: Sequence[TrendPoint], *, title: str, id_prefix: str) -> Markup:
    """Draw one column per build (passed under blocked runs) and a line of its findings."""
    prefix = check_id_prefix(id_prefix)
    columns = max(len(points), 1)
    room = WIDTH - TREND_LEFT - PAD
    step = room / columns
    column = min(BAR * 2, step * 0.6)
    plot_top = PAD + LEGEND_ROW + FONT
    plot_height = TREND_HEIGHT - plot_top - TREND_BOTTOM
    base = plot_top + plot_height
    most_runs = max((p.passed + p.blocked for p in points), default=0) or 1
    most_findings = max((p.findings for p in points), default=0) or 1
    body = [
        _legend([("passed runs", "status-pass"), ("blocked runs", "status-blocked")]),
        _text(WIDTH - PAD, PAD + 11, FONT - 1, "— findings", anchor="end"),
        f'<line class="trend-axis" x1="{num(TREND_LEFT)}" y1="{num(base)}" '
        f'x2="{num(WIDTH - PAD)}" y2="{num(base)}" stroke="currentColor" stroke-width="0.5"/>',
        _text(TREND_LEFT - 4, plot_top + FONT * 0.35, FONT - 2, count(most_runs), anchor="end"),
    ]
    line: list[str] = []
    for index, point in enumerate(points):
        centre = TREND_LEFT + step * (index + 0.5)
        left = centre - column / 2
        top = base
        for value, css in ((point.passed, "status-pass"), (point.blocked, "status-blocked")):
            height = plot_height * value / most_runs
            if value:
                top -= height
                body.append(
                    f'<rect class="bar {css}" x="{num(left)}" y="{num(top)}" '
                    f'width="{num(column)}" height="{num(height)}" stroke="currentColor" '
                    f'stroke-width="0.5"/>'
                )
        label = escape(fit_text(clean_text(point.label), FONT - 2, step - 2))
        body.append(_text(centre, base + FONT + 2, FONT - 2, label, "chart-label", "middle"))
        y = base - plot_height * point.findings / most_findings
        line.append(f"{num(centre)},{num(y)}")
        body.append(
            f'<circle class="trend-point" cx="{num(centre)}" cy="{num(y)}" r="3" '
            'fill="currentColor"/>'
            + _text(centre + 5, y - 4, FONT - 2, count(point.findings), "chart-value")
        )
    if len(line) > 1:
        body.insert(
            4,
            f'<polyline class="trend-line" points="{" ".join(line)}" fill="none" '
            f'stroke="currentColor" stroke-width="1.5"/>',
        )
    description = " ".join(
        f"{clean_text(p.label)}: {count(p.passed)} passed, {count(p.blocked)} blocked, "
        f"{count(p.findings)} findings."
        for p in points
    )
    return _svg(TREND_HEIGHT, prefix, title, description or "No data.", body)
