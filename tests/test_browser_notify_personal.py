"""Issue 41, item 4, in real Chromium at 1440 and 390 px: bob opens his notifications, reads
that nothing brings him his assignments or @mentions in Acme, turns them on in one click, and
after alice's bulk action on three cases in the review queue (assign to bob, one comment
mentioning him) finds one notification listing the three cases. With EVALSITE_SHOTS=<folder>,
the pages are photographed at both widths (the notifications page, the review queue, the
threads list)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

from evaluations.models import Notification, Project
from tests.team_helpers import REGRESSED, day_run, eval_id, team_version, user_in

expect = sync_api.expect
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def tab_for(chromium: Any, live_server: Any, username: str, password: str, width: int) -> Any:
    context = chromium.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(15_000)
    tab = context.new_page()
    tab.goto(live_server.url + "/accounts/login/")
    tab.get_by_label("Username").fill(username)
    tab.get_by_label("Password").fill(password)
    tab.get_by_role("button", name="Log in").click()
    expect(tab).not_to_have_url(re.compile(r"/accounts/login/"))
    return tab


def shoot(tab: Any, name: str) -> None:
    width = tab.evaluate("document.documentElement.scrollWidth")
    viewport = tab.viewport_size["width"]
    assert width <= viewport, f"{name}: the page scrolls sideways ({width} > {viewport})"
    folder = os.environ.get("EVALSITE_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(Path(folder) / f"{name}-{viewport}.png"), full_page=True)


@pytest.mark.parametrize("width", [1440, 390])
def test_bob_turns_on_his_assignments_and_mentions_and_gets_one_message_for_a_bulk_action(
        chromium: Any, live_server: Any, alice: Any, acme: Project, width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)  # the queue's tasks run where they are queued
    version = team_version(acme)
    day_run(acme, version)
    day_run(acme, version, wrong=REGRESSED)
    bob = user_in(acme, "bob", "member")
    problems: list[str] = []
    tab = tab_for(chromium, live_server, "bob", "bob-pass-123", width)
    tab.on("pageerror", lambda exc: problems.append(str(exc)))
    tab.goto(live_server.url + "/notifications/")
    routes = tab.get_by_test_id("personal-route")
    expect(routes.nth(0)).to_contain_text("Cases assigned to you: nothing is sent — no rule is on")
    expect(routes.nth(1)).to_contain_text("Your @mentions: nothing is sent — no rule is on")
    expect(tab.get_by_text("come to you by name)")).to_have_count(0)
    shoot(tab, "notifications-off")
    tab.get_by_test_id("personal-on").click()
    expect(tab.get_by_text("now come to you")).to_be_visible()
    expect(routes.nth(0)).to_contain_text("✓ on")
    expect(routes.nth(1)).to_contain_text("✓ on")
    expect(tab.get_by_test_id("personal-on")).to_have_count(0)
    shoot(tab, "notifications-on")

    lead = tab_for(chromium, live_server, "alice", "alice-pass-123", width)
    lead.goto(live_server.url + "/review/?tab=untriaged")
    shoot(lead, "review-queue")
    for i in sorted(REGRESSED)[:3]:
        lead.locator(f"input[name=case][value$=':{eval_id(i)}']").check()
    form = lead.get_by_test_id("bulk-form")
    form.get_by_test_id("bulk-assignee").select_option(label="bob")
    form.locator("textarea[name=comment]").fill("@bob these three broke with the lookup change")
    form.locator("button[type=submit]").click()
    expect(lead.get_by_text("3 cases assigned to bob, commented on.")).to_be_visible()
    lead.goto(live_server.url + "/threads/")
    shoot(lead, "threads")

    assert Notification.objects.filter(user=bob).count() == 1
    tab.goto(live_server.url + "/notifications/")
    note = tab.get_by_test_id("notification")
    expect(note).to_have_count(1)
    expect(note).to_contain_text("alice assigned you 3 cases and mentioned you on 3 cases")
    expect(note).to_contain_text("“@bob these three broke with the lookup change”")
    for i in sorted(REGRESSED)[:3]:
        expect(note.get_by_role("link", name=eval_id(i))).to_have_count(2)  # under the assignment and the mention
    shoot(tab, "notifications-one-message")
    assert problems == []
