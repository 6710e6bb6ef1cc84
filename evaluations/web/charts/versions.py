"""Where an eval set's version changed, marked on its trend figures: a dashed vertical line
at the first run of each new version, labelled with the version. Data in, figure out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import plotly.graph_objects as go

from evaluations.web.charts import safe


@dataclass(frozen=True)
class VersionChange:
    run_label: str  # the first run on the new version, as the x axis shows it
    when: datetime | None
    before: int  # version numbers
    after: int
    diff_url: str


def mark_version_changes(fig: go.Figure, changes: Sequence[VersionChange]) -> go.Figure:
    dated = all(c.when is not None for c in changes)
    for change in changes:
        x = change.when.isoformat() if dated and change.when else safe(change.run_label)
        fig.add_shape(
            type="line",
            xref="x",
            yref="paper",
            x0=x,
            x1=x,
            y0=0,
            y1=1,
            line={"dash": "dash", "width": 1, "color": "#888"},
        )
        fig.add_annotation(
            x=x,
            xref="x",
            yref="paper",
            y=1,
            yanchor="bottom",
            showarrow=False,
            text=f"v{change.after}",
            font={"size": 10, "color": "#666"},
        )
    return fig
