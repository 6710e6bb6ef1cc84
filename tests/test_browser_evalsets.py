"""The eval-set journeys in real Chromium: log in, upload, browse, filter, open a case.

Debian's chromium (`apt-get install -y chromium`) is driven through playwright's sync API;
playwright's own browser downloads are never used. Screenshots of the eval-set detail and the
case page go to /tmp for a person to look at.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.models import EvalSet, Membership, Project
from tests.conftest import DATA

# playwright's sync API runs an event loop in this thread; Django would otherwise refuse the
# ORM calls the test makes while it is running.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect

PAGES = DATA / "pages"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]




def new_tab(chromium: Any, **options: Any) -> Any:
    context = chromium.new_context(viewport={"width": 1366, "height": 860}, **options)
    context.set_default_timeout(10_000)
    return context.new_page()


@pytest.fixture
def tab(chromium: Any) -> Iterator[Any]:
    page = new_tab(chromium)
    yield page
    page.context.close()


def log_in(tab: Any, live_server: Any, username: str = "alice", password: str = "alice-pass-123") -> None:
    tab.goto(live_server.url + "/")
    expect(tab).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    tab.get_by_label("Username").fill(username)
    tab.get_by_label("Password").fill(password)
    tab.get_by_role("button", name="Log in").click()
    expect(tab).to_have_url(live_server.url + "/")


def test_a_member_uploads_an_evalset_filters_its_cases_and_opens_one(
    tab: Any, live_server: Any, alice: Any, acme: Project
) -> None:
    log_in(tab, live_server)
    expect(tab.get_by_text("No eval sets in Acme yet")).to_be_visible()

    tab.get_by_role("navigation", name="Main").get_by_role("link", name="Upload").click()
    tab.locator("input[type=file]").set_input_files(str(PAGES / "weather.evalset.json"))
    expect(tab.locator("[data-dropzone-files]")).to_contain_text("weather.evalset.json")
    tab.get_by_role("button", name="Upload").click()

    panel = tab.locator(".result-panel")
    expect(panel).to_contain_text("New version v1 stored")
    expect(panel).to_contain_text("native")
    expect(panel.locator(".facts")).to_contain_text("3")

    panel.get_by_role("link", name="Open cases").click()
    expect(tab.get_by_role("heading", name="Weather Agent Tests")).to_be_visible()
    rows = tab.locator("#cases-table tbody tr")
    expect(rows).to_have_count(3)
    tab.screenshot(path="/tmp/evalset_detail.png", full_page=True)

    tab.wait_for_load_state()  # htmx is loaded with `defer`: as a person would, type once the page is there
    tab.get_by_label("Search cases").fill("tokyo")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("basic_weather")
    expect(tab).to_have_url(re.compile(r"q=tokyo"))  # filters live in the URL

    rows.first.get_by_role("link", name="basic_weather").click()
    expect(tab.get_by_role("heading", name="basic_weather")).to_be_visible()
    expect(tab.locator(".turn")).to_have_count(1)
    expect(tab.locator(".tool-call")).to_contain_text("get_weather")
    expect(tab.locator(".tool-call")).to_contain_text('"city": "Tokyo"')
    tab.locator(".tool-result > summary").click()
    expect(tab.locator(".tool-result")).to_contain_text('"temp_c": 22')
    tab.screenshot(path="/tmp/case_detail.png", full_page=True)


def test_the_tag_filter_and_pagination_work_in_the_browser(
    tab: Any, live_server: Any, alice: Any, acme: Project
) -> None:
    cases = [
        {"eval_id": f"case_{i:03d}", "tags": ["even" if i % 2 == 0 else "odd"],
         "conversation": [{"invocation_id": "t1", "user_content": {"role": "user", "content": f"question {i}"}}]}
        for i in range(120)
    ]
    body = json.dumps({"eval_set_id": "big", "eval_cases": cases}).encode()
    outcome = evalset_import(project=acme, files=[SourceFile("big.evalset.json", body)])[0]
    log_in(tab, live_server)
    tab.goto(f"{live_server.url}/evalsets/{outcome.evalset.pk}/")
    expect(tab.locator("#cases-table tbody tr")).to_have_count(50)
    tab.wait_for_load_state()
    tab.get_by_label("Tag", exact=True).select_option("odd")
    expect(tab.locator(".table-summary")).to_contain_text("of 60 matching cases")
    tab.get_by_role("link", name="Next →").click()
    expect(tab.locator("#cases-table tbody tr")).to_have_count(10)
    expect(tab.locator("#cases-table")).to_contain_text("case_119")
    expect(tab.get_by_label("Tag", exact=True)).to_have_value("odd")


def test_the_plain_file_input_uploads_without_javascript(
    chromium: Any, live_server: Any, alice: Any, acme: Project
) -> None:
    tab = new_tab(chromium, java_script_enabled=False)
    try:
        log_in(tab, live_server)
        tab.goto(live_server.url + "/evalsets/upload/")
        tab.locator("input[type=file]").set_input_files(str(PAGES / "weather.evalset.json"))
        tab.get_by_role("button", name="Upload").click()
        expect(tab.locator(".result-panel")).to_contain_text("New version v1 stored")
    finally:
        tab.context.close()
    assert EvalSet.objects.get().eval_set_id == "weather_agent_v1"


def test_html_in_a_case_is_shown_as_text_and_never_runs(
    tab: Any, live_server: Any, alice: Any, acme: Project
) -> None:
    source = SourceFile("xss.evalset.json", (PAGES / "xss.evalset.json").read_bytes())
    outcome = evalset_import(project=acme, files=[source])[0]
    case = outcome.version.cases.get()
    log_in(tab, live_server)

    tab.goto(f"{live_server.url}/evalsets/{outcome.evalset.pk}/")
    expect(tab.locator("#cases-table")).to_contain_text('<img src=x onerror="window.__xss=3">')
    expect(tab.locator("#cases-table")).to_contain_text("<script>window.__xss=4</script>")

    tab.goto(f"{live_server.url}/cases/{case.pk}/")
    user = tab.locator(".msg-user")
    expect(user).to_contain_text('<img src=x onerror="window.__xss=1"> and <script>window.__xss=2</script>')
    expect(tab.locator(".msg-final")).to_contain_text('<img src=x onerror="window.__xss=6">')
    assert tab.locator("main img").count() == 0
    assert tab.locator("main script").count() == 0
    assert tab.evaluate("typeof window.__xss") == "undefined"


def test_the_project_switcher_changes_the_project(
    tab: Any, live_server: Any, alice: Any, acme: Project, globex: Project
) -> None:
    Membership.objects.create(project=globex, user=alice, role=Membership.Role.MEMBER)
    evalset_import(project=globex, files=[SourceFile("xss.evalset.json", (PAGES / "xss.evalset.json").read_bytes())])
    log_in(tab, live_server)
    expect(tab.get_by_text("No eval sets in Acme yet")).to_be_visible()
    tab.get_by_label("Project").select_option(label="Globex")
    expect(tab.get_by_role("heading", name="Eval sets in Globex")).to_be_visible()
    expect(tab.locator("table")).to_contain_text("xss_probe")
