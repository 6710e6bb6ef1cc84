"""Node-level results (watsonx `applies_to: node`): time spent per agent node.

A node's latency is the time of the tool calls it made (`OutputToolCall.node` and
`latency_seconds`, filled from traces by `evaluations.interop.otel.spans.apply_trace`) plus the duration
of its trajectory steps where they record one (`metadata.duration_seconds`). Nodes with no
timing are not scored.
"""

from __future__ import annotations

from collections import defaultdict

from evaluations.evaluators.base import Evaluator, Level, ScoreResult, register
from evaluations.schemas.evalset import CriterionConfig, EvalCase, StepType
from evaluations.schemas.outputs import AgentOutput


@register
class NodeLatencyEvaluator(Evaluator):
    name = "node_latency_seconds"
    group = "performance"
    threshold_direction = "upper"

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        threshold = self.threshold(config)
        seconds: dict[str, float] = defaultdict(float)
        calls: dict[str, int] = defaultdict(int)
        for call in output.all_tool_calls():
            if call.node and call.latency_seconds is not None:
                seconds[call.node] += call.latency_seconds
                calls[call.node] += 1
        for step in output.trajectory:
            duration = step.metadata.get("duration_seconds")
            if step.step_type == StepType.NODE and isinstance(duration, int | float):
                seconds[step.name] += float(duration)
        results = [
            ScoreResult(criterion=criterion, score=None, raw_value=value, passed=threshold.passes(value),
                        applies_to=Level.NODE, node_name=node, threshold=threshold,
                        justification={"node": node, "latency_seconds": value, "timed_tool_calls": calls[node]})
            for node, value in sorted(seconds.items())
        ]
        if not results:
            return []
        slowest = max(results, key=lambda r: r.raw_value or 0.0)
        return [*results, ScoreResult(
            criterion=criterion, score=None, raw_value=slowest.raw_value,
            passed=all(r.passed for r in results), threshold=threshold,
            justification={"slowest_node": slowest.node_name, "nodes": len(results)},
        )]
