"""The run journeys in real Chromium: start a demo run from the New run page, watch its
progress move without a reload, see the charts, filter the cases; and agent output that holds
markup stays text.

The run is executed by the test itself (`runs.run_execute_here`, batch by batch) rather than
by a queue cluster, so the test decides when progress moves and waits for the page to show
it. Screenshots of the run page (light and dark) go to /tmp for a person to look at.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from evaluations.models import Project, Run
from evaluations.runs import services as runs
from evaluations.schemas.outputs import AgentOutput
from tests.conftest import draw_charts
from tests.engine_helpers import import_demo, perfect_outputs, regressed_outputs

# playwright's sync API runs an event loop in this thread; Django would otherwise refuse the
# ORM calls the test makes while it is running.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect

XSS = '<img src=x onerror="window.__xss=1">'

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]




class Tab:
    """A browser tab that remembers every console error and uncaught exception."""

    def __init__(self, chromium: Any, **options: Any) -> None:
        self.context = chromium.new_context(viewport={"width": 1366, "height": 900}, **options)
        self.context.set_default_timeout(10_000)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _console(self, message: Any) -> None:
        # The browser asks for /favicon.ico on its own; evalsite has none (yet).
        if message.type == "error" and not message.location.get("url", "").endswith("/favicon.ico"):
            self.errors.append(f"{message.text} at {message.location.get('url')}")


@pytest.fixture
def tab(chromium: Any) -> Iterator[Tab]:
    opened = Tab(chromium)
    yield opened
    opened.context.close()


def log_in(page: Any, live_server: Any, next_path: str = "/") -> None:
    page.goto(live_server.url + next_path)
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-pass-123")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(live_server.url + next_path)


def test_a_member_starts_a_demo_run_watches_it_progress_and_filters_its_cases(
    tab: Tab, live_server: Any, alice: Any, acme: Project, settings: Any, chromium: Any
) -> None:
    settings.EVALSITE_BATCH_SIZE = 2  # four batches: progress the page can be seen to follow
    import_demo(acme)
    page = tab.page
    log_in(page, live_server)

    page.get_by_role("navigation", name="Main").get_by_role("link", name="New run").click()
    expect(page.get_by_role("heading", name=re.compile("New run"))).to_be_visible()
    expect(page.get_by_label("Callable", exact=True)).to_be_hidden()  # only the chosen target's settings show
    page.screenshot(path="/tmp/run_new.png", full_page=True)
    page.get_by_label("Demo agent").check()
    page.get_by_label("missing call").check()
    page.get_by_label("Model", exact=True).fill("demo-model")
    page.get_by_role("button", name="Start run").click()

    expect(page).to_have_url(re.compile(r"/runs/\d+/$"))
    run = Run.objects.get()
    progress = page.locator("#run-progress")
    expect(progress).to_contain_text("0 of 8 results settled")
    expect(page.locator(".plotly")).to_have_count(0)

    seen: list[str] = []

    def follow(current: Run) -> None:
        if current.cases_settled < current.cases_total:  # the last batch brings in the summary instead
            text = f"{current.cases_settled} of 8 results settled"
            expect(progress).to_contain_text(text, timeout=8_000)  # polled every 2 s, no reload
            seen.append(text)

    page.evaluate("window.__notReloaded = true")
    runs.run_execute_here(run.pk, progress=follow)
    assert seen[:2] == ["2 of 8 results settled", "4 of 8 results settled"]

    # Finished: the summary and charts appear, swapped in by htmx without a reload.
    expect(page.locator(".card-main")).to_contain_text("%", timeout=8_000)
    assert page.evaluate("window.__notReloaded") is True
    expect(page.locator("#run-progress")).to_have_count(0)
    draw_charts(page)
    charts = page.locator(".plotly")
    expect(charts).to_have_count(3)
    expect(page.locator(".chart").first.locator("svg.main-svg").first).to_be_visible()
    page.screenshot(path="/tmp/run_detail.png", full_page=True)

    failed = Run.objects.get(pk=run.pk).cases_failed
    assert failed > 0
    rows = page.locator("#results-table tbody tr")
    expect(rows).to_have_count(8)
    page.get_by_label("Status").select_option("failed")
    expect(rows).to_have_count(failed)
    expect(page).to_have_url(re.compile(r"status=failed"))
    for status in rows.locator("td:nth-child(2)").all_inner_texts():
        assert "failed" in status
    page.get_by_role("link", name=re.compile(r"^Latency \(s\)")).click()
    expect(page).to_have_url(re.compile(r"sort=-latency"))
    expect(rows).to_have_count(failed)  # the sort keeps the filter
    assert tab.errors == []
    page.goto(live_server.url + "/")
    expect(page.locator("table.trends")).to_contain_text("demo-model")
    page.screenshot(path="/tmp/runs_home.png", full_page=True)
    page.goto(live_server.url + "/runs/")
    page.screenshot(path="/tmp/runs_list.png", full_page=True)
    assert tab.errors == []

    # The same page in dark mode, for a person to look at.
    dark = Tab(chromium, color_scheme="dark")
    try:
        dark.context.add_cookies(tab.context.cookies())
        dark.page.goto(live_server.url + f"/runs/{run.pk}/")
        draw_charts(dark.page)
        expect(dark.page.locator(".plotly")).to_have_count(3)
        dark.page.screenshot(path="/tmp/run_detail_dark.png", full_page=True)
        assert dark.errors == []
    finally:
        dark.context.close()


def test_agent_output_with_markup_shows_as_text(tab: Tab, live_server: Any, alice: Any, acme: Project) -> None:
    raw = perfect_outputs()
    raw[0]["turns"][0]["final_response"] = XSS
    version = import_demo(acme)
    run = runs.run_create(project=acme, version=version, target_kind="uploaded", enqueue=False,
                          outputs=[AgentOutput.model_validate(o) for o in raw], name=XSS,
                          labels={"model": XSS, "tags": [XSS]})
    runs.run_execute_here(run.pk)
    page = tab.page
    log_in(page, live_server, f"/runs/{run.pk}/")
    row = page.locator("#results-table tbody tr").first
    expect(row.locator(".response")).to_have_text(XSS)
    expect(page.get_by_role("heading", level=1)).to_contain_text(XSS)
    draw_charts(page)
    expect(page.locator(".plotly")).to_have_count(3)
    assert page.locator("main img").count() == 0
    assert page.evaluate("typeof window.__xss") == "undefined"
    page.goto(live_server.url + "/runs/")
    expect(page.locator("table.runs")).to_contain_text(XSS)
    page.goto(live_server.url + "/")
    expect(page.locator("table.trends")).to_contain_text(XSS)
    assert page.locator("main img").count() == 0
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert tab.errors == []


def test_two_runs_are_picked_for_comparison_from_the_runs_list(
    tab: Tab, live_server: Any, alice: Any, acme: Project
) -> None:
    version = import_demo(acme)
    made = []
    for name, raw in (("baseline", perfect_outputs()), ("candidate", regressed_outputs())):
        run = runs.run_create(project=acme, version=version, target_kind="uploaded", enqueue=False, name=name,
                              outputs=[AgentOutput.model_validate(o) for o in raw])
        made.append(runs.run_execute_here(run.pk))
    page = tab.page
    log_in(page, live_server, "/runs/")
    compare = page.get_by_role("button", name="Compare")
    expect(compare).to_be_disabled()
    page.get_by_label("Pick candidate to compare").check()
    expect(compare).to_be_disabled()
    page.get_by_label("Pick baseline to compare").check()
    expect(compare).to_be_enabled()
    compare.click()
    expect(page).to_have_url(re.compile(rf"/compare/\?baseline={made[0].pk}&candidate={made[1].pk}$"))
