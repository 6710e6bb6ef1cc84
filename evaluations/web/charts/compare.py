"""Charts that put runs side by side: a baseline against a candidate (paired scores,
latency distributions, per-criterion deltas with their intervals, pass rate by tag), and an
eval set's runs over time (pass rate and p95 latency lines, the case x run heatmap).

Pure functions of plain data. Colours of comparison statuses come from
`evaluations.review.comparison.STATUSES`, the same ones the badges use; every point of the paired
scatter carries the URL of its case drill-down in `customdata[0]` (static/js/compare.js
opens it on click).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import plotly.graph_objects as go

from evaluations.review.comparison import REGRESSED, STATUSES, UNCHANGED_PASS, signed
from evaluations.web.charts import PALETTE, axis, base_layout, fmt_duration, log_ticks, safe, time_axis

BASELINE_COLOUR = PALETTE["grey"]
CANDIDATE_COLOUR = PALETTE["blue"]


# --- Baseline vs candidate ----------------------------------------------------------------


@dataclass(frozen=True)
class ScatterPoint:
    eval_id: str
    baseline: float
    candidate: float
    status: str  # a key of STATUSES
    url: str  # the case drill-down
    count: int = 1  # cases with the same scores and status, drawn as this one point


def paired_scatter(points: Sequence[ScatterPoint], criterion: str, *, note: str = "") -> go.Figure:
    """Baseline score (x) against candidate score (y) per case for one criterion. Points
    under the diagonal got worse; regressions are drawn last, larger, with an outline."""
    fig = go.Figure()
    values = [v for p in points for v in (p.baseline, p.candidate)]
    low, high = min([0.0, *values]), max([1.0, *values])
    pad = (high - low) * 0.04
    fig.add_shape(type="line", x0=low, y0=low, x1=high, y1=high, layer="below",
                  line={"color": "rgba(128,128,128,0.6)", "width": 1, "dash": "dot"})
    # Regressions last, so they sit on top of the many unchanged points.
    order = [key for key in STATUSES if key != REGRESSED] + [REGRESSED]
    for key in order:
        group = [p for p in points if p.status == key]
        if not group:
            continue
        style = STATUSES[key]
        highlight = key == REGRESSED
        fig.add_trace(go.Scatter(
            x=[p.baseline for p in group], y=[p.candidate for p in group], mode="markers",
            name=f"{style.icon} {style.label} ({sum(p.count for p in group):,})",
            marker={"color": style.colour, "size": 11 if highlight else 7,
                    "opacity": 0.45 if key == UNCHANGED_PASS else 0.9,
                    "symbol": "triangle-down" if highlight else "circle",
                    "line": {"width": 1 if highlight else 0, "color": "rgba(0,0,0,0.55)"}},
            customdata=[[p.url, safe(p.eval_id) + (f" and {p.count - 1:,} more here" if p.count > 1 else ""),
                         style.label] for p in group],
            hovertemplate="%{customdata[1]}<br>baseline %{x:.2f} → candidate %{y:.2f}<br>%{customdata[2]}"
                          "<br><i>click to open</i><extra></extra>",
        ))
    layout = base_layout(height=360, showlegend=True, margin={"l": 52, "r": 12, "t": 40, "b": 44},
                         hovermode="closest")
    if note:
        layout["annotations"] = [{"text": safe(note), "xref": "paper", "yref": "paper", "x": 1, "y": 0,
                                  "xanchor": "right", "yanchor": "bottom", "showarrow": False,
                                  "font": {"size": 11}}]
    fig.update_layout(**layout)
    fig.update_xaxes(axis(title_text=f"baseline {safe(criterion)}", range=[low - pad, high + pad]))
    fig.update_yaxes(axis(title_text=f"candidate {safe(criterion)}", range=[low - pad, high + pad]))
    return fig


def latency_ecdf(baseline: Sequence[float], candidate: Sequence[float]) -> go.Figure:
    """Both runs' latency distributions as ECDFs (from their percentiles: 0 %, 1 %, ... 100 %):
    a curve further right is slower; the gap at 0.95 is the p95 delta."""
    fig = go.Figure()
    scale, unit, log = time_axis([*baseline, *candidate])
    for name, quantiles, colour, dash in (("baseline", baseline, BASELINE_COLOUR, "dash"),
                                          ("candidate", candidate, CANDIDATE_COLOUR, "solid")):
        if not quantiles:
            continue
        fractions = [i / (len(quantiles) - 1) if len(quantiles) > 1 else 1.0 for i in range(len(quantiles))]
        fig.add_trace(go.Scatter(
            x=[q * scale if not log or q > 0 else None for q in quantiles], y=fractions, mode="lines", name=name,
            line={"color": colour, "dash": dash, "width": 2, "shape": "hv"},
            customdata=[fmt_duration(q) for q in quantiles],
            hovertemplate=name + ": %{y:.0%} of results within %{customdata}<extra></extra>",
        ))
    fig.add_hline(y=0.95, line={"color": "rgba(128,128,128,0.5)", "width": 1, "dash": "dot"},
                  annotation={"text": "p95", "font": {"size": 10}}, annotation_position="top left")
    fig.update_layout(**base_layout(height=260, showlegend=True, hovermode="closest"))
    scaled = [q * scale for q in [*baseline, *candidate]]
    fig.update_xaxes(axis(title_text=f"latency ({unit}{', log scale' if log else ''})",
                          **({"type": "log", **log_ticks(scaled)} if log else {"rangemode": "tozero"})))
    fig.update_yaxes(axis(title_text="share of results", range=[0, 1.02], tickformat=".0%"))
    return fig


@dataclass(frozen=True)
class DeltaBar:
    criterion: str
    delta: float
    low: float
    high: float
    n: int
    verdict: str


def delta_bars(bars: Sequence[DeltaBar]) -> go.Figure:
    """Mean score delta per criterion with its 95% interval as whiskers, coloured by its sign
    (worse: the regression colour; better: the improvement colour) and labelled with its
    value; a bar whose interval crosses zero (could be noise) is drawn faint."""
    def colour(bar: DeltaBar) -> str:
        if round(bar.delta, 4) == 0:
            return PALETTE["grey"]
        hue = STATUSES[REGRESSED].colour if bar.delta < 0 else STATUSES["improved"].colour
        return hue if bar.verdict == "likely real" else hue + "73"  # #RRGGBBAA: faint

    names = [safe(b.criterion) for b in bars]
    fig = go.Figure(go.Bar(
        y=names, x=[b.delta for b in bars], orientation="h",
        marker={"color": [colour(b) for b in bars], "line": {"width": 0}},
        error_x={"type": "data", "symmetric": False, "array": [b.high - b.delta for b in bars],
                 "arrayminus": [b.delta - b.low for b in bars], "color": "rgba(110,119,129,0.9)", "thickness": 1.5,
                 "width": 6},
        customdata=[[safe(b.criterion), signed(b.delta), signed(b.low, sign=False), signed(b.high, sign=False), b.n,
                     b.verdict] for b in bars],
        hovertemplate="%{customdata[0]}: %{customdata[1]} [%{customdata[2]}, %{customdata[3]}]"
                      "<br>n=%{customdata[4]} · %{customdata[5]}<extra></extra>",
    ))
    fig.add_vline(x=0, line={"color": "rgba(128,128,128,0.7)", "width": 1})
    extent = max([0.05, *(abs(v) for b in bars for v in (b.low, b.high))]) * 1.1
    fig.update_layout(**base_layout(height=max(120, 34 * len(bars) + 60), margin={"l": 8, "r": 16, "t": 12, "b": 40}))
    fig.update_xaxes(axis(title_text="candidate \u2212 baseline (mean score)", range=[-extent, extent], zeroline=False))
    # Each bar's value beside its name: a label on the bar would sit under its whisker.
    labels = [f"{name}  <b>{signed(b.delta, 3)}</b>" for name, b in zip(names, bars, strict=True)]
    fig.update_yaxes(axis(showgrid=False, type="category", autorange="reversed", tickmode="array", tickvals=names,
                          ticktext=labels))
    return fig


@dataclass(frozen=True)
class TagPair:
    tag: str
    baseline_passed: int
    baseline_n: int
    candidate_passed: int
    candidate_n: int


def tag_pass_rates(tags: Sequence[TagPair]) -> go.Figure:
    """Pass rate per tag for both runs, side by side, with the number of judged results."""
    fig = go.Figure()
    names = [safe(t.tag) for t in tags]
    for run, colour, passed, judged in (
        ("baseline", BASELINE_COLOUR, [t.baseline_passed for t in tags], [t.baseline_n for t in tags]),
        ("candidate", CANDIDATE_COLOUR, [t.candidate_passed for t in tags], [t.candidate_n for t in tags]),
    ):
        rates = [p / n if n else None for p, n in zip(passed, judged, strict=True)]
        fig.add_trace(go.Bar(
            y=names, x=rates, orientation="h", name=run, marker={"color": colour, "line": {"width": 0}},
            customdata=[[name, p, n] for name, p, n in zip(names, passed, judged, strict=True)],
            texttemplate="%{x:.0%}", textposition="outside", cliponaxis=False,
            hovertemplate=run + " · %{customdata[0]}<br>%{x:.0%} passed (%{customdata[1]} of %{customdata[2]})"
                                "<extra></extra>",
        ))
    fig.update_layout(**base_layout(height=max(140, 40 * len(tags) + 70), barmode="group", showlegend=True,
                                    margin={"l": 8, "r": 16, "t": 28, "b": 36}))
    # the whole 0-100 % scale, with room for the labels beyond a full bar
    fig.update_xaxes(axis(range=[0, 1.12], tickformat=".0%", tickvals=[0, 0.25, 0.5, 0.75, 1]))
    fig.update_yaxes(axis(showgrid=False, type="category", autorange="reversed"))
    return fig


# --- An eval set's runs over time ---------------------------------------------------------


@dataclass(frozen=True)
class TrendPoint:
    label: str  # "#12 · 05-14" : the run, as the x axis shows it
    title: str  # hover: run name, model, date
    pass_rate: float | None
    p95: float | None
    url: str
    when: datetime | None = None  # when the run was made: the x axis, when every point has it
    series: str = ""  # "main · gpt-4o": runs of one branch and model make one line


SERIES_COLOURS = [PALETTE["blue"], PALETTE["orange"], "#009E73", "#CC79A7", "#56B4E9", "#E69F00"]


def _series(points: Sequence[TrendPoint]) -> list[tuple[str, list[TrendPoint]]]:
    groups: dict[str, list[TrendPoint]] = {}
    for p in points:
        groups.setdefault(p.series, []).append(p)
    return list(groups.items())


def _trend(points: Sequence[TrendPoint], y: Any, hover: str) -> go.Figure:
    """One line per branch and model, on a date axis (a category axis of run labels when a
    point has no date)."""
    dated = bool(points) and all(p.when is not None for p in points)
    fig = go.Figure()
    groups = _series(points)
    for index, (name, group) in enumerate(groups):
        colour = SERIES_COLOURS[index % len(SERIES_COLOURS)]
        fig.add_trace(go.Scatter(
            x=[p.when.isoformat() if dated and p.when else safe(p.label) for p in group], y=[y(p) for p in group],
            mode="lines+markers", name=safe(name) or "runs", line={"color": colour, "width": 2},
            marker={"size": 7}, connectgaps=False, cliponaxis=False,  # a point at 100 % drawn whole
            customdata=[[p.url, safe(p.title), fmt_duration(p.p95)] for p in group], hovertemplate=hover,
        ))
    fig.update_layout(**base_layout(height=260, showlegend=len(groups) > 1, hovermode="closest"))
    fig.update_xaxes(axis(type="date", title_text="run date") if dated
                     else axis(type="category", title_text="run (oldest first)"))
    return fig


def pass_rate_trend(points: Sequence[TrendPoint]) -> go.Figure:
    fig = _trend(points, lambda p: p.pass_rate, "%{customdata[1]}<br>pass rate %{y:.1%}<extra></extra>")
    fig.update_yaxes(axis(range=[-0.03, 1.05], tickformat=".0%", tickvals=[0, 0.25, 0.5, 0.75, 1],
                          title_text="pass rate"))
    return fig


def latency_trend(points: Sequence[TrendPoint]) -> go.Figure:
    scale, unit, log = time_axis([p.p95 for p in points])
    fig = _trend(points, lambda p: None if p.p95 is None else p.p95 * scale,
                 "%{customdata[1]}<br>p95 latency %{customdata[2]}<extra></extra>")
    scaled = [p.p95 * scale for p in points if p.p95 is not None]
    fig.update_yaxes(axis(title_text=f"p95 latency ({unit}{', log scale' if log else ''})",
                          **({"type": "log", **log_ticks(scaled)} if log else {"rangemode": "tozero"})))
    return fig


# Cell outcomes of the heatmap, each with its colour (the run pages' result colours) and
# a mark drawn in the cell, so colour is never the only signal.
HEATMAP_OUTCOMES: dict[str, tuple[int, str, str]] = {
    "none": (0, "rgba(0,0,0,0)", ""),
    "pass": (1, STATUSES[UNCHANGED_PASS].colour, "✓"),
    "fail": (2, STATUSES[REGRESSED].colour, "✗"),
    "error": (3, STATUSES["errored"].colour, "!"),
    "mixed": (4, STATUSES["flaky"].colour, "≈"),
    "unscored": (5, "#C8C8C8", "?"),  # a light grey: its mark stays legible
}


@dataclass(frozen=True)
class HeatmapRow:
    eval_id: str
    cells: Sequence[str]  # one outcome key of HEATMAP_OUTCOMES per run
    first_failing: int | None  # index of the run where its current failing streak began
    urls: Sequence[str | None] = ()  # per run, the drill-down a click on the cell opens


def case_heatmap(rows: Sequence[HeatmapRow], run_labels: Sequence[str]) -> go.Figure:
    """Cases (rows) x runs (columns, oldest first) coloured by outcome; the cell where a case
    started failing (and still fails) is outlined and marked."""
    n = len(HEATMAP_OUTCOMES)
    colourscale = []
    for code, colour, _ in HEATMAP_OUTCOMES.values():
        colourscale += [[code / n, colour], [(code + 1) / n, colour]]
    labels = [safe(label) for label in run_labels]
    names = [safe(r.eval_id) for r in rows]
    z = [[HEATMAP_OUTCOMES[c][0] for c in r.cells] for r in rows]
    marks = [[HEATMAP_OUTCOMES[c][2] for c in r.cells] for r in rows]
    hover = [[f"{name}<br>{label}: {cell if cell != 'none' else 'not in this run'}"
              + (" · started failing here" if r.first_failing == j else "")
              for j, (label, cell) in enumerate(zip(labels, r.cells, strict=True))]
             for name, r in zip(names, rows, strict=True)]
    fig = go.Figure(go.Heatmap(
        # zmin/zmax put code k in the middle of colour band k.
        z=z, x=labels, y=names, zmin=-0.5, zmax=n - 0.5, colorscale=colourscale, showscale=False, xgap=1, ygap=1,
        text=marks, texttemplate="%{text}", textfont={"size": 12, "color": "rgba(0,0,0,0.8)"},
        # [url, hover] per cell: the page's script opens customdata[0] on a click
        customdata=[[[(r.urls[j] if j < len(r.urls) else None) or "", text] for j, text in enumerate(row_hover)]
                    for r, row_hover in zip(rows, hover, strict=True)],
        hovertemplate="%{customdata[1]}<extra></extra>",
    ))
    for i, r in enumerate(rows):
        if r.first_failing is not None:
            fig.add_shape(type="rect", x0=r.first_failing - 0.5, x1=r.first_failing + 0.5, y0=i - 0.5, y1=i + 0.5,
                          line={"color": "rgba(0,0,0,0.85)", "width": 2})
    # The run labels ("#12 · 11-24 · main · gpt-x") stand at -45°: room for the longest under
    # the cells, added to the height so the rows keep theirs.
    below = min(220, 24 + round(5.2 * max((len(label) for label in run_labels), default=4)))
    fig.update_layout(**base_layout(height=max(80, 20 * len(rows) + 16) + below,
                                    margin={"l": 8, "r": 8, "t": 8, "b": below}))
    fig.update_xaxes(axis(type="category", showgrid=False, tickangle=-45))
    fig.update_yaxes(axis(type="category", showgrid=False, autorange="reversed"))
    return fig
