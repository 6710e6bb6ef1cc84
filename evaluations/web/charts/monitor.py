"""A monitor over time: pass rate and each criterion's mean score (lines, left axis 0 to 1)
over the volume scored (bars, right axis), per hour or day."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import plotly.graph_objects as go
from django.utils import timezone

from evaluations.web.charts import GRID, PALETTE, SERIES, axis, base_layout, safe

MIN_BUCKETS = 6  # the narrowest time axis, in buckets: one hour of traffic is not a chart-wide bar


def time_range(starts: Sequence[datetime], width: timedelta, since: datetime, until: datetime) -> list[datetime]:
    """The time axis: from the first bucket with data (at least MIN_BUCKETS buckets before the
    window's end, never before the window's start) to the end of the window or of the last
    bucket, whichever is later (the current hour's bar, drawn at its middle, is not cut off).
    A window of 24 h whose traffic began an hour ago is drawn over six hours, not as a sliver
    at the right edge."""
    first = min(starts, default=until)
    start = max(since, min(first, until - width * MIN_BUCKETS))
    return [start, max([until + width / 4, *(at + width for at in starts)])]


def monitor_chart(points: Sequence[Any], criteria: Sequence[str], step: str, since: datetime,
                  until: datetime) -> go.Figure:
    """Buckets start at `p.at`; bars are drawn at their middle, one bucket wide, over the part
    of the window [since, until] that holds data (`time_range`). Every time is in the current
    time zone: plotly.js reads the clock time and drops the offset, so a point in Paris time
    and a range in UTC would not line up."""
    width = timedelta(days=1) if step == "day" else timedelta(hours=1)
    local = timezone.get_current_timezone()
    since, until = since.astimezone(local), until.astimezone(local)
    starts = [p.at.astimezone(local) for p in points]
    x = [at + width / 2 for at in starts]
    fig = go.Figure()
    fig.add_bar(x=x, y=[p.total for p in points], name="scored", yaxis="y2", marker_color=GRID,
                width=width.total_seconds() * 1000 * 0.9, hovertemplate="%{y} scored<extra></extra>")
    fig.add_scatter(x=x, y=[p.pass_rate for p in points], name="pass rate", mode="lines+markers",
                    line={"color": PALETTE["blue"], "width": 3},
                    customdata=[[p.passed, p.total] for p in points],
                    hovertemplate="pass rate %{y:.0%} (%{customdata[0]} of %{customdata[1]})<extra></extra>")
    for i, name in enumerate(criteria[:6]):
        fig.add_scatter(x=x, y=[p.criteria.get(name) for p in points], name=safe(name), mode="lines+markers",
                        line={"color": SERIES[(i + 1) % len(SERIES)], "width": 1.5, "dash": "dot"},
                        hovertemplate=f"{safe(name)} mean %{{y:.2f}}<extra></extra>")
    fig.update_layout(**base_layout(height=280, barmode="overlay", showlegend=True,
                                    margin={"l": 48, "r": 48, "t": 28, "b": 40},
                                    xaxis=axis(title=None, type="date", range=time_range(starts, width, since, until),
                                               tickformat="%b %d" if step == "day" else "%H:%M\n%b %d"),
                                    yaxis=axis(title="pass rate / mean", range=[0, 1.05], tickformat=".0%"),
                                    yaxis2=axis(title="scored", overlaying="y", side="right", showgrid=False,
                                                rangemode="tozero", tickformat=",d")))
    return fig
