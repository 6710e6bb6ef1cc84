"""An admin makes a monitor rule in real Chromium (the form shows the fields its kind uses,
through static/js/notify.js under the strict CSP), and a person reads a notification whose
text tried to run a script, from the unread count in the navigation, on a phone's width."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from evaluations.models import Membership, Monitor, Notification, NotifyChannel, NotifyMessage, NotifyRule, Project

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect
XSS = "<img src=x onerror=window.__xss=1>"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def tab_for(chromium: Any, live_server: Any, username: str, password: str, width: int) -> Any:
    context = chromium.new_context(viewport={"width": width, "height": 860})
    context.set_default_timeout(10_000)
    tab = context.new_page()
    tab.goto(live_server.url + "/accounts/login/")
    tab.get_by_label("Username").fill(username)
    tab.get_by_label("Password").fill(password)
    tab.get_by_role("button", name="Log in").click()
    expect(tab).not_to_have_url(re.compile(r"/accounts/login/"))
    return tab


def test_an_admin_makes_a_monitor_rule_and_a_person_reads_their_notification(chromium: Any, live_server: Any,
                                                                              alice: Any, acme: Project) -> None:
    dana = get_user_model().objects.create_user("dana", "dana@example.com", "dana-pass-123")
    Membership.objects.create(project=acme, user=dana, role=Membership.Role.ADMIN)
    NotifyChannel.objects.create(project=acme, name="In-app", kind="inapp")
    monitor = Monitor.objects.create(project=acme, name="answers", criteria={"safety": {"evaluator": "json_valid"}})
    admin = tab_for(chromium, live_server, "dana", "dana-pass-123", 1440)
    problems: list[str] = []
    admin.on("pageerror", lambda exc: problems.append(str(exc)))
    admin.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    admin.goto(live_server.url + "/projects/acme/members/")
    admin.get_by_test_id("project-notifications").click()
    admin.get_by_test_id("rule-new").click()
    expect(admin.get_by_label("Monitor criterion")).to_be_hidden()
    expect(admin.get_by_label("Branch")).to_be_visible()
    admin.get_by_label("When").select_option("monitor")
    expect(admin.get_by_label("Branch")).to_be_hidden()
    admin.get_by_label("Name").fill("safety monitor")
    admin.get_by_label("Monitor", exact=True).select_option(str(monitor.pk))
    admin.get_by_label("Monitor criterion").fill("safety")
    admin.get_by_label("Monitor pass rate below (0 to 1)").fill("0.95")
    admin.get_by_label("In-app").check()
    admin.get_by_role("button", name="Save rule").click()
    expect(admin.get_by_test_id("rule-row")).to_contain_text("answers safety < 0.95 over 60 min")
    rule = NotifyRule.objects.get()
    assert (rule.monitor_id, rule.criterion, rule.threshold) == (monitor.pk, "safety", 0.95)
    assert problems == []  # no CSP violation, no script error

    message = NotifyMessage.objects.create(project=acme, rule=rule, event="monitor", subject=f"[Acme] {XSS}",
                                           payload={"items": [{"type": "monitor", "verdict": XSS}]})
    Notification.objects.create(user=alice, project=acme, message=message)
    phone = tab_for(chromium, live_server, "alice", "alice-pass-123", 390)
    phone.goto(live_server.url + "/runs/")
    phone.get_by_role("button", name="Menu").click()
    expect(phone.get_by_test_id("nav-unread")).to_have_text("1")
    phone.get_by_test_id("nav-notifications").click()
    expect(phone.get_by_test_id("notification")).to_contain_text(XSS)  # shown as text
    assert phone.evaluate("window.__xss") is None
    assert phone.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    phone.get_by_test_id("read-all").click()
    expect(phone.get_by_test_id("nav-unread")).to_have_count(0)
    assert not Notification.objects.filter(user=alice, read_at=None).exists()
