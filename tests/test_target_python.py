"""The Python target: a `module:function` agent run turn by turn, with warm-ups, latency and
memory as Upsonic measures them, and every failure recorded instead of raised.

The agents under test are the functions below (imported by the target through their dotted
path, as a user's would be) and the demo agent.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from evaluations.runs.targets.contract import Message
from evaluations.runs.targets.http import NOT_RUNNABLE
from evaluations.runs.targets.python import PythonTarget, PythonTargetSpec
from evaluations.schemas.evalset import ConversationScenario, EvalCase, EvalSet, Invocation, MessageContent

HERE = "tests.test_target_python"
DEMO = Path(__file__).resolve().parent.parent / "evaluations" / "demo" / "travel_agent.evalset.json"

CALLS: list[dict[str, Any]] = []
KEPT: list[bytearray] = []


def counting_agent(request: dict[str, Any]) -> dict[str, Any]:
    CALLS.append(request)
    return {"final_response": f"answer {request['turn_index']}",
            "tool_calls": [{"name": "lookup", "args": {"turn": request["turn_index"]}}],
            "usage": {"input_tokens": 10, "output_tokens": 2}}


def allocating_agent(request: dict[str, Any]) -> str:
    KEPT.append(bytearray(1_000_000))  # stays: the net increase
    scratch = bytearray(4_000_000)  # freed before returning: only the peak sees it
    del scratch
    return "allocated"


def sleepy_agent(request: dict[str, Any]) -> str:
    time.sleep(2)
    return "too late"


def failing_agent(request: dict[str, Any]) -> str:
    raise ValueError("no such city")


def garbage_agent(request: dict[str, Any]) -> int:
    return 42


def echo_agent(request: dict[str, Any]) -> dict[str, Any]:
    return {"final_response": request["user_content"], "metadata": {"history": len(request["history"])}}


async def async_agent(request: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"final_response": "async answer"}


def turn(text: Any, invocation_id: str = "turn_1") -> Invocation:
    content = text if isinstance(text, str) else [{"type": "json", "json": text}]
    return Invocation(invocation_id=invocation_id, user_content=MessageContent(role="user", content=content))


def case(eval_id: str, *texts: Any) -> EvalCase:
    return EvalCase(eval_id=eval_id, conversation=[turn(t, f"turn_{n + 1}") for n, t in enumerate(texts)])


def target(function: str, **spec: Any) -> PythonTarget:
    return PythonTarget(PythonTargetSpec(callable=f"{HERE}:{function}", **spec))


@pytest.fixture(autouse=True)
def _fresh() -> None:
    CALLS.clear()
    KEPT.clear()


class TestRunning:
    def test_each_turn_gets_the_conversation_so_far(self) -> None:
        (output,) = target("counting_agent").run_many([(case("c1", "first", "second"), 0)])
        assert [t.final_response for t in output.turns] == ["answer 0", "answer 1"]
        assert [t.invocation_id for t in output.turns] == ["turn_1", "turn_2"]
        assert CALLS[1]["history"] == [{"role": "user", "content": "first"}, {"role": "assistant", "content": "answer 0"}]
        assert output.turns[1].tool_calls[0].args == {"turn": 1}
        assert output.turns[0].usage is not None and output.turns[0].usage.prompt_tokens == 10

    def test_outputs_come_back_in_the_order_of_the_work(self) -> None:
        work = [(case("b", "x"), 1), (case("a", "y"), 0), (case("b", "x"), 0)]
        outputs = target("counting_agent").run_many(work)
        assert [(o.eval_id, o.iteration) for o in outputs] == [("b", 1), ("a", 0), ("b", 0)]

    def test_a_plain_string_is_the_final_response(self) -> None:
        (output,) = target("allocating_agent").run_many([(case("c", "go"), 0)])
        assert output.turns[0].final_response == "allocated"
        assert output.error is None

    def test_a_coroutine_function_is_awaited(self) -> None:
        (output,) = target("async_agent").run_many([(case("c", "go"), 0)])
        assert output.turns[0].final_response == "async answer"

    def test_the_target_metadata_reaches_every_request(self) -> None:
        target("counting_agent", metadata={"faults": {"wrong_tool": True}}).run_many([(case("c", "a", "b"), 0)])
        assert [r["metadata"] for r in CALLS] == [{"faults": {"wrong_tool": True}}] * 2

    def test_input_overrides_merge_into_structured_input(self) -> None:
        inputs = {"query": "summarise", "file": {"ID": "evaluationFiles/doc.pdf", "FullName": "Doc.pdf"}}
        work = [(case("uipath-1", inputs), 0), (case("other", inputs), 0)]
        outputs = target("echo_agent").run_many(work, input_overrides={"uipath-1": {"file": {"ID": "550e8400"}}})
        assert outputs[0].turns[0].final_response == [
            {"type": "json", "json": {"query": "summarise", "file": {"ID": "550e8400", "FullName": "Doc.pdf"}}}]
        assert outputs[1].turns[0].final_response == [{"type": "json", "json": inputs}]
        assert work[0][0].conversation[0].user_content.content == [{"type": "json", "json": inputs}]  # untouched

    def test_the_demo_agent_passes_its_eval_set(self) -> None:
        evalset = EvalSet.model_validate_json(DEMO.read_text())
        spec = PythonTargetSpec(callable="evaluations.demo.agent:respond")
        outputs = PythonTarget(spec).run_many([(c, 0) for c in evalset.eval_cases])
        for c, output in zip(evalset.eval_cases, outputs, strict=True):
            assert output.error is None
            for invocation, got in zip(c.conversation, output.turns, strict=True):
                assert [(t.name, t.args) for t in got.tool_calls] == [
                    (t.name, t.args) for t in invocation.expected_tool_trajectory]


class TestMeasuring:
    def test_warm_ups_run_first_once_per_case_and_are_not_recorded(self) -> None:
        c = case("c1", "first", "second")
        outputs = target("counting_agent", warmups=2).run_many([(c, 0), (c, 1)])
        assert [r.get("metadata", {}).get("warmup", False) for r in CALLS] == [True] * 4 + [False] * 4
        assert [len(o.turns) for o in outputs] == [2, 2]

    def test_latency_is_measured_per_turn_and_for_the_whole_run(self) -> None:
        (output,) = target("counting_agent").run_many([(case("c", "a", "b"), 0)])
        turn_latencies = [t.latency_seconds for t in output.turns]
        assert all(v is not None and v > 0 for v in turn_latencies)
        assert output.latency_seconds is not None
        assert output.latency_seconds >= sum(v for v in turn_latencies if v is not None)

    def test_memory_is_the_net_increase_and_the_peak_relative_to_the_start(self) -> None:
        (output,) = target("allocating_agent").run_many([(case("c", "go"), 0)])
        assert output.memory_increase_bytes is not None and output.memory_peak_bytes is not None
        assert 1_000_000 <= output.memory_increase_bytes < 1_500_000
        assert output.memory_peak_bytes >= 5_000_000  # kept and scratch were alive together
        assert output.memory_peak_bytes > output.memory_increase_bytes

    def test_memory_is_measured_for_each_iteration_on_its_own(self) -> None:
        c = case("c", "go")
        first, second = target("allocating_agent").run_many([(c, 0), (c, 1)])
        assert first.memory_increase_bytes is not None and second.memory_increase_bytes is not None
        assert 1_000_000 <= first.memory_increase_bytes < 1_500_000
        assert 1_000_000 <= second.memory_increase_bytes < 1_500_000  # not 2 MB: the first run is not counted


class TestFailures:
    def test_an_exception_is_recorded_on_the_turn_and_the_case(self) -> None:
        (output,) = target("failing_agent").run_many([(case("c", "a", "b"), 0)])
        assert output.turns[0].error == "ValueError: no such city"
        assert output.error == "turn turn_1: ValueError: no such city"
        assert len(output.turns) == 1  # the second turn would build on an answer that never came

    def test_a_callable_past_its_timeout_is_abandoned(self) -> None:
        start = time.perf_counter()
        (output,) = target("sleepy_agent", timeout_seconds=0.2).run_many([(case("c", "a"), 0)])
        assert time.perf_counter() - start < 1.5
        assert output.turns[0].error == "timed out after 0.2s"

    def test_a_reply_of_the_wrong_type_is_an_error(self) -> None:
        (output,) = target("garbage_agent").run_many([(case("c", "a"), 0)])
        assert output.error == "turn turn_1: the reply must be a TurnReply object or a string, not '42'"

    @pytest.mark.parametrize("path", [f"{HERE}:no_such_function", "tests.no_such_module:respond", f"{HERE}:CALLS"])
    def test_a_callable_that_cannot_be_loaded_fails_every_output(self, path: str) -> None:
        outputs = PythonTarget(PythonTargetSpec(callable=path)).run_many([(case("a", "x"), 0), (case("b", "y"), 0)])
        assert [o.eval_id for o in outputs] == ["a", "b"]
        assert all(o.error is not None and o.error.startswith(f"cannot load {path}") for o in outputs)

    def test_a_malformed_callable_path_is_refused_by_the_spec(self) -> None:
        with pytest.raises(ValueError):
            PythonTargetSpec(callable="just_a_module")


class TestSimulatedUsers:
    scenario_case = EvalCase(eval_id="sim", conversation_scenario=ConversationScenario(
        starting_prompt="Hi", conversation_plan="Ask about Paris, then stop."))

    def test_a_scenario_without_a_simulator_is_not_runnable(self) -> None:
        (output,) = target("counting_agent").run_many([(self.scenario_case, 0)])
        assert output.error == NOT_RUNNABLE
        assert CALLS == []

    def test_a_simulator_drives_the_conversation_until_it_stops(self) -> None:
        seen: list[list[Message]] = []

        def simulate(c: EvalCase, history: list[Message]) -> str | None:
            seen.append(history)
            return ["Hi", "Weather in Paris?"][len(history) // 2] if len(history) < 4 else None

        spec = PythonTargetSpec(callable=f"{HERE}:counting_agent")
        (output,) = PythonTarget(spec, simulate_user=simulate).run_many([(self.scenario_case, 0)])
        assert [t.invocation_id for t in output.turns] == ["turn_1", "turn_2"]
        assert [r["user_content"] for r in CALLS] == ["Hi", "Weather in Paris?"]
        assert [len(h) for h in seen] == [0, 2, 4]

    def test_simulated_conversations_stop_at_the_turn_limit(self) -> None:
        spec = PythonTargetSpec(callable=f"{HERE}:counting_agent")
        (output,) = PythonTarget(spec, simulate_user=lambda c, h: "again", max_simulated_turns=3).run_many(
            [(self.scenario_case, 0)])
        assert len(output.turns) == 3

    def test_a_failing_simulator_is_recorded(self) -> None:
        def broken(c: EvalCase, history: list[Message]) -> str:
            raise RuntimeError("judge model unavailable")

        spec = PythonTargetSpec(callable=f"{HERE}:counting_agent")
        (output,) = PythonTarget(spec, simulate_user=broken).run_many([(self.scenario_case, 0)])
        assert output.error == "the user simulator failed: RuntimeError: judge model unavailable"
