"""The monitor journey in real Chromium (issue 31): the monitors list, a monitor's page with
its drawn chart and failing traces, a failure opening its trace with the failed criteria
beside the waterfall, a thread read as a conversation; markup in agent answers stays text;
no console errors (the Content-Security-Policy holds); no sideways scroll on a phone.

With EVALSITE_SHOTS=<folder>, every page is also photographed at 1440 and 390 px wide."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # playwright's loop runs in this thread

from django.test import Client

from evaluations.accounts.tokens import token_create
from evaluations.models import Membership, Monitor, MonitorResult, Project, Retention, RetentionSweep
from evaluations.monitors import scoring
from evaluations.monitors.services import monitor_create
from evaluations.monitors.spec import MonitorSpec
from tests.monitor_helpers import agent_trace, spec
from tests.otlp_helpers import post

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

XSS = '<img src=x onerror="window.__xss=1">'


@pytest.fixture
def page(chromium: Any) -> Iterator[tuple[Any, list[str]]]:
    context = chromium.new_context(viewport={"width": 1440, "height": 900})
    context.set_default_timeout(15_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" and "favicon" not in
           m.location.get("url", "") else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    yield tab, errors
    context.close()


def _seed(project: Project, user: Any) -> Monitor:
    Membership.objects.filter(user=user).update(role=Membership.Role.ADMIN)
    token = token_create(user=user, name="agent").secret
    monitor = monitor_create(project=project, spec=MonitorSpec.model_validate(spec(name="production answers")),
                             user=user)
    monitor_create(project=project, spec=MonitorSpec.model_validate(spec(
        name="conversations", level="thread", idle_seconds=1,
        criteria={"no_tool_errors": {"evaluator": "tool_errors"}})), user=user)
    client = Client()
    answers = ['{"city": "Paris", "days": 3}', "Lyon is lovely", XSS, '{"city": "Paris"}', "Paris, then Nice"]
    for n in range(15):
        message = agent_trace(answers[n % 5], session=f"conversation-{n % 4}", user=f"user-{n % 3}",
                              env="prod" if n % 4 else "staging", tool_error="weather service down" if n % 6 == 0
                              else "", seconds=0.4 + n * 0.3, tokens=120 + 40 * n)
        assert post(client, message, token).status_code == 200
    from evaluations.models import Trace

    scoring.score_traces(list(Trace.objects.values_list("pk", flat=True)))
    from datetime import timedelta

    from django.utils import timezone

    scoring.sweep_threads(timezone.now() + timedelta(seconds=5))
    Retention.objects.create(project=project, days=30)
    RetentionSweep.objects.create(project=project, cutoff=timezone.now() - timedelta(days=30), traces=1200, results=2400)
    return monitor


def _shoot(tab: Any, name: str) -> None:
    folder = os.environ.get("EVALSITE_SHOTS")
    width = tab.evaluate("document.documentElement.scrollWidth")
    viewport = tab.viewport_size["width"]
    assert width <= viewport, f"{name}: the page scrolls sideways ({width} > {viewport})"
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(Path(folder) / f"{name}-{viewport}.png"), full_page=True)


def test_the_monitor_journey(page: Any, live_server: Any, acme: Project, alice: Any) -> None:
    from playwright.sync_api import expect

    tab, errors = page
    monitor = _seed(acme, alice)
    tab.goto(live_server.url + "/monitors/")
    tab.get_by_label("Username").fill("alice")
    tab.get_by_label("Password").fill("alice-pass-123")
    tab.get_by_role("button", name="Log in").click()
    failing = MonitorResult.objects.filter(monitor=monitor, passed=False).select_related("trace").first()
    assert failing is not None and failing.trace is not None
    thread = MonitorResult.objects.filter(trace__isnull=True, passed=False).first()
    assert thread is not None
    pages = [("monitors", "/monitors/"), ("monitor", f"/monitors/{monitor.pk}/"),
             ("monitor-edit", f"/monitors/{monitor.pk}/edit/"), ("monitor-new", "/monitors/new/"),
             ("trace-with-verdicts", f"/traces/{failing.trace_id}/"), ("threads", "/threads/"),
             ("thread", f"/threads/view/?id={thread.thread_id}"), ("retention", "/projects/acme/retention/"),
             ("home", "/")]
    for width in (1440, 390):
        tab.set_viewport_size({"width": width, "height": 900})
        for name, path in pages:
            tab.goto(live_server.url + path)
            if name in {"monitor", "trace-with-verdicts"}:
                tab.wait_for_selector(".js-plotly-plot .main-svg")
            _shoot(tab, name)
    tab.set_viewport_size({"width": 1440, "height": 900})

    tab.goto(live_server.url + "/monitors/")
    tab.get_by_role("link", name="production answers").click()
    expect(tab.get_by_test_id("monitor-cards")).to_contain_text("of 15 traces")
    tab.wait_for_selector("[data-testid=monitor-chart] .js-plotly-plot .main-svg")
    tab.locator("[data-testid=monitor-failing] a[href^='/traces/']").first.click()
    verdicts = tab.get_by_test_id("trace-verdicts")
    expect(verdicts).to_contain_text("production answers")
    expect(verdicts).to_contain_text("✗ failed")
    expect(tab.get_by_test_id("waterfall")).to_be_visible()
    expect(tab.get_by_test_id("trace-promote")).to_be_visible()

    tab.goto(live_server.url + f"/monitors/{monitor.pk}/?environment=staging")
    expect(tab.get_by_test_id("monitor-cards")).to_contain_text("of 4 traces")
    tab.goto(live_server.url + "/threads/view/?id=conversation-2")
    expect(tab.get_by_test_id("thread-turns")).to_contain_text(XSS)  # shown as text
    assert tab.evaluate("window.__xss") is None
    assert errors == []
