"""The leaderboard's Pareto view: quality against cost or latency, one point per run, the runs
no other run beats on both drawn in colour and joined by the front line. Pure: plain data in,
a figure out; each point's run page URL is in `customdata[0]` (static/js/compare.js opens it
on click)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from evaluations.web.charts import PALETTE, axis, base_layout, safe


@dataclass(frozen=True)
class ParetoPoint:
    label: str
    quality: float
    cost: float  # cost in USD or p95 latency in seconds: lower is better
    on_front: bool
    url: str


def pareto_chart(points: Sequence[ParetoPoint], criterion: str, cost_title: str) -> go.Figure:
    fig = go.Figure()
    for on_front, name, colour in ((False, "dominated", PALETTE["grey"]), (True, "Pareto front", PALETTE["blue"])):
        chosen = [p for p in points if p.on_front == on_front]
        if not chosen:
            continue
        if on_front:
            chosen = sorted(chosen, key=lambda p: p.cost)
        fig.add_trace(go.Scatter(
            x=[p.cost for p in chosen], y=[p.quality for p in chosen], name=name,
            mode="lines+markers" if on_front else "markers",
            line={"color": colour, "width": 1, "shape": "hv"},
            marker={"color": colour, "size": 10, "symbol": "circle" if on_front else "circle-open"},
            customdata=[[p.url, safe(p.label)] for p in chosen],
            hovertemplate="%{customdata[1]}<br>" + safe(criterion) + " %{y:.3f}<br>%{x:.4g}<extra></extra>",
        ))
    fig.update_layout(**base_layout(height=300, showlegend=True, hovermode="closest"))
    fig.update_xaxes(axis(title_text=cost_title, rangemode="tozero"))
    fig.update_yaxes(axis(title_text=f"{criterion} mean"))
    return fig
