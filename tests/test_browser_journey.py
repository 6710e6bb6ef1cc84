"""The whole journey in one Chromium tab, as a user walks it: upload the demo eval set, start a
clean baseline run of the demo agent and a regressed candidate (fault `wrong_argument` on every
case), watch both reach done without a reload, compare them, click a point of the scatter to
open a case, and open a regressed case to see the changed tool-call argument.

As in test_browser_runs.py, the runs started from the page are executed by the test itself
(`runs.run_execute_here`) rather than by a queue cluster. Every page visited is screenshotted
to tests/artifacts/ (kept by CI); no request may leave the live server, and the console must
stay free of errors.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlsplit

import pytest

from evaluations.models import EvalSet, Project, Run
from evaluations.runs import services as runs
from tests.conftest import REPO, draw_charts

# playwright's sync API runs an event loop in this thread; Django would otherwise refuse the
# ORM calls the test makes while it is running.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect

DEMO = REPO / "evaluations" / "demo" / "travel_agent.evalset.json"
ARTIFACTS = REPO / "tests" / "artifacts"
WAIT = 60_000

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


def test_a_member_uploads_runs_compares_and_drills_into_a_regression(
    chromium: Any, live_server: Any, alice: Any, acme: Project
) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    server_host = urlsplit(live_server.url).netloc
    context = chromium.new_context(viewport={"width": 1366, "height": 900})
    context.set_default_timeout(15_000)
    errors: list[str] = []
    outside: list[str] = []

    def guard(route: Any) -> None:
        url = route.request.url
        if url.startswith(("http://", "https://", "ws://", "wss://")) and urlsplit(url).netloc != server_host:
            outside.append(url)
            route.abort()
        else:
            route.continue_()

    def console(message: Any) -> None:
        # The browser asks for /favicon.ico on its own; evalsite has none (yet).
        if message.type == "error" and not message.location.get("url", "").endswith("/favicon.ico"):
            errors.append(f"{message.text} at {message.location.get('url')}")

    context.route("**/*", guard)
    page = context.new_page()
    page.on("console", console)
    page.on("pageerror", lambda e: errors.append(str(e)))
    shot = 0

    def screenshot(name: str) -> None:
        nonlocal shot
        shot += 1
        page.screenshot(path=str(ARTIFACTS / f"journey_{shot:02d}_{name}.png"), full_page=True)

    try:
        # 1. Log in and upload the demo eval set through the page's file input.
        page.goto(live_server.url + "/")
        expect(page).to_have_url(re.compile(r"/accounts/login/"))
        screenshot("login")
        page.get_by_label("Username").fill("alice")
        page.get_by_label("Password").fill("alice-pass-123")
        page.get_by_role("button", name="Log in").click()
        expect(page).to_have_url(live_server.url + "/")
        screenshot("home")

        page.get_by_role("navigation", name="Main").get_by_role("link", name="Upload").click()
        page.locator("input[type=file]").set_input_files(str(DEMO))
        expect(page.locator("[data-dropzone-files]")).to_contain_text(DEMO.name)
        page.get_by_role("button", name="Upload").click()
        panel = page.locator(".result-panel")
        expect(panel).to_contain_text("New version v1 stored")
        expect(panel.locator(".facts")).to_contain_text("8")
        screenshot("upload_result")
        assert EvalSet.objects.get(project=acme).eval_set_id == "demo_travel_agent"

        # 2 and 3. A clean baseline, then a candidate whose every case gets a wrong argument.
        def start_and_watch(name: str, faults: list[str], rate: str | None) -> Run:
            page.get_by_role("navigation", name="Main").get_by_role("link", name="New run").click()
            expect(page.get_by_role("heading", name=re.compile("New run"))).to_be_visible()
            page.get_by_label("Demo agent").check()
            for fault in faults:
                page.get_by_label(fault).check()
            if rate is not None:
                page.get_by_label("Share of cases affected").fill(rate)
            page.get_by_label("Name", exact=True).fill(name)
            page.get_by_label("Model", exact=True).fill(f"demo-{name}")
            screenshot(f"new_run_{name}")
            page.get_by_role("button", name="Start run").click()
            expect(page).to_have_url(re.compile(r"/runs/\d+/$"))
            run = Run.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
            expect(page.locator("#run-progress")).to_contain_text("0 of 8 results settled")
            page.evaluate("window.__notReloaded = true")
            runs.run_execute_here(run.pk)
            # Done: the polling progress brings in the summary and charts (htmx swaps <main>).
            expect(page.locator("#run-progress")).to_have_count(0, timeout=WAIT)
            expect(page.locator(".card-main")).to_contain_text("%", timeout=WAIT)
            expect(page.locator(".charts")).to_be_visible(timeout=WAIT)
            draw_charts(page)
            expect(page.locator(".plotly")).to_have_count(3, timeout=WAIT)
            assert page.evaluate("window.__notReloaded") is True  # htmx did it, without a reload
            screenshot(f"run_{name}")
            run.refresh_from_db()
            assert run.cases_settled == run.cases_total == 8
            return run

        baseline = start_and_watch("baseline", [], None)
        candidate = start_and_watch("candidate", ["wrong argument"], "1.0")
        assert candidate.target["metadata"]["faults"] == {"wrong_argument": True, "rate": 1.0}
        assert candidate.cases_failed > baseline.cases_failed

        # 4. Pick both on the runs list and compare; the regressions-only filter is on.
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs").click()
        expect(page.locator("table.runs")).to_contain_text("candidate")
        page.wait_for_load_state("load")
        compare = page.get_by_role("button", name="Compare")
        expect(compare).to_be_disabled()
        page.get_by_label("Pick candidate to compare").check()
        page.get_by_label("Pick baseline to compare").check()
        expect(compare).to_be_enabled()
        screenshot("runs_list")
        compare.click()
        expect(page).to_have_url(re.compile(rf"/compare/\?baseline={baseline.pk}&candidate={candidate.pk}$"))
        expect(page.get_by_test_id("headline")).to_contain_text(re.compile(r"[1-9]\d* regressions?"))
        expect(page.locator("#compare-cases .table-summary")).to_contain_text("regressed cases only")
        rows = page.get_by_test_id("cases-table").locator("tbody tr")
        expect(rows.first).to_contain_text("regressed")
        for status in rows.all_inner_texts():
            assert "regressed" in status
        draw_charts(page)
        scatter = page.get_by_test_id("scatter").locator(".js-plotly-plot")
        expect(scatter).to_be_visible(timeout=WAIT)
        page.wait_for_load_state("load")  # compare.js binds the chart clicks once the page is there
        compare_url = page.url
        screenshot("compare")

        # 5. A click on a point of the paired scatter opens that case's drill-down.
        point = scatter.locator(".scatterlayer .point").first
        expect(point).to_be_attached(timeout=WAIT)
        scatter.scroll_into_view_if_needed()  # below the regressions list: the mouse clicks on screen
        box = point.bounding_box()
        assert box is not None
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        expect(page).to_have_url(re.compile(rf"/runs/{candidate.pk}/cases/\d+/\?baseline={baseline.pk}"),
                                 timeout=WAIT)
        expect(page.get_by_role("navigation", name="Walk the comparison")).to_be_visible()
        screenshot("drilldown_from_scatter")
        page.go_back()
        expect(page).to_have_url(compare_url)
        expect(page.get_by_test_id("cases-table").locator("tbody tr").first).to_contain_text("regressed")

        # 6. Open the first regressed case: the tool-call diff marks the changed argument.
        first = page.get_by_test_id("cases-table").locator("tbody tr").first
        eval_id = first.get_by_role("link").first.inner_text().strip()
        first.get_by_role("link", name=eval_id).click()
        expect(page.get_by_role("heading", name=eval_id)).to_be_visible()
        expect(page.get_by_role("navigation", name="Walk the comparison")).to_contain_text("regressed 1 of")
        changed = page.get_by_test_id("calldiff").locator(".arg-changed").first
        expect(changed).to_be_visible()
        left = changed.locator(".side-left").inner_text()
        right = changed.locator(".side-right").inner_text()
        assert left.strip() and right.strip() and left != right
        screenshot("drilldown_regression")

        # 7. Nothing went wrong in the console, and nothing left the test server.
        assert errors == []
        assert outside == []
    finally:
        context.close()
