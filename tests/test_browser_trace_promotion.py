"""In real Chromium: a member opens a received trace, adds it to an eval set through the case
editor, and sees the new version (a promotion naming the trace) in the history with its diff;
the version history offers the eval set's own tool format, and explains an export that would
lose content. Screenshots (1440 and 390 px wide) go to /tmp/evalsite-trace-promote-*.png."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

from evaluations.accounts.tokens import token_create
from evaluations.evalsets.curation import case_native, evalset_edit, parse_edit
from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.models import EvalCase, Project
from tests.conftest import REALWORLD
from tests.test_pages_evalsets import import_generated
from tests.trace_promotion_helpers import send_agent_trace

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def log_in(tab: Any, live_server: Any) -> None:
    tab.goto(live_server.url + "/accounts/login/")
    tab.get_by_label("Username").fill("alice")
    tab.get_by_label("Password").fill("alice-pass-123")
    tab.get_by_role("button", name="Log in").click()
    expect(tab).to_have_url(live_server.url + "/")


def shoot(tab: Any, name: str) -> None:
    tab.screenshot(path=f"/tmp/evalsite-trace-promote-{name}-1440.png", full_page=True)
    tab.set_viewport_size({"width": 390, "height": 844})
    tab.screenshot(path=f"/tmp/evalsite-trace-promote-{name}-390.png", full_page=True)
    overflow = tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    tab.set_viewport_size({"width": 1440, "height": 900})
    assert overflow <= 1, f"{name}: the page is {overflow}px wider than a 390 px screen"


def test_a_member_adds_a_received_trace_to_an_eval_set(tab: Any, live_server: Any, alice: Any, acme: Project) -> None:
    target = import_generated(acme, 4, eval_set_id="support")
    trace = send_agent_trace(token_create(user=alice, name="otel").secret)
    log_in(tab, live_server)
    tab.goto(f"{live_server.url}/traces/")
    tab.get_by_role("link", name="weather-agent").first.click()
    expect(tab.get_by_test_id("trace-promote")).to_be_visible()
    shoot(tab, "trace")
    tab.get_by_label("Add to eval set").select_option(str(target.evalset.pk))
    tab.get_by_role("button", name="Add as a new case…").click()
    expect(tab.get_by_role("heading", name=re.compile(r"^Add trace weather-agent to"))).to_be_visible()
    # the proposal, from the spans, as text (the answer's markup is not run)
    expect(tab.get_by_label("Expected response").first).to_have_value("It is <script>alert(1)</script> sunny")
    expect(tab.get_by_label("Expected tool calls").first).to_have_value(re.compile(r'"city": "Paris"'))
    shoot(tab, "editor")
    tab.get_by_label("Expected response").first.fill("It is sunny in Paris.")
    tab.get_by_role("button", name="Save as v2").click()

    expect(tab).to_have_url(re.compile(r"/diff/\?from=1&to=2$"))
    expect(tab.get_by_text(f"trace-{trace.trace_id[:12]}").first).to_be_visible()
    expect(tab.locator("pre", has_text="It is sunny in Paris.").first).to_be_attached()
    shoot(tab, "diff")
    tab.goto(f"{live_server.url}/evalsets/{target.evalset.pk}/versions/")
    row = tab.locator("table.version-history tbody tr").first
    expect(row).to_contain_text("promotion")
    expect(row).to_contain_text(f"from trace {trace.trace_id}")
    row.get_by_role("link", name="diff with v1").click()
    expect(tab).to_have_url(re.compile(r"/diff/\?from=1&to=2$"))


def test_the_history_offers_the_tools_format_and_explains_a_loss(
    tab: Any, live_server: Any, alice: Any, acme: Project
) -> None:
    folder = "google-adk/ecommerce_customer_service_agent/"
    files = [
        SourceFile(folder + n, (REALWORLD / folder / n).read_bytes())
        for n in ("order_query.test.json", "test_config.json")
    ]
    version = evalset_import(project=acme, files=files)[0].version
    log_in(tab, live_server)
    tab.goto(f"{live_server.url}/evalsets/{version.evalset_id}/versions/")
    with tab.expect_download() as download:
        tab.get_by_role("link", name="ADK").click()
    assert download.value.suggested_filename.endswith(".zip")
    shoot(tab, "history")
    tab.goto(f"{live_server.url}/evalsets/{version.evalset_id}/")
    expect(tab.get_by_role("link", name="ADK")).to_be_visible()
    shoot(tab, "evalset")

    row = EvalCase.objects.in_version(version).get()
    case = case_native(row)
    case["tags"] = ["<b>vip</b>"]
    change = {"base_version": 1, "note": "tag it", "changes": [{"op": "put", "eval_id": row.eval_id, "case": case}]}
    evalset_edit(evalset=version.evalset, edit=parse_edit(change), user=alice, how="edit")
    tab.goto(f"{live_server.url}/evalsets/{version.evalset_id}/versions/")
    tab.locator("table.version-history tbody tr").first.get_by_role("link", name="ADK").click()
    expect(tab.get_by_role("heading", name="v2 cannot be written as ADK exactly")).to_be_visible()
    expect(tab.get_by_test_id("export-losses")).to_contain_text("ADK eval cases have no tags")
    expect(tab.get_by_test_id("export-losses")).to_contain_text(f"case {row.eval_id} · tags")
    shoot(tab, "loss")
