"""A reviewer in real Chromium, at 1440 and 390 px: the New run page offers DeepEval's judged
metrics with their parameters and **Add** puts one in the config being edited; a run scored
by them shows the judge's spend, and its drill-down a metric's reason and steps (verdicts with
their reasons), the judge's text escaped. With EVALSITE_SHOTS_DIR set, each page is saved
there as a PNG (the screenshots the pages were checked with)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from evaluations.models import CaseResult, Project
from evaluations.schemas.evalset import EvalConfig
from tests.compare_helpers import generated_outputs, generated_version, make_run
from tests.llm_server import Behaviour, FakeLLM

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]

REPLIES: dict[str, Any] = {
    "Statements": {"statements": ["Item 1 is in stock.", "Our shop opens at 9.", "<i>Thanks</i> for asking!"]},
    "Verdicts": {"verdicts": [{"verdict": "yes"}, {"verdict": "no", "reason": "Opening hours were not asked for."},
                              {"verdict": "borderline", "reason": "A courtesy, not an answer."}]},
    "AnswerRelevancyScoreReason": {"reason": "Most of the answer is about stock; <b>one aside</b> is not."},
    "Truths": {"truths": ["Item 1 is in stock."]},
    "Claims": {"claims": ["Item 1 is in stock."]},
    "FaithfulnessScoreReason": {"reason": "Every claim is supported."},
}


def _login(chromium: Any, live_server: Any, width: int) -> Any:
    context = chromium.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(10_000)
    tab = context.new_page()
    tab.goto(live_server.url + "/accounts/login/")
    tab.get_by_label("Username").fill("alice")
    tab.get_by_label("Password").fill("alice-pass-123")
    tab.get_by_role("button", name="Log in").click()
    expect(tab).not_to_have_url(re.compile(r"/accounts/login/"))
    return tab


def _shot(tab: Any, name: str, full_page: bool = True) -> None:
    folder = os.environ.get("EVALSITE_SHOTS_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=full_page)


@pytest.fixture
def judged_run(acme: Project, monkeypatch: pytest.MonkeyPatch) -> Any:
    with FakeLLM() as llm:
        monkeypatch.setenv("EVALSITE_LLM_BASE_URL", llm.url)
        monkeypatch.setenv("EVALSITE_LLM_MODEL", "gpt-4o-mini")
        llm.responder = lambda body: Behaviour(
            content=json.dumps(REPLIES[body["response_format"]["json_schema"]["name"]]),
            usage={"prompt_tokens": 420, "completion_tokens": 60, "total_tokens": 480})
        version = generated_version(acme, 3)
        outputs = generated_outputs(3)
        for output in outputs:
            output["metadata"] = {"retrieval_context": ["Item stock list: every item is in stock."]}
        return make_run(acme, version, outputs, config=EvalConfig.model_validate({"criteria": {
            "deepeval_answer_relevancy": {"threshold": 0.5}, "deepeval_faithfulness": {"threshold": 0.7}}}))


@pytest.mark.parametrize("width", [1440, 390])
def test_a_judged_runs_spend_and_a_metrics_steps_are_shown(chromium: Any, live_server: Any, alice: Any,
                                                           judged_run: Any, width: int) -> None:
    tab = _login(chromium, live_server, width)
    tab.goto(live_server.url + reverse("run_detail", args=[judged_run.pk]))
    spend = tab.get_by_role("region", name="Judge spend")
    expect(spend).to_contain_text("Estimated before it started")
    expect(spend).to_contain_text("21 calls")  # 3 cases x (3 for answer relevancy + 4 for faithfulness)
    _shot(tab, f"run-judge-spend-{width}")
    result = CaseResult.objects.filter(run=judged_run).order_by("pk").first()
    assert result is not None
    tab.goto(live_server.url + reverse("run_case", args=[judged_run.pk, result.pk]))
    steps = tab.get_by_test_id("judged-steps").first
    expect(steps).to_contain_text("Most of the answer is about stock; <b>one aside</b> is not.")  # as text
    expect(steps).to_contain_text("Opening hours were not asked for.")
    expect(steps.locator("li.verdict-no")).to_have_count(1)
    assert steps.locator("b").count() == 0 and steps.locator("i").count() == 0  # the judge's markup escaped
    steps.scroll_into_view_if_needed()
    _shot(tab, f"drilldown-steps-{width}")


@pytest.mark.parametrize("width", [1440, 390])
def test_the_new_run_page_offers_the_metrics_and_adds_one_to_the_config(chromium: Any, live_server: Any,
                                                                         alice: Any, acme: Project, width: int) -> None:
    generated_version(acme, 2)
    tab = _login(chromium, live_server, width)
    tab.goto(live_server.url + reverse("run_new"))
    tab.get_by_label("Edited JSON").check()
    catalogue = tab.locator("[data-deepeval-catalogue]").first
    catalogue.locator("summary").click()
    expect(catalogue).to_contain_text("deepeval_faithfulness")
    expect(catalogue).to_contain_text("penalize_ambiguous_claims")
    catalogue.get_by_role("button", name="Add deepeval_faithfulness to the config").click()
    config = json.loads(tab.locator("[data-config-editor]").input_value())
    assert config["criteria"]["deepeval_faithfulness"] == {"threshold": 0.5, "options": {}}
    catalogue.get_by_role("button", name="Add deepeval_faithfulness to the config").click()  # a second one
    config = json.loads(tab.locator("[data-config-editor]").input_value())
    assert config["criteria"]["deepeval_faithfulness_2"]["evaluator"] == "deepeval_faithfulness"
    _shot(tab, f"new-run-metrics-{width}")
    catalogue.get_by_role("button", name="Add deepeval_g_eval to the config").scroll_into_view_if_needed()
    _shot(tab, f"new-run-metrics-{width}-view", full_page=False)


@pytest.mark.parametrize("width", [1440, 390])
def test_an_eval_sets_page_offers_the_metrics_with_their_parameters(chromium: Any, live_server: Any, alice: Any,
                                                                     acme: Project, width: int) -> None:
    version = generated_version(acme, 2)
    tab = _login(chromium, live_server, width)
    tab.goto(live_server.url + reverse("evalset_detail", args=[version.evalset_id]))
    catalogue = tab.locator("[data-deepeval-catalogue]").first
    catalogue.locator("summary").click()
    expect(catalogue).to_contain_text("deepeval_conversation_completeness")
    expect(catalogue).to_contain_text("window_size")  # turn relevancy's parameter, with DeepEval's default 10
    assert catalogue.get_by_role("button").count() == 0  # nothing to add to here: the link says where
    expect(tab.get_by_role("link", name="New run").last).to_be_visible()
    catalogue.scroll_into_view_if_needed()
    _shot(tab, f"evalset-metrics-{width}", full_page=False)
