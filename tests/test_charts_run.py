"""The run charts: pure functions from bin counts to plotly figures. No database."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from evaluations.web.charts import PALETTE, STATUS_COLOURS, fmt_seconds, to_html
from evaluations.web.charts.run import (
    ScoreBins,
    TagRate,
    latency_histogram,
    nice_step,
    pass_rate_by_tag,
    score_distribution,
    sparkline_points,
)


def bins(passed: dict[int, int] | None = None, failed: dict[int, int] | None = None,
         unjudged: dict[int, int] | None = None) -> ScoreBins:
    def counts(values: dict[int, int] | None) -> list[int]:
        out = [0] * 10
        for index, n in (values or {}).items():
            out[index] = n
        return out

    return ScoreBins(passed=counts(passed), failed=counts(failed), unjudged=counts(unjudged))


def test_score_distribution_has_one_panel_per_criterion_and_stacks_passed_over_failed() -> None:
    fig = score_distribution({
        "trajectory_match": bins(passed={9: 6}, failed={0: 2}),
        "response_match": bins(passed={9: 8}),
    })
    assert isinstance(fig, go.Figure)
    assert fig.layout.barmode == "stack"
    traces = [(t.name, t.xaxis, sum(t.y)) for t in fig.data]
    assert traces == [("passed", "x", 6), ("failed", "x", 2), ("passed", "x2", 8)]
    assert [a.text for a in fig.layout.annotations] == ["trajectory_match", "response_match"]
    # Scores always on a 0-1 axis, whatever the data.
    assert tuple(fig.layout.xaxis.range) == (0, 1) and tuple(fig.layout.xaxis2.range) == (0, 1)


def test_score_distribution_colours_outcomes_with_the_status_palette_and_shows_each_once_in_the_legend() -> None:
    fig = score_distribution({"a": bins(passed={9: 1}, failed={1: 1}), "b": bins(passed={8: 1}, unjudged={5: 3})})
    colours = {t.name: t.marker.color for t in fig.data}
    assert colours == {"passed": STATUS_COLOURS["passed"], "failed": STATUS_COLOURS["failed"],
                       "unjudged": STATUS_COLOURS["unjudged"]}
    assert [t.name for t in fig.data if t.showlegend] == ["passed", "failed", "unjudged"]
    assert fig.layout.showlegend is False  # the page's caption carries the key


def test_score_distribution_bins_are_tenths_of_the_score_range() -> None:
    fig = score_distribution({"a": bins(failed={3: 4})})
    [bar] = fig.data
    assert list(bar.x) == pytest.approx([(i + 0.5) / 10 for i in range(10)])
    assert list(bar.y) == [0, 0, 0, 4, 0, 0, 0, 0, 0, 0]
    assert bar.customdata[3][1] == "0.3\u20130.4"


def test_criterion_names_are_escaped_in_titles_and_hover_text() -> None:
    fig = score_distribution({"<img src=x onerror=alert(1)>": bins(passed={9: 1})})
    assert fig.layout.annotations[0].text == "&lt;img src=x onerror=alert(1)&gt;"
    assert fig.data[0].customdata[0][0] == "&lt;img src=x onerror=alert(1)&gt;"
    assert "<img" not in to_html(fig)


def test_many_criteria_wrap_into_rows_of_three() -> None:
    fig = score_distribution({f"c{i}": bins(passed={9: 1}) for i in range(5)})
    assert fig.layout.height == 200 * 2 + 20
    assert {t.xaxis for t in fig.data} == {"x", "x2", "x3", "x4", "x5"}


def test_latency_histogram_draws_bins_and_marks_p50_and_p95_in_seconds() -> None:
    fig = latency_histogram(0.5, [1, 3, 0, 2], p50=0.61, p95=1.734)
    [bar] = fig.data
    assert list(bar.y) == [1, 3, 0, 2]
    assert list(bar.x) == pytest.approx([0.25, 0.75, 1.25, 1.75])
    assert list(bar.customdata) == ["0\u20130.50 s", "0.50\u20131.0 s", "1.0\u20131.5 s", "1.5\u20132.0 s"]
    assert [s.x0 for s in fig.layout.shapes] == [0.61, 1.734]
    assert [a.text for a in fig.layout.annotations] == ["p50 0.61 s", "p95 1.7 s"]
    assert bar.marker.color == PALETTE["blue"]
    fast = latency_histogram(0.0005, [2, 1], p50=0.0004, p95=0.00093)  # all under a second: milliseconds
    assert list(fast.data[0].customdata) == ["0\u20130.50 ms", "0.50\u20131.0 ms"]
    assert [a.text for a in fast.layout.annotations] == ["p50 0.40 ms", "p95 0.93 ms"]
    assert fast.layout.xaxis.title.text == "latency (ms)"


def test_latency_histogram_without_percentiles_has_no_markers() -> None:
    fig = latency_histogram(1.0, [2])
    assert len(fig.layout.shapes) == 0


def test_pass_rate_by_tag_puts_the_worst_tag_on_top_and_labels_sample_sizes() -> None:
    fig = pass_rate_by_tag([TagRate("weather", 3, 4), TagRate("orders", 1, 2), TagRate("never_judged", 0, 0),
                            TagRate("flights", 2, 2)])
    [bar] = fig.data
    # Plotly draws the first category at the bottom: the worst comes last.
    assert list(bar.y) == ["flights", "weather", "orders"]
    assert list(bar.x) == [1.0, 0.75, 0.5]
    assert list(bar.text) == ["100% · n=2", "75% · n=4", "50% · n=2"]
    assert tuple(fig.layout.xaxis.range) == (0, 1)


def test_tags_are_escaped_in_the_tag_chart() -> None:
    fig = pass_rate_by_tag([TagRate('<b onmouseover="x">t</b>', 1, 1)])
    assert fig.data[0].y[0] == "&lt;b onmouseover=&quot;x&quot;&gt;t&lt;/b&gt;"
    assert fig.data[0].customdata[0][0].startswith("&lt;b")


def test_to_html_leaves_plotly_js_to_the_page_and_hides_the_logo() -> None:
    html = to_html(latency_histogram(1.0, [1]))
    assert html.startswith("<div")
    assert '<script type="application/json" class="plotly-figure"' in html  # data, not an inline script
    assert "Plotly.newPlot" not in html
    assert '"displaylogo": false' in html
    assert "cdn.plot.ly" not in html and "<html" not in html
    assert len(html) < 20_000  # the library itself is not inlined


def test_charts_have_transparent_backgrounds_for_light_and_dark_pages() -> None:
    for fig in (latency_histogram(1.0, [1]), pass_rate_by_tag([TagRate("a", 1, 1)]),
                score_distribution({"a": bins(passed={9: 1})})):
        assert fig.layout.paper_bgcolor == "rgba(0,0,0,0)"
        assert fig.layout.plot_bgcolor == "rgba(0,0,0,0)"
        assert fig.layout.title.text is None


@pytest.mark.parametrize(("value", "text"), [
    (0.0534, "0.053"), (0.5, "0.50"), (0.999, "1.0"), (1.42, "1.4"), (9.96, "10"), (12.3, "12"), (123.4, "123"),
    (0, "0"), (None, "—"),
])
def test_seconds_show_two_significant_digits(value: float | None, text: str) -> None:
    assert fmt_seconds(value) == text


@pytest.mark.parametrize(("span", "step"), [(1.9, 0.1), (4.0, 0.2), (9.0, 0.5), (150.0, 10.0), (0.0, 0.1)])
def test_latency_bins_have_round_widths(span: float, step: float) -> None:
    assert nice_step(span) == pytest.approx(step)


def test_sparkline_points_span_the_box_with_zero_at_the_bottom_and_skip_gaps() -> None:
    assert sparkline_points([0.0, None, 1.0], width=100, height=20, pad=0) == "0.0,20.0 100.0,0.0"
    assert sparkline_points([]) == ""
    assert sparkline_points([None]) == ""
    assert sparkline_points([0.5], width=10, height=10, pad=0) == "5.0,5.0"
