"""The review journey in real Chromium: open a comparison, see its regressions, open one,
walk to the next with the link and with the keyboard, and never run the agent's HTML.

Screenshots of the compare page and the drill-down go to /tmp (compare.png, drilldown.png,
trend.png) for a person to look at.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from evaluations.models import CaseResult, Project, Run
from tests.compare_helpers import import_demo, make_run, perfect_outputs, regressed_outputs
from tests.conftest import DATA, draw_charts

# playwright's sync API runs an event loop in this thread; Django would otherwise refuse the
# ORM calls the test makes while it is running.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect

XSS = "<script>window.__xss=1</script>"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]




@pytest.fixture
def tab(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1366, "height": 860})
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page
    context.close()


def log_in(tab: Any, live_server: Any) -> None:
    tab.goto(live_server.url + "/accounts/login/")
    tab.get_by_label("Username").fill("alice")
    tab.get_by_label("Password").fill("alice-pass-123")
    tab.get_by_role("button", name="Log in").click()
    expect(tab).not_to_have_url(re.compile(r"/accounts/login/"))


@pytest.fixture
def runs(acme: Project) -> tuple[Run, Run]:
    version = import_demo(acme)
    baseline = make_run(acme, version, perfect_outputs(), name="baseline", labels={"model": "agent-v1"})
    outputs = regressed_outputs()
    tokyo = next(o for o in outputs if o["eval_id"] == "weather_tokyo")
    tokyo["turns"][0]["final_response"] = f"It is sunny in Kyoto. {XSS}"
    candidate = make_run(acme, version, outputs, name="candidate", labels={"model": "agent-v2"})
    return baseline, candidate


def test_a_reviewer_walks_the_regressions_of_a_comparison(tab: Any, live_server: Any, alice: Any,
                                                          runs: tuple[Run, Run]) -> None:
    _, candidate = runs
    log_in(tab, live_server)
    tab.goto(f"{live_server.url}/compare/?candidate={candidate.pk}")

    expect(tab.get_by_test_id("headline")).to_contain_text("2 regressions, 0 improvements")
    expect(tab.get_by_test_id("headline")).to_contain_text("trajectory_match \u22120.25")
    rows = tab.get_by_test_id("cases-table").locator("tbody tr")
    expect(rows).to_have_count(2)  # regressions only, by default
    expect(rows.first).to_contain_text("regressed")
    expect(tab.locator("#compare-cases .table-summary")).to_contain_text("regressed cases only")
    draw_charts(tab)
    expect(tab.get_by_test_id("scatter").locator(".js-plotly-plot")).to_be_visible()
    tab.screenshot(path="/tmp/compare.png", full_page=True)

    rows.first.get_by_role("link", name="order_status").click()
    expect(tab.get_by_role("heading", name="order_status")).to_be_visible()
    stepper = tab.get_by_role("navigation", name="Walk the comparison")
    expect(stepper).to_contain_text("regressed 1 of 2")
    expect(tab.get_by_test_id("calldiff").locator(".call-missing")).to_contain_text("get_order")
    tab.screenshot(path="/tmp/drilldown_missing.png", full_page=True)

    stepper.get_by_role("link", name="Next →").click()
    expect(tab.get_by_role("heading", name="weather_tokyo")).to_be_visible()
    expect(stepper).to_contain_text("regressed 2 of 2")
    changed = tab.get_by_test_id("calldiff").locator(".arg-changed")
    expect(changed.locator(".side-left")).to_contain_text('"Tokyo"')
    expect(changed.locator(".side-right")).to_contain_text('"Kyoto"')
    # the agent's HTML, as text (beside the expected answer: the two share too little to diff)
    expect(tab.get_by_test_id("side-by-side")).to_contain_text(XSS)
    assert tab.evaluate("typeof window.__xss") == "undefined"
    assert tab.locator("main script").count() == 0
    tab.screenshot(path="/tmp/drilldown.png", full_page=True)

    tab.keyboard.press("k")
    expect(tab.get_by_role("heading", name="order_status")).to_be_visible()
    tab.keyboard.press("j")
    expect(tab.get_by_role("heading", name="weather_tokyo")).to_be_visible()
    expect(tab).to_have_url(re.compile(r"status=regressed"))  # the filter travelled along

    tab.get_by_role("link", name="Back to the comparison").click()
    expect(tab.get_by_test_id("cases-table").locator("tbody tr")).to_have_count(2)


def test_clicking_a_point_of_the_scatter_opens_its_case(tab: Any, live_server: Any, alice: Any,
                                                        runs: tuple[Run, Run]) -> None:
    baseline, candidate = runs
    log_in(tab, live_server)
    tab.goto(f"{live_server.url}/compare/?baseline={baseline.pk}&candidate={candidate.pk}")
    draw_charts(tab)
    plot = tab.get_by_test_id("scatter").locator(".js-plotly-plot")
    expect(plot).to_be_visible()
    tab.wait_for_load_state("load")
    # A click on a point, as plotly reports it: the regression's own point data.
    tab.evaluate("""() => {
        const plot = document.querySelector('[data-testid="scatter"] .js-plotly-plot');
        const trace = plot.data.find(t => t.name.includes('regressed'));
        plot.emit('plotly_click', {points: [{customdata: trace.customdata[0]}]});
    }""")
    expect(tab.get_by_role("navigation", name="Walk the comparison")).to_contain_text("regressed")
    tokyo = CaseResult.objects.get(run=candidate, case__eval_id="weather_tokyo")
    order = CaseResult.objects.get(run=candidate, case__eval_id="order_status")
    assert re.search(rf"/runs/{candidate.pk}/cases/({tokyo.pk}|{order.pk})/\?baseline={baseline.pk}", tab.url)


def test_a_traced_result_draws_its_span_waterfall(tab: Any, live_server: Any, alice: Any, acme: Project) -> None:
    trace = json.loads((DATA / "traces" / "genai_cancel_order.json").read_text())
    outputs = [o for o in perfect_outputs() if o["eval_id"] == "order_status"]
    outputs[0]["turns"] = [{"final_response": "Order 1042 shipped on 2026-11-18 and arrives on 2026-11-22."}]
    outputs[0]["trace"] = trace
    run = make_run(acme, import_demo(acme), outputs, eval_ids=["order_status"])
    result = CaseResult.objects.get(run=run)
    log_in(tab, live_server)
    tab.goto(f"{live_server.url}/runs/{run.pk}/cases/{result.pk}/")
    draw_charts(tab)
    chart = tab.get_by_test_id("waterfall").locator(".js-plotly-plot")
    expect(chart).to_be_visible()
    expect(chart.locator(".ytick")).to_have_count(6)  # one row per span
    expect(chart).to_contain_text("invoke_agent orders_assistant")
    tab.screenshot(path="/tmp/waterfall.png", full_page=True)


def test_the_trend_page_draws_the_runs_and_the_heatmap(tab: Any, live_server: Any, alice: Any,
                                                       runs: tuple[Run, Run]) -> None:
    _, candidate = runs
    log_in(tab, live_server)
    tab.goto(f"{live_server.url}/evalsets/{candidate.evalset_version.evalset_id}/")
    tab.get_by_role("link", name="Trend over runs").click()
    tab.wait_for_url(re.compile(r"/trend/"))
    draw_charts(tab)
    expect(tab.get_by_test_id("heatmap").locator(".js-plotly-plot")).to_be_visible()
    # drawn by the server, the one of its two widths that fits the box
    expect(tab.get_by_test_id("pass-rate-trend").locator("svg.svg-chart:visible")).to_have_count(1)
    expect(tab.locator(".trend-failing")).to_contain_text("weather_tokyo")
    tab.screenshot(path="/tmp/trend.png", full_page=True)
