"""Issue 41, item 7, in real Chromium: at 390 px a chart's legend is compact (small type,
entries side by side) and leaves the plot most of the figure (it took half the monitor chart,
one entry a row); at 1440 px the legend stays one line. Checked on the monitor chart and the
trace waterfall, the two charts of the monitor journey with a legend (static/js/figures.js
does it for every plotly figure). With EVALSITE_SHOTS=<folder>, photographed at both widths."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # playwright's loop runs in this thread

from evaluations.models import MonitorResult, Project
from tests.conftest import draw_charts
from tests.test_browser_monitors import _seed

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MEASURE = """(root) => {
  const figure = root.querySelector('.js-plotly-plot');
  const legend = figure.querySelector('.legend');
  const plot = figure.querySelector('.nsewdrag');
  const rows = new Set([...figure.querySelectorAll('.legend .traces')].map(t => Math.round(t.getBoundingClientRect().top)));
  const size = parseFloat(getComputedStyle(figure.querySelector('.legend .legendtext')).fontSize);
  return {figure: figure.getBoundingClientRect().height, legend: legend.getBoundingClientRect().height,
          plot: plot.getBoundingClientRect().height, legendBottom: legend.getBoundingClientRect().bottom,
          plotTop: plot.getBoundingClientRect().top, rows: rows.size, entries: figure.querySelectorAll('.legend .traces').length,
          size: size};
}"""


@pytest.fixture
def tab(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1440, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


def _shoot(tab: Any, name: str) -> None:
    folder = os.environ.get("EVALSITE_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(Path(folder) / f"{name}-{tab.viewport_size['width']}.png"), full_page=True)


def test_legends_are_compact_on_a_phone_and_leave_the_plot_its_room(tab: Any, live_server: Any, acme: Project,
                                                                    alice: Any) -> None:
    monitor = _seed(acme, alice)
    failing = MonitorResult.objects.filter(monitor=monitor, passed=False).exclude(trace=None).first()
    assert failing is not None
    tab.goto(live_server.url + "/accounts/login/")
    tab.get_by_label("Username").fill("alice")
    tab.get_by_label("Password").fill("alice-pass-123")
    tab.get_by_role("button", name="Log in").click()
    charts = [("monitor-chart", f"/monitors/{monitor.pk}/", "[data-testid=monitor-chart]"),
              ("waterfall", f"/traces/{failing.trace_id}/", "[data-testid=waterfall]")]
    plots: dict[tuple[str, int], float] = {}
    for width in (1440, 390):
        tab.set_viewport_size({"width": width, "height": 900})
        for name, path, where in charts:
            tab.goto(live_server.url + path)
            assert draw_charts(tab) >= 1
            got = tab.locator(where).evaluate(MEASURE)
            _shoot(tab, name)
            plots[(name, width)] = got["plot"]
            assert got["legendBottom"] <= got["plotTop"] + 1, (name, width, got)  # above the plot, not over it
            if width == 390:
                assert got["size"] <= 10, (name, got)
                assert got["rows"] <= (got["entries"] + 1) // 2, (name, got)  # two or more a row
                assert got["plot"] >= 0.9 * plots[(name, 1440)], (name, got, plots)  # the plot keeps its room
                assert got["legend"] <= 0.35 * got["figure"], (name, got)
            else:
                assert got["rows"] == 1, (name, got)
