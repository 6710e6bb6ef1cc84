"""The model target (evaluations/runs/targets/model.py) against a scripted OpenAI-compatible
server on 127.0.0.1 (tests/llm_server.py): the prompt rendered from the case, tool calls
answered with simulated results, parallel and malformed calls, a model that never stops,
429s with Retry-After, streaming off, the key from the environment, usage and cost, several
turns with their history, the user simulator, and the egress policy."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from evaluations.runs.simulator import simulate_user
from evaluations.runs.targets.model import ModelTarget, inferred_tools
from evaluations.schemas.evalset import (
    ConversationScenario,
    EvalCase,
    Invocation,
    MessageContent,
    SessionInput,
    ToolCall,
    UserSimulatorConfig,
)
from evaluations.schemas.model_target import ModelTargetSpec
from tests.llm_server import Behaviour, FakeLLM, completion, reply, status, tool_calls

WEATHER = {"temp_c": 22, "sky": "clear"}


def weather_case() -> EvalCase:
    return EvalCase(
        eval_id="weather_tokyo", name="Weather in Tokyo",
        conversation=[Invocation(
            invocation_id="turn_1", user_content=MessageContent.user("What's the weather in Tokyo?"),
            expected_tool_trajectory=[ToolCall(name="get_weather", args={"city": "Tokyo"}, result=WEATHER)],
            expected_final_response=MessageContent.assistant("22°C and clear."))],
        session_input=SessionInput(initial_state={"units": "metric"}),
        metadata={"channel": "web"},
    )


def spec(llm: FakeLLM, **extra: Any) -> ModelTargetSpec:
    return ModelTargetSpec.model_validate({"base_url": llm.url, "model": "scripted-model", "retries": 2,
                                           "backoff_seconds": 0.01, **extra})


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def run_one(target_spec: ModelTargetSpec, case: EvalCase, **kwargs: Any) -> Any:
    target = ModelTarget(target_spec, **kwargs)
    try:
        [output] = target.run_many([(case, 0)])
    finally:
        target.close()
    return output


def test_a_tool_call_is_answered_with_the_eval_sets_expected_response(llm: FakeLLM,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRIPTED_KEY", "sk-test-123")
    llm.script(tool_calls(("get_weather", {"city": "Tokyo"}), prompt_tokens=50, completion_tokens=7),
               reply("It is 22°C and clear in Tokyo.", prompt_tokens=80, completion_tokens=9))
    target_spec = spec(llm, api_key_env="SCRIPTED_KEY", temperature=0.2, prompt={
        "system": "You answer {{case_name}} in {{state.units}} units.", "user": "[{{metadata.channel}}] {{input}}"})
    output = run_one(target_spec, weather_case())

    assert output.error is None
    [turn] = output.turns
    assert turn.final_response == "It is 22°C and clear in Tokyo."
    [call] = turn.tool_calls
    assert (call.name, call.args, call.result, call.simulated, call.error) == (
        "get_weather", {"city": "Tokyo"}, WEATHER, "expected", None)
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens, turn.usage.total_tokens) == (130, 16, 146)
    assert turn.latency_seconds is not None and turn.latency_seconds > 0
    assert turn.metadata["model_calls"] == 2

    first, second = llm.requests
    assert first.path == "/v1/chat/completions"
    assert first.headers["authorization"] == "Bearer sk-test-123"
    assert first.body["stream"] is False and first.body["temperature"] == 0.2
    assert first.body["model"] == "scripted-model"
    assert first.body["messages"] == [
        {"role": "system", "content": "You answer Weather in Tokyo in metric units."},
        {"role": "user", "content": "[web] What's the weather in Tokyo?"}]
    tool_message = second.body["messages"][-1]
    assert tool_message == {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(WEATHER)}
    assert second.body["messages"][-2]["tool_calls"][0]["function"]["name"] == "get_weather"
    # The key is read in the worker: the target keeps only the variable's name.
    assert "sk-test-123" not in target_spec.model_dump_json()


def test_parallel_tool_calls_are_each_answered_in_order(llm: FakeLLM) -> None:
    case = weather_case()
    case.conversation[0].expected_tool_trajectory.append(
        ToolCall(name="get_weather", args={"city": "Osaka"}, result={"temp_c": 25}))
    llm.script(tool_calls(("get_weather", {"city": "Osaka"}), ("get_weather", {"city": "Tokyo"})), reply("Both."))
    output = run_one(spec(llm), case)
    calls = output.turns[0].tool_calls
    assert [(c.args["city"], c.result) for c in calls] == [("Osaka", {"temp_c": 25}), ("Tokyo", WEATHER)]
    answers = llm.requests[1].body["messages"][-2:]
    assert [(m["tool_call_id"], json.loads(m["content"])) for m in answers] == [
        ("call_1", {"temp_c": 25}), ("call_2", WEATHER)]


def test_malformed_arguments_are_the_calls_error_and_the_model_may_try_again(llm: FakeLLM) -> None:
    llm.script(tool_calls(("get_weather", '{"city": "Tokyo"')), tool_calls(("get_weather", {"city": "Tokyo"})),
               reply("22°C."))
    output = run_one(spec(llm), weather_case())
    bad, good = output.turns[0].tool_calls
    assert bad.error == "the model's arguments are not a JSON object"
    assert bad.args == {"_raw": '{"city": "Tokyo"'}
    assert "not a JSON object" in llm.requests[1].body["messages"][-1]["content"]
    assert (good.simulated, good.result) == ("expected", WEATHER)
    assert output.turns[0].final_response == "22°C."


def test_a_model_that_never_stops_calling_tools_ends_the_turn_at_max_steps(llm: FakeLLM) -> None:
    llm.script(tool_calls(("get_weather", {"city": "Tokyo"})))  # repeated for every request
    output = run_one(spec(llm, max_steps=3), weather_case())
    [turn] = output.turns
    assert turn.error == "the model was still calling tools after 3 model calls (max_steps)"
    assert turn.final_response is None
    assert len(llm.requests) == 3
    # the expected response is used once; the repeats have none
    assert [c.simulated for c in turn.tool_calls] == ["expected", "none", "none"]
    assert output.metadata["unsimulated_tools"] == ["get_weather"]


def test_a_429_is_retried_after_the_servers_retry_after(llm: FakeLLM) -> None:
    arrivals: list[float] = []
    script = [status(429, "slow down", {"Retry-After": "0.3"}), reply("ok")]

    def respond(body: dict[str, Any]) -> Behaviour:
        arrivals.append(time.monotonic())
        return script.pop(0) if len(script) > 1 else script[0]

    llm.responder = respond
    output = run_one(spec(llm, backoff_seconds=0.01), weather_case())
    assert output.turns[0].final_response == "ok"
    assert len(arrivals) == 2
    assert arrivals[1] - arrivals[0] >= 0.3  # the server's wait, not the 0.01 s backoff


def test_a_model_that_keeps_failing_ends_the_case_with_the_reason(llm: FakeLLM) -> None:
    llm.script(status(503, "overloaded"))
    output = run_one(spec(llm, retries=1), weather_case())
    assert output.error == "turn turn_1: model call 1: HTTP 503: overloaded (after 2 attempts)"
    assert len(llm.requests) == 2
    llm.script(status(400, "model not found"))
    output = run_one(spec(llm, retries=3), weather_case())
    assert output.error == "turn turn_1: model call 1: HTTP 400: model not found"  # not retried
    assert len(llm.requests) == 3


def test_a_missing_environment_variable_fails_every_case_before_any_call(llm: FakeLLM,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    output = run_one(spec(llm, api_key_env="NOT_SET_ANYWHERE"), weather_case())
    assert output.error == "the environment variable NOT_SET_ANYWHERE (api_key_env) is not set in the worker"
    assert llm.requests == []


def test_an_azure_style_key_header_and_api_version(llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZ_KEY", "az-1")
    llm.script(reply("hi"))
    run_one(spec(llm, api_key_env="AZ_KEY", api_key_header="api-key", api_version="2024-10-21"), weather_case())
    [request] = llm.requests
    assert request.headers["api-key"] == "az-1" and "authorization" not in request.headers
    assert request.path == "/v1/chat/completions?api-version=2024-10-21"


def test_cost_comes_from_the_response_else_from_the_prices(llm: FakeLLM) -> None:
    llm.script(completion({"role": "assistant", "content": "a"},
                          usage={"prompt_tokens": 100, "completion_tokens": 10, "cost": 0.0042}))
    assert run_one(spec(llm), weather_case()).turns[0].usage.cost_usd == pytest.approx(0.0042)
    llm.script(reply("b", prompt_tokens=1000, completion_tokens=500))
    priced = spec(llm, input_cost_per_million=2.0, output_cost_per_million=8.0)
    assert run_one(priced, weather_case()).turns[0].usage.cost_usd == pytest.approx(0.002 + 0.004)


def test_content_parts_are_read_as_text(llm: FakeLLM) -> None:
    llm.script(completion({"role": "assistant", "content": [{"type": "text", "text": "It is "},
                                                             {"type": "text", "text": "warm."}]}))
    assert run_one(spec(llm), weather_case()).turns[0].final_response == "It is warm."


def test_several_turns_carry_the_whole_conversation(llm: FakeLLM) -> None:
    case = weather_case()
    case.conversation.append(Invocation(invocation_id="turn_2", user_content=MessageContent.user("And tomorrow?"),
                                        expected_tool_trajectory=[ToolCall(name="get_forecast",
                                                                           args={"city": "Tokyo", "days": 1},
                                                                           result={"sky": "rain"})]))
    llm.script(tool_calls(("get_weather", {"city": "Tokyo"})), reply("Clear today."),
               tool_calls(("get_forecast", {"city": "Tokyo", "days": 1})), reply("Rain tomorrow."))
    output = run_one(spec(llm, prompt={"system": "Be brief.", "user": "Turn {{turn}}: {{input}}"}), case)
    assert [t.final_response for t in output.turns] == ["Clear today.", "Rain tomorrow."]
    assert output.turns[1].tool_calls[0].result == {"sky": "rain"}
    roles = [(m["role"], m.get("content")) for m in llm.requests[2].body["messages"]]
    assert roles[:2] == [("system", "Be brief."), ("user", "Turn 1: What's the weather in Tokyo?")]
    assert ("assistant", "Clear today.") in roles
    assert roles[-1] == ("user", "Turn 2: And tomorrow?")


def test_structured_input_fills_input_paths(llm: FakeLLM) -> None:
    case = EvalCase(eval_id="calc", conversation=[Invocation(
        invocation_id="turn_1", user_content=MessageContent.json_part("user", {"a": 1, "b": 2, "operator": "+"}))])
    llm.script(reply("3"))
    run_one(spec(llm, prompt={"user": "Compute {{input.a}} {{input.operator}} {{input.b}} from {{input}}"}), case)
    assert llm.requests[0].body["messages"][0]["content"] == (
        'Compute 1 + 2 from {"a":1,"b":2,"operator":"+"}')


def test_a_uipath_mockito_mock_answers_and_raises(llm: FakeLLM) -> None:
    case = EvalCase(eval_id="mocked", conversation=[Invocation(invocation_id="turn_1",
                                                               user_content=MessageContent.user("weather?"))],
                    metadata={"mockingStrategy": {"type": "mockito", "config": [
                        {"function": "get_temperature", "arguments": {"args": [], "kwargs": {"city": "Paris"}},
                         "then": [{"type": "return", "value": {"c": 18}}, {"type": "raise", "value": "down"}]}]}})
    llm.script(tool_calls(("get_temperature", {"city": "Paris"}), ("get_temperature", {"city": "Paris"}),
                          ("get_temperature", {"city": "Rome"})), reply("done"))
    output = run_one(spec(llm), case)
    first, second, other = output.turns[0].tool_calls
    assert (first.result, first.simulated, first.error) == ({"c": 18}, "mock", None)
    assert (second.result, second.simulated, second.error) == ({"error": "down"}, "mock", "the mock raises: down")
    assert (other.simulated, other.error is not None) == ("none", True)


def test_uipath_simulate_tools_has_a_model_play_the_tool(llm: FakeLLM) -> None:
    case = EvalCase(eval_id="simulated", conversation=[Invocation(invocation_id="turn_1",
                                                                  user_content=MessageContent.user("Humidity?"))],
                    metadata={"simulateTools": True, "simulationInstructions": "Humidity is always 40%.",
                              "toolsToSimulate": [{"name": "get_humidity"}]})
    with FakeLLM() as player:
        player.script(reply('```json\n{"humidity": 40}\n```'))
        llm.script(tool_calls(("get_humidity", {"city": "Oslo"})), reply("40%."))
        target_spec = spec(llm, tool_model={"base_url": player.url, "model": "player-model"},
                           tools=[{"type": "function", "function": {"name": "get_humidity", "parameters": {
                               "type": "object", "properties": {"city": {"type": "string"}}}}}])
        output = run_one(target_spec, case)
        [call] = output.turns[0].tool_calls
        assert (call.result, call.simulated) == ({"humidity": 40}, "llm")
        [asked] = player.requests
        assert asked.body["model"] == "player-model" and asked.body["stream"] is False
        prompt = asked.body["messages"][0]["content"]
        assert "Humidity is always 40%." in prompt and '"city": "Oslo"' in prompt and "get_humidity" in prompt


def test_the_target_may_ask_a_model_to_play_every_tool(llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeLLM() as judge:
        monkeypatch.setenv("EVALSITE_LLM_BASE_URL", judge.url)
        monkeypatch.setenv("EVALSITE_LLM_MODEL", "judge-model")
        judge.script(reply("sunny, 30 degrees"))
        llm.script(tool_calls(("get_weather", {"city": "Lima"})), reply("Sunny."))
        output = run_one(spec(llm, simulate_with_llm=True, tool_instructions="Lima is sunny."), weather_case())
        [call] = output.turns[0].tool_calls
        assert (call.result, call.simulated) == ("sunny, 30 degrees", "llm")
        assert judge.requests[0].body["model"] == "judge-model"


def test_a_conversation_scenario_runs_with_the_user_simulator(llm: FakeLLM) -> None:
    case = EvalCase(eval_id="scenario", conversation_scenario=ConversationScenario(
        starting_prompt="Hi, is it raining in Tokyo?", conversation_plan="Ask about Tokyo's weather, then stop."))
    with FakeLLM() as simulator_llm:
        simulator_llm.script(reply("</finished>"))
        llm.script(reply("No rain today."))
        simulate = simulate_user(UserSimulatorConfig(max_turns=5), simulator_llm.client())
        output = run_one(spec(llm), case, simulate_user=simulate)
    assert [t.final_response for t in output.turns] == ["No rain today."]
    assert llm.requests[0].body["messages"][-1]["content"] == "Hi, is it raining in Tokyo?"
    assert len(simulator_llm.requests) == 1  # asked for the next message, which was the stop signal


def test_cases_run_side_by_side_each_with_its_own_conversation(llm: FakeLLM) -> None:
    llm.responder = lambda body: reply(f"answer to {body['messages'][-1]['content']}")
    cases = [EvalCase(eval_id=f"c{i}", conversation=[Invocation(invocation_id="turn_1",
                                                                 user_content=MessageContent.user(f"q{i}"))])
             for i in range(12)]
    target = ModelTarget(spec(llm))
    outputs = target.run_many([(case, 0) for case in cases])
    target.close()
    assert [o.turns[0].final_response for o in outputs] == [f"answer to q{i}" for i in range(12)]
    assert ModelTargetSpec(base_url=llm.url, model="m").concurrency == 8


def test_a_refused_model_url_fails_the_cases_without_calling_it() -> None:
    target_spec = ModelTargetSpec(base_url="http://169.254.169.254/v1", model="m")
    output = run_one(target_spec, weather_case())
    assert output.error.startswith("the model URL is refused: 169.254.169.254")


def test_the_spec_refuses_what_it_cannot_use() -> None:
    with pytest.raises(ValueError, match="unknown variable 'inptu'"):
        ModelTargetSpec(base_url="http://127.0.0.1:9/v1", model="m", prompt={"user": "{{inptu}}"})
    with pytest.raises(ValueError, match="evalsite sets messages, stream itself"):
        ModelTargetSpec(base_url="http://127.0.0.1:9/v1", model="m", parameters={"stream": True, "messages": []})
    with pytest.raises(ValueError, match="name of an environment variable"):
        ModelTargetSpec(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="sk-live-abc def")
    with pytest.raises(ValueError, match="http:// or https://"):
        ModelTargetSpec(base_url="ftp://127.0.0.1/v1", model="m")


def test_tools_are_inferred_from_every_expected_call_of_the_eval_set() -> None:
    cases = [weather_case(), EvalCase(eval_id="b", conversation=[Invocation(
        invocation_id="t", user_content=MessageContent.user("x"), expected_tool_trajectory=[
            ToolCall(name="get_weather", args={"city": "Oslo", "days": 2}),
            ToolCall(name="get_weather", args={"city": "Rome", "days": 2.5}),
        ])], metadata={"toolsToSimulate": [{"name": "get_humidity"}]})]
    tools = {t.function.name: t.function.parameters for t in inferred_tools(cases)}
    assert tools == {
        "get_humidity": {"type": "object", "properties": {}},
        "get_weather": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "number"}},
                        "required": ["city"]},
    }
