"""The reviewer's loop in real Chromium: from home to a regression's cause and a triage
decision in two clicks; a live run whose counters move before it finishes; and pages that
fit a 390 px phone without scrolling sideways.

Screenshots go to /tmp/review-flow-*.png for a person to look at.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from evaluations.models import CaseResult, Project, Run, Trace, Triage
from evaluations.runs import services as runs
from tests.compare_helpers import import_demo, make_run, perfect_outputs, regressed_outputs

# playwright's sync API runs an event loop in this thread; Django would otherwise refuse the
# ORM calls the test makes while it is running.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1440, "height": 900})
    context.set_default_timeout(10_000)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda e: errors.append(str(e)))
    opened.errors = errors
    yield opened
    context.close()


def log_in(page: Any, live_server: Any, next_path: str = "/") -> None:
    page.goto(live_server.url + next_path)
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-pass-123")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(live_server.url + next_path)


def two_runs(project: Project) -> tuple[Run, Run]:
    version = import_demo(project)
    labels = {"branch": "main", "model": "gpt-x"}
    return (make_run(project, version, perfect_outputs(), name="nightly", labels=labels),
            make_run(project, version, regressed_outputs(), name="nightly", labels=labels))


def test_from_home_to_a_regressions_cause_and_its_triage_in_two_clicks(page: Any, live_server: Any, alice: Any,
                                                                       acme: Project) -> None:
    baseline, candidate = two_runs(acme)
    log_in(page, live_server)
    # Click 1: home's change for the eval set opens the comparison with its default baseline.
    page.get_by_test_id("home-change").get_by_role("link").click()
    expect(page).to_have_url(re.compile(rf"/compare/\?baseline={baseline.pk}&candidate={candidate.pk}"))
    regressions = page.get_by_test_id("regressed-list")
    expect(regressions).to_be_visible()
    # the causes are on the first screen, under the verdict, before any chart
    cause = regressions.get_by_role("row").filter(has_text="weather_tokyo").get_by_test_id("cause")
    expect(cause).to_have_text("city Tokyo→Kyoto")
    assert cause.bounding_box()["y"] < 900
    expect(regressions.get_by_role("row").filter(has_text="order_status").get_by_test_id("cause")).to_contain_text(
        "missing get_order(")
    page.screenshot(path="/tmp/review-flow-compare.png")
    # Click 2: the case, with the triage panel beside it on the first screen.
    regressions.get_by_role("link", name="weather_tokyo").click()
    expect(page.locator("h1")).to_have_text("weather_tokyo")
    panel = page.get_by_test_id("triage-panel")
    expect(panel).to_be_in_viewport()
    panel.get_by_label("Status").select_option("confirmed")
    panel.get_by_role("button", name="Save triage").click()
    expect(page.get_by_test_id("triage-panel").get_by_test_id("triage-status")).to_have_text("Confirmed regression")
    page.screenshot(path="/tmp/review-flow-drilldown.png")
    assert Triage.objects.get(eval_id="weather_tokyo").status == "confirmed"
    assert page.errors == []


def slow_agent(request: dict[str, Any]) -> dict[str, Any]:
    """The demo agent, 0.3 s a turn: slow enough to watch."""
    from evaluations.demo.agent import respond

    time.sleep(0.3)
    return respond(request)


def test_a_live_runs_counters_move_before_it_finishes(page: Any, live_server: Any, alice: Any,
                                                      acme: Project) -> None:
    version = import_demo(acme)
    run = runs.run_create(project=acme, version=version, target_kind=Run.TargetKind.PYTHON,
                          target={"callable": f"{__name__}:slow_agent"}, enqueue=False, name="slow")
    log_in(page, live_server, f"/runs/{run.pk}/")
    progress = page.locator("#run-progress")
    expect(progress).to_contain_text("0 of 8 results settled")
    badge = page.get_by_test_id("run-status")
    expect(badge).to_have_text(re.compile("queued"))
    page.evaluate("window.__notReloaded = true")
    home = page.context.new_page()  # home's latest-runs table, watching the same run
    home.goto(live_server.url + "/")
    home_badge = home.locator(f"#run-status-{run.pk}")
    expect(home_badge).to_have_text(re.compile("queued"))
    worker = threading.Thread(target=runs.run_execute_here, args=(run.pk,), daemon=True)
    worker.start()
    try:
        # all eight results are one batch: the page must still see them settle one by one
        expect(progress).to_contain_text(re.compile(r"\b[1-7] of 8 results settled"), timeout=15_000)
        expect(badge).to_have_text(re.compile("running"))
        expect(page.get_by_test_id("elapsed")).to_be_visible()
        expect(page.get_by_test_id("eta")).to_contain_text("≈")
        expect(page.get_by_test_id("recent-results").locator("tbody tr").first).to_be_visible()
        # and the cases table fills in as they finish
        expect(page.locator("#results-table tbody").get_by_text("passed").first).to_be_visible(timeout=8_000)
        assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING  # seen before it finished
        page.screenshot(path="/tmp/review-flow-live.png")
    finally:
        worker.join(timeout=60)
    assert not CaseResult.objects.filter(run=run, status=CaseResult.Status.PENDING).exists()
    # The badges turn "completed" in place: the run page was not reloaded, home neither.
    expect(badge).to_have_text(re.compile("completed"), timeout=10_000)
    expect(home_badge).to_have_text(re.compile("completed"), timeout=10_000)
    # the summary and charts come in too, still without a reload
    expect(page.locator(".card-main")).to_contain_text("%", timeout=10_000)
    expect(page.locator(".chart .main-svg").first).to_be_visible()
    expect(progress).to_have_count(0)
    assert page.evaluate("window.__notReloaded") is True
    assert page.errors == []


def test_no_page_scrolls_sideways_on_a_390_px_phone(chromium: Any, live_server: Any, alice: Any,
                                                    acme: Project) -> None:
    baseline, candidate = two_runs(acme)
    # a run with long labels: the baseline picker lists it, and must still fit
    make_run(acme, candidate.evalset_version, perfect_outputs(), name="canary with a long name",
             labels={"branch": "feature/a-rather-long-branch-name-for-the-planner", "model": "provider/model-x-large"})
    tokyo = CaseResult.objects.get(run=candidate, case__eval_id="weather_tokyo")
    # a received trace whose resource holds a long unbroken value
    trace = Trace.objects.create(project=acme, trace_id="cd" * 16, received=True, name="agent", span_count=0,
                                 resource={"service.instance.id": "x" * 120, "service.name": "agent"})
    evalset_id = candidate.evalset_version.evalset_id
    context = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    context.set_default_timeout(10_000)
    phone = context.new_page()
    try:
        log_in(phone, live_server)
        paths = ["/", f"/compare/?baseline={baseline.pk}&candidate={candidate.pk}",
                 f"/runs/{candidate.pk}/", f"/runs/{candidate.pk}/cases/{tokyo.pk}/?baseline={baseline.pk}",
                 "/runs/", "/evalsets/", f"/evalsets/{evalset_id}/trend/", f"/evalsets/{evalset_id}/",
                 f"/evalsets/{evalset_id}/versions/", "/review/?tab=untriaged", "/grading/", "/calibration/",
                 "/traces/", f"/traces/{trace.pk}/"]
        for path in paths:
            phone.goto(live_server.url + path)
            width = phone.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"{path} is {width} px wide"
        phone.screenshot(path="/tmp/review-flow-phone.png", full_page=True)
        # the menu is folded behind a button, and opens
        nav = phone.get_by_role("navigation", name="Main")
        expect(nav).to_be_hidden()
        phone.get_by_role("button", name="Menu").click()
        expect(nav).to_be_visible()
        expect(phone.get_by_role("button", name="Menu")).to_have_attribute("aria-expanded", "true")
        # a keyboard user can skip the header
        phone.goto(live_server.url + "/")
        phone.keyboard.press("Tab")
        expect(phone.get_by_role("link", name="Skip to content")).to_be_focused()
    finally:
        context.close()


def test_a_comparison_with_a_running_candidate_holds_its_verdict_then_gives_it(page: Any, live_server: Any,
                                                                              alice: Any, acme: Project) -> None:
    version = import_demo(acme)
    baseline = make_run(acme, version, perfect_outputs(), name="baseline")
    run = runs.run_create(project=acme, version=version, target_kind=Run.TargetKind.PYTHON,
                          target={"callable": f"{__name__}:slow_agent"}, enqueue=False, name="slow")
    log_in(page, live_server, f"/compare/?baseline={baseline.pk}&candidate={run.pk}&status=all")
    headline = page.get_by_test_id("headline")
    expect(headline).to_contain_text("The candidate is still running: 8 of 8 cases pending")
    worker = threading.Thread(target=runs.run_execute_here, args=(run.pk,), daemon=True)
    worker.start()
    try:
        # the cases fill in while it runs, then the page reloads with the verdict
        expect(page.get_by_test_id("cases-table").locator(".cmp-unchanged-pass").first).to_be_visible(timeout=15_000)
        expect(headline).to_contain_text("0 regressions, 0 improvements", timeout=20_000)
        expect(page.get_by_test_id("live")).to_have_count(0)
    finally:
        worker.join(timeout=60)
    assert page.errors == []
