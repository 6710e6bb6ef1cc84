"""The trend's line charts drawn by the server as SVG (evaluations.web.charts.svg): the same
plotly figures the builders make, as text; no database, no browser."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from evaluations.web.charts.compare import TrendPoint, latency_trend, pass_rate_trend
from evaluations.web.charts.svg import to_svg
from evaluations.web.charts.versions import VersionChange, mark_version_changes

EVIL = '<img src=x onerror="alert(1)">'
T0 = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)


def trend() -> list[TrendPoint]:
    return [
        TrendPoint("#1 · 11-20", "run 1 · m1", 1.0, 0.02, "/runs/1/", T0, "main · m1"),
        TrendPoint("#2 · 11-21", "run 2 · m2", 0.75, 1.0, "/runs/2/", T0 + timedelta(days=1), f"{EVIL} · m2"),
        TrendPoint("#3 · 11-23", "run 3 · m1", None, None, "/runs/3/", T0 + timedelta(days=3), "main · m1"),
        TrendPoint("#4 · 11-24", "run 4 · m1", 0.5, 0.4, "/runs/4/", T0 + timedelta(days=4), "main · m1"),
    ]


def narrow(svg: str) -> str:
    return svg.split('<div class="svg-narrow">', 1)[1].split("</svg>", 1)[0]


def test_a_line_per_series_a_point_per_run_and_a_gap_where_a_run_has_no_value() -> None:
    svg = to_svg(pass_rate_trend(trend()))
    chart = narrow(svg)
    # main: run 1, then nothing for run 3, then run 4: two single points, no line across the gap
    assert chart.count("<circle") == 3 and chart.count("<polyline") == 0
    titles = re.findall(r"<title>(.*?)</title>", chart)
    assert titles[0] == "main · m1 · run 1 · m1 · pass rate 100.0%"
    assert titles[1] == "main · m1 · run 4 · m1 · pass rate 50.0%"
    # the y axis as the figure says: 0 to 100 % in quarters, with its title; the x axis dated
    assert [t for t in re.findall(r'text-anchor="end">([^<]*)</text>', chart) if t.endswith("%")] == [
        "0%", "25%", "50%", "75%", "100%"]
    assert ">pass rate</text>" in chart and ">run date</text>" in chart
    assert ">Nov 20, 2026</text>" in chart and ">Nov 24, 2026</text>" in chart
    # named for assistive technology, drawn for a narrow and a wide box, and its data as a table
    assert chart.count('role="img"') == 1 and 'aria-label="Chart: pass rate against run date"' in chart
    assert svg.count("<svg class=\"svg-chart\"") == 2 and 'viewBox="0 0 720 260"' in svg
    assert '<details class="chart-data">' in svg
    assert "plotly-figure" not in svg and "<script" not in svg


def test_consecutive_points_make_a_line_in_the_series_colour() -> None:
    points = [TrendPoint(f"#{i}", f"run {i}", rate, 1.0, f"/runs/{i}/", T0 + timedelta(hours=i), "main")
              for i, rate in enumerate([1.0, 0.5, 0.75], start=1)]
    chart = narrow(to_svg(pass_rate_trend(points)))
    [line] = re.findall(r'<polyline class="svg-series" points="([^"]+)" stroke="([^"]+)"', chart)
    assert len(line[0].split()) == 3 and line[1] == "#0072B2"
    ys = [float(pair.split(",")[1]) for pair in line[0].split()]
    assert ys[0] < ys[2] < ys[1]  # 100 % highest on the page, then 75 %, then 50 %


def test_user_text_is_escaped_once_never_markup() -> None:
    svg = to_svg(pass_rate_trend(trend()))
    assert "<img" not in svg and "onerror=\"" not in svg
    # shown as the text it is, in the legend, the tooltips and the data table: not double-escaped
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; · m2" in svg
    assert "&amp;lt;" not in svg


def test_a_log_latency_axis_has_the_figures_ticks_and_version_changes_are_marked() -> None:
    changes = [VersionChange("#2 · 11-21", T0 + timedelta(days=1), 1, 2, "/evalsets/1/diff/?from=1&to=2")]
    chart = narrow(to_svg(mark_version_changes(latency_trend(trend()), changes)))
    ticks = re.findall(r'text-anchor="end">([^<]*)</text>', chart)
    assert ticks[:6] == ["0.02", "0.05", "0.1", "0.2", "0.5", "1"]  # 1-2-5 per decade, written in full
    assert "p95 latency (s, log scale)" in chart
    assert chart.count('class="svg-marker"') == 1 and '>v2</text>' in chart
    titles = re.findall(r"<title>(.*?)</title>", chart)
    assert titles[0] == "main · m1 · run 1 · m1 · p95 latency 20 ms"


def test_runs_without_dates_stand_in_order_on_a_category_axis() -> None:
    points = [TrendPoint("#1", "run 1", 1.0, 1.0, "/runs/1/"), TrendPoint("#2", "run 2", 0.0, 2.0, "/runs/2/")]
    chart = narrow(to_svg(pass_rate_trend(points)))
    xs = [float(x) for x in re.findall(r'<circle cx="([\d.]+)"', chart)]
    assert xs[0] < xs[1]
    assert ">#1</text>" in chart and ">#2</text>" in chart and ">run (oldest first)</text>" in chart
