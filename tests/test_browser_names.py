"""Long eval ids in real Chromium at 390 px: a 200-character path-like id (real ADK files name
cases by absolute paths) widens neither the compare page nor the case page nor the drill-down,
and its whole text is one hover (title) away."""

from __future__ import annotations

import os
from typing import Any

import pytest

from evaluations.models import CaseResult, Project
from tests.drilldown_helpers import four_turn_runs
from tests.test_names import LONG_ID

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # playwright's loop in this thread; the ORM calls are the test's

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_200_character_path_id_fits_a_390_px_phone(chromium: Any, live_server: Any, alice: Any,
                                                     acme: Project) -> None:
    assert len(LONG_ID) >= 200
    baseline, candidate = four_turn_runs(acme, eval_id=LONG_ID)
    result = CaseResult.objects.get(run=candidate)
    context = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    context.set_default_timeout(10_000)
    phone = context.new_page()
    try:
        phone.goto(live_server.url + "/accounts/login/")
        phone.get_by_label("Username").fill("alice")
        phone.get_by_label("Password").fill("alice-pass-123")
        phone.get_by_role("button", name="Log in").click()
        phone.wait_for_url(live_server.url + "/")
        for name, path in (
            ("compare", f"/compare/?baseline={baseline.pk}&candidate={candidate.pk}&status=all"),
            ("case", f"/cases/{result.case_id}/"),
            ("drilldown", f"/runs/{candidate.pk}/cases/{result.pk}/?baseline={baseline.pk}"),
        ):
            phone.goto(live_server.url + path)
            phone.wait_for_load_state("load")
            width = phone.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"{name} is {width} px wide"
            cut = phone.locator(".eid-cut").first
            assert cut.get_attribute("title") == LONG_ID
            assert phone.locator(".eid-cut + button.eid-copy").first.get_attribute("data-copy-text") == LONG_ID
            phone.screenshot(path=f"/tmp/names-390-{name}.png", full_page=True)
    finally:
        context.close()
