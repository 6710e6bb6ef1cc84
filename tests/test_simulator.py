"""The LLM user simulator (evaluations/runs/simulator.py) against a real chat-completions server on
127.0.0.1: the starting prompt, the next message, the stop signal, the turn limit, custom
instructions, and failures."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from evaluations.evaluators.llm import LLMError
from evaluations.runs.simulator import Message, Status, UserSimulator, render_instructions, simulate_user
from evaluations.schemas.evalset import ConversationScenario, UserSimulatorConfig
from tests.llm_server import FakeLLM, hang, reply

SCENARIO = ConversationScenario(
    starting_prompt="Hi, I need to change my flight.",
    conversation_plan="Ask to move flight BA117 to Friday. Accept any afternoon slot.",
    user_persona={"id": "busy_traveller", "behaviors": ["terse", "polite"]},
)
SO_FAR = [Message("user", "Hi, I need to change my flight."), Message("agent", "Sure, which flight?")]


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def test_the_first_message_is_the_starting_prompt_without_a_call(llm: FakeLLM) -> None:
    result = UserSimulator(llm.client()).next_message(SCENARIO, [], UserSimulatorConfig())
    assert (result.status, result.message, result.stop) == (Status.SUCCESS, "Hi, I need to change my flight.", False)
    assert llm.requests == []


def test_the_next_message_comes_from_the_llm_with_the_plan_persona_and_history(llm: FakeLLM) -> None:
    llm.script(reply("  BA117, please move it to Friday afternoon.\n"))
    result = UserSimulator(llm.client()).next_message(SCENARIO, SO_FAR, UserSimulatorConfig())
    assert (result.status, result.message) == (Status.SUCCESS, "BA117, please move it to Friday afternoon.")
    [request] = llm.requests
    prompt = request.body["messages"][0]["content"]
    assert "Ask to move flight BA117 to Friday." in prompt
    assert '"busy_traveller"' in prompt
    assert "user: Hi, I need to change my flight.\n\nagent: Sure, which flight?" in prompt
    assert "</finished>" in prompt
    assert request.body["model"] == "judge-model"  # the config names no model: the client's


def test_a_model_named_in_the_config_is_used(llm: FakeLLM) -> None:
    llm.script(reply("Friday"))
    UserSimulator(llm.client()).next_message(SCENARIO, SO_FAR, UserSimulatorConfig(model="sim-model",
                                                                                   options={"temperature": 0.9}))
    assert llm.requests[0].body["model"] == "sim-model"
    assert llm.requests[0].body["temperature"] == 0.9


def test_the_schemas_default_model_does_not_override_the_clients(llm: FakeLLM) -> None:
    llm.script(reply("Friday"))
    stored = UserSimulatorConfig.model_validate(UserSimulatorConfig().model_dump())
    UserSimulator(llm.client()).next_message(SCENARIO, SO_FAR, stored)
    assert llm.requests[0].body["model"] == "judge-model"


def test_the_stop_signal_ends_the_conversation(llm: FakeLLM) -> None:
    llm.script(reply("Thanks, that's all. </FINISHED>"))
    result = UserSimulator(llm.client()).next_message(SCENARIO, SO_FAR, UserSimulatorConfig())
    assert (result.status, result.message, result.stop) == (Status.STOP_SIGNAL_DETECTED, None, True)


def test_the_turn_limit_stops_without_a_call(llm: FakeLLM) -> None:
    history = [*SO_FAR, Message("user", "BA117"), Message("agent", "Done.")]
    result = UserSimulator(llm.client()).next_message(SCENARIO, history, UserSimulatorConfig(max_turns=2))
    assert result.status is Status.TURN_LIMIT_REACHED
    assert llm.requests == []


def test_adk_minus_one_lifts_the_limit(llm: FakeLLM) -> None:
    llm.script(reply("one more thing"))
    history = [*SO_FAR, Message("user", "BA117"), Message("agent", "Done.")]
    config = UserSimulatorConfig(max_turns=2, options={"max_allowed_invocations": -1})
    assert UserSimulator(llm.client()).next_message(SCENARIO, history, config).message == "one more thing"


def test_a_scenario_without_starting_prompt_asks_the_llm_for_the_first_message(llm: FakeLLM) -> None:
    llm.script(reply("Hello?"))
    scenario = ConversationScenario(conversation_plan="Say hello.")
    assert UserSimulator(llm.client()).next_message(scenario, [], UserSimulatorConfig()).message == "Hello?"
    assert "(nothing yet)" in llm.requests[0].body["messages"][0]["content"]


def test_custom_instructions_use_adks_placeholders(llm: FakeLLM) -> None:
    llm.script(reply("ok"))
    template = "PLAN={{ conversation_plan }} STOP={{stop_signal}} HISTORY={{ conversation_history }}"
    UserSimulator(llm.client()).next_message(SCENARIO, SO_FAR, UserSimulatorConfig(
        options={"custom_instructions": template}))
    assert llm.requests[0].body["messages"][0]["content"] == (
        "PLAN=Ask to move flight BA117 to Friday. Accept any afternoon slot. STOP=</finished> "
        "HISTORY=user: Hi, I need to change my flight.\n\nagent: Sure, which flight?")


def test_render_instructions_leaves_unknown_placeholders(llm: FakeLLM) -> None:
    assert render_instructions("{{ a }} {{ b }}", {"a": "x"}) == "x {{ b }}"


def test_a_failing_llm_raises_an_llm_error_for_the_caller(llm: FakeLLM) -> None:
    llm.script(hang(5))
    with pytest.raises(LLMError, match="did not answer"):
        UserSimulator(llm.client(timeout=0.2, max_retries=0)).next_message(SCENARIO, SO_FAR, UserSimulatorConfig())



def test_simulate_user_drives_a_scenario_case_through_the_targets_turn_loop(llm: FakeLLM) -> None:
    from evaluations.runs.targets.contract import TurnReply
    from evaluations.runs.targets.http import TurnResult, drive_case
    from evaluations.schemas.evalset import EvalCase

    llm.script(reply("Move BA117 to Friday."), reply("Thanks! </finished>"))
    agent_saw: list[Any] = []

    def agent(request: dict[str, Any]) -> TurnResult:
        agent_saw.append(request["user_content"])
        return TurnResult(reply=TurnReply(final_response=f"answer {len(agent_saw)}"), latency_seconds=0.1)

    case = EvalCase(eval_id="s", conversation_scenario=SCENARIO)
    output = drive_case(case, 0, agent, simulate_user=simulate_user(UserSimulatorConfig(max_turns=5), llm.client()))
    assert agent_saw == ["Hi, I need to change my flight.", "Move BA117 to Friday."]
    assert [t.final_response for t in output.turns] == ["answer 1", "answer 2"]
    assert output.error is None
    # The second LLM call saw the whole conversation, the agent's answers as "agent".
    assert "user: Move BA117 to Friday.\n\nagent: answer 2" in llm.requests[1].body["messages"][0]["content"]


def test_simulate_user_ends_a_scripted_case_at_once(llm: FakeLLM) -> None:
    from evaluations.schemas.evalset import EvalCase

    assert simulate_user(UserSimulatorConfig(), llm.client())(EvalCase(eval_id="scripted"), []) is None
