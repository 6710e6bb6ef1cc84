"""Plotly figure builders: pure functions, plain data in, a figure out. Nothing here queries.

Shared by every page's charts: one colour-blind-safe palette (Okabe-Ito), one quiet layout
that reads on a light and a dark page (transparent backgrounds; `static/js/charts.js` then
takes the text and grid colours from the page's CSS), seconds shown with two significant
digits, and `to_html` for the template. Text that comes from users (case ids, tags,
criterion names) is escaped before it goes into hover text or labels: plotly renders those
as HTML.
"""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from django.utils.html import escape

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


def fmt_seconds(value: float | None) -> str:
    """Seconds with two significant digits (0.053, 0.50, 1.4), and whole seconds from ten on
    (12, 123): never scientific notation, never a rounded-away integer part."""
    if value is None:
        return "—"
    if value == 0:
        return "0"
    if abs(value) >= 9.95:
        return f"{value:.0f}"
    rounded = float(f"{value:.2g}")
    decimals = max(0, 1 - math.floor(math.log10(abs(rounded))))
    return f"{rounded:.{decimals}f}"


def fmt_duration(value: float | None) -> str:
    """A duration with its unit: `1.4 s`, `52 ms` under a second, `99 µs` under a millisecond
    (two significant digits, as `fmt_seconds`)."""
    if value is None:
        return "—"
    if value == 0 or abs(value) >= 0.9995:
        return f"{fmt_seconds(value)} s"
    if abs(value) >= 0.0009995:
        return f"{fmt_seconds(value * 1000)} ms"
    return f"{fmt_seconds(value * 1_000_000)} µs"


def time_axis(values: Any) -> tuple[float, str, bool]:
    """How to draw latencies: (scale to multiply seconds by, unit, log axis). Milliseconds when
    everything is under a second; a log axis when the values spread over more than 10x (so
    a fast run does not collapse onto 0 beside a slow one)."""
    positive = [v for v in values if v is not None and v > 0]
    if not positive:
        return 1.0, "s", False
    scale, unit = (1000.0, "ms") if max(positive) < 1 else (1.0, "s")
    return scale, unit, max(positive) / min(positive) > 10


def safe(text: Any) -> str:
    """User text for plotly's hover and tick labels, which render HTML."""
    return str(escape(str(text)))


def to_html(fig: go.Figure) -> str:
    """The figure as a <div> and its inline script, named for assistive technology and
    followed by its numbers as a table (`charts.a11y`); no toolbar (it covered the legends).
    plotly.js itself is served locally by the page (static `vendor/plotly-cartesian-*.min.js`,
    a build of the cartesian trace types only), never from a CDN."""
    from evaluations.charts.a11y import data_table, label_of

    plot = str(pio.to_html(fig, include_plotlyjs=False, full_html=False,
                           config={"displaylogo": False, "displayModeBar": False}))
    return (f'<div role="img" aria-label="{escape(label_of(fig))}">{plot}</div>' + data_table(fig))
