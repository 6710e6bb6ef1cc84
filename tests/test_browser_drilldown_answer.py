"""The drill-down in real Chromium: a four-turn case with twelve expected calls opens on its
answer. The summary of what differs is on the first screen, its links land on the rows, the
ten matched calls are closed, and the page is short.

Measured on the same case before the change: 6,483 px at 1440 px wide (2,550 px after) (every matched call
expanded with its arguments, the baseline's calls in a second table per turn, every score's
justification spread out), with the first difference below the fold.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from evaluations.models import CaseResult, Project
from tests.drilldown_helpers import four_turn_runs

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # playwright's loop in this thread; the ORM calls are the test's

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HEIGHT_BEFORE = 6483  # px, the same case and window, measured before the change (see the docstring)


def log_in(page: Any, live_server: Any, path: str) -> None:
    page.goto(live_server.url + path)
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(live_server.url + path)
    page.wait_for_load_state("load")


def test_the_drilldown_opens_on_its_answer_and_is_short(chromium: Any, live_server: Any, alice: Any,
                                                        acme: Project) -> None:
    baseline, candidate = four_turn_runs(acme)
    result = CaseResult.objects.get(run=candidate)
    context = chromium.new_context(viewport={"width": 1440, "height": 900})
    context.set_default_timeout(10_000)
    page = context.new_page()
    try:
        log_in(page, live_server, f"/runs/{candidate.pk}/cases/{result.pk}/?baseline={baseline.pk}")
        summary = page.get_by_test_id("drill-summary")
        box = summary.bounding_box()
        assert box is not None and box["y"] + box["height"] < 900  # above the fold
        links = summary.get_by_role("link")
        assert links.all_inner_texts() == ["turn 2: 1 missing call: fetch", "turn 3: value differs in store"]
        # every matched call closed, none of their arguments on screen
        matched = page.get_by_test_id("matched-call")
        assert matched.count() == 10
        assert page.evaluate("[...document.querySelectorAll('details.call-folded')].every(d => !d.open)")
        assert not page.get_by_text('"https://example.test/1"').first.is_visible()
        height = page.evaluate("document.documentElement.scrollHeight")
        assert height < HEIGHT_BEFORE / 2, height
        # a jump link scrolls its difference into view
        links.nth(1).click()
        row = page.locator("#turn-3-call-3")
        page.wait_for_function("location.hash === '#turn-3-call-3'")
        top = row.bounding_box()
        assert top is not None and -1 <= top["y"] < 900  # scrolled to the top of the window
        # a folded call opens on click
        matched.first.locator("summary").click()
        assert page.evaluate("document.querySelector('details.call-folded').open")
        page.screenshot(path="/tmp/drilldown-answer.png", full_page=True)
    finally:
        context.close()
