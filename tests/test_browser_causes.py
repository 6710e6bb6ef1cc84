"""A reviewer in real Chromium goes from a compare page to a cause, its cases and a bulk
triage: the Causes table names the injected causes of a real eval set, a click filters the
cases table to one cause (in the URL), and triaging its cases marks every one of them and
comes back to the same filtered page."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from django.urls import reverse

from evaluations.models import Project, Triage
from tests.causes_helpers import runs_with_injected

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


def _login(chromium: Any, live_server: Any, width: int) -> Any:
    context = chromium.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(10_000)
    tab = context.new_page()
    tab.goto(live_server.url + "/accounts/login/")
    tab.get_by_label("Username").fill("alice")
    tab.get_by_label("Password").fill("alice-pass-123")
    tab.get_by_role("button", name="Log in").click()
    expect(tab).not_to_have_url(re.compile(r"/accounts/login/"))
    return tab


def test_from_a_compare_page_to_a_cause_its_cases_and_a_bulk_triage(chromium: Any, live_server: Any, alice: Any,
                                                                    acme: Project) -> None:
    baseline, candidate, injected = runs_with_injected(acme, "deepeval-goldens")
    tab = _login(chromium, live_server, 1440)
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.goto(live_server.url + reverse("compare") + f"?baseline={baseline.pk}&candidate={candidate.pk}")

    table = tab.get_by_test_id("causes-table")
    expect(table).to_be_visible()
    rows = table.get_by_test_id("cause-row")
    expect(rows).to_have_count(len(injected.causes))
    timeout_row = rows.filter(has_text="timeout")
    expect(timeout_row.get_by_test_id("cause-cases")).to_have_text(str(injected.causes["timeout"]))
    expect(timeout_row.get_by_test_id("cause-change")).to_have_text("new")

    timeout_row.get_by_test_id("cause-link").click()
    expect(tab).to_have_url(re.compile(r"[?&]cause=\d+"))
    expect(tab.get_by_test_id("cause-chosen")).to_contain_text("timeout")
    cases = tab.get_by_test_id("cases-table").locator("tbody tr")
    expect(cases).to_have_count(len(injected.timed_out))
    for eval_id in injected.timed_out:
        expect(tab.get_by_test_id("cases-table")).to_contain_text(eval_id)
    filtered = tab.url.split("#", 1)[0]  # the fragment stays in the browser: the redirect goes to the page

    form = tab.get_by_test_id("cause-triage")
    form.get_by_label("status").select_option(Triage.Status.CONFIRMED)
    form.get_by_role("button", name="Triage").click()
    expect(tab).to_have_url(filtered)
    expect(tab.locator(".messages")).to_contain_text(
        f"{len(injected.timed_out)} cases marked")
    expect(tab.get_by_test_id("cases-table").get_by_test_id("case-triage").first).to_contain_text(
        "Confirmed regression")
    assert sorted(Triage.objects.filter(candidate=candidate, status=Triage.Status.CONFIRMED)
                  .values_list("eval_id", flat=True)) == sorted(injected.timed_out)
    assert not errors
