"""Grading an item in context, in real Chromium: the queue's item shows the turns, the
expected and actual answers, the aligned calls (the matched one folded, the wrong ones open)
and the justification; the grader opens the folded call, grades the item fail with the
keyboard and the row comes back graded with its context; no page scrolls sideways on a
390 px phone, hostile text included.

Screenshots at 1440 and 390 px go to /tmp/shots-28-grading/ (outside the repository) for a
person to look at.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from evaluations.models import Project, Run
from tests.grading_context_helpers import answer, context_run, user_text
from tests.test_browser_grading import log_in

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect
SHOTS = Path("/tmp/shots-28-grading")
HOSTILE = '<img src=x onerror="document.title=\'pwned\'"> ' + "a-very-long-unbroken-token-" * 12

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def run(acme: Project) -> Run:
    return context_run(acme, 6, turns=2, wrong=frozenset({1}), responses={3: HOSTILE})


def test_grade_an_item_in_context(tab: Any, live_server: Any, alice: Any, chromium: Any, run: Run) -> None:
    SHOTS.mkdir(exist_ok=True)
    log_in(tab, live_server)
    tab.goto(live_server.url + "/grading/?criterion=trajectory_match&kind=deterministic")
    item = tab.get_by_test_id("queue-item").filter(has_text="case_0001")
    expect(item.get_by_test_id("grade-user")).to_have_count(2)
    expect(item.get_by_test_id("grade-user").nth(1)).to_contain_text(user_text(1, 2))
    expect(item.get_by_test_id("grade-expected").first).to_contain_text(answer(1, 1))
    expect(item.get_by_test_id("grade-justification")).to_contain_text("missing")
    folded = item.get_by_test_id("matched-call")
    expect(folded).to_have_count(1)
    expect(folded.locator(".arg-line")).to_be_hidden()  # the matched search call is folded
    expect(item.locator("tbody.call-args_differ")).to_contain_text("999")  # the wrong id is open
    expect(item.locator("tbody.call-missing")).to_be_visible()
    folded.locator("summary").click()
    expect(folded.locator(".arg-line")).to_contain_text("item 1")
    tab.screenshot(path=str(SHOTS / "grading-context-1440.png"), full_page=True)
    item.screenshot(path=str(SHOTS / "grading-item-1440.png"))

    item.click(position={"x": 5, "y": 5})  # the item becomes the current one
    expect(item).to_have_class(re.compile("is-current"))
    tab.keyboard.press("f")
    graded = tab.get_by_test_id("queue-item").filter(has_text="case_0001")
    expect(graded.get_by_test_id("my-grade")).to_have_text("you: fail")
    expect(graded.get_by_test_id("grade-turn")).to_have_count(2)  # the row came back with its context
    expect(graded.locator("tbody.call-missing")).to_be_visible()
    assert tab.title() != "pwned"

    context = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        phone = context.new_page()
        log_in(phone, live_server)
        for name, path in (("grading-context", "/grading/?criterion=trajectory_match"),
                           ("grading-context-answers", "/grading/?criterion=exact_match")):
            phone.goto(live_server.url + path)
            expect(phone.get_by_test_id("grade-context").first).to_be_visible()
            width = phone.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"{path} is {width} px wide"
            phone.screenshot(path=str(SHOTS / f"{name}-390.png"), full_page=True)
            phone.screenshot(path=str(SHOTS / f"{name}-390-top.png"))
            phone.get_by_test_id("grade-justification").first.screenshot(path=str(SHOTS / f"{name}-why-390.png"))
        assert phone.title() != "pwned"
    finally:
        context.close()
