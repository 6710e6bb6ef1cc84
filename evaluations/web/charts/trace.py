"""The waterfall of an agent trace: one bar per span on a time axis, in tree order (parents
above their children, siblings by start time), coloured by what the span is: an agent node,
an LLM call, a tool call, or anything else."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from evaluations.web.charts import PALETTE, axis, base_layout, fmt_seconds, safe

# Span kinds as `evaluations.interop.otel.spans` categorises them (AGENT and CHAIN are agent nodes).
KIND_STYLES: dict[str, tuple[str, str]] = {  # kind -> (legend label, colour)
    "node": ("agent node", PALETTE["blue"]),
    "llm": ("LLM call", PALETTE["purple"]),
    "tool": ("tool call", PALETTE["orange"]),
    "other": ("other", PALETTE["grey"]),
}
# A failed span is never told by an outline alone: it is drawn in its own series, in
# vermillion with a hatch (the pattern reads without colour), named "failed span" in the
# legend, and its row label and bar say "✗ failed" in words.
FAILED_LABEL, FAILED_COLOUR = "failed span", PALETTE["vermillion"]
FAILED_MARK = "\u2717"


def depth_prefix(depth: int) -> str:
    """The label prefix of a span at `depth`: "└ " for a child, "· └ " for a grandchild, ...
    (tick labels are right-aligned, so leading spaces would not show as indentation)."""
    return "" if depth == 0 else "\u00b7 " * (depth - 1) + "\u2514 "


def kind_group(kind: str) -> str:
    kind = kind.upper()
    if kind in ("AGENT", "CHAIN"):
        return "node"
    if kind == "LLM":
        return "llm"
    if kind == "TOOL":
        return "tool"
    return "other"


@dataclass(frozen=True)
class WaterfallSpan:
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    start_ns: int | None
    end_ns: int | None
    status: str = ""


@dataclass(frozen=True)
class _Placed:
    span: WaterfallSpan
    depth: int


def tree_order(spans: Sequence[WaterfallSpan]) -> list[_Placed]:
    """Depth first from the roots (spans whose parent is not in the trace), siblings by start."""
    ids = {s.span_id for s in spans}
    children: dict[str, list[WaterfallSpan]] = {}
    roots: list[WaterfallSpan] = []
    for span in spans:
        if span.parent_span_id and span.parent_span_id in ids and span.parent_span_id != span.span_id:
            children.setdefault(span.parent_span_id, []).append(span)
        else:
            roots.append(span)

    def start(span: WaterfallSpan) -> tuple[int, str]:
        return (span.start_ns if span.start_ns is not None else 0, span.span_id)

    placed: list[_Placed] = []
    seen: set[str] = set()

    def walk(top: WaterfallSpan) -> None:
        stack = [(top, 0)]
        while stack:
            span, depth = stack.pop()
            if span.span_id in seen:  # a malformed trace with a cycle: show each span once
                continue
            seen.add(span.span_id)
            placed.append(_Placed(span, depth))
            stack.extend((child, depth + 1)
                         for child in sorted(children.get(span.span_id, []), key=start, reverse=True))

    for root in sorted(roots, key=start):
        walk(root)
    # Spans caught in a parent cycle are reachable from no root: show them anyway.
    for span in sorted(spans, key=start):
        if span.span_id not in seen:
            walk(span)
    return placed


def waterfall(spans: Sequence[WaterfallSpan]) -> go.Figure:
    """Spans as horizontal bars from their start to their end, in seconds since the trace
    began, coloured by kind; a failed span in a series of its own (colour, hatch and the
    words "✗ failed"). Hover: name, kind, start and duration."""
    placed = [p for p in tree_order(spans) if p.span.start_ns is not None]
    origin = min((p.span.start_ns for p in placed if p.span.start_ns is not None), default=0)
    # Rows are numbered so that two spans of the same name stay two rows.
    labels = [depth_prefix(p.depth) + (f"{FAILED_MARK} " if _failed(p) else "") + (safe(p.span.name) or "(unnamed)")
              for p in placed]
    fig = go.Figure()
    series = [(group, label, colour, [(i, p) for i, p in enumerate(placed)
                                      if not _failed(p) and kind_group(p.span.kind) == group])
              for group, (label, colour) in KIND_STYLES.items()]
    series.append(("failed", FAILED_LABEL, FAILED_COLOUR, [(i, p) for i, p in enumerate(placed) if _failed(p)]))
    for group, label, colour, rows in series:
        if not rows:
            continue
        failed = group == "failed"
        starts = [((p.span.start_ns or origin) - origin) / 1e9 for _, p in rows]
        durations = [max(0.0, ((p.span.end_ns or p.span.start_ns or origin) - (p.span.start_ns or origin)) / 1e9)
                     for _, p in rows]
        fig.add_trace(go.Bar(
            # An explicit width: plotly would size each trace's bars by its own row spacing.
            y=[i for i, _ in rows], x=durations, base=starts, orientation="h", name=label, width=0.72,
            marker={"color": colour, **({"pattern": {"shape": "/", "fgcolor": "#ffffff", "size": 6},
                                         "line": {"color": "#000000", "width": 1}} if failed else {})},
            text=[f"{FAILED_MARK} failed"] * len(rows) if failed else None,
            textposition="outside" if failed else None, cliponaxis=False,
            customdata=[[safe(p.span.name), safe(p.span.kind or "span"), fmt_seconds(s), fmt_seconds(d),
                         " · failed" if failed else ""]
                        for (_, p), s, d in zip(rows, starts, durations, strict=True)],
            hovertemplate="%{customdata[0]}<br>%{customdata[1]}%{customdata[4]}<br>starts at %{customdata[2]} s"
                          " · takes %{customdata[3]} s<extra></extra>",
        ))
    fig.update_layout(**base_layout(height=max(140, 24 * len(placed) + 70), showlegend=True, barmode="overlay",
                                    margin={"l": 8, "r": 16, "t": 28, "b": 40}))
    fig.update_xaxes(axis(title_text="seconds since the trace began", rangemode="tozero"))
    fig.update_yaxes(axis(showgrid=False, autorange="reversed", tickmode="array",
                          tickvals=list(range(len(placed))), ticktext=labels))
    return fig


def _failed(placed: _Placed) -> bool:
    return placed.span.status == "ERROR"
