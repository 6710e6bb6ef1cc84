"""Performance evaluators: latency, tokens and cost against upper limits, and Upsonic's
performance statistics over iterations.

`performance` checks one metric (option `metric`) against the criterion's threshold as an
UPPER limit (`threshold_direction = "upper"`): each turn that records the metric gets an
interaction result, the conversation gets the total (`AgentOutput.total_latency()`, or the
summed usage). `per_turn_limit` sets a different limit for single turns. `raw_value` is in the
metric's unit (seconds, tokens, USD); `score` is None, since these have no natural [0, 1]
scale: `passed` says whether the limit holds. An output that does not record the metric gets a
result with an error saying so. `latency_seconds`, `total_tokens` and `cost_usd` are the same
evaluator with that metric preselected, so a criterion of that name needs no options.

`performance_stats` is Upsonic's `PerformanceEvaluator._aggregate_results` over the iterations
of one case: average (mean), median, min, max and std_dev, the *sample* standard deviation
(`statistics.stdev`, 0.0 for a single run), for latency and for memory increase and peak.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from evaluations.evaluators.base import Evaluator, Level, ScoreResult, Threshold, register
from evaluations.evaluators.output import options_error
from evaluations.schemas.evalset import CriterionConfig, EvalCase
from evaluations.schemas.outputs import AgentOutput, TurnOutput
from evaluations.schemas.results import PerformanceEvaluationResult, PerformanceRunResult

Metric = Literal["latency_seconds", "total_tokens", "cost_usd"]

_UNITS: dict[str, str] = {"latency_seconds": "s", "total_tokens": "tokens", "cost_usd": "USD"}


class PerformanceOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metric: Metric = "latency_seconds"
    per_turn_limit: float | None = None


def _turn_value(turn: TurnOutput, metric: str) -> float | None:
    if metric == "latency_seconds":
        return turn.latency_seconds
    if turn.usage is None:
        return None
    if metric == "total_tokens":
        total = turn.usage.total()
        return float(total) if total is not None else None
    return turn.usage.cost_usd


def _total_value(output: AgentOutput, metric: str) -> float | None:
    if metric == "latency_seconds":
        return output.total_latency()
    # Summed turn by turn: one turn may report total_tokens and another only prompt and
    # completion tokens, which `AgentOutput.usage()` (field by field) would not add up.
    values = [v for v in (_turn_value(turn, metric) for turn in output.turns) if v is not None]
    return sum(values) if values else None


@register
class PerformanceEvaluator(Evaluator):
    name = "performance"
    group = "performance"
    Options = PerformanceOptions
    threshold_direction = "upper"
    default_metric: ClassVar[Metric] = "latency_seconds"

    def options(self, config: CriterionConfig) -> Any:
        return self._memo_options(config.options, lambda: self.Options.model_validate(
            {"metric": self.default_metric, **config.options}))

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        try:
            options: PerformanceOptions = self.options(config)
        except ValidationError as exc:
            return options_error(criterion, exc)
        metric, unit = options.metric, _UNITS[options.metric]
        total_limit = self.threshold(config)
        turn_limit = Threshold(upper_limit=options.per_turn_limit) if options.per_turn_limit is not None \
            else total_limit
        results: list[ScoreResult] = []
        for index, turn in enumerate(output.turns):
            value = _turn_value(turn, metric)
            if value is None:
                continue
            results.append(ScoreResult(
                criterion=criterion, score=None, passed=turn_limit.passes(value), applies_to=Level.INTERACTION,
                turn_index=index, raw_value=value, threshold=turn_limit,
                justification={"metric": metric, "unit": unit, "actual": value, "limit": turn_limit.upper_limit,
                               "invocation_id": turn.invocation_id},
            ))
        total = _total_value(output, metric)
        justification: dict[str, Any] = {"metric": metric, "unit": unit, "actual": total,
                                         "limit": total_limit.upper_limit, "turns_measured": len(results)}
        if total is None:
            results.append(ScoreResult(criterion=criterion, score=None, passed=None, threshold=total_limit,
                                       justification=justification,
                                       error=f"the output records no {metric.replace('_', ' ')}"))
        else:
            results.append(ScoreResult(criterion=criterion, score=None, passed=total_limit.passes(total),
                                       raw_value=total, threshold=total_limit, justification=justification))
        return results


@register
class LatencyEvaluator(PerformanceEvaluator):
    name = "latency_seconds"


@register
class TotalTokensEvaluator(PerformanceEvaluator):
    name = "total_tokens"
    default_metric = "total_tokens"


@register
class CostEvaluator(PerformanceEvaluator):
    name = "cost_usd"
    default_metric = "cost_usd"


# --- Upsonic's statistics -------------------------------------------------------------------------


def calculate_stats(data: Sequence[float]) -> dict[str, float]:
    """Upsonic's `_calculate_stats`: {} for no data; std_dev is the sample standard deviation."""
    if not data:
        return {}
    return {
        "average": statistics.mean(data),
        "median": statistics.median(data),
        "min": min(data),
        "max": max(data),
        "std_dev": statistics.stdev(data) if len(data) > 1 else 0.0,
    }


def performance_stats(outputs: list[AgentOutput], warmup_runs: int) -> PerformanceEvaluationResult:
    """Upsonic's `PerformanceEvaluationResult` over the measured iterations of one case.

    `outputs` are the measured runs only: warm-up runs are never measured (as in Upsonic) and
    `warmup_runs` is recorded as given. Runs are taken in iteration order; a run that failed
    (`error`) or recorded no latency was not measured and is left out. Memory statistics cover
    the runs that measured memory (the Python target does; uploaded outputs usually do not)."""
    runs = [
        PerformanceRunResult(latency_seconds=latency, memory_increase_bytes=o.memory_increase_bytes,
                             memory_peak_bytes=o.memory_peak_bytes)
        for o in sorted(outputs, key=lambda o: o.iteration)
        if o.error is None and (latency := o.total_latency()) is not None
    ]
    return PerformanceEvaluationResult(
        all_runs=runs,
        num_iterations=len(runs),
        warmup_runs=warmup_runs,
        latency_stats=calculate_stats([r.latency_seconds for r in runs]),
        memory_increase_stats=calculate_stats(
            [float(r.memory_increase_bytes) for r in runs if r.memory_increase_bytes is not None]),
        memory_peak_stats=calculate_stats(
            [float(r.memory_peak_bytes) for r in runs if r.memory_peak_bytes is not None]),
    )
