"""A line figure drawn by the server as SVG: no script, nothing to fetch, nothing to run.

For the charts a page shows in its first screen on a phone (the trend's pass rate and p95
latency): drawn by plotly.js there, the page fetched and ran its 1.2 MB before it answered
input (on a slow phone, a second of blocked main thread). `to_svg` takes the same plotly
figure the builders make (`charts.compare.pass_rate_trend`, `latency_trend`, with
`charts.versions.mark_version_changes`), so what a chart shows is decided in one place:
scatter traces with lines and markers, on a date, category or linear x axis and a linear or
log y axis with the figure's range, tick values, labels and format; vertical lines (shapes)
and their labels (annotations). Each point's hover text becomes its `<title>` (a tooltip
and, with the `Data` table below, the text alternative). The box keeps the figure's aspect
ratio (viewBox), so its space is reserved before it is painted. Text from users arrives
escaped for plotly (`charts.safe`): it is unescaped, then escaped again for SVG.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import plotly.graph_objects as go
from django.utils import timezone
from django.utils.html import escape

from evaluations.web.charts.a11y import data_table, label_of

WIDTH = 400  # the viewBox's width in a narrow box: about what a phone gives a chart, so text stays ~12 px
WIDE = 720  # and in a box 560 px wide or more (a desktop)
LEFT, RIGHT, TOP, BOTTOM = 56, 14, 24, 40
_PLACEHOLDER = re.compile(r"%\{(customdata\[(\d+)\]|y|x)(:[^}]*)?\}")


def _plain(text: Any) -> str:
    """Plotly text (HTML-escaped, `<br>` between lines) as plain text."""
    text = re.sub(r"<extra>.*?</extra>", "", str(text))
    return html.unescape(re.sub(r"<br\s*/?>", " · ", text)).strip()


def _number(value: Any) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _fmt(value: float, spec: str | None) -> str:
    if spec:
        try:
            return format(value, spec)
        except ValueError:
            pass
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:g}"


def _nice_ticks(top: float) -> list[float]:
    """0 and 3 to 5 round steps up to at least `top`."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / 4
    step = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * step >= raw:
            step *= m
            break
    count = math.ceil(top / step - 1e-9)
    return [round(i * step, 10) for i in range(count + 1)]


class _Axis:
    """Maps data values to one pixel span, and says where to draw the ticks."""

    def __init__(self, values: Sequence[float], layout_axis: Any, span: tuple[float, float], *, log: bool) -> None:
        self.log, self.span = log, span
        tickvals = list(getattr(layout_axis, "tickvals", None) or [])
        ticktext = list(getattr(layout_axis, "ticktext", None) or [])
        self.spec = (getattr(layout_axis, "tickformat", None) or "") or None
        axis_range = list(getattr(layout_axis, "range", None) or [])
        if log:
            positive = [v for v in values if v > 0] + [t for t in tickvals if t > 0]
            low, high = (min(positive), max(positive)) if positive else (1.0, 10.0)
            self.low, self.high = math.log10(low), math.log10(high)
            if self.high - self.low < 1e-9:
                self.low, self.high = self.low - 0.5, self.high + 0.5
        else:
            if axis_range:
                self.low, self.high = float(axis_range[0]), float(axis_range[1])
            else:
                ticks = _nice_ticks(max(values, default=1.0))
                tickvals = tickvals or ticks
                self.low, self.high = 0.0, max(ticks[-1], max(tickvals, default=1.0))
        self.ticks = [(t, ticktext[i] if i < len(ticktext) else _fmt(t, self.spec)) for i, t in enumerate(tickvals)]
        if not self.ticks:
            self.ticks = [(t, _fmt(t, self.spec)) for t in _nice_ticks(self.high)]

    def __call__(self, value: float) -> float:
        v = math.log10(value) if self.log else value
        start, end = self.span
        return start + (v - self.low) / (self.high - self.low) * (end - start)


def _x_positions(fig: go.Figure, width: float) -> tuple[Callable[[Any], float | None], list[tuple[float, str, str]]]:
    """Where each x value goes, and the x axis's labels (position, text, anchor): the first and
    the last, the axis being runs in the order they were made."""
    xs = [x for trace in fig.data for x in (getattr(trace, "x", None) or [])]
    dated = getattr(fig.layout.xaxis, "type", None) == "date"
    pad = 10.0
    start, end = LEFT + pad, width - RIGHT - pad
    if dated:
        def when(x: Any) -> datetime | None:
            try:
                moment = datetime.fromisoformat(str(x))
            except ValueError:
                return None
            return timezone.localtime(moment) if timezone.is_aware(moment) else moment
        moments = [t for t in (when(x) for x in xs) if t is not None]
        low, high = (min(m.timestamp() for m in moments), max(m.timestamp() for m in moments)) if moments else (0, 1)

        def place(x: Any) -> float | None:
            moment = when(x)
            if moment is None:
                return None
            t = moment.timestamp()
            return (start + end) / 2 if high == low else start + (t - low) / (high - low) * (end - start)

        labels: list[tuple[float, str, str]] = []
        if moments:
            first, last = min(moments), max(moments)
            shape = "%b %-d, %H:%M" if high - low < 2 * 86400 else "%b %-d, %Y"
            labels.append((start, first.strftime(shape), "start"))
            if last.strftime(shape) != first.strftime(shape):
                labels.append((end, last.strftime(shape), "end"))
        return place, labels
    order: list[str] = []
    for x in xs:
        if str(x) not in order:
            order.append(str(x))

    def slot(x: Any) -> float | None:
        if str(x) not in order:
            return None
        i = order.index(str(x))
        return (start + end) / 2 if len(order) == 1 else start + i / (len(order) - 1) * (end - start)

    ends = [(start, _plain(order[0]), "start")] if order else []
    if len(order) > 1:
        ends.append((end, _plain(order[-1]), "end"))
    return slot, ends


def _hover(template: str | None, trace: Any, i: int, y: float, y_spec: str | None) -> str:
    custom = list(trace.customdata[i]) if getattr(trace, "customdata", None) is not None else []

    def fill(match: re.Match[str]) -> str:
        what, index, spec = match.group(1), match.group(2), (match.group(3) or ":")[1:]
        if index is not None:
            return str(custom[int(index)]) if int(index) < len(custom) else ""
        if what == "y":
            return _fmt(y, spec or y_spec)
        return str(trace.x[i])

    name = _plain(getattr(trace, "name", "") or "")
    text = _plain(_PLACEHOLDER.sub(fill, template)) if template else _fmt(y, y_spec)
    return f"{name} · {text}" if name else text


def _series_points(trace: Any, place_x: Callable[[Any], float | None], place_y: _Axis,
                   log: bool) -> list[list[tuple[float, float, int, float]]]:
    """The trace's points as runs of drawable (px, py, index, y): a missing value breaks the line."""
    runs: list[list[tuple[float, float, int, float]]] = [[]]
    for i, (x, raw) in enumerate(zip(trace.x or [], trace.y or [], strict=False)):
        y, px = _number(raw), place_x(x)
        if y is None or px is None or (log and y <= 0):
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((px, place_y(y), i, y))
    return [r for r in runs if r]


def to_svg(fig: go.Figure) -> str:
    """The figure as inline SVG (with an HTML legend above it when the figure shows one), named
    for assistive technology and followed by its numbers as a table, like `to_html`. Drawn
    twice, for a narrow and a wide box (the CSS shows the one that fits the chart's box, by a
    container query), so its text keeps about 12 px on a phone and on a desktop alike."""
    legend, narrow = _draw(fig, WIDTH)
    _, wide = _draw(fig, WIDE)
    return (f'<div class="svg-figure">{legend}<div class="svg-narrow">{narrow}</div>'
            f'<div class="svg-wide">{wide}</div></div>' + data_table(fig))


def _draw(fig: go.Figure, width: int) -> tuple[str, str]:
    """(the legend, the <svg>) at this viewBox width."""
    height = int(fig.layout.height or 260)
    y_layout = fig.layout.yaxis
    log = getattr(y_layout, "type", None) == "log"
    values = [v for trace in fig.data for v in (_number(y) for y in (trace.y or [])) if v is not None]
    y = _Axis(values, y_layout, (height - BOTTOM, TOP), log=log)
    place_x, x_labels = _x_positions(fig, width)
    parts: list[str] = []
    for value, text in y.ticks:
        if log and value <= 0:
            continue
        py = y(value)
        if not TOP - 1 <= py <= height - BOTTOM + 1:
            continue
        parts.append(f'<line class="svg-grid" x1="{LEFT}" x2="{width - RIGHT}" y1="{py:.1f}" y2="{py:.1f}"/>'
                     f'<text x="{LEFT - 6}" y="{py + 4:.1f}" text-anchor="end">{escape(_plain(text))}</text>')
    base = height - BOTTOM
    for px, text, anchor in x_labels:
        parts.append(f'<text x="{px:.1f}" y="{base + 16}" text-anchor="{anchor}">{escape(text)}</text>')
    x_title = _plain(getattr(getattr(fig.layout.xaxis, "title", None), "text", None) or "")
    y_title = _plain(getattr(getattr(y_layout, "title", None), "text", None) or "")
    if x_title:
        parts.append(f'<text x="{(LEFT + width - RIGHT) / 2:.1f}" y="{height - 4}" text-anchor="middle">'
                     f"{escape(x_title)}</text>")
    if y_title:
        middle = (TOP + base) / 2
        parts.append(f'<text x="12" y="{middle:.1f}" text-anchor="middle" transform="rotate(-90 12 {middle:.1f})">'
                     f"{escape(y_title)}</text>")
    for shape in fig.layout.shapes or ():
        if shape.type == "line" and shape.x0 == shape.x1 and (at := place_x(shape.x0)) is not None:
            parts.append(f'<line class="svg-marker" x1="{at:.1f}" x2="{at:.1f}" y1="{TOP}" y2="{base}"/>')
    for note in fig.layout.annotations or ():
        if note.x is not None and (at := place_x(note.x)) is not None:
            parts.append(f'<text class="svg-note" x="{at:.1f}" y="{TOP - 6}" text-anchor="middle">'
                         f"{escape(_plain(note.text or ''))}</text>")
    legend: list[str] = []
    for trace in fig.data:
        colour = escape(getattr(getattr(trace, "line", None), "color", None) or "currentColor")
        name = _plain(getattr(trace, "name", "") or "")
        template = getattr(trace, "hovertemplate", None)
        series = _series_points(trace, place_x, y, log)
        for run in series:
            if len(run) > 1 and "lines" in (trace.mode or "lines"):
                path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in run)
                parts.append(f'<polyline class="svg-series" points="{path}" stroke="{colour}"/>')
            for px, py, i, value in run:
                title = escape(_hover(template, trace, i, value, y.spec))
                parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{colour}">'
                             f"<title>{title}</title></circle>")
        if name:
            legend.append(f'<li><svg class="svg-key" viewBox="0 0 20 10" aria-hidden="true" focusable="false">'
                          f'<line x1="0" x2="20" y1="5" y2="5" stroke="{colour}" stroke-width="2"/>'
                          f'<circle cx="10" cy="5" r="3" fill="{colour}"/></svg>{escape(name)}</li>')
    shown_legend = f'<ul class="svg-legend">{"".join(legend)}</ul>' if legend and fig.layout.showlegend else ""
    return shown_legend, (f'<svg class="svg-chart" viewBox="0 0 {width} {height}" role="img" '
                          f'aria-label="{escape(label_of(fig))}" focusable="false">{"".join(parts)}</svg>')
