"""Several runs in real Chromium: tick four runs on the runs list, compare them, open one
case across the runs; the leaderboard draws its Pareto chart under the site's CSP. No page
scrolls sideways on a 390 px phone.

Screenshots at 1440 and 390 px go to /tmp/shots-20/ (outside the repository) for a person
to look at.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from evaluations.models import Project, Run
from tests.compare_helpers import generated_outputs, generated_version, make_run

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect
SHOTS = Path("/tmp/shots-20")
XSS = "<img src=x onerror=window.__xss=1>"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


def log_in(tab: Any, live_server: Any) -> None:
    tab.goto(live_server.url + "/accounts/login/")
    tab.get_by_label("Username").fill("alice")
    tab.get_by_label("Password").fill("alice-pass-123")
    tab.get_by_role("button", name="Log in").click()
    expect(tab).not_to_have_url(re.compile(r"/accounts/login/"))


@pytest.fixture
def four(acme: Project) -> list[Run]:
    version = generated_version(acme, 60)
    made = []
    for index, (name, wrong) in enumerate((("reference", set(range(1, 11))), ("perfect", set()),
                                           ("close", set(range(1, 9))), ("worse", set(range(1, 13))))):
        outputs = generated_outputs(60, wrong=wrong, slow=index / 4)
        outputs[9]["turns"][0]["final_response"] = f"Item 9 {XSS} is in stock."
        made.append(make_run(acme, version, outputs, name=name,
                             labels={"model": f"model-{index}", "branch": "main"}))
    return made


def test_compare_four_runs_and_open_a_case_across_them(tab: Any, live_server: Any, alice: Any,
                                                       four: list[Run]) -> None:
    SHOTS.mkdir(exist_ok=True)
    log_in(tab, live_server)
    tab.goto(f"{live_server.url}/runs/")
    for run in four:
        tab.locator(f'input[name="run"][value="{run.pk}"]').check()
    button = tab.get_by_role("button", name="Compare 4 runs")
    expect(button).to_be_enabled()
    button.click()
    expect(tab).to_have_url(re.compile(r"/compare/runs/\?runs="))
    expect(tab.get_by_role("heading", name="Compare 4 runs")).to_be_visible()
    criteria = tab.get_by_test_id("nway-criteria")
    expect(criteria.locator(".nway-best-cell")).to_have_count(1)
    expect(criteria).to_contain_text("★ best")
    matrix = tab.get_by_test_id("nway-matrix")
    first = matrix.locator("tbody tr").first
    expect(first).to_contain_text("case_0009")
    expect(first.locator(".nway-fail")).to_have_count(2)
    expect(first.locator(".nway-pass")).to_have_count(2)
    tab.screenshot(path=str(SHOTS / "nway-1440.png"), full_page=True)

    first.get_by_role("link", name="case_0009").click()
    expect(tab).to_have_url(re.compile(r"/compare/runs/case/"))
    side = tab.get_by_test_id("nway-case")
    expect(side.locator(".nway-run")).to_have_count(4)
    expect(side).to_contain_text('{"id": 9}')
    expect(side).to_contain_text('{"id": 0}')
    expect(side.locator(".nway-run").nth(1)).to_contain_text(XSS)  # shown as text, never run
    assert tab.evaluate("window.__xss") is None
    tab.screenshot(path=str(SHOTS / "nway-case-1440.png"), full_page=True)


def test_leaderboard_and_phone_widths(chromium: Any, tab: Any, live_server: Any, alice: Any,
                                      four: list[Run]) -> None:
    SHOTS.mkdir(exist_ok=True)
    log_in(tab, live_server)
    evalset = four[0].evalset_version.evalset_id
    errors: list[str] = []
    tab.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    tab.goto(f"{live_server.url}/evalsets/{evalset}/leaderboard/?axis=latency&criterion=trajectory_match")
    expect(tab.get_by_test_id("leaderboard").locator("tbody tr")).to_have_count(4)
    expect(tab.get_by_test_id("pareto-chart").locator(".main-svg").first).to_be_visible()
    assert not errors, errors  # the figure drew without breaking the CSP
    tab.screenshot(path=str(SHOTS / "leaderboard-1440.png"), full_page=True)

    ids = ",".join(str(r.pk) for r in four)
    context = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        phone = context.new_page()
        phone.goto(live_server.url + "/accounts/login/")
        phone.get_by_label("Username").fill("alice")
        phone.get_by_label("Password").fill("alice-pass-123")
        phone.get_by_role("button", name="Log in").click()
        expect(phone).not_to_have_url(re.compile(r"/accounts/login/"))
        for name, path in (("nway", f"/compare/runs/?runs={ids}"),
                           ("nway-case", f"/compare/runs/case/?runs={ids}&case=case_0009"),
                           ("leaderboard", f"/evalsets/{evalset}/leaderboard/")):
            phone.goto(live_server.url + path)
            width = phone.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"{path} is {width} px wide"
            phone.screenshot(path=str(SHOTS / f"{name}-390.png"), full_page=True)
    finally:
        context.close()
