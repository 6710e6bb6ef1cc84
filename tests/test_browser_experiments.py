"""An experiment started from its page in real Chromium: the form with two variants against a
scripted model on 127.0.0.1, the experiment's page following the runs, and the landing on the
N-way comparison once both have completed; then a case's trajectories side by side."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from evaluations.models import Experiment, Project, Run
from evaluations.prompts.services import prompt_create
from evaluations.runs import services as runs
from tests.llm_server import FakeLLM
from tests.model_helpers import ScriptedAgent, demo_with_results, import_with_results

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        server.responder = ScriptedAgent(demo_with_results(), sloppy={"sloppy-model": {"weather_two_cities"}})
        yield server


@pytest.fixture
def tab(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1366, "height": 860})
    context.set_default_timeout(30_000)  # a shared, busy machine
    page = context.new_page()
    yield page
    context.close()


def test_an_experiment_started_from_the_page_lands_on_the_comparison(tab: Any, live_server: Any, alice: Any,
                                                                      acme: Project, llm: FakeLLM) -> None:
    version = import_with_results(acme)
    saved = prompt_create(project=acme, name="travel", system="You help travellers.", user="{{input}}", actor=alice)
    tab.goto(live_server.url + "/")
    tab.get_by_label("Username").fill("alice")
    tab.get_by_label("Password").fill("alice-pass-123")
    tab.get_by_role("button", name="Log in").click()

    tab.get_by_role("link", name="Experiments", exact=True).click()
    tab.get_by_role("link", name="New experiment").first.click()
    expect(tab).to_have_url(re.compile(r"/experiments/new/$"))
    tab.get_by_label("Eval set", exact=True).select_option(str(version.evalset_id))
    tab.locator("#x-name").fill("two models")
    tab.get_by_label("Base URL").fill(llm.url)
    tab.get_by_label("API key variable").fill("")
    tab.get_by_label("Variant 1 model").fill("good-model")
    tab.get_by_label("Variant 1 prompt").select_option(f"{saved.prompt.pk}:1")
    tab.get_by_label("Variant 2 model").fill("sloppy-model")
    tab.get_by_label("Variant 2 temperature").fill("0.7")
    tab.get_by_role("button", name="Start the experiment").click()

    expect(tab).to_have_url(re.compile(r"/experiments/\d+/\?land=1$"))
    expect(tab.get_by_test_id("experiment-runs")).to_contain_text("travel v1")
    expect(tab.get_by_test_id("experiment-runs")).to_contain_text("temperature 0.7")
    experiment = Experiment.objects.get()
    ids = list(Run.objects.filter(variant__experiment=experiment).order_by("pk").values_list("pk", flat=True))
    assert len(ids) == 2
    for run_id in ids:  # the workers' part, done here: no cluster runs in this test
        runs.run_execute_here(run_id)

    # the page, polling, goes on to the comparison of the two runs by itself
    expect(tab).to_have_url(re.compile(r"/compare/runs/\?runs=" + "%2C".join(map(str, ids)) + "$"))
    expect(tab.locator("body")).to_contain_text(f"#{ids[0]}")
    expect(tab.locator("body")).to_contain_text(f"#{ids[1]}")

    tab.goto(f"{live_server.url}/compare/runs/trajectories/?runs={ids[0]},{ids[1]}&case=weather_two_cities")
    expect(tab.get_by_test_id("divergence")).to_contain_text("The runs first diverge at turn 1, step 1")
    expect(tab.get_by_test_id("trajectories")).to_contain_text("simulated · expected")
    assert tab.locator("[data-diverges]").count() == 1
