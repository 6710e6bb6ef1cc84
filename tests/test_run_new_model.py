"""The new-run page's model target: a run of one model and a prompt (stored, or typed on the
page) started from the form, executed against a scripted OpenAI-compatible server on 127.0.0.1
with the tools simulated from the eval set, and the form's refusals (nothing written)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.models import CaseResult, Project, Run
from evaluations.prompts.services import prompt_create, prompt_version_save
from evaluations.runs import services as runs
from tests.llm_server import FakeLLM
from tests.model_helpers import ScriptedAgent, demo_with_results, import_with_results

pytestmark = pytest.mark.django_db


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        server.responder = ScriptedAgent(demo_with_results())
        yield server


def form(version: Any, **fields: Any) -> dict[str, Any]:
    return {"version": version.pk, "config_source": "default", "target_kind": "model", "iterations": 1,
            "warmups": 0, "model_api_key_env": "", **fields}


def test_the_page_offers_the_projects_stored_prompt_versions(alice_client: Client, acme: Project, alice: Any) -> None:
    import_with_results(acme)
    saved = prompt_create(project=acme, name="travel", system="Be brief.", user="{{input}}", actor=alice)
    prompt_version_save(prompt=saved.prompt, system="Be very brief.", user="{{input}}", actor=alice)
    page = alice_client.get(reverse("run_new")).content.decode()
    assert 'value="model"' in page and "A model and a prompt" in page
    assert f'value="{saved.prompt.pk}:2">travel v2</option>' in page
    assert f'value="{saved.prompt.pk}:1">travel v1</option>' in page


def test_a_run_of_a_model_and_a_stored_prompt_starts_from_the_form_and_runs(
        alice_client: Client, acme: Project, alice: Any, llm: FakeLLM) -> None:
    version = import_with_results(acme)
    saved = prompt_create(project=acme, name="travel", system="Travel help for {{case_name}}.",
                          user="Q: {{input}}", actor=alice)
    response = alice_client.post(reverse("run_new"), form(
        version, model_base_url=llm.url, model_name="good-model", model_prompt=f"{saved.prompt.pk}:1",
        model_max_steps=4, model_temperature=0.3, model_system="ignored: a stored prompt is chosen"))
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.get()
    assert response["Location"] == reverse("run_detail", args=[run.pk])
    assert run.target_kind == Run.TargetKind.MODEL and run.model == "good-model"
    assert (run.target["prompt"]["prompt_id"], run.target["prompt"]["version"]) == (saved.prompt.pk, 1)
    assert run.target["prompt"]["system"] == "Travel help for {{case_name}}."
    assert (run.target["max_steps"], run.target["temperature"]) == (4, 0.3)
    assert "api_key_env" not in run.target and run.target["tools_inferred"] is True

    done = runs.run_execute_here(run.pk)
    assert done.status == Run.Status.COMPLETED and (done.cases_done, done.cases_errored) == (8, 0)
    assert done.summary["criteria"]["trajectory_match"]["pass_rate"] == pytest.approx(1.0)
    first = llm.requests[0].body
    assert first["model"] == "good-model" and first["temperature"] == 0.3
    assert first["messages"][1]["content"].startswith("Q: ")
    tokyo = CaseResult.objects.get(run=done, case__eval_id="weather_tokyo")
    [call] = tokyo.output["turns"][0]["tool_calls"]
    assert call["simulated"] == "expected"


def test_the_prompt_typed_on_the_page_is_used_when_none_is_stored(alice_client: Client, acme: Project,
                                                                  llm: FakeLLM) -> None:
    version = import_with_results(acme)
    response = alice_client.post(reverse("run_new"), form(
        version, model_base_url=llm.url, model_name="typed-model", model_system="Answer as a travel agent.",
        model_user="{{input}}"))
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.get()
    assert run.target["prompt"] == {"system": "Answer as a travel agent.", "user": "{{input}}"}
    runs.run_execute_here(run.pk)
    assert llm.requests[0].body["messages"][0] == {"role": "system", "content": "Answer as a travel agent."}


@pytest.mark.parametrize(("fields", "expected"), [
    ({"model_name": "m"}, "Give the endpoint&#x27;s base URL"),
    ({"model_base_url": "http://127.0.0.1:9/v1"}, "Give the model&#x27;s name"),
    ({"model_base_url": "http://169.254.169.254/v1", "model_name": "m"}, "target.base_url is refused"),
    ({"model_base_url": "ftp://127.0.0.1/v1", "model_name": "m"}, "target.base_url"),
    ({"model_base_url": "http://127.0.0.1:9/v1", "model_name": "m", "model_prompt": "999:1"}, "999:1 is not one of the available choices"),
    ({"model_base_url": "http://127.0.0.1:9/v1", "model_name": "m", "model_temperature": 3}, "Temperature"),
])
def test_what_the_form_refuses_says_why_and_writes_nothing(alice_client: Client, acme: Project,
                                                           fields: dict[str, Any], expected: str) -> None:
    version = import_with_results(acme)
    response = alice_client.post(reverse("run_new"), form(version, **fields))
    assert response.status_code == 400
    assert expected in response.content.decode()
    assert Run.objects.count() == 0
