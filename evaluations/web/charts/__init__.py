"""Plotly figure builders: pure functions, plain data in, a figure out. Nothing here queries.

Shared by every page's charts: one colour-blind-safe palette (Okabe-Ito), one quiet layout
that reads on a light and a dark page (transparent backgrounds; `static/js/charts.js` then
takes the text and grid colours from the page's CSS), seconds shown with two significant
digits, and `to_html` for the template. Text that comes from users (case ids, tags,
criterion names) is escaped before it goes into hover text or labels: plotly renders those
as HTML.
"""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from django.utils.html import escape

from evaluations.units import fmt_duration, fmt_seconds

__all__ = ["fmt_duration", "fmt_seconds"]  # re-exported: the charts format time as the verdicts do

# Okabe-Ito: distinguishable with every common colour-vision deficiency.
PALETTE = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "grey": "#999999",
}
# The status vocabulary of the pages, in chart colours (the same hues as the badges' CSS).
STATUS_COLOURS = {
    "passed": PALETTE["green"],
    "failed": PALETTE["vermillion"],
    "error": PALETTE["orange"],
    "unjudged": PALETTE["grey"],
}
SERIES = [PALETTE[name] for name in ("blue", "orange", "green", "vermillion", "purple", "sky", "yellow")]

# Mid-grey text and faint grid read on white and on near-black alike, before charts.js
# swaps in the page's own colours.
TEXT = "#6e7781"
GRID = "rgba(128, 128, 128, 0.22)"
FONT = '-apple-system, BlinkMacSystemFont, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif'


def base_layout(*, height: int = 240, **extra: Any) -> dict[str, Any]:
    """The quiet layout every chart starts from: no title (the page has headings), no
    background, thin grid, a compact legend on top."""
    layout: dict[str, Any] = {
        "height": height,
        "margin": {"l": 48, "r": 12, "t": 28, "b": 40},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "font": {"family": FONT, "size": 12, "color": TEXT},
        "hoverlabel": {"font": {"family": FONT}},
        "showlegend": False,
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "xanchor": "left", "yanchor": "bottom",
                   "bgcolor": "rgba(0,0,0,0)"},
        "bargap": 0.08,
    }
    layout.update(extra)
    return layout


def axis(**extra: Any) -> dict[str, Any]:
    options: dict[str, Any] = {"gridcolor": GRID, "zerolinecolor": GRID, "linecolor": GRID, "ticks": "",
                               "automargin": True}
    options.update(extra)
    return options


def time_axis(values: Any) -> tuple[float, str, bool]:
    """How to draw latencies: (scale to multiply seconds by, unit, log axis). Milliseconds when
    everything is under a second; a log axis when the values spread over more than 10x (so
    a fast run does not collapse onto 0 beside a slow one)."""
    positive = [v for v in values if v is not None and v > 0]
    if not positive:
        return 1.0, "s", False
    scale, unit = (1000.0, "ms") if max(positive) < 1 else (1.0, "s")
    return scale, unit, max(positive) / min(positive) > 10


def log_ticks(values: Any) -> dict[str, Any]:
    """Tick values and labels for a log axis over `values` (already scaled): 1, 2, 5 per decade
    when the data span three decades or less, else powers of ten only, each written in full.
    Plotly's own log ticks label the minor ones by their first digit ("1000 5 2 100 5 2"),
    which reads as nonsense."""
    positive = [v for v in values if v is not None and v > 0]
    if not positive:
        return {}
    low, high = math.floor(math.log10(min(positive))), math.ceil(math.log10(max(positive)))
    steps = (1, 2, 5) if high - low <= 3 else (1,)
    ticks = [m * 10.0 ** e for e in range(low, high + 1) for m in steps]
    # the decades around the data, trimmed to one tick beyond it on each side
    below = [t for t in ticks if t <= min(positive)]
    above = [t for t in ticks if t >= max(positive)]
    first, last = (below[-1] if below else ticks[0]), (above[0] if above else ticks[-1])
    shown = [t for t in ticks if first <= t <= last]
    return {"tickmode": "array", "tickvals": shown, "ticktext": [f"{t:,.0f}" if t >= 1 else f"{t:g}" for t in shown]}


def safe(text: Any) -> str:
    """User text for plotly's hover and tick labels, which render HTML."""
    return str(escape(str(text)))


FIGURE_CONFIG = {"displaylogo": False, "displayModeBar": False, "responsive": True}
_JSON_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


def to_html(fig: go.Figure) -> str:
    """The figure as an empty <div> and a JSON data block (`<script type="application/json">`,
    which the browser never runs), drawn by the static `js/figures.js`: no inline script, so
    the Content-Security-Policy allows only the app's own script files. `<`, `>` and `&` are
    escaped in the JSON, so no text in a figure can end the block. The figure is named for
    assistive technology and followed by its numbers as a table (`charts.a11y`); no toolbar
    (it covered the legends). plotly.js itself is served locally (static
    `vendor/plotly-evalsite-<hash>.min.js`, built from assets/plotly with the scatter, bar and
    heatmap traces only), never from a CDN."""
    from evaluations.web.charts.a11y import data_table, label_of

    div_id = f"figure-{uuid.uuid4().hex}"
    text = pio.to_json(fig, validate=False).rstrip()  # {"data": [...], "layout": {...}}
    payload = text[:-1] + ',"config":' + json.dumps(FIGURE_CONFIG) + "}"
    # The box has the figure's height before plotly.js draws into it (figures.js draws a figure
    # when it comes into view), so drawing it shifts nothing below it.
    height = int(fig.layout.height or 450)  # plotly's own default
    return (f'<div role="img" aria-label="{escape(label_of(fig))}">'
            f'<div id="{div_id}" class="plotly-graph-div" style="height:{height}px"></div>'
            f'<script type="application/json" class="plotly-figure" data-target="{div_id}">'
            f"{payload.translate(_JSON_ESCAPES)}</script></div>" + data_table(fig))
