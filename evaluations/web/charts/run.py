"""The charts of one run: score distribution per criterion, latency histogram, pass rate by
tag; and the tiny pass-rate sparkline of the home page.

Inputs are what `evaluations.runs.selectors` computes in the database (bin counts, never one
row per case), so a 10,000-case run draws as fast as a 10-case one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from evaluations.runs.chart_data import SCORE_BINS, ScoreBins, TagRate, nice_step, sparkline_points
from evaluations.web.charts import PALETTE, STATUS_COLOURS, axis, base_layout, fmt_seconds, safe, time_axis

__all__ = ["SCORE_BINS", "ScoreBins", "TagRate", "nice_step", "sparkline_points"]  # drawn here, computed in runs

MAX_COLUMNS = 3


def bin_label(index: int, bins: int = SCORE_BINS) -> str:
    low, high = index / bins, (index + 1) / bins
    return f"{low:.1f}\u2013{high:.1f}"


def score_distribution(criteria: Mapping[str, ScoreBins]) -> go.Figure:
    """One small histogram per criterion (scores 0-1 on x, cases on y), bars stacked by
    outcome (coloured as `STATUS_COLOURS`) so the threshold shows where passed turns into
    failed."""
    names = list(criteria)
    columns = max(1, min(MAX_COLUMNS, len(names)))
    rows = max(1, math.ceil(len(names) / columns))
    fig = make_subplots(rows=rows, cols=columns, subplot_titles=[safe(n) for n in names],
                        horizontal_spacing=0.06, vertical_spacing=0.2 if rows > 1 else 0.1)
    centres = [(i + 0.5) / SCORE_BINS for i in range(SCORE_BINS)]
    labels = [bin_label(i) for i in range(SCORE_BINS)]
    shown: set[str] = set()
    for index, name in enumerate(names):
        row, col = index // columns + 1, index % columns + 1
        bins = criteria[name]
        for outcome, counts in (("passed", bins.passed), ("failed", bins.failed), ("unjudged", bins.unjudged)):
            if not any(counts):
                continue
            fig.add_trace(
                go.Bar(
                    x=centres, y=list(counts), width=1 / SCORE_BINS * 0.92, name=outcome,
                    legendgroup=outcome, showlegend=outcome not in shown,
                    marker={"color": STATUS_COLOURS[outcome], "line": {"width": 0}},
                    customdata=[[safe(name), label] for label in labels],
                    hovertemplate="%{customdata[0]}<br>score %{customdata[1]}<br>%{y} " + outcome
                                  + "<extra></extra>",
                ),
                row=row, col=col,
            )
            shown.add(outcome)
        fig.update_xaxes(axis(range=[0, 1], dtick=0.2, tickformat=".1f"), row=row, col=col)
        fig.update_yaxes(axis(rangemode="tozero", title_text="results" if col == 1 else None), row=row, col=col)
    # The page's caption carries the colour key: a plotly legend would crowd the panel titles.
    fig.update_layout(**base_layout(height=200 * rows + 20, barmode="stack", showlegend=False))
    fig.update_annotations(font={"size": 12})  # the subplot titles: criterion names
    return fig


def latency_histogram(width: float, counts: Sequence[int], *, p50: float | None = None,
                      p95: float | None = None) -> go.Figure:
    """Cases per latency bin (bin i covers [i*width, (i+1)*width) seconds), with the p50 and
    p95 marked."""
    starts = [i * width for i in range(len(counts))]
    scale, unit, _ = time_axis([s + width for s in starts])  # milliseconds when all are under a second
    labels = [f"{fmt_seconds(s * scale)}\u2013{fmt_seconds((s + width) * scale)} {unit}" for s in starts]
    fig = go.Figure(go.Bar(
        x=[(s + width / 2) * scale for s in starts], y=list(counts), width=width * scale * 0.92,
        marker={"color": PALETTE["blue"], "line": {"width": 0}}, customdata=labels, name="results",
        hovertemplate="%{customdata}<br>%{y} results<extra></extra>",
    ))
    for label, value, dash in (("p50", p50, "dot"), ("p95", p95, "dash")):
        if value is None:
            continue
        fig.add_vline(x=value * scale, line={"color": PALETTE["orange"], "width": 1.5, "dash": dash},
                      annotation={"text": f"{label} {fmt_seconds(value * scale)} {unit}", "font": {"size": 11},
                                  "yanchor": "bottom"},
                      annotation_position="top right")
    fig.update_layout(**base_layout(height=240))
    fig.update_xaxes(axis(title_text=f"latency ({unit})", rangemode="tozero"))
    fig.update_yaxes(axis(title_text="results", rangemode="tozero"))
    return fig


def pass_rate_by_tag(rates: Sequence[TagRate], iterations: int = 1) -> go.Figure:
    """Pass rate per case tag, worst on top, each bar labelled with its sample size."""
    rated = sorted((r for r in rates if r.judged), key=lambda r: (-(r.rate or 0.0), r.tag))
    fig = go.Figure(go.Bar(
        y=[safe(r.tag) for r in rated], x=[r.rate for r in rated], orientation="h",
        marker={"color": PALETTE["blue"], "line": {"width": 0}},
        text=[f"{(r.rate or 0):.0%} · {r.judged} results" if iterations > 1 else f"{(r.rate or 0):.0%} · n={r.judged}"
              for r in rated], textposition="outside", cliponaxis=False,
        customdata=[[safe(r.tag), r.passed, r.judged] for r in rated], name="pass rate",
        hovertemplate="%{customdata[0]}<br>%{x:.0%} passed (%{customdata[1]} of %{customdata[2]})"
                      "<extra></extra>",
    ))
    right = 120 if iterations > 1 else 70  # room for "100% · 16 results" beyond a full bar
    fig.update_layout(**base_layout(height=max(140, 26 * len(rated) + 70),
                                    margin={"l": 8, "r": right, "t": 8, "b": 36}))
    fig.update_xaxes(axis(range=[0, 1], tickformat=".0%", dtick=0.25))
    fig.update_yaxes(axis(showgrid=False, type="category"))
    return fig
