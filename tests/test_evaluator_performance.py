"""Performance evaluators (evaluations/evaluators/performance.py): latency, tokens and cost
against upper limits, and Upsonic's statistics over iterations."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest

from evaluations.evaluators.base import Level, ScoreResult
from evaluations.evaluators.performance import (
    CostEvaluator,
    LatencyEvaluator,
    PerformanceEvaluator,
    TotalTokensEvaluator,
    calculate_stats,
    performance_stats,
)
from evaluations.schemas.evalset import CriterionConfig, EvalCase
from evaluations.schemas.outputs import AgentOutput, TurnOutput, Usage
from evaluations.schemas.results import PerformanceEvaluationResult

CASE = EvalCase(eval_id="c")


def run(*turns: dict[str, Any], **fields: Any) -> AgentOutput:
    return AgentOutput(eval_id="c", turns=[TurnOutput(**t) for t in turns], **fields)


def by_level(results: list[ScoreResult]) -> tuple[list[ScoreResult], ScoreResult]:
    turns = [r for r in results if r.applies_to is Level.INTERACTION]
    [total] = [r for r in results if r.applies_to is Level.CONVERSATION]
    return turns, total


class TestLatency:
    def test_each_turn_and_the_total_are_checked_against_an_upper_limit(self) -> None:
        out = run({"latency_seconds": 1.2}, {"latency_seconds": 2.5})
        turns, total = by_level(PerformanceEvaluator().score(CASE, out, CriterionConfig(threshold=3.0), "latency"))
        assert [(t.raw_value, t.passed) for t in turns] == [(1.2, True), (2.5, True)]
        assert (total.raw_value, total.passed) == (3.7, False)
        assert total.threshold is not None and total.threshold.as_dict() == {"upper_limit": 3.0}
        assert total.score is None  # seconds have no [0, 1] scale
        assert total.justification["unit"] == "s"

    def test_the_threshold_is_an_upper_limit(self) -> None:
        assert PerformanceEvaluator.threshold_direction == "upper"
        threshold = PerformanceEvaluator().threshold(CriterionConfig(threshold=2.0))
        assert (threshold.passes(2.0), threshold.passes(2.01), threshold.passes(0.0)) == (True, False, True)

    def test_a_per_turn_limit_is_separate_from_the_total_one(self) -> None:
        out = run({"latency_seconds": 1.2}, {"latency_seconds": 2.5})
        turns, total = by_level(PerformanceEvaluator().score(
            CASE, out, CriterionConfig(threshold=5.0, options={"per_turn_limit": 2.0}), "latency"))
        assert [t.passed for t in turns] == [True, False]
        assert total.passed is True

    def test_the_output_total_latency_wins_over_the_sum_of_turns(self) -> None:
        out = run({"latency_seconds": 1.0}, latency_seconds=4.0)
        _, total = by_level(LatencyEvaluator().score(CASE, out, CriterionConfig(threshold=3.0), "latency_seconds"))
        assert (total.raw_value, total.passed) == (4.0, False)

    def test_an_output_without_latency_gets_an_error_result(self) -> None:
        [result] = PerformanceEvaluator().score(CASE, run({"final_response": "x"}), CriterionConfig(), "latency")
        assert (result.passed, result.raw_value) == (None, None)
        assert result.error == "the output records no latency seconds"


class TestTokensAndCost:
    OUT = run({"usage": Usage(prompt_tokens=800, completion_tokens=60, cost_usd=0.001)},
              {"usage": Usage(total_tokens=500, cost_usd=0.0025)})

    def test_total_tokens_are_summed_over_the_turns(self) -> None:
        turns, total = by_level(TotalTokensEvaluator().score(CASE, self.OUT, CriterionConfig(threshold=1000),
                                                             "total_tokens"))
        assert [t.raw_value for t in turns] == [860.0, 500.0]
        assert [t.passed for t in turns] == [True, True]
        assert (total.raw_value, total.passed) == (1360.0, False)
        assert total.justification["unit"] == "tokens"

    def test_cost_is_in_usd(self) -> None:
        turns, total = by_level(CostEvaluator().score(CASE, self.OUT, CriterionConfig(threshold=0.003), "cost_usd"))
        assert [t.raw_value for t in turns] == [0.001, 0.0025]
        assert total.raw_value == pytest.approx(0.0035)
        assert total.passed is False

    def test_the_metric_option_chooses_what_performance_checks(self) -> None:
        _, total = by_level(PerformanceEvaluator().score(
            CASE, self.OUT, CriterionConfig(threshold=2000, options={"metric": "total_tokens"}), "perf"))
        assert (total.raw_value, total.passed) == (1360.0, True)

    def test_an_unknown_metric_is_an_error_on_the_score(self) -> None:
        [result] = PerformanceEvaluator().score(CASE, self.OUT, CriterionConfig(options={"metric": "memory"}), "p")
        assert "invalid options" in result.error and "metric" in result.error

    def test_an_output_without_usage_gets_an_error_result(self) -> None:
        [result] = CostEvaluator().score(CASE, run({"latency_seconds": 1.0}), CriterionConfig(), "cost_usd")
        assert result.error == "the output records no cost usd"


class TestUpsonicStatistics:
    def outputs(self) -> list[AgentOutput]:
        return [
            AgentOutput(eval_id="c", iteration=2, latency_seconds=4.0, memory_increase_bytes=300, memory_peak_bytes=900),
            AgentOutput(eval_id="c", iteration=0, latency_seconds=1.0, memory_increase_bytes=100, memory_peak_bytes=500),
            AgentOutput(eval_id="c", iteration=1, latency_seconds=2.0, memory_increase_bytes=200, memory_peak_bytes=700),
        ]

    def test_latency_and_memory_statistics_as_upsonic_computes_them(self) -> None:
        result = performance_stats(self.outputs(), warmup_runs=2)
        assert isinstance(result, PerformanceEvaluationResult)
        assert (result.num_iterations, result.warmup_runs) == (3, 2)
        assert [r.latency_seconds for r in result.all_runs] == [1.0, 2.0, 4.0]  # iteration order
        stats = result.latency_stats
        assert stats["average"] == pytest.approx(7 / 3)
        assert (stats["median"], stats["min"], stats["max"]) == (2.0, 1.0, 4.0)
        # Sample standard deviation (statistics.stdev, n - 1), not the population one (1.2472).
        assert stats["std_dev"] == pytest.approx(math.sqrt(42 / 18))
        assert stats["std_dev"] == pytest.approx(1.5275, abs=1e-4)
        assert result.memory_increase_stats == {"average": 200.0, "median": 200.0, "min": 100.0, "max": 300.0,
                                                "std_dev": 100.0}
        assert result.memory_peak_stats["average"] == 700.0

    def test_one_run_has_zero_deviation_and_no_runs_have_no_statistics(self) -> None:
        assert calculate_stats([1.5]) == {"average": 1.5, "median": 1.5, "min": 1.5, "max": 1.5, "std_dev": 0.0}
        assert calculate_stats([]) == {}
        assert calculate_stats([1.0, 2.0, 3.0, 10.0])["std_dev"] == statistics.stdev([1.0, 2.0, 3.0, 10.0])

    def test_failed_and_unmeasured_runs_are_left_out(self) -> None:
        outputs = [*self.outputs(),
                   AgentOutput(eval_id="c", iteration=3, latency_seconds=60.0, error="timeout"),
                   AgentOutput(eval_id="c", iteration=4)]
        result = performance_stats(outputs, warmup_runs=0)
        assert result.num_iterations == 3
        assert result.latency_stats["max"] == 4.0

    def test_runs_without_memory_measurements_leave_the_memory_statistics_empty(self) -> None:
        outputs = [run({"latency_seconds": 1.0}), run({"latency_seconds": 3.0})]
        result = performance_stats(outputs, warmup_runs=1)
        assert result.latency_stats["average"] == 2.0
        assert result.memory_increase_stats == {} and result.memory_peak_stats == {}
        assert result.all_runs[0].memory_peak_bytes is None


def test_the_registry_knows_the_performance_evaluators() -> None:
    from evaluations.evaluators import get_evaluator_class

    for name, cls in {"performance": PerformanceEvaluator, "latency_seconds": LatencyEvaluator,
                      "total_tokens": TotalTokensEvaluator, "cost_usd": CostEvaluator}.items():
        assert get_evaluator_class(name) is cls
        assert cls.group == "performance"
