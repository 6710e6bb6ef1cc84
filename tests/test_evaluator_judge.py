"""LLM judges (evaluations/evaluators/judge.py) against a real chat-completions server on
127.0.0.1: Upsonic's EvaluationScore per turn, iterations averaged, weighted rubrics, failures
recorded on the score; UiPath's output and trajectory judges with their prompts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from evaluations.evaluators.base import Level, ScoreResult
from evaluations.evaluators.judge import (
    LLMJudgeEvaluator,
    UiPathLegacyLLMJudgeEvaluator,
    UiPathLegacyTrajectoryEvaluator,
    UiPathLLMJudgeOutputEvaluator,
    UiPathLLMJudgeStrictJsonEvaluator,
    UiPathLLMJudgeTrajectoryEvaluator,
    normalise,
)
from evaluations.interop import files_from_paths
from evaluations.interop.uipath.evalset import reader as uipath_reader
from evaluations.schemas.evalset import (
    ConversationScenario,
    CriterionConfig,
    EvalCase,
    Invocation,
    MessageContent,
    Rubric,
)
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, TurnOutput
from tests.conftest import REALWORLD
from tests.llm_server import Behaviour, FakeLLM, hang, reply, reply_json, status

CALCULATOR = REALWORLD / "uipath" / "calculator"


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def verdict(score: float, is_met: bool = True, reasoning: str = "because", critique: str = "none") -> Behaviour:
    return reply_json({"reasoning": reasoning, "score": score, "is_met": is_met, "critique": critique})


def capital_case(**extra: Any) -> EvalCase:
    return EvalCase(eval_id="capital", conversation=[Invocation(
        invocation_id="turn_1", user_content=MessageContent.user("What is the capital of France?"),
        expected_final_response=MessageContent.assistant("Paris"), **extra)])


def answered(*answers: Any) -> AgentOutput:
    return AgentOutput(eval_id="capital", turns=[TurnOutput(final_response=a) for a in answers])


def judge(llm: FakeLLM, **client: Any) -> LLMJudgeEvaluator:
    return LLMJudgeEvaluator(client=llm.client(**client))


def turn(results: list[ScoreResult], index: int = 0) -> ScoreResult:
    return [r for r in results if r.applies_to is Level.INTERACTION][index]


def overall(results: list[ScoreResult]) -> ScoreResult:
    [result] = [r for r in results if r.applies_to is Level.CONVERSATION]
    return result


class TestVerdicts:
    def test_a_good_json_verdict_scores_the_turn_and_the_conversation(self, llm: FakeLLM) -> None:
        llm.script(verdict(8.5, reasoning="Correct city.", critique="Could be shorter."))
        results = judge(llm).score(capital_case(), answered("The capital of France is Paris."),
                                   CriterionConfig(threshold=0.7), "llm_judge")
        first = turn(results)
        assert first.raw_value == 8.5
        assert first.score == pytest.approx(7.5 / 9)
        assert first.passed is True
        accuracy = first.justification["accuracy"]
        assert accuracy["average_score"] == 8.5
        assert accuracy["user_query"] == "What is the capital of France?"
        assert accuracy["expected_output"] == "Paris"
        assert accuracy["generated_output"] == "The capital of France is Paris."
        assert accuracy["evaluation_scores"] == [{"score": 8.5, "reasoning": "Correct city.", "is_met": True,
                                                  "critique": "Could be shorter."}]
        assert first.justification["usage"] == {"calls": 1, "prompt_tokens": 10, "completion_tokens": 5,
                                                "total_tokens": 15}
        assert overall(results).score == first.score

    def test_the_prompt_carries_the_query_the_expected_and_the_actual_answer(self, llm: FakeLLM) -> None:
        llm.script(verdict(9))
        judge(llm).score(capital_case(), answered("Paris, of course."), CriterionConfig(options={
            "guidelines": "Accept any phrasing."}), "llm_judge")
        [request] = llm.requests
        system, user = request.body["messages"]
        assert system["role"] == "system" and "1" in system["content"] and "10" in system["content"]
        assert "<UserQuery>\nWhat is the capital of France?\n</UserQuery>" in user["content"]
        assert "\nParis\n</ExpectedAnswer>" in user["content"]
        assert "\nParis, of course.\n</GeneratedAnswer>" in user["content"]
        assert "Accept any phrasing." in user["content"]
        assert request.body["response_format"]["json_schema"]["name"] == "EvaluationScore"
        assert request.body["model"] == "judge-model"  # the client's: the config sets no judge_model

    def test_a_judge_model_set_in_the_config_is_used(self, llm: FakeLLM) -> None:
        llm.script(verdict(9))
        judge(llm).score(capital_case(), answered("Paris"), CriterionConfig(judge_model="gpt-4.1"), "llm_judge")
        assert llm.requests[0].body["model"] == "gpt-4.1"

    def test_a_config_stored_with_every_field_still_uses_the_deployments_model(self, llm: FakeLLM) -> None:
        llm.script(verdict(9))
        stored = CriterionConfig.model_validate(CriterionConfig().model_dump(mode="json"))  # as a run keeps it
        assert stored.judge_model == "gpt-4o-mini"
        judge(llm).score(capital_case(), answered("Paris"), stored, "llm_judge")
        assert llm.requests[0].body["model"] == "judge-model"

    def test_a_fenced_json_verdict_is_accepted(self, llm: FakeLLM) -> None:
        llm.script(reply('```json\n{"reasoning": "ok", "score": 10, "is_met": true, "critique": "none"}\n```'))
        results = judge(llm).score(capital_case(), answered("Paris"), CriterionConfig(), "llm_judge")
        assert (turn(results).score, turn(results).raw_value) == (1.0, 10)

    def test_an_invalid_json_verdict_is_recorded_as_an_error(self, llm: FakeLLM) -> None:
        llm.script(reply("Score: 8/10, looks right"))
        results = judge(llm).score(capital_case(), answered("Paris"), CriterionConfig(), "llm_judge")
        first = turn(results)
        assert (first.score, first.passed) == (None, None)
        assert first.error.startswith("LLM judge failed: the reply is not JSON")
        assert overall(results).error == "no turn could be scored"

    def test_a_score_outside_one_to_ten_is_an_error(self, llm: FakeLLM) -> None:
        llm.script(verdict(0))
        first = turn(judge(llm).score(capital_case(), answered("Paris"), CriterionConfig(), "llm_judge"))
        assert "does not match EvaluationScore: score" in first.error

    def test_a_500_then_a_success_is_retried(self, llm: FakeLLM) -> None:
        llm.script(status(500), verdict(7))
        first = turn(judge(llm).score(capital_case(), answered("Paris"), CriterionConfig(), "llm_judge"))
        assert first.raw_value == 7
        assert first.error == ""
        assert len(llm.requests) == 2

    def test_a_hanging_judge_times_out_and_the_error_is_recorded(self, llm: FakeLLM) -> None:
        llm.script(hang(5))
        results = judge(llm, timeout=0.2, max_retries=0).score(capital_case(), answered("Paris"), CriterionConfig(),
                                                               "llm_judge")
        assert "did not answer within 0.2 s" in turn(results).error
        assert turn(results).score is None

    def test_an_unanswered_turn_scores_zero_without_a_call(self, llm: FakeLLM) -> None:
        first = turn(judge(llm).score(capital_case(), answered(), CriterionConfig(), "llm_judge"))
        assert (first.score, first.passed) == (0.0, False)
        assert first.justification["no_response"] is True
        assert llm.requests == []

    def test_a_turn_without_expected_response_or_rubrics_is_not_judged(self, llm: FakeLLM) -> None:
        case = EvalCase(eval_id="c", conversation=[Invocation(invocation_id="t", user_content=MessageContent.user("hi"))])
        assert judge(llm).score(case, answered("hello"), CriterionConfig(), "llm_judge") == []
        assert llm.requests == []

    def test_the_normalised_score_maps_one_to_ten_onto_zero_to_one(self) -> None:
        assert (normalise(1), normalise(5.5), normalise(10)) == (0.0, 0.5, 1.0)


class TestIterations:
    def test_iterations_are_averaged_into_the_accuracy_result(self, llm: FakeLLM) -> None:
        llm.script(verdict(6), verdict(9, is_met=True), verdict(3, is_met=False))
        first = turn(judge(llm).score(capital_case(), answered("Paris"),
                                      CriterionConfig(threshold=0.5, options={"iterations": 3}), "llm_judge"))
        assert len(llm.requests) == 3
        assert first.raw_value == 6.0
        assert first.score == pytest.approx(5 / 9)
        assert first.passed is True
        assert [s["score"] for s in first.justification["accuracy"]["evaluation_scores"]] == [6, 9, 3]
        assert first.justification["is_met"] is True  # 2 of 3 said met

    def test_adk_num_samples_stands_for_iterations(self, llm: FakeLLM) -> None:
        llm.script(verdict(4), verdict(8))
        first = turn(judge(llm).score(capital_case(), answered("Paris"),
                                      CriterionConfig(options={"judge_model_options": {"num_samples": 2}}),
                                      "llm_judge"))
        assert first.raw_value == 6.0
        assert len(llm.requests) == 2

    def test_one_failed_iteration_fails_the_turn(self, llm: FakeLLM) -> None:
        llm.script(verdict(9), status(400, "context length exceeded"))
        first = turn(judge(llm).score(capital_case(), answered("Paris"), CriterionConfig(options={"iterations": 2}),
                                      "llm_judge"))
        assert "HTTP 400: context length exceeded" in first.error
        assert first.justification["usage"]["calls"] == 1


def rubric_responder(scores: dict[str, float]) -> Any:
    def respond(body: dict[str, Any]) -> Behaviour:
        prompt = body["messages"][-1]["content"]
        [name] = [n for n in scores if f"Judge only this criterion: {n}." in prompt]
        return verdict(scores[name], is_met=scores[name] >= 5)
    return respond


class TestRubrics:
    RUBRICS = [
        Rubric(name="helpfulness", description="How helpful is the response?",
               scoring_guide="5=Very helpful, 1=Not helpful at all", weight=2.0),
        Rubric(name="accuracy", description="Is the information accurate?", scoring_guide="", weight=1.5),
        Rubric(name="clarity", description="Is the response clear?", scoring_guide="5=Very clear", weight=1.0),
    ]

    def test_each_rubric_is_judged_and_weighted(self, llm: FakeLLM) -> None:
        llm.responder = rubric_responder({"helpfulness": 10, "accuracy": 4, "clarity": 7})
        first = turn(judge(llm).score(capital_case(), answered("Paris"),
                                      CriterionConfig(threshold=0.7, rubrics=self.RUBRICS), "llm_judge"))
        # (2*10 + 1.5*4 + 1*7) / 4.5 = 33 / 4.5
        assert first.raw_value == pytest.approx(33 / 4.5)
        assert first.score == pytest.approx((33 / 4.5 - 1) / 9)
        assert first.passed is True
        assert [(r["name"], r["weight"], r["average_score"]) for r in first.justification["rubrics"]] == [
            ("helpfulness", 2.0, 10), ("accuracy", 1.5, 4), ("clarity", 1.0, 7)]
        assert first.justification["is_met"] is False  # accuracy was not met
        assert len(llm.requests) == 3
        prompt = llm.requests[0].body["messages"][-1]["content"]
        assert "What to evaluate: How helpful is the response?" in prompt
        assert "How to score: 5=Very helpful, 1=Not helpful at all" in prompt

    def test_rubrics_times_iterations_calls_each_averaged(self, llm: FakeLLM) -> None:
        answers = {"helpfulness": iter([10, 8]), "accuracy": iter([2, 4])}
        llm.responder = lambda body: verdict(next(answers[next(
            n for n in answers if f"criterion: {n}." in body["messages"][-1]["content"])]))
        first = turn(judge(llm).score(capital_case(), answered("Paris"), CriterionConfig(
            rubrics=self.RUBRICS[:2], options={"iterations": 2}), "llm_judge"))
        assert len(llm.requests) == 4
        assert first.raw_value == pytest.approx((2 * 9 + 1.5 * 3) / 3.5)

    def test_case_and_invocation_rubrics_join_the_config_ones_and_the_narrowest_wins(self, llm: FakeLLM) -> None:
        llm.responder = lambda body: verdict(5)
        case = capital_case(rubrics=[Rubric(name="clarity", description="Is it one word?", weight=3.0)])
        case.rubrics = [Rubric(name="tone", description="Is it polite?")]
        first = turn(judge(llm).score(case, answered("Paris"), CriterionConfig(rubrics=self.RUBRICS), "llm_judge"))
        by_name = {r["name"]: r for r in first.justification["rubrics"]}
        assert set(by_name) == {"helpfulness", "accuracy", "clarity", "tone"}
        assert by_name["clarity"]["description"] == "Is it one word?"
        assert by_name["clarity"]["weight"] == 3.0

    def test_rubrics_alone_are_enough_to_judge_a_turn(self, llm: FakeLLM) -> None:
        llm.responder = lambda body: verdict(10)
        case = EvalCase(eval_id="c", conversation=[Invocation(invocation_id="t", user_content=MessageContent.user("hi"),
                                                              rubrics=[Rubric(name="tone", description="polite?")])])
        first = turn(judge(llm).score(case, answered("Hello!"), CriterionConfig(), "llm_judge"))
        assert first.score == 1.0
        assert "No reference answer is given." in llm.requests[0].body["messages"][-1]["content"]

    def test_weights_that_add_up_to_zero_are_an_error(self, llm: FakeLLM) -> None:
        llm.responder = lambda body: verdict(5)
        rubrics = [Rubric(name="a", description="a", weight=0.0)]
        first = turn(judge(llm).score(capital_case(), answered("Paris"), CriterionConfig(rubrics=rubrics), "j"))
        assert "weights add up to 0" in first.error


class TestConversations:
    def test_each_turn_is_judged_and_the_conversation_is_their_mean(self, llm: FakeLLM) -> None:
        llm.script(verdict(10), verdict(4))
        case = EvalCase(eval_id="c", conversation=[
            Invocation(invocation_id=f"t{i}", user_content=MessageContent.user(q),
                       expected_final_response=MessageContent.assistant(a))
            for i, (q, a) in enumerate([("capital of France?", "Paris"), ("and Italy?", "Rome")])])
        results = judge(llm).score(case, answered("Paris", "Milan"), CriterionConfig(threshold=0.5), "j")
        assert [(r.applies_to, r.score) for r in results] == [
            (Level.INTERACTION, 1.0), (Level.INTERACTION, pytest.approx(3 / 9)), (Level.CONVERSATION, pytest.approx(2 / 3))]

    def test_a_scenario_conversation_is_judged_as_a_whole(self, llm: FakeLLM) -> None:
        llm.script(verdict(8))
        case = EvalCase(eval_id="s", conversation_scenario=ConversationScenario(
            starting_prompt="I want a refund", conversation_plan="Ask for a refund of order 42.",
            expected_outcome="The agent issues the refund."))
        out = AgentOutput(eval_id="s", turns=[
            TurnOutput(final_response="Which order?", metadata={"user_content": "I want a refund"}),
            TurnOutput(final_response="Refund issued.", metadata={"user_content": "Order 42"})])
        [result] = judge(llm).score(case, out, CriterionConfig(), "j")
        assert (result.applies_to, result.raw_value) == (Level.CONVERSATION, 8)
        prompt = llm.requests[0].body["messages"][-1]["content"]
        assert "user: Order 42\nagent: Refund issued." in prompt
        assert "The agent issues the refund." in prompt


# --- UiPath ---------------------------------------------------------------------------------------


def uipath_verdict(score: float, justification: str = "close enough") -> Behaviour:
    return reply_json({"justification": justification, "score": score})


def calculator_config(name: str, threshold: float = 0.7) -> CriterionConfig:
    doc = json.loads((CALCULATOR / "evaluators" / name).read_text())
    return CriterionConfig(threshold=threshold, options=dict(doc["evaluatorConfig"]))


def uipath_case(criteria: dict[str, Any] | None, metadata: dict[str, Any] | None = None) -> EvalCase:
    return EvalCase(eval_id="u", conversation=[Invocation(
        invocation_id="turn_1", user_content=MessageContent.json_part("user", {"a": 2, "b": 3, "operator": "+"}))],
        criteria={"J": criteria}, metadata=metadata or {})


class TestUiPathOutputJudges:
    def test_the_definition_prompt_gets_str_of_the_values_and_the_score_is_divided_by_100(self, llm: FakeLLM) -> None:
        llm.script(uipath_verdict(87.456))
        evaluator = UiPathLLMJudgeOutputEvaluator(client=llm.client())
        [result] = evaluator.score(uipath_case(None), answered({"result": 5}),
                                   calculator_config("llm-judge-semantic-similarity.json"), "J")
        assert result.score == 0.87  # rounded to 2 places, as UiPath does
        assert result.raw_value == 87.456
        assert result.passed is True
        assert result.justification["justification"] == "close enough"
        assert result.justification["expected"] == result.justification["actual"] == "{'result': 5.0}"
        system, user = llm.requests[0].body["messages"]
        assert user["content"] == ("Compare the following outputs and evaluate their semantic similarity.\n\n"
                                   "Actual Output: {'result': 5.0}\nExpected Output: {'result': 5.0}\n\n"
                                   "Provide a score from 0-100 where 100 means semantically identical and 0 means "
                                   "completely different.")
        assert "0 to 100" in system["content"]
        # The definition names a model: UiPath sends it.
        assert llm.requests[0].body["model"] == "anthropic.claude-sonnet-4-5-20250929-v1:0"
        assert llm.requests[0].body["response_format"]["json_schema"]["name"] == "UiPathVerdict"

    def test_missing_placeholders_are_appended_in_tagged_sections(self, llm: FakeLLM) -> None:
        llm.script(uipath_verdict(50))
        cfg = CriterionConfig(options={"prompt": "Are these the same?"})
        UiPathLLMJudgeOutputEvaluator(client=llm.client()).score(
            uipath_case({"expectedOutput": "Paris"}), answered("Rome"), cfg, "J")
        prompt = llm.requests[0].body["messages"][-1]["content"]
        assert prompt == ("Are these the same?\n\n## Actual Output\n<ActualOutput>\nRome\n</ActualOutput>"
                          "\n\n## Expected Output\n<ExpectedOutput>\nParis\n</ExpectedOutput>")
        assert llm.requests[0].body["model"] == "judge-model"

    def test_the_strict_json_judge_uses_its_own_system_prompt_and_default_prompt(self, llm: FakeLLM) -> None:
        llm.script(uipath_verdict(100))
        cfg = CriterionConfig(options={})
        [result] = UiPathLLMJudgeStrictJsonEvaluator(client=llm.client()).score(
            uipath_case({"expectedOutput": {"a": 1}}), answered({"a": 1}), cfg, "J")
        assert result.score == 1.0
        system, user = llm.requests[0].body["messages"]
        assert "100/N" in system["content"]
        assert user["content"] == "ExpectedOutput (ground truth):\n{'a': 1.0}\n\nActualOutput (model answer):\n{'a': 1.0}"

    def test_a_case_without_the_evaluator_is_not_scored_and_calls_nothing(self, llm: FakeLLM) -> None:
        case = EvalCase(eval_id="u", criteria={"Other": None})
        assert UiPathLLMJudgeOutputEvaluator(client=llm.client()).score(
            case, answered("x"), calculator_config("llm-judge-semantic-similarity.json"), "J") == []
        assert llm.requests == []

    def test_a_failed_call_is_recorded(self, llm: FakeLLM) -> None:
        llm.script(reply("sure, 80"))
        [result] = UiPathLLMJudgeOutputEvaluator(client=llm.client()).score(
            uipath_case({"expectedOutput": "x"}), answered("x"), CriterionConfig(), "J")
        assert result.score is None
        assert result.error.startswith("LLM judge failed:")

    def test_a_score_above_100_is_an_error(self, llm: FakeLLM) -> None:
        llm.script(uipath_verdict(150))
        [result] = UiPathLLMJudgeOutputEvaluator(client=llm.client()).score(
            uipath_case({"expectedOutput": "x"}), answered("x"), CriterionConfig(), "J")
        assert "does not match UiPathVerdict: score" in result.error

    def test_the_legacy_judge_uses_the_definition_prompt_and_keeps_the_score_unrounded(self, llm: FakeLLM) -> None:
        llm.script(uipath_verdict(66.666))
        cfg = CriterionConfig(options={"prompt": "Expected {{ExpectedOutput}}, got {{ActualOutput}}. Input: "
                                                 "{{UserOrSyntheticInput}}", "targetOutputKey": "result",
                                       "model": "same-as-agent"})
        [result] = UiPathLegacyLLMJudgeEvaluator(client=llm.client()).score(
            uipath_case({"expectedOutput": {"result": 5.0}, "expectedAgentBehavior": ""}), answered({"value": 5}),
            cfg, "J")
        assert result.score == pytest.approx(0.66666)
        # The key exists on the expected side only: the actual output is kept whole.
        assert llm.requests[0].body["messages"][-1]["content"] == (
            "Expected 5.0, got {'value': 5}. Input: {'a': 2, 'b': 3, 'operator': '+'}")
        assert llm.requests[0].body["model"] == "judge-model"  # "same-as-agent": the deployment's model

    def test_the_legacy_judge_refuses_an_empty_expected_output(self, llm: FakeLLM) -> None:
        [result] = UiPathLegacyLLMJudgeEvaluator(client=llm.client()).score(
            uipath_case({"expectedOutput": {}}), answered("x"), CriterionConfig(options={"prompt": "p"}), "J")
        assert result.error == "the expected output is empty"
        assert llm.requests == []


class TestUiPathTrajectoryJudges:
    def test_the_calculator_legacy_llm_as_a_judge_judges_the_run_history(self, llm: FakeLLM) -> None:
        # calculator/evaluators/legacy-llm-as-a-judge.json is category 3: a trajectory judge.
        files = files_from_paths([CALCULATOR])
        [legacy] = [f for f in files if f.name.endswith("eval-sets/legacy.json")]
        parsed = uipath_reader.parse(legacy, [f for f in files if uipath_reader.is_companion(f)])
        assert parsed.default_config is not None
        criterion = parsed.default_config.criteria["llm-as-a-judge"]
        assert criterion.evaluator == "uipath-legacy-trajectory"
        case = parsed.evalset.eval_cases[1]  # test-random-addition-using-llm: simulated tools
        out = AgentOutput(eval_id=case.eval_id, turns=[TurnOutput(
            final_response={"result": 2.0},
            tool_calls=[OutputToolCall(name="get_random_operator", args={}, result="+")])])
        llm.script(uipath_verdict(90.5))
        [result] = UiPathLegacyTrajectoryEvaluator(client=llm.client()).score(case, out, criterion, "llm-as-a-judge")
        assert result.score == pytest.approx(0.905)
        assert result.raw_value == 90.5
        assert result.passed is True
        prompt = llm.requests[0].body["messages"][-1]["content"]
        assert "ExpectedAgentBehavior:\nThe operation should produce the right output.\n" in prompt
        assert "SimulationInstructions:\nThe random operator is '+'.\n" in prompt
        assert "UserOrSyntheticInputGivenToAgent:\n{'a': 1, 'b': 1, 'operator': 'random'}\n" in prompt
        history = json.loads(prompt.split("AgentRunHistory:\n", 1)[1])
        assert history == [{"turn": 1, "tool": "get_random_operator", "args": {}, "result": "+"},
                           {"turn": 1, "agent_response": {"result": 2.0}}]
        assert llm.requests[0].body["model"] == "gpt-4.1-2025-04-14"

    def test_the_legacy_trajectory_prompt_needs_both_placeholders(self, llm: FakeLLM) -> None:
        [result] = UiPathLegacyTrajectoryEvaluator(client=llm.client()).score(
            uipath_case({"expectedAgentBehavior": "x"}), answered("y"),
            CriterionConfig(options={"prompt": "Only {{AgentRunHistory}}"}), "J")
        assert "must contain {{ExpectedAgentBehavior}} and {{AgentRunHistory}}" in result.error

    def test_the_current_trajectory_judge_takes_default_criteria(self, llm: FakeLLM) -> None:
        doc = json.loads((CALCULATOR / "evaluators" / "trajectory.json").read_text())
        cfg = CriterionConfig(options=doc["evaluatorConfig"])
        llm.script(uipath_verdict(73.333))
        [result] = UiPathLLMJudgeTrajectoryEvaluator(client=llm.client()).score(
            uipath_case(None), answered({"result": 5}), cfg, "J")
        assert result.score == 0.73
        assert result.justification["expected"] == ("The agent should correctly perform the calculation and return "
                                                     "the result.")
        prompt = llm.requests[0].body["messages"][-1]["content"]
        assert prompt.startswith("Evaluate the agent's execution trajectory based on the expected behavior.\n\n"
                                 "Expected Agent Behavior: The agent should correctly perform the calculation")


def test_the_registry_knows_the_judges() -> None:
    from evaluations.evaluators import get_evaluator_class

    for name in ("llm_judge", "uipath-llm-judge-output", "uipath-llm-judge-output-semantic-similarity",
                 "uipath-llm-judge-output-strict-json-similarity", "uipath-legacy-llm-as-a-judge",
                 "uipath-llm-judge-trajectory-similarity", "uipath-llm-judge-trajectory-simulation",
                 "uipath-llm-judge-trajectory",
                 "uipath-legacy-trajectory"):
        cls = get_evaluator_class(name)
        assert cls.name == name
        assert cls.group == "llm_judge"


def test_a_judge_built_without_a_client_reads_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                              llm: FakeLLM) -> None:
    evaluator = LLMJudgeEvaluator()  # as the run engine builds it
    monkeypatch.setenv("EVALSITE_LLM_BASE_URL", llm.url)
    monkeypatch.setenv("EVALSITE_LLM_MODEL", "env-judge")
    llm.script(verdict(10))
    first = turn(evaluator.score(capital_case(), answered("Paris"), CriterionConfig(), "llm_judge"))
    assert first.score == 1.0
    assert llm.requests[0].body["model"] == "env-judge"
