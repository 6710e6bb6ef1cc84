"""The comparison, trend and trace charts: plain data in, plotly figures out; no database."""

from __future__ import annotations

from evaluations.review.comparison import STATUSES
from evaluations.review.selectors import first_failing
from evaluations.web.charts import log_ticks, to_html
from evaluations.web.charts.compare import (
    DeltaBar,
    HeatmapRow,
    ScatterPoint,
    TagPair,
    TrendPoint,
    case_heatmap,
    delta_bars,
    latency_ecdf,
    latency_trend,
    paired_scatter,
    pass_rate_trend,
    tag_pass_rates,
)
from evaluations.web.charts.trace import WaterfallSpan, tree_order, waterfall

EVIL = '<img src=x onerror="alert(1)">'


def points() -> list[ScatterPoint]:
    return [
        ScatterPoint("steady", 1.0, 1.0, "unchanged-pass", "/runs/2/cases/10/?baseline=1"),
        ScatterPoint(EVIL, 1.0, 0.0, "regressed", "/runs/2/cases/11/?baseline=1"),
        ScatterPoint("better", 0.5, 1.0, "improved", "/runs/2/cases/12/?baseline=1"),
    ]


def test_the_scatter_has_a_trace_per_status_with_regressions_on_top() -> None:
    fig = paired_scatter(points(), "trajectory_match")
    names = [t.name for t in fig.data]
    assert names[-1].startswith("\u25bc regressed")
    assert [t.marker.color for t in fig.data] == [STATUSES[s].colour for s in ("improved", "unchanged-pass",
                                                                               "regressed")]
    regressed = fig.data[-1]
    assert regressed.marker.size > fig.data[0].marker.size  # highlighted
    assert list(regressed.x) == [1.0] and list(regressed.y) == [0.0]


def test_the_scatter_draws_the_diagonal_and_carries_each_case_url() -> None:
    fig = paired_scatter(points(), "trajectory_match")
    [diagonal] = fig.layout.shapes
    assert (diagonal.x0, diagonal.y0, diagonal.x1, diagonal.y1) == (0.0, 0.0, 1.0, 1.0)
    urls = [c[0] for t in fig.data for c in t.customdata]
    assert sorted(urls) == sorted(p.url for p in points())


def test_hover_text_from_users_is_escaped() -> None:
    fig = paired_scatter(points(), "<b>crit</b>")
    hover = [c[1] for t in fig.data for c in t.customdata]
    assert EVIL not in hover and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in hover
    assert "&lt;b&gt;crit&lt;/b&gt;" in fig.layout.xaxis.title.text
    bars = tag_pass_rates([TagPair(EVIL, 1, 2, 2, 2)])
    assert all(EVIL not in str(y) for y in bars.data[0].y)
    html = to_html(waterfall([WaterfallSpan("a", "", "<script>x</script>", "TOOL", 0, 10)]))
    assert "<script>x</script>" not in html


def test_a_point_standing_for_several_cases_says_so() -> None:
    fig = paired_scatter([ScatterPoint("first", 1.0, 1.0, "unchanged-pass", "/runs/2/cases/3/", count=3)], "t")
    assert fig.data[0].name.endswith("(3)")
    assert fig.data[0].customdata[0][1] == "first and 2 more here"


def test_latency_ecdf_draws_both_runs_from_their_quantiles() -> None:
    fig = latency_ecdf([0.1, 0.2, 0.4], [0.2, 0.5, 1.5])
    assert [t.name for t in fig.data] == ["baseline", "candidate"]
    assert list(fig.data[1].x) == [0.2, 0.5, 1.5] and list(fig.data[1].y) == [0.0, 0.5, 1.0]
    assert len(latency_ecdf([], [0.3]).data) == 1  # a run without timings draws nothing


def test_delta_bars_have_interval_whiskers_and_honest_colours() -> None:
    fig = delta_bars([DeltaBar("trajectory_match", -0.08, -0.11, -0.05, 400, "likely real"),
                      DeltaBar("response_match", 0.01, -0.02, 0.04, 400, "could be noise")])
    bar = fig.data[0]
    assert list(bar.error_x.array) == [-0.05 - -0.08, 0.04 - 0.01]
    assert list(bar.error_x.arrayminus) == [-0.08 - -0.11, 0.01 - -0.02]
    assert bar.marker.color[0] == STATUSES["regressed"].colour
    # coloured by sign; could be noise: the same hue, faint
    assert bar.marker.color[1] == STATUSES["improved"].colour + "73"
    # each bar says its value beside its name (on the bar, its whisker would cross it)
    assert list(fig.layout.yaxis.ticktext) == ["trajectory_match  <b>\u22120.080</b>", "response_match  <b>+0.010</b>"]
    assert list(fig.layout.yaxis.tickvals) == list(bar.y)


def test_tag_pass_rates_put_both_runs_side_by_side() -> None:
    fig = tag_pass_rates([TagPair("weather", 3, 4, 1, 4), TagPair("empty", 0, 0, 1, 2)])
    assert [t.name for t in fig.data] == ["baseline", "candidate"]
    assert list(fig.data[0].x) == [0.75, None] and list(fig.data[1].x) == [0.25, 0.5]


def test_trend_lines_and_heatmap() -> None:
    trend = [TrendPoint("#1", "run 1", 1.0, 1.2, "/runs/1/"), TrendPoint("#2", "run 2", 0.5, None, "/runs/2/")]
    assert list(pass_rate_trend(trend).data[0].y) == [1.0, 0.5]
    fig = case_heatmap([HeatmapRow("a", ["pass", "fail", "fail"], 1), HeatmapRow("b", ["none", "pass", "mixed"],
                                                                                   None)], ["#1", "#2", "#3"])
    heat = fig.data[0]
    assert [list(row) for row in heat.z] == [[1, 2, 2], [0, 1, 4]]
    assert [list(row) for row in heat.text] == [["\u2713", "\u2717", "\u2717"], ["", "\u2713", "\u2248"]]
    [outline] = fig.layout.shapes  # only the case that still fails
    assert (outline.x0, outline.x1, outline.y0, outline.y1) == (0.5, 1.5, -0.5, 0.5)


def test_the_first_failing_run_is_where_the_current_streak_began() -> None:
    assert first_failing(["pass", "fail", "fail"]) == 1
    assert first_failing(["fail", "pass", "error", "none", "fail"]) == 2
    assert first_failing(["fail", "fail", "pass"]) is None
    assert first_failing(["fail", "mixed", "fail"]) == 2  # flaky repeats break the streak
    assert first_failing([]) is None


def spans() -> list[WaterfallSpan]:
    s = 1_000_000_000
    return [
        WaterfallSpan("tool2", "root", "cancel_order", "TOOL", 2 * s, 3 * s, "ERROR"),
        WaterfallSpan("root", "", "invoke_agent", "AGENT", 0, 4 * s),
        WaterfallSpan("llm", "root", "chat", "LLM", s // 2, s),
        WaterfallSpan("tool1", "llm", "get_order", "TOOL", s // 2 + 1, s),
    ]


def test_spans_are_placed_in_tree_order() -> None:
    placed = tree_order(spans())
    assert [(p.span.span_id, p.depth) for p in placed] == [("root", 0), ("llm", 1), ("tool1", 2), ("tool2", 1)]


def test_the_waterfall_puts_spans_on_a_time_axis_coloured_by_kind() -> None:
    fig = waterfall(spans())
    by_name = {t.name: t for t in fig.data}
    assert set(by_name) == {"agent node", "LLM call", "tool call", "failed span"}
    tools = by_name["tool call"]
    assert list(tools.base) == [0.5 + 1e-9] and list(tools.x) == [0.5 - 1e-9]
    assert list(tools.y) == [2]  # rows in tree order
    labels = list(fig.layout.yaxis.ticktext)
    assert labels[:3] == ["invoke_agent", "\u2514 chat", "\u00b7 \u2514 get_order"]


def test_a_failed_span_is_told_by_colour_hatch_and_words_not_an_outline_alone() -> None:
    fig = waterfall(spans())
    failed = next(t for t in fig.data if t.name == "failed span")  # its own legend entry
    assert list(failed.y) == [3] and list(failed.base) == [2.0] and list(failed.x) == [1.0]
    assert failed.marker.color == "#D55E00"  # vermillion (Okabe-Ito), unlike every kind's colour
    assert failed.marker.color not in {t.marker.color for t in fig.data if t.name != "failed span"}
    assert failed.marker.pattern.shape == "/"  # reads in greyscale too
    assert list(failed.text) == ["\u2717 failed"] and "failed" in failed.customdata[0][4]
    assert list(fig.layout.yaxis.ticktext)[3] == "\u2514 \u2717 cancel_order"


def test_a_span_cycle_does_not_loop_forever() -> None:
    cyclic = [WaterfallSpan("a", "b", "a", "", 0, 1), WaterfallSpan("b", "a", "b", "", 0, 1)]
    assert [(p.span.span_id, p.depth) for p in tree_order(cyclic)] == [("a", 0), ("b", 1)]


def test_latency_axes_use_milliseconds_under_a_second_and_log_where_they_spread() -> None:
    spread = latency_ecdf([0.004, 0.005, 0.013], [0.0004, 0.0006, 0.0017])
    assert spread.layout.xaxis.type == "log" and spread.layout.xaxis.title.text == "latency (ms, log scale)"
    assert list(spread.data[0].x) == [4.0, 5.0, 13.0]
    close = latency_ecdf([1.0, 1.5, 2.0], [1.2, 1.6, 2.5])
    assert close.layout.xaxis.type != "log" and close.layout.xaxis.title.text == "latency (s)"


def test_a_log_latency_axis_labels_its_ticks_in_full_1_2_5_per_decade() -> None:
    # Plotly's own log ticks read "1000 5 2 100 5 2 10 5": the minor ones by their first digit.
    trend = latency_trend([TrendPoint("#1", "run 1", 1.0, 0.008, "/runs/1/"),
                           TrendPoint("#2", "run 2", 0.9, 0.95, "/runs/2/")])
    axis = trend.layout.yaxis
    assert axis.type == "log" and axis.tickmode == "array"
    assert list(axis.tickvals) == [5, 10, 20, 50, 100, 200, 500, 1000]
    assert list(axis.ticktext) == ["5", "10", "20", "50", "100", "200", "500", "1,000"]
    ecdf = latency_ecdf([0.004, 0.005, 0.013], [0.0004, 0.0006, 0.0017]).layout.xaxis
    assert list(ecdf.ticktext) == ["0.2", "0.5", "1", "2", "5", "10", "20"]
    # Over more than three decades, powers of ten only.
    wide = log_ticks([1, 250_000])
    assert wide["ticktext"] == ["1", "10", "100", "1,000", "10,000", "100,000", "1,000,000"]


def test_a_pass_rate_of_100_percent_is_drawn_whole() -> None:
    fig = pass_rate_trend([TrendPoint("#1", "run 1", 1.0, 1.2, "/runs/1/"), TrendPoint("#2", "run 2", 0.0, 1, "/")])
    low, high = fig.layout.yaxis.range
    assert low < 0 and high > 1.02  # room for a marker's radius at 0 % and 100 %
    assert fig.data[0].cliponaxis is False


def test_every_chart_has_a_name_and_its_numbers_as_a_table() -> None:
    from evaluations.web.charts import to_html

    html = to_html(tag_pass_rates([TagPair("<b>weather</b>", 3, 4, 1, 4)]))
    assert html.startswith('<div role="img" aria-label="Chart: ')
    table = html.split('<details class="chart-data">', 1)[1]
    assert "&lt;b&gt;weather&lt;/b&gt;" in table and "<b>weather" not in table  # escaped once, shown as text
    assert "<td>0.75</td>" in table and "<td>0.25</td>" in table
    assert '"displayModeBar": false' in html  # no toolbar over the legend
