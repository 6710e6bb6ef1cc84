"""Upsonic's reliability check (`reliability`) and its result model."""

from __future__ import annotations

from typing import Any

import pytest

from evaluations.evaluators.base import Level, ScoreResult
from evaluations.evaluators.reliability import NO_EXPECTED_TOOLS, ReliabilityEvaluator, check_reliability
from evaluations.schemas.evalset import CriterionConfig, EvalCase, Invocation, MessageContent, ToolCall
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, TurnOutput
from evaluations.schemas.results import ReliabilityEvaluationResult, ToolCallCheck


def case_of(*turns: list[str]) -> EvalCase:
    return EvalCase(eval_id="c", conversation=[
        Invocation(invocation_id=f"t{i}", user_content=MessageContent.user("q"),
                   expected_tool_trajectory=[ToolCall(name=name) for name in names])
        for i, names in enumerate(turns, 1)
    ])


def output_of(*turns: list[str]) -> AgentOutput:
    return AgentOutput(eval_id="c", turns=[TurnOutput(tool_calls=[OutputToolCall(name=n) for n in names])
                                           for names in turns])


def reliability(case: EvalCase, output: AgentOutput, **options: Any) -> ScoreResult:
    [result] = ReliabilityEvaluator().score(case, output, CriterionConfig(options=options), "reliability")
    return result


class TestCheckReliability:
    def test_it_passes_when_every_expected_tool_was_called(self) -> None:
        result = check_reliability(["search", "analyze"], ["search", "analyze", "search"])
        assert result.passed and result.summary == "All reliability checks passed."
        assert result.checks == [ToolCallCheck(tool_name="search", was_called=True, times_called=2),
                                 ToolCallCheck(tool_name="analyze", was_called=True, times_called=1)]
        assert (result.missing_tool_calls, result.unexpected_tool_calls) == ([], [])

    def test_a_missing_tool_fails_and_is_named(self) -> None:
        result = check_reliability(["search", "analyze"], ["search"])
        assert not result.passed
        assert result.missing_tool_calls == ["analyze"]
        assert result.checks[1] == ToolCallCheck(tool_name="analyze", was_called=False, times_called=0)
        assert result.summary == "Missing expected tool calls: analyze."

    def test_unexpected_tools_count_only_under_exact_match(self) -> None:
        loose = check_reliability(["search"], ["search", "write", "delete"])
        assert loose.passed and loose.unexpected_tool_calls == []
        exact = check_reliability(["search"], ["search", "write", "delete"], exact_match=True)
        assert not exact.passed
        assert exact.unexpected_tool_calls == ["delete", "write"]  # sorted, as Upsonic sorts them
        assert exact.summary == "Unexpected tools were called: delete, write."

    def test_order_matters_wants_the_expected_order_with_anything_between(self) -> None:
        assert check_reliability(["a", "b"], ["a", "x", "b"], order_matters=True).passed
        wrong = check_reliability(["a", "b"], ["b", "a"], order_matters=True)
        assert not wrong.passed and wrong.summary == "Tools were not called in the expected order."
        assert check_reliability(["a", "b"], ["b", "a"]).passed

    def test_the_summary_lists_every_failure(self) -> None:
        result = check_reliability(["a", "b"], ["c", "a"], exact_match=True, order_matters=True)
        assert result.summary == ("Missing expected tool calls: b. Tools were not called in the expected order. "
                                  "Unexpected tools were called: c.")


class TestAssertPassed:
    def test_it_raises_with_the_summary_when_the_check_failed(self) -> None:
        result = check_reliability(["search", "analyze"], ["search"])
        with pytest.raises(AssertionError, match=r"^Reliability evaluation failed: Missing expected tool calls: "
                                                 r"analyze\.$"):
            result.assert_passed()

    def test_it_is_silent_when_the_check_passed(self) -> None:
        result = ReliabilityEvaluationResult(
            passed=True, summary="All reliability checks passed.", expected_tool_calls=["search", "analyze"],
            actual_tool_calls=["search", "analyze"], missing_tool_calls=[], unexpected_tool_calls=[],
            checks=[ToolCallCheck(tool_name="search", was_called=True, times_called=2)],
        )
        assert result.assert_passed() is None


class TestReliabilityEvaluator:
    def test_expected_tools_come_from_the_case_trajectories_once_each(self) -> None:
        result = reliability(case_of(["search", "lookup"], ["search", "book"]),
                             output_of(["search"], ["lookup", "book"]))
        assert (result.score, result.passed, result.applies_to) == (1.0, True, Level.CONVERSATION)
        assert result.justification["expected_tool_calls"] == ["search", "lookup", "book"]
        assert result.justification["actual_tool_calls"] == ["search", "lookup", "book"]

    def test_the_justification_is_the_reliability_result(self) -> None:
        result = reliability(case_of(["search", "book"]), output_of(["search", "cancel"]), exact_match=True)
        assert (result.score, result.passed) == (0.0, False)
        report = ReliabilityEvaluationResult.model_validate(result.justification)
        assert report.missing_tool_calls == ["book"]
        assert report.unexpected_tool_calls == ["cancel"]
        assert report.summary == "Missing expected tool calls: book. Unexpected tools were called: cancel."
        assert result.justification["checks"] == [
            {"tool_name": "search", "was_called": True, "times_called": 1},
            {"tool_name": "book", "was_called": False, "times_called": 0},
        ]

    def test_expected_tools_in_the_options_replace_the_case_trajectories(self) -> None:
        result = reliability(case_of(["search"]), output_of(["lookup"]), expected_tools=["lookup"])
        assert result.score == 1.0
        assert result.justification["expected_tool_calls"] == ["lookup"]

    def test_order_matters_is_an_option(self) -> None:
        case, output = case_of(["a", "b"]), output_of(["b", "a"])
        assert reliability(case, output).score == 1.0
        assert reliability(case, output, order_matters=True).score == 0.0

    def test_no_expected_tools_is_an_error_as_in_upsonic(self) -> None:
        result = reliability(case_of([]), output_of(["search"]))
        assert (result.score, result.passed, result.error) == (None, None, NO_EXPECTED_TOOLS)

    def test_unknown_options_are_refused(self) -> None:
        with pytest.raises(ValueError, match="exactmatch"):
            reliability(case_of(["a"]), output_of(["a"]), exactmatch=True)
