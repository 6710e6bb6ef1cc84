"""Runs of the model target end to end: started through the API (the docs' own example, run
against a scripted OpenAI-compatible server on 127.0.0.1), executed by the engine, scored by
the eval set's criteria, and read back in the drill-down with the simulated results marked."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from evaluations.models import CaseResult, Project, Run
from evaluations.prompts.services import prompt_create
from evaluations.runs import services as runs
from tests.conftest import REPO
from tests.llm_server import FakeLLM
from tests.model_helpers import ScriptedAgent, demo_with_results, import_with_results

pytestmark = pytest.mark.django_db


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def docs_example() -> dict[str, Any]:
    """The model target's example in docs/runs.md, as the page shows it."""
    text = (REPO / "docs" / "runs.md").read_text()
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", text, re.DOTALL) if '"target_kind": "model"' in b]
    assert len(blocks) == 1
    return blocks[0]


def post(client: Client, body: dict[str, Any]) -> Any:
    return client.post("/api/v1/runs/", data=json.dumps(body), content_type="application/json")


def test_the_docs_example_runs_against_a_scripted_model(alice_client: Client, acme: Project, llm: FakeLLM,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    llm.responder = ScriptedAgent(demo_with_results())
    version = import_with_results(acme)
    body = docs_example()
    body["evalset"] = version.evalset_id
    body["target"]["base_url"] = llm.url  # the docs name OpenAI; the test's model is on 127.0.0.1
    response = post(alice_client, body)
    assert response.status_code == 201, response.content
    created = response.json()
    assert created["target_kind"] == "model" and created["model"] == "gpt-4o-mini"
    assert "sk-from-the-environment" not in response.content.decode()
    stored = Run.objects.get(pk=created["id"]).target
    assert stored["api_key_env"] == "OPENAI_API_KEY" and stored["tools_inferred"] is True
    assert sorted(t["function"]["name"] for t in stored["tools"]) == [
        "book_flight", "cancel_order", "get_forecast", "get_order", "get_weather", "search_flights"]

    run = runs.run_execute_here(created["id"])
    assert run.status == Run.Status.COMPLETED
    assert (run.cases_done, run.cases_errored) == (8, 0)
    assert run.summary["criteria"]["trajectory_match"]["pass_rate"] == pytest.approx(1.0)
    assert all(r.headers["authorization"] == "Bearer sk-from-the-environment" for r in llm.requests)
    assert all(r.body["stream"] is False and r.body["temperature"] == 0 for r in llm.requests)
    assert llm.requests[0].body["messages"][0]["content"].startswith("You are a travel assistant.")

    tokyo = CaseResult.objects.get(run=run, case__eval_id="weather_tokyo")
    [call] = tokyo.output["turns"][0]["tool_calls"]
    assert (call["simulated"], call["result"]) == ("expected", {"tool": "get_weather", "ok": True,
                                                                "for_city": "Tokyo"})
    assert (tokyo.prompt_tokens, tokyo.completion_tokens) == (270, 32)
    assert tokyo.latency_seconds is not None

    run_page = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert f"model gpt-4o-mini at {llm.url}, tools simulated" in run_page
    page = alice_client.get(f"/runs/{run.pk}/cases/{tokyo.pk}/")
    assert page.status_code == 200
    assert "simulated: the eval set&#x27;s expected response" in page.content.decode()


def test_a_stored_prompt_version_is_resolved_into_the_run(alice_client: Client, acme: Project, alice: Any,
                                                           llm: FakeLLM) -> None:
    version = import_with_results(acme)
    saved = prompt_create(project=acme, name="travel", system="Travel help for {{case_name}}.", user="Q: {{input}}",
                          actor=alice)
    target = {"base_url": llm.url, "model": "m", "prompt": {"prompt_id": saved.prompt.pk, "version": 1}}
    response = post(alice_client, {"evalset": version.evalset_id, "target_kind": "model", "target": target})
    assert response.status_code == 201, response.content
    stored = Run.objects.get(pk=response.json()["id"]).target["prompt"]
    assert stored == {"system": "Travel help for {{case_name}}.", "user": "Q: {{input}}",
                      "prompt_id": saved.prompt.pk, "version": 1}


def test_bad_model_targets_are_refused_with_where_and_nothing_is_created(alice_client: Client,
                                                                          acme: Project) -> None:
    version = import_with_results(acme)
    cases = [
        ({"base_url": "http://169.254.169.254/v1", "model": "m"}, "target.base_url is refused"),
        ({"base_url": "http://127.0.0.1:9/v1", "model": "m", "prompt": {"user": "{{inptu}}"}},
         "target.prompt.user"),
        ({"base_url": "http://127.0.0.1:9/v1"}, "target.model: Field required"),
        ({"base_url": "http://127.0.0.1:9/v1", "model": "m", "prompt": {"prompt_id": 999}},
         "no prompt 999 in this project"),
    ]
    for target, expected in cases:
        response = post(alice_client, {"evalset": version.evalset_id, "target_kind": "model", "target": target})
        assert response.status_code == 400, response.content
        assert expected in response.content.decode()
    assert not Run.objects.exists()


def test_a_model_target_runs_its_cases_eight_at_a_time_by_default(acme: Project, llm: FakeLLM) -> None:
    version = import_with_results(acme)
    llm.responder = ScriptedAgent(demo_with_results())
    run = runs.run_create(project=acme, version=version, target_kind=Run.TargetKind.MODEL,
                          target={"base_url": llm.url, "model": "m"}, enqueue=False)
    from evaluations.runs.engine import _build_target, _chunk_floor

    target = _build_target(run)
    assert _chunk_floor(target) == 8  # the first chunk hands the target eight cases at once


UIPATH = {
    "version": "1.0", "id": "weather-mocks", "name": "Weather with mocks", "evaluatorRefs": [],
    "evaluations": [
        {"id": "mocked", "name": "Mocked temperature", "inputs": {"city": "Paris"}, "evaluationCriterias": {},
         "mockingStrategy": {"type": "mockito", "config": [
             {"function": "get_temperature", "arguments": {"args": [], "kwargs": {"city": "Paris"}},
              "then": [{"type": "return", "value": {"celsius": 18}}]}]}},
        {"id": "played", "name": "Humidity played by a model", "inputs": {"city": "Oslo"}, "evaluationCriterias": {},
         "mockingStrategy": {"type": "llm", "prompt": "Humidity is 40% everywhere.",
                             "toolsToSimulate": [{"name": "get_humidity"}]}},
    ],
}


def test_a_uipath_eval_sets_mocks_and_simulation_instructions_answer_the_model(acme: Project, llm: FakeLLM) -> None:
    from evaluations.evalsets.services import evalset_import
    from evaluations.interop import SourceFile
    from tests.llm_server import reply, tool_calls

    [outcome] = evalset_import(project=acme, files=[SourceFile("weather.json", json.dumps(UIPATH).encode())])
    cases = {c.eval_id: c.metadata for c in outcome.version.cases.all()}
    assert cases["mocked"]["mockingStrategy"]["type"] == "mockito"  # the importer keeps them

    def model(body: dict[str, Any]) -> Any:
        if body["messages"][-1]["role"] == "tool":
            return reply("done")
        city = json.loads(body["messages"][-1]["content"])["city"]
        return tool_calls(("get_temperature" if city == "Paris" else "get_humidity", {"city": city}))

    with FakeLLM() as player:
        player.script(reply('{"humidity": 40}'))
        llm.responder = model
        run = runs.run_create(project=acme, version=outcome.version, target_kind=Run.TargetKind.MODEL, target={
            "base_url": llm.url, "model": "m", "tool_model": {"base_url": player.url, "model": "player"}})
        assert sorted(t["function"]["name"] for t in run.target["tools"]) == ["get_humidity", "get_temperature"]
        run = runs.run_execute_here(run.pk)
        assert "Humidity is 40% everywhere." in player.requests[0].body["messages"][0]["content"]
    calls = {r.case.eval_id: r.output["turns"][0]["tool_calls"][0] for r in CaseResult.objects.filter(run=run)
             .select_related("case")}
    assert (calls["mocked"]["simulated"], calls["mocked"]["result"]) == ("mock", {"celsius": 18})
    assert (calls["played"]["simulated"], calls["played"]["result"]) == ("llm", {"humidity": 40})
