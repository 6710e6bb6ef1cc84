"""Upsonic's reliability check (`ReliabilityEvaluator`, seed 000): were the expected tools called?

Expected tool names are `options.expected_tools` or, by default, the names in the case's expected
trajectories (each name once, in first-expected order). Actual names are every tool call of the
output, in order. Then, as Upsonic does:

- one `ToolCallCheck` per expected tool (was it called, how many times); an uncalled one is missing;
- `order_matters`: the expected tools must appear in that order (other calls may come between);
- `exact_match`: any called tool that was not expected fails the check (`unexpected_tool_calls`,
  sorted, is filled only then).

The score is 1.0 when the check passes, else 0.0; the justification is the
`ReliabilityEvaluationResult`. Like Upsonic, an empty list of expected tools is an error.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from evaluations.evaluators.base import Evaluator, ScoreResult, register
from evaluations.schemas.evalset import CriterionConfig, EvalCase
from evaluations.schemas.outputs import AgentOutput
from evaluations.schemas.results import ReliabilityEvaluationResult, ToolCallCheck

NO_EXPECTED_TOOLS = ("`expected_tool_calls` cannot be an empty list: the case expects no tool calls "
                     "and the criterion names no `expected_tools`")


class ReliabilityOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    expected_tools: list[str] | None = None
    order_matters: bool = False
    exact_match: bool = False


def check_reliability(expected: Sequence[str], actual: Sequence[str], *, order_matters: bool = False,
                      exact_match: bool = False) -> ReliabilityEvaluationResult:
    """Upsonic's `ReliabilityEvaluator.run` on lists of tool names."""
    passed = True
    messages: list[str] = []
    checks: list[ToolCallCheck] = []
    missing: list[str] = []
    for tool in expected:
        count = actual.count(tool)
        checks.append(ToolCallCheck(tool_name=tool, was_called=count > 0, times_called=count))
        if count == 0:
            passed = False
            missing.append(tool)
    if missing:
        messages.append(f"Missing expected tool calls: {', '.join(missing)}.")
    if order_matters:
        remaining = iter(actual)
        if not all(tool in remaining for tool in expected):  # `in` consumes: a subsequence test
            passed = False
            messages.append("Tools were not called in the expected order.")
    unexpected: list[str] = []
    if exact_match:
        unexpected = sorted(set(actual) - set(expected))
        if unexpected:
            passed = False
            messages.append(f"Unexpected tools were called: {', '.join(unexpected)}.")
    if passed:
        messages.append("All reliability checks passed.")
    return ReliabilityEvaluationResult(
        passed=passed, summary=" ".join(messages), expected_tool_calls=list(expected),
        actual_tool_calls=list(actual), checks=checks, missing_tool_calls=missing, unexpected_tool_calls=unexpected,
    )


def expected_tool_names(case: EvalCase) -> list[str]:
    names: dict[str, None] = {}
    for invocation in case.conversation:
        for call in invocation.expected_tool_trajectory:
            names.setdefault(call.name)
    return list(names)


@register
class ReliabilityEvaluator(Evaluator):
    name = "reliability"
    group = "trajectory"
    Options = ReliabilityOptions

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        options: ReliabilityOptions = self.options(config)
        threshold = self.threshold(config)
        expected = options.expected_tools if options.expected_tools is not None else expected_tool_names(case)
        if not expected:
            return [ScoreResult(criterion=criterion, score=None, passed=None, threshold=threshold,
                                error=NO_EXPECTED_TOOLS)]
        result = check_reliability(expected, [c.name for c in output.all_tool_calls()],
                                   order_matters=options.order_matters, exact_match=options.exact_match)
        return [ScoreResult(criterion=criterion, score=1.0 if result.passed else 0.0, passed=result.passed,
                            threshold=threshold, justification=result.model_dump(mode="json"))]
