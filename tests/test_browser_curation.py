"""Curation journeys in real Chromium: a member edits a case and reads the new version's diff;
a regression is added to the eval set from the compare page; a viewer cannot edit.
Screenshots (1440 and 390 px wide) go to /tmp/evalsite-curation-*.png for a person to look at."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from evaluations.models import EvalCase, EvalSet, Membership, Project

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

from tests.compare_helpers import generated_outputs, generated_version, make_run

expect = sync_api.expect

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


def log_in(tab: Any, live_server: Any, username: str, password: str) -> None:
    tab.goto(live_server.url + "/accounts/login/")
    tab.get_by_label("Username").fill(username)
    tab.get_by_label("Password").fill(password)
    tab.get_by_role("button", name="Log in").click()
    expect(tab).to_have_url(live_server.url + "/")


def shoot(tab: Any, name: str) -> None:
    tab.screenshot(path=f"/tmp/evalsite-curation-{name}-1440.png", full_page=True)
    tab.set_viewport_size({"width": 390, "height": 844})
    tab.screenshot(path=f"/tmp/evalsite-curation-{name}-390.png", full_page=True)
    overflow = tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    tab.set_viewport_size({"width": 1440, "height": 900})
    assert overflow <= 1, f"{name}: the page is {overflow}px wider than a 390 px screen"


def test_a_member_edits_a_case_and_sees_the_new_version_and_its_diff(
    tab: Any, live_server: Any, alice: Any, acme: Project
) -> None:
    version = generated_version(acme, 8)
    log_in(tab, live_server, "alice", "alice-pass-123")
    tab.goto(f"{live_server.url}/evalsets/{version.evalset_id}/")
    shoot(tab, "evalset")
    tab.get_by_role("link", name="case_0002").click()
    shoot(tab, "case")
    tab.get_by_role("link", name="Edit").click()
    expect(tab.get_by_role("heading", name="Edit case_0002")).to_be_visible()
    shoot(tab, "editor")
    # a mistake first: broken JSON in the expected tool calls is reported and nothing is saved
    tab.get_by_label("Expected tool calls").first.fill('[{"name": "lookup", "args": {"id": 2}')
    tab.get_by_role("button", name="Save as v2").click()
    expect(tab.get_by_role("alert")).to_contain_text("turn 1 · expected tool calls")
    expect(tab.get_by_role("alert")).to_contain_text("Nothing was saved")
    assert version.evalset.versions.count() == 1
    tab.get_by_label("Expected tool calls").first.fill('[{"name": "lookup", "args": {"id": 2, "fresh": true}}]')
    tab.get_by_label("Expected response").first.fill("Item 2 is <b>back</b> in stock.")
    tab.get_by_label("Change note").fill("item 2 restocked")
    tab.get_by_role("button", name="Save as v2").click()

    expect(tab).to_have_url(re.compile(r"/diff/\?from=1&to=2$"))
    expect(tab.get_by_role("heading", name="v1 → v2")).to_be_visible()
    expect(tab.locator(".diff-counts")).to_contain_text("1 changed")
    expect(tab.locator(".case-diff")).to_contain_text("Item 2 is <b>back</b> in stock.")  # shown as text
    expect(tab.locator(".call-diff")).to_contain_text("fresh")
    shoot(tab, "diff")

    tab.goto(f"{live_server.url}/evalsets/{version.evalset_id}/versions/")
    expect(tab.locator(".version-history")).to_contain_text("item 2 restocked")
    expect(tab.locator(".version-history")).to_contain_text("alice")
    shoot(tab, "history")
    assert EvalCase.objects.in_version(EvalSet.objects.get(pk=version.evalset_id).latest_version).get(
        eval_id="case_0002"
    ).conversation[0]["expected_tool_trajectory"][0]["args"] == {"id": 2, "fresh": True}


def test_a_regression_is_promoted_from_the_compare_page(tab: Any, live_server: Any, alice: Any, acme: Project) -> None:
    version = generated_version(acme, 10)
    baseline = make_run(acme, version, generated_outputs(10))
    candidate = make_run(acme, version, generated_outputs(10, wrong={6}))
    log_in(tab, live_server, "alice", "alice-pass-123")
    tab.goto(f"{live_server.url}/compare/?baseline={baseline.pk}&candidate={candidate.pk}")
    form = tab.get_by_test_id("promote-form")
    expect(form).to_contain_text("1 regressed case")
    shoot(tab, "compare")
    form.get_by_label("Change note").fill("the Tokyo regression")
    form.get_by_role("button", name="Add as new cases").click()
    expect(tab).to_have_url(re.compile(r"/diff/\?from=1&to=2$"))
    expect(tab.locator(".diff-counts")).to_contain_text("1 added")
    expect(tab.locator(".case-diff")).to_contain_text(f"case_0006-run{candidate.pk}")
    latest = EvalSet.objects.get(pk=version.evalset_id).latest_version
    assert (latest.how_created, latest.note) == ("promotion", "the Tokyo regression")
    # from the drill-down: the agent's answer proposed as the case's new expectation, edited, saved
    result = candidate.results.get(case__eval_id="case_0006")
    tab.goto(f"{live_server.url}/runs/{candidate.pk}/cases/{result.pk}/?baseline={baseline.pk}")
    shoot(tab, "drilldown")
    tab.get_by_test_id("promote").get_by_role("link", name="new expected answer").click()
    expect(tab.get_by_label("Expected tool calls").first).to_have_value(re.compile(r'"id": 0'))
    shoot(tab, "promote")
    tab.get_by_label("Expected tool calls").first.fill('[{"name": "lookup", "args": {"id": 6}}]')
    tab.get_by_role("button", name="Save as v3").click()
    expect(tab).to_have_url(re.compile(r"/diff/\?from=2&to=3$"))
    assert EvalSet.objects.get(pk=version.evalset_id).latest_version.how_created == "promotion"


def test_a_viewer_reads_but_cannot_edit(tab: Any, live_server: Any, acme: Project) -> None:
    carol = get_user_model().objects.create_user("carol", "carol@example.com", "carol-pass-123")
    Membership.objects.create(project=acme, user=carol, role=Membership.Role.VIEWER)
    version = generated_version(acme, 4)
    baseline = make_run(acme, version, generated_outputs(4))
    candidate = make_run(acme, version, generated_outputs(4, wrong={1}))
    log_in(tab, live_server, "carol", "carol-pass-123")
    tab.goto(f"{live_server.url}/evalsets/{version.evalset_id}/")
    expect(tab.get_by_role("link", name="Versions & diffs")).to_be_visible()
    expect(tab.get_by_role("link", name="Add a case")).to_have_count(0)
    expect(tab.locator("#bulk-form")).to_have_count(0)
    tab.get_by_role("link", name="case_0001").click()
    expect(tab.get_by_role("link", name="Edit")).to_have_count(0)
    case = EvalCase.objects.get(eval_id="case_0001")
    response = tab.goto(f"{live_server.url}/cases/{case.pk}/edit/")
    assert response is not None and response.status == 403
    tab.goto(f"{live_server.url}/compare/?baseline={baseline.pk}&candidate={candidate.pk}")
    expect(tab.get_by_role("heading", name="Compare runs")).to_be_visible()
    tab.wait_for_load_state("networkidle")
    expect(tab.get_by_test_id("promote-form")).to_have_count(0)


def test_the_run_pages_filtered_cases_are_added_from_the_browser(
    tab: Any, live_server: Any, alice: Any, acme: Project
) -> None:
    version = generated_version(acme, 6)
    run = make_run(acme, version, generated_outputs(6, wrong={3}))
    log_in(tab, live_server, "alice", "alice-pass-123")
    tab.goto(f"{live_server.url}/runs/{run.pk}/")
    tab.get_by_label("Status").select_option("failed")  # the table is filtered by htmx, the URL follows
    expect(tab).to_have_url(re.compile(r"status=failed"))
    shoot(tab, "run")
    form = tab.get_by_test_id("promote-table")
    form.get_by_placeholder("change note").fill("the failing case")
    form.get_by_role("button", name="Add filtered cases").click()
    expect(tab).to_have_url(re.compile(r"/diff/\?from=1&to=2$"))
    expect(tab.locator(".diff-counts")).to_contain_text("1 added")
    expect(tab.locator(".case-diff")).to_contain_text(f"case_0003-run{run.pk}")
