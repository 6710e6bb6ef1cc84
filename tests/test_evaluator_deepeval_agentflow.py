"""DeepEval's and AgentFlow's deterministic criteria (evaluations/evaluators/deepeval.py,
agentflow.py), with numbers taken from deepeval 4.3.1 and 10xscale-agentflow 0.10.1 on the
same inputs (tests/differential/ checks them against the libraries on generated variants).
Pure: no database, no network."""

from __future__ import annotations

from typing import Any

import pytest

from evaluations.evaluators import get_evaluator_class
from evaluations.evaluators.base import Level, ScoreResult
from evaluations.schemas.evalset import CriterionConfig, EvalCase, Invocation, MatchType, MessageContent, ToolCall
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, TurnOutput

WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
FORECAST = {"name": "get_forecast", "args": {"city": "Paris", "days": 1}}


def case(*turns: tuple[list[dict[str, Any]], str | None]) -> EvalCase:
    return EvalCase(eval_id="c", conversation=[Invocation(
        invocation_id=f"t{i}", user_content=MessageContent.user("q"),
        expected_tool_trajectory=[ToolCall(**c) for c in calls],
        expected_final_response=MessageContent.assistant(text) if text is not None else None)
        for i, (calls, text) in enumerate(turns)])


def output(*turns: tuple[list[dict[str, Any]], Any]) -> AgentOutput:
    return AgentOutput(eval_id="c", turns=[TurnOutput(final_response=text,
                                                      tool_calls=[OutputToolCall(**c) for c in calls])
                                           for calls, text in turns])


def score(evaluator: str, c: EvalCase, o: AgentOutput, threshold: float = 0.5, **config: Any) -> ScoreResult:
    results = get_evaluator_class(evaluator)().score(c, o, CriterionConfig(threshold=threshold, **config), "crit")
    [result] = [r for r in results if r.applies_to is Level.CONVERSATION]
    return result


class TestDeepEvalToolCorrectness:
    def test_order_is_ignored_unless_asked(self) -> None:
        c, o = case(([WEATHER, FORECAST], None)), output(([FORECAST, WEATHER], "ok"))
        assert score("deepeval_tool_correctness", c, o).score == 1.0
        assert score("deepeval_tool_correctness", c, o, options={"should_consider_ordering": True}).score == 0.5

    def test_input_parameters_score_the_share_of_equal_keys(self) -> None:
        changed = {"name": "get_forecast", "args": {"city": "Paris", "days": 2}}
        result = score("deepeval_tool_correctness", case(([WEATHER, FORECAST], None)), output(([WEATHER, changed], "")),
                       options={"evaluation_params": ["input_parameters"]})
        assert (result.score, result.passed) == (0.75, True)  # (1 + 1/2) / 2

    def test_exact_match_needs_the_same_list(self) -> None:
        c = case(([WEATHER, FORECAST], None))
        assert score("deepeval_tool_correctness", c, output(([WEATHER, FORECAST, FORECAST], "")),
                     options={"should_exact_match": True}).score == 0.0
        assert score("deepeval_tool_correctness", c, output(([WEATHER], ""), ([FORECAST], "")),
                     options={"should_exact_match": True}).score == 1.0  # every turn's calls, in order

    def test_two_identical_calls_match_one_of_two_expected_as_in_deepeval(self) -> None:
        # DeepEval keeps the used calls in a set: an equal call counts as used already.
        assert score("deepeval_tool_correctness", case(([WEATHER, WEATHER], None)),
                     output(([WEATHER, WEATHER], "")), options={"evaluation_params": ["input_parameters"]}).score == 0.5

    def test_no_expected_tools(self) -> None:
        assert score("deepeval_tool_correctness", case(([], None)), output(([], ""))).score == 1.0
        assert score("deepeval_tool_correctness", case(([], None)), output(([WEATHER], ""))).score == 0.0

    def test_strict_mode_scores_zero_below_one(self) -> None:
        result = score("deepeval_tool_correctness", case(([WEATHER, FORECAST], None)), output(([WEATHER], "")),
                       options={"strict_mode": True})
        assert (result.score, result.passed) == (0.0, False)

    def test_unknown_options_are_refused(self) -> None:
        with pytest.raises(ValueError, match="evaluation_params"):
            score("deepeval_tool_correctness", case(([], None)), output(), options={"evaluation_params": ["name"]})


class TestDeepEvalExactMatch:
    def test_stripped_texts_compared_on_the_last_turn(self) -> None:
        c = case(([], "Hello"), ([], "Paris "))
        assert score("deepeval_exact_match", c, output(([], "x"), ([], " Paris"))).score == 1.0
        assert score("deepeval_exact_match", c, output(([], "Paris"), ([], "paris"))).score == 0.0

    def test_an_empty_answer_is_an_error_as_deepeval_raises(self) -> None:
        result = score("deepeval_exact_match", case(([], "Paris")), output(([], "")))
        assert (result.score, result.passed) == (None, None)
        assert "'actual_output' cannot be empty" in result.error


class TestAgentFlow:
    def test_exact_ignores_a_trailing_extra_call_as_agentflow_does(self) -> None:
        c, o = case(([WEATHER], None)), output(([WEATHER, FORECAST], ""))
        assert score("agentflow_trajectory_match", c, o, match_type=MatchType.EXACT).score == 1.0
        assert score("trajectory_match", c, o, match_type=MatchType.EXACT).score != 1.0  # evalsite's own

    def test_an_expected_call_without_args_accepts_any_args(self) -> None:
        c, o = case(([{"name": "get_weather"}], None)), output(([WEATHER], ""))
        assert score("agentflow_trajectory_match", c, o, options={"check_args": True}).score == 1.0
        other = output(([{"name": "get_weather", "args": {"city": "Rome"}}], ""))
        assert score("agentflow_trajectory_match", case(([WEATHER], None)), other,
                     options={"check_args": True}).score == 0.0

    def test_multi_turn_calls_are_one_trajectory(self) -> None:
        c = case(([WEATHER], "a"), ([FORECAST], "b"))
        swapped = output(([FORECAST], "a"), ([WEATHER], "b"))
        assert score("agentflow_trajectory_match", c, swapped, match_type=MatchType.IN_ORDER).score == 0.5
        assert score("agentflow_trajectory_match", c, swapped, match_type=MatchType.ANY_ORDER).score == 1.0

    def test_tool_name_match_with_nothing_expected_is_half(self) -> None:
        assert score("agentflow_tool_name_match", case(([], None)), output(([WEATHER], ""))).score == 0.5
        assert score("agentflow_tool_name_match", case(([], None)), output(([], ""))).score == 1.0

    def test_rouge_counts_each_word_once_and_never_stems(self) -> None:
        result = score("agentflow_rouge_match", case(([], "the the cats")), output(([], "The cat")))
        assert result.score == 0.5  # {the, cats} vs {the, cat}
        assert score("response_match", case(([], "the the cats")), output(([], "The cat"))).score == 0.8

    def test_rouge_without_an_expected_response(self) -> None:
        assert score("agentflow_rouge_match", case(([], None)), output(([], "anything"))).score == 0.5
        assert score("agentflow_rouge_match", case(([], None)), output(([], ""))).score == 1.0

    def test_exact_match_compares_the_last_turn_with_the_last_expected_response(self) -> None:
        c = case(([], "first"), ([], None))
        assert score("agentflow_exact_match", c, output(([], "x"), ([], " first "))).score == 1.0
