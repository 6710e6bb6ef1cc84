"""A team's week in real Chromium (issue 29): alice and bob (members) and vera (a viewer) over
five days of runs of a 40-case eval set with tool calls. Day 1 all pass; day 2 five
regressions on main, which alice confirms, assigns to bob and comments on in one action over
every page of the filtered queue; day 3 the same five plus three flaky cases, shown on home;
day 4 a feature branch with two regressions of its own, listed under main on home, its
comparison showing main's decisions; day 5 the five fixed, leaving bob nothing open. The
counts are asserted at each step; home fits 390 px without scrolling sideways. Screenshots of
home, the runs list, the queue, a case's history, the activity feed and the report are saved
at 1440 and 390 px when EVALSITE_SHOTS names a folder."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from evaluations.models import Project, Triage
from tests.team_helpers import FEATURE_OWN, FLAKY, REGRESSED, day_run, eval_id, team_version, user_in

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = os.environ.get("EVALSITE_SHOTS", "")


def tab_for(chromium: Any, live_server: Any, username: str, width: int = 1440) -> Any:
    context = chromium.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(10_000)
    tab = context.new_page()
    tab.goto(live_server.url + "/accounts/login/")
    tab.get_by_label("Username").fill(username)
    tab.get_by_label("Password").fill(f"{username}-pass-123")
    tab.get_by_role("button", name="Log in").click()
    expect(tab).not_to_have_url(re.compile(r"/accounts/login/"))
    return tab


def shoot(tab: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        width = tab.viewport_size["width"]
        tab.screenshot(path=str(Path(SHOTS) / f"{name}-{width}.png"), full_page=True)


def summary(tab: Any) -> str:
    return tab.get_by_test_id("queue-summary").inner_text()


def test_a_team_reviews_a_week_of_runs(chromium: Any, live_server: Any, acme: Project, alice: Any) -> None:
    bob = user_in(acme, "bob", "member")
    user_in(acme, "vera", "viewer")
    version = team_version(acme)
    url = live_server.url
    alice_tab = tab_for(chromium, live_server, "alice")
    errors: list[str] = []
    alice_tab.on("pageerror", lambda exc: errors.append(str(exc)))

    # Day 1: all pass.
    day1 = day_run(acme, version)
    alice_tab.goto(url + "/")
    main_row = alice_tab.locator('tr[data-branch="main"]')
    expect(main_row).to_contain_text("100%")
    alice_tab.goto(url + reverse("review_queue") + "?tab=untriaged")
    expect(alice_tab.get_by_test_id("queue-summary")).to_contain_text("No untriaged regressions")

    # Day 2: five regressions on main; alice hands them all to bob in one action.
    day2 = day_run(acme, version, wrong=REGRESSED)
    alice_tab.goto(url + "/")
    expect(main_row).to_contain_text("5 regressions")
    expect(main_row.get_by_test_id("baseline-label")).to_have_text(f"vs #{day1.pk} · previous on main")
    alice_tab.goto(url + reverse("review_queue") + "?tab=untriaged")
    alice_tab.locator('select[name="branch"]').select_option("main")
    alice_tab.get_by_role("button", name="Filter").click()
    expect(alice_tab.get_by_test_id("queue-summary")).to_contain_text("5 cases")
    shoot(alice_tab, "queue")
    alice_tab.get_by_test_id("bulk-scope").select_option("all")
    alice_tab.get_by_test_id("bulk-status").select_option("confirmed")
    alice_tab.get_by_test_id("bulk-assignee").select_option(label="bob")
    alice_tab.get_by_test_id("bulk-comment").fill("The lookup ids are off: **bob**, yours.")
    alice_tab.get_by_role("button", name="Apply").click()
    expect(alice_tab.locator(".message-success")).to_contain_text("5 cases marked “Confirmed regression”, "
                                                                  "assigned to bob, commented on.")
    expect(alice_tab.get_by_test_id("queue-summary")).to_contain_text("No untriaged regressions")
    assert Triage.objects.filter(status="confirmed", assignee=bob).count() == 5

    bob_tab = tab_for(chromium, live_server, "bob")
    bob_tab.goto(url + reverse("review_queue"))
    expect(bob_tab.get_by_test_id("nav-assigned")).to_have_text("5")
    expect(bob_tab.get_by_test_id("queue-summary")).to_contain_text("5 cases open and assigned to you")

    # Day 3: the same five, plus three flaky cases, on home.
    day_run(acme, version, wrong=REGRESSED, flaky=FLAKY)
    alice_tab.goto(url + "/")
    expect(main_row.get_by_test_id("home-flaky")).to_have_text("≈ 3")
    expect(main_row.get_by_test_id("baseline-label")).to_have_text(f"vs #{day2.pk} · previous on main")

    # Day 4: a feature branch with two regressions of its own, under main on home.
    feature = day_run(acme, version, wrong=REGRESSED | FEATURE_OWN, branch="feat/x")
    alice_tab.goto(url + "/")
    rows = alice_tab.locator("table.home-branches tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_have_attribute("data-branch", "main")
    expect(rows.nth(1)).to_contain_text("2 regressions")
    expect(rows.nth(1)).to_contain_text("feat/x compared with main")
    expect(alice_tab.get_by_test_id("unlike")).to_have_count(0)
    shoot(alice_tab, "home")
    alice_tab.locator(".home-set > summary").click()  # it folds
    expect(rows.nth(0)).to_be_hidden()
    alice_tab.goto(url + reverse("review_queue") + "?tab=untriaged")
    expect(alice_tab.get_by_test_id("queue-summary")).to_contain_text("2 cases")
    alice_tab.goto(url + reverse("compare") + f"?candidate={feature.pk}&status=all")
    expect(alice_tab.get_by_test_id("main-triage")).to_have_count(5)
    expect(alice_tab.get_by_test_id("main-triage").first).to_contain_text("main: Confirmed regression · bob")
    alice_tab.goto(url + reverse("run_list"))
    expect(alice_tab.get_by_test_id("run-group")).to_have_count(2)
    shoot(alice_tab, "runs")

    # vera reads everything, changes nothing.
    vera_tab = tab_for(chromium, live_server, "vera")
    vera_tab.goto(url + reverse("review_queue") + "?tab=untriaged")
    expect(vera_tab.get_by_test_id("queue-summary")).to_contain_text("2 cases")
    expect(vera_tab.get_by_test_id("bulk-form")).to_have_count(0)
    vera_tab.goto(url + reverse("run_case_by_eval_id", args=[day2.pk]) + f"?eval_id={eval_id(1)}&baseline={day1.pk}")
    history = vera_tab.get_by_test_id("triage-history")
    expect(history.locator("li")).to_have_count(2)
    expect(history).to_contain_text("alice status open → confirmed, assignee none → bob")
    expect(history).to_contain_text("alice commented")
    shoot(vera_tab, "history")

    # Day 5: the five fixed; bob has nothing open.
    day_run(acme, version)
    bob_tab.goto(url + reverse("review_queue"))
    expect(bob_tab.get_by_test_id("queue-summary")).to_contain_text("Nothing open is assigned to you")
    expect(bob_tab.get_by_test_id("nav-assigned")).to_have_count(0)
    bob_tab.goto(url + reverse("review_queue") + "?tab=assigned&state=all")
    expect(bob_tab.get_by_test_id("queue-summary")).to_contain_text("5 cases assigned to you")
    bob_tab.goto(url + reverse("project_activity", args=["acme"]) + f"?eval_id={eval_id(1)}")
    expect(bob_tab.locator(".event")).to_have_count(3)  # confirmed and assigned, the comment, fixed
    shoot(bob_tab, "activity")
    alice_tab.goto(url + reverse("project_report", args=["acme"]))
    expect(alice_tab.get_by_test_id("report-counts")).to_contain_text("5 runs")
    expect(alice_tab.get_by_test_id("report-decisions").locator("tbody tr")).to_have_count(5)
    shoot(alice_tab, "report")

    # At 390 px home leads with the eval set, pass rate and change, and never scrolls sideways.
    phone = tab_for(chromium, live_server, "alice", width=390)
    for name, path in (("home", "/"), ("runs", reverse("run_list")),
                       ("queue", reverse("review_queue") + "?tab=assigned&assignee=bob&state=all"),
                       ("activity", reverse("project_activity", args=["acme"])),
                       ("report", reverse("project_report", args=["acme"])),
                       ("history", reverse("run_case_by_eval_id", args=[day2.pk])
                        + f"?eval_id={eval_id(1)}&baseline={day1.pk}")):
        phone.goto(url + path)
        shoot(phone, name)
        if name == "home":
            assert phone.evaluate("document.documentElement.scrollWidth") <= 390
            head = phone.locator(".home-set > summary")
            expect(head).to_contain_text("support")
            expect(head).to_contain_text("100%")
            expect(head.get_by_test_id("baseline-label")).to_be_visible()
    assert errors == []
