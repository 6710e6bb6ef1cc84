"""The trace journey in real Chromium: traces an agent sent are in the project's trace list,
a search narrows it without a reload, and a trace opens in its drawn span waterfall; a span
name holding markup stays text; no console errors (the Content-Security-Policy holds)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # playwright's loop runs in this thread

from django.test import Client

from evaluations.accounts.tokens import token_create
from evaluations.models import Project
from tests.otlp_helpers import T0, post, request_of, span

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

XSS = '<img src=x onerror="window.__xss=1">'


@pytest.fixture
def page(chromium: Any) -> Iterator[tuple[Any, list[str]]]:
    context = chromium.new_context(viewport={"width": 1366, "height": 900})
    context.set_default_timeout(10_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" and "favicon" not in
           m.location.get("url", "") else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    yield tab, errors
    context.close()


def test_a_trace_is_found_in_the_list_and_opens_in_its_waterfall(page: Any, live_server: Any, acme: Project,
                                                                 alice: Any) -> None:
    tab, errors = page
    token = token_create(user=alice, name="agent").secret
    client = Client()
    for n, name in enumerate(["checkout agent", "refund agent", XSS]):
        trace_id, root = os.urandom(16), os.urandom(8)
        spans = [span(trace_id, root, b"", name, T0 + n, T0 + n + 2_000_000_000, {"openinference.span.kind": "AGENT"}),
                 span(trace_id, os.urandom(8), root, "tool lookup_order", T0 + n + 100_000_000,
                      T0 + n + 900_000_000, {"openinference.span.kind": "TOOL", "tool.name": "lookup_order"})]
        assert post(client, request_of(spans, resource={"service.name": "shop"}), token).status_code == 200

    tab.goto(live_server.url + "/traces/")
    tab.get_by_label("Username").fill("alice")
    tab.get_by_label("Password").fill("alice-pass-123")
    tab.get_by_role("button", name="Log in").click()
    tab.goto(live_server.url + "/traces/")
    table = tab.locator("#traces-table")
    assert "of 3 traces" in table.inner_text()
    assert tab.get_by_text(XSS).count() == 1  # shown as text
    tab.get_by_placeholder("name, trace id, thread, eval id").fill("refund")
    from playwright.sync_api import expect

    expect(table).to_contain_text("of 1 trace")  # htmx swapped the table
    assert "refund" in tab.url  # the search is in the URL, for a link to a teammate
    tab.get_by_role("link", name="refund agent").click()
    tab.wait_for_selector("[data-testid=waterfall] .main-svg")  # plotly drew it
    assert tab.locator("[data-testid=waterfall] .main-svg").count() >= 1
    assert tab.get_by_role("cell", name="tool lookup_order", exact=True).count() == 1
    assert tab.evaluate("window.__xss") is None
    assert errors == []
