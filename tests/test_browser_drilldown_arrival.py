"""One drill-down, in real Chromium (issue 41, 8): whichever link opens a case — the run page's
cases table, a cause's example on the run page or the compare page, the trend's failing cases,
the N-way case page, the review queue — the page shows the comparison it belongs to (the
default baseline when none is named), the triage panel and previous / next. A cause's triage
control sits with its filtered cases table, in view after the click, and takes an assignee."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from evaluations.models import Membership, Project, Run, Triage
from tests.causes_helpers import runs_with_injected
from tests.compare_helpers import baseline_and_candidate

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


def _login(chromium: Any, live_server: Any, width: int = 1440, height: int = 900) -> Any:
    context = chromium.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(10_000)
    tab = context.new_page()
    tab.goto(live_server.url + "/accounts/login/")
    tab.get_by_label("Username").fill("alice")
    tab.get_by_label("Password").fill("alice-pass-123")
    tab.get_by_role("button", name="Log in").click()
    expect(tab).not_to_have_url(re.compile(r"/accounts/login/"))
    return tab


def _is_one_drilldown(tab: Any, baseline: Run) -> None:
    """The same page whatever the way in: the comparison, the triage panel, previous / next."""
    expect(tab).to_have_url(re.compile(r"/runs/\d+/cases/\d+/"))
    expect(tab.get_by_text(re.compile(rf"compared with #{baseline.pk}\b"))).to_be_visible()
    expect(tab.get_by_test_id("triage-panel")).to_be_visible()
    walk = tab.get_by_role("navigation", name="Walk the comparison")
    expect(walk).to_be_visible()
    expect(walk.get_by_role("link", name="Back to the comparison")).to_have_attribute(
        "href", re.compile(rf"baseline={baseline.pk}"))


def test_every_way_into_a_case_lands_on_the_same_drill_down(chromium: Any, live_server: Any, alice: Any,
                                                             acme: Project) -> None:
    baseline, candidate = baseline_and_candidate(acme)
    tab = _login(chromium, live_server)
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    # the run page's cases table
    tab.goto(live_server.url + reverse("run_detail", args=[candidate.pk]) + "?status=failed")
    tab.locator("#results-table").get_by_role("link", name="order_status").click()
    _is_one_drilldown(tab, baseline)
    # a cause's example on the run page
    tab.goto(live_server.url + reverse("run_detail", args=[candidate.pk]))
    tab.get_by_test_id("causes-table").get_by_role("link", name="order_status").click()
    _is_one_drilldown(tab, baseline)
    # a cause's example on the compare page
    tab.goto(live_server.url + reverse("compare") + f"?baseline={baseline.pk}&candidate={candidate.pk}")
    tab.get_by_test_id("causes-table").get_by_role("link", name="order_status").click()
    _is_one_drilldown(tab, baseline)
    # the trend's failing cases
    tab.goto(live_server.url + reverse("evalset_trend", args=[candidate.evalset_version.evalset_id]))
    tab.get_by_test_id("failing-since").filter(has_text=f"since #{candidate.pk}").first.get_by_role("link").click()
    _is_one_drilldown(tab, baseline)
    # the N-way case page
    tab.goto(live_server.url + reverse("nway_case") + f"?runs={baseline.pk},{candidate.pk}&case=order_status")
    tab.get_by_role("link", name="open in the run").nth(1).click()
    _is_one_drilldown(tab, baseline)
    # the review queue
    tab.goto(live_server.url + reverse("review_queue") + "?tab=untriaged")
    tab.get_by_role("link", name="order_status").first.click()
    _is_one_drilldown(tab, baseline)
    # and previous / next walk on from there
    walk = tab.get_by_role("navigation", name="Walk the comparison")
    walk.get_by_role("link", name=re.compile("Next|Previous")).first.click()
    _is_one_drilldown(tab, baseline)
    assert not errors


def test_a_causes_triage_control_is_in_view_with_its_table_and_assigns(chromium: Any, live_server: Any, alice: Any,
                                                                       acme: Project) -> None:
    carol = get_user_model().objects.create_user("carol", password="carol-pass-123")
    Membership.objects.create(project=acme, user=carol, role=Membership.Role.MEMBER)
    baseline, candidate, injected = runs_with_injected(acme, "deepeval-goldens")
    tab = _login(chromium, live_server, 1440, 900)
    tab.goto(live_server.url + reverse("compare") + f"?baseline={baseline.pk}&candidate={candidate.pk}")
    tab.get_by_test_id("causes-table").get_by_test_id("cause-row").filter(has_text="timeout") \
        .get_by_test_id("cause-link").click()
    expect(tab).to_have_url(re.compile(r"[?&]cause=\d+"))
    form = tab.get_by_test_id("cause-triage")
    expect(form).to_be_in_viewport()  # not 800 px above it: it sits with the filtered table
    box = form.bounding_box()
    table = tab.get_by_test_id("cases-table").bounding_box()
    assert box is not None and table is not None and 0 <= box["y"] < 900 and 0 <= box["y"] < table["y"]
    filtered = tab.url.split("#", 1)[0]
    form.get_by_label("status").select_option(Triage.Status.CONFIRMED)
    form.get_by_label("assignee").select_option(label="carol")
    form.get_by_label("comment").fill("the timeouts of the new retry policy")
    form.get_by_role("button", name="Triage").click()
    expect(tab).to_have_url(filtered)
    expect(tab.locator(".messages")).to_contain_text("assigned to carol")
    triaged = Triage.objects.filter(candidate=candidate, eval_id__in=injected.timed_out)
    assert triaged.count() == len(injected.timed_out)
    assert set(triaged.values_list("status", "assignee__username")) == {(Triage.Status.CONFIRMED, "carol")}


@pytest.mark.parametrize("width", [390])
def test_the_causes_controls_fit_a_phone(chromium: Any, live_server: Any, alice: Any, acme: Project,
                                         width: int) -> None:
    baseline, candidate, _ = runs_with_injected(acme, "deepeval-goldens")
    tab = _login(chromium, live_server, width, 844)
    tab.goto(live_server.url + reverse("compare") + f"?baseline={baseline.pk}&candidate={candidate.pk}")
    tab.get_by_test_id("causes-table").get_by_test_id("cause-link").first.click()
    form = tab.get_by_test_id("cause-triage")
    expect(form).to_be_in_viewport()
    overflow = tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 1
