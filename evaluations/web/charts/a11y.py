"""A text alternative for every chart: an accessible name (the chart's axes, or what the page
says it shows) and the figure's numbers as a table behind a "Data" toggle, for screen
readers, keyboards and anyone who wants the exact values.

Trace names and labels arrive escaped for plotly (which renders them as HTML: `safe`); they
are unescaped and escaped again here, so the table shows the text as it is, never markup."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go
from django.utils.html import escape

MAX_ROWS = 300


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.unescape(str(value))


def _axis_title(axis: Any) -> str:
    title = getattr(getattr(axis, "title", None), "text", None)
    return _text(title) if title else ""


def label_of(fig: go.Figure) -> str:
    """`Chart: candidate score against baseline score`, from the axis titles; else the trace names."""
    x, y = _axis_title(fig.layout.xaxis), _axis_title(fig.layout.yaxis)
    if x and y:
        return f"Chart: {y} against {x}"
    names = [_text(t.name) for t in fig.data if getattr(t, "name", None)]
    return "Chart" + (f": {', '.join(names[:4])}" if names else "") + (f" by {x or y}" if x or y else "")


def _rows(fig: go.Figure) -> tuple[list[str], list[list[str]]]:
    heatmaps = [t for t in fig.data if t.type == "heatmap"]
    if heatmaps:
        trace = heatmaps[0]
        # The corner cell names the rows (a header cell is never empty: axe's empty-table-header).
        head = [_axis_title(fig.layout.yaxis) or "row"] + [_text(x) for x in list(trace.x or [])]
        texts = trace.text if trace.text is not None else trace.z
        cells = [[_text(y)] + [_text(v) for v in row] for y, row in zip(trace.y or [], texts or [], strict=False)]
        return head, cells
    head = ["series", _axis_title(fig.layout.xaxis) or "x", _axis_title(fig.layout.yaxis) or "y"]
    rows: list[list[str]] = []
    for trace in fig.data:
        xs: Any = getattr(trace, "x", None)
        ys: Any = getattr(trace, "y", None)
        if xs is None or ys is None:
            continue
        name = _text(getattr(trace, "name", "")) or trace.type
        rows += [[name, _text(x), _text(y)] for x, y in zip(xs, ys, strict=False)]
    return head, rows


def data_table(fig: go.Figure) -> str:
    """The figure's numbers as an HTML table inside a closed <details> (escaped text)."""
    head, rows = _rows(fig)
    if not rows:
        return ""
    note = f"<p class=\"help\">The first {MAX_ROWS} of {len(rows)} rows.</p>" if len(rows) > MAX_ROWS else ""
    body = "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in rows[:MAX_ROWS])
    header = "".join(f"<th scope=\"col\">{escape(cell)}</th>" for cell in head)
    return (f'<details class="chart-data"><summary>Data</summary>{note}<div class="table-scroll">'
            f'<table class="table compact"><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table></div>'
            "</details>")
