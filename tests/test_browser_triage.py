"""Two teammates triage the same regression in real Chromium, each in their own browser
context: alice confirms it and comments (Markdown, with a script payload); bob reloads,
sees both (the comment rendered, the script inert) and replies; alice reloads and sees the
reply threaded under her comment."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from django.urls import reverse

from evaluations.models import CaseResult, Comment, Membership, Project, Triage
from tests.compare_helpers import baseline_and_candidate

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect

XSS = "<script>window.__xss=1</script>"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]




def tab_for(chromium: Any, live_server: Any, username: str, password: str) -> Any:
    context = chromium.new_context(viewport={"width": 1366, "height": 860})
    context.set_default_timeout(10_000)
    tab = context.new_page()
    tab.goto(live_server.url + "/accounts/login/")
    tab.get_by_label("Username").fill(username)
    tab.get_by_label("Password").fill(password)
    tab.get_by_role("button", name="Log in").click()
    expect(tab).not_to_have_url(re.compile(r"/accounts/login/"))
    return tab


def test_two_teammates_triage_the_same_regression(chromium: Any, live_server: Any, alice: Any, bob: Any,
                                                  acme: Project) -> None:
    Membership.objects.create(project=acme, user=bob, role=Membership.Role.MEMBER)
    baseline, candidate = baseline_and_candidate(acme)
    result = CaseResult.objects.get(run=candidate, case__eval_id="weather_tokyo", iteration=0)
    url = live_server.url + reverse("run_case", args=[candidate.pk, result.pk]) + f"?baseline={baseline.pk}"
    alice_tab = tab_for(chromium, live_server, "alice", "alice-pass-123")
    bob_tab = tab_for(chromium, live_server, "bob", "bob-pass-123")
    errors: list[str] = []
    for tab in (alice_tab, bob_tab):
        tab.on("pageerror", lambda exc: errors.append(str(exc)))

    # alice confirms the regression, assigns it to bob, and comments.
    alice_tab.goto(url)
    panel = alice_tab.locator("#triage-panel")
    expect(panel.get_by_test_id("triage-status")).to_have_text("untriaged")
    panel.get_by_label("Status").select_option(label="Confirmed regression")
    panel.get_by_label("Assignee").select_option(label="bob")
    panel.get_by_role("button", name="Save triage").click()
    expect(panel.get_by_test_id("triage-status")).to_have_text("Confirmed regression")
    expect(panel.get_by_test_id("triage-assignee")).to_have_text("bob")
    panel.get_by_label("Comment").fill(f"**Kyoto**, not Tokyo: see `get_weather` {XSS}")
    panel.get_by_role("button", name="Comment").click()
    expect(panel.get_by_test_id("comment")).to_have_count(1)
    expect(panel.locator(".comment-body strong")).to_have_text("Kyoto")
    assert alice_tab.url == url  # htmx swapped the panel in place
    alice_tab.screenshot(path="/tmp/triage.png", full_page=True)

    # bob reloads: the status, the assignee and the comment, rendered and inert.
    bob_tab.goto(url)
    panel = bob_tab.locator("#triage-panel")
    expect(panel.get_by_test_id("triage-status")).to_have_text("Confirmed regression")
    expect(panel.get_by_test_id("triage-assignee")).to_have_text("bob")
    body = panel.locator(".comment-body").first
    expect(body.locator("strong")).to_have_text("Kyoto")
    expect(body.locator("code")).to_have_text("get_weather")
    expect(body).to_contain_text(XSS)  # shown as text
    assert bob_tab.evaluate("window.__xss") is None
    assert panel.locator(".comment-body script").count() == 0
    panel.locator(".comment-reply summary").first.click()
    panel.get_by_label("Reply to alice").fill("On it: _the geocoder_ changed.")
    panel.get_by_role("button", name="Reply", exact=True).click()
    expect(panel.locator(".comment-replies .comment-body em")).to_have_text("the geocoder")

    # alice reloads and sees the reply threaded under her comment.
    alice_tab.reload()
    panel = alice_tab.locator("#triage-panel")
    first = panel.get_by_test_id("comment").first
    expect(first.locator(".comment-replies [data-testid=comment]")).to_have_count(1)
    expect(first.locator(".comment-replies .comment-meta strong")).to_have_text("bob")
    expect(first.locator(".comment-replies .comment-body")).to_contain_text("the geocoder changed.")
    assert alice_tab.evaluate("window.__xss") is None
    assert not errors

    triage = Triage.objects.get(eval_id="weather_tokyo", baseline=baseline, candidate=candidate)
    assert triage.status == "confirmed" and triage.assignee == bob
    reply = Comment.objects.get(author=bob)
    assert reply.parent is not None and reply.parent.author == alice
    for tab in (alice_tab, bob_tab):
        tab.context.close()
