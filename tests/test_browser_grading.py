"""Grading in real Chromium: grade five results of the grading queue with the keyboard, see
the judge's kappa on the calibration page, change a grade and see the kappa change; the
drill-down's grades panel; no page scrolls sideways on a 390 px phone.

Screenshots at 1440 and 390 px go to /tmp/shots-20/ (outside the repository) for a person
to look at.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evaluations.models import CaseResult, HumanGrade, Project, Run
from evaluations.review import calibration
from tests.compare_helpers import generated_version
from tests.grading_helpers import judged_run
from tests.llm_server import FakeLLM

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect
SHOTS = Path("/tmp/shots-20")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def judged(acme: Project, monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    with FakeLLM() as llm:
        yield judged_run(acme, generated_version(acme, 12), llm, monkeypatch, count=12, fails={1, 2, 3})


def log_in(page: Any, live_server: Any) -> None:
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-pass-123")
    page.get_by_role("button", name="Log in").click()
    expect(page).not_to_have_url(re.compile(r"/accounts/login/"))


def auto_passed(item: Any) -> bool:
    return "passed" in item.locator(".grade-item-head .st").inner_text()


def kappa_text(tab: Any, live_server: Any) -> str:
    tab.goto(live_server.url + "/calibration/")
    return str(tab.get_by_test_id("cal-kappa").inner_text())


def test_grade_five_results_with_the_keyboard_and_see_kappa_change(
    tab: Any, live_server: Any, alice: Any, judged: Run
) -> None:
    SHOTS.mkdir(exist_ok=True)
    log_in(tab, live_server)
    tab.goto(live_server.url + "/calibration/")
    expect(tab.get_by_test_id("calibration-empty")).to_be_visible()

    tab.goto(live_server.url + "/grading/?criterion=llm_judge")
    expect(tab.get_by_test_id("grade-keys")).to_contain_text("grade pass")
    items = tab.get_by_test_id("queue-item")
    expect(items).to_have_count(12)
    expect(items.first).to_have_class(re.compile("is-current"))  # the first item is ready for the keys
    verdicts = []
    for index in range(5):
        item = items.nth(index)
        expect(item).to_have_class(re.compile("is-current"))
        agree = auto_passed(item)
        verdict = agree if index < 4 else not agree  # the fifth disagrees with the judge
        if index == 3:  # a note: e, type, Enter back to the keys
            tab.keyboard.press("e")
            tab.keyboard.type("<i>checked</i>")
            tab.keyboard.press("Enter")
            expect(item).to_be_focused()
        if index == 4:
            tab.keyboard.press("7")  # a score of 0.7 first
            expect(item.locator("input.grade-score")).to_have_value("0.7")
        tab.keyboard.press("p" if verdict else "f")
        expect(items.nth(index).get_by_test_id("my-grade")).to_have_text("you: " + ("pass" if verdict else "fail"))
        verdicts.append(verdict)
    expect(items.nth(5)).to_have_class(re.compile("is-current"))  # moved on after the fifth
    tab.screenshot(path=str(SHOTS / "grading-1440.png"), full_page=True)
    assert HumanGrade.objects.filter(grader=alice).count() == 5
    assert HumanGrade.objects.filter(grader=alice, note="<i>checked</i>").count() == 1
    fifth = HumanGrade.objects.get(grader=alice, score__isnull=False)
    assert fifth.score == pytest.approx(0.7) and fifth.passed is verdicts[4]

    [row] = calibration.calibration_rows(project=judged.project)
    expected = row.calibration.confusion.kappa
    shown = kappa_text(tab, live_server)
    assert shown == ("undefined" if expected is None else f"{expected:.3f}")
    expect(tab.get_by_test_id("cal-accuracy")).to_contain_text("0.800")
    expect(tab.get_by_test_id("cal-disagreements")).to_contain_text("1 disagreement")
    tab.screenshot(path=str(SHOTS / "calibration-1440.png"), full_page=True)

    # One click to the disagreement, then k (back) and p/f to agree with the judge this time
    tab.get_by_test_id("cal-disagreements").click()
    expect(tab).to_have_url(re.compile(r"/grading/\?criterion=llm_judge&judge_model=judge-a"))
    first = tab.get_by_test_id("queue-item").first
    expect(first).to_contain_text("disagreement")
    tab.keyboard.press("j")
    tab.keyboard.press("k")
    expect(first).to_have_class(re.compile("is-current"))
    tab.keyboard.press("p" if not verdicts[4] else "f")
    expect(first.get_by_test_id("my-grade")).to_have_text("you: " + ("pass" if not verdicts[4] else "fail"))
    assert kappa_text(tab, live_server) == "1.000"
    expect(tab.get_by_test_id("cal-accuracy")).to_contain_text("1.000")
    assert shown != "1.000"


def test_the_drilldown_panel_and_phone_widths(
    chromium: Any, tab: Any, live_server: Any, alice: Any, judged: Run
) -> None:
    SHOTS.mkdir(exist_ok=True)
    log_in(tab, live_server)
    result = CaseResult.objects.get(run=judged, case__eval_id="case_0002")
    tab.goto(f"{live_server.url}/runs/{judged.pk}/cases/{result.pk}/")
    panel = tab.get_by_test_id("grades-panel")
    row = panel.get_by_test_id("grades-llm_judge")
    row.get_by_label("pass").check()
    row.get_by_label("note").fill("<b>the right item</b>")
    row.get_by_role("button", name="Save").click()
    expect(panel.get_by_test_id("grades-llm_judge")).to_contain_text("by alice")
    expect(panel.get_by_test_id("grades-llm_judge")).to_contain_text("<b>the right item</b>")  # as text
    expect(panel.get_by_test_id("grades-llm_judge")).to_contain_text("disagreement")
    tab.locator("#grades").screenshot(path=str(SHOTS / "drill-grades-1440.png"))

    context = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        phone = context.new_page()
        log_in(phone, live_server)
        for name, path in (
            ("grading", "/grading/"),
            ("calibration", "/calibration/"),
            ("drill-grades", f"/runs/{judged.pk}/cases/{result.pk}/"),
        ):
            phone.goto(live_server.url + path)
            width = phone.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"{path} is {width} px wide"
            phone.screenshot(path=str(SHOTS / f"{name}-390.png"), full_page=True)
            phone.screenshot(path=str(SHOTS / f"{name}-390-top.png"))
    finally:
        context.close()
