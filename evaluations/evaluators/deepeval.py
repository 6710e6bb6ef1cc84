"""DeepEval's deterministic metrics, computed as deepeval 4.3 computes them
(`deepeval/metrics/tool_correctness/tool_correctness.py`, `deepeval/metrics/exact_match/`).

A case is scored the way DeepEval scores one test case: its `tools_called` are every actual
turn's tool calls in order, its `expected_tools` every invocation's expected tool calls in
order, `actual_output` the last turn's response and `expected_output` the last expected
response. A tool call's `input_parameters` are its `args` and its `output` its `result`.

`deepeval_tool_correctness` (`ToolCorrectnessMetric` without `available_tools`, so no LLM):

- default: for each expected tool, the best not-yet-used called tool of the same name
  (scored 1, times the share of equal parameters with `evaluation_params: ["input_parameters"]`,
  0 when the outputs differ with `"output"`), summed and divided by the expected count; as in
  DeepEval, a called tool counts as used when any *equal* call (same name, parameters and
  output) was used, so two identical calls match one expected call of the pair only;
- `should_consider_ordering`: the weighted longest common subsequence over the expected count;
- `should_exact_match`: 1 when the lists have the same length and each pair has the same
  name (and parameters, output, as asked), else 0;
- no expected tools: 1 when nothing was called, else 0; `strict_mode`: below the threshold
  (then 1) scores 0.

`deepeval_exact_match` (`ExactMatchMetric`): 1 when the stripped texts are equal, else 0; no
expected response, or an empty or missing actual one, is an error on the score (DeepEval
raises `MissingTestCaseParamsError`).

The thresholds are the criterion's (DeepEval's defaults are 0.5 and 1: set them to match).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from evaluations.evaluators.base import Evaluator, ScoreResult, register, text_of
from evaluations.evaluators.output import actual_value
from evaluations.schemas.evalset import CriterionConfig, EvalCase, ToolCall
from evaluations.schemas.outputs import AgentOutput

_MISSING = object()


class _Tool:
    """A tool call as DeepEval's `ToolCall` sees it: equal when name, parameters and output are."""

    __slots__ = ("name", "output", "params")

    def __init__(self, call: ToolCall) -> None:
        self.name = call.name
        self.params: dict[str, Any] = call.args
        self.output = call.result

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, _Tool) and self.name == other.name and self.params == other.params
                and self.output == other.output)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "input_parameters": self.params, "output": self.output}


def compare_dicts(expected: dict[str, Any], actual: dict[str, Any], exact: bool) -> float:
    """DeepEval's `_compare_dicts`: the share of keys (of both sides) with equal values,
    nested dicts compared recursively."""
    if expected == actual:
        return 1.0
    if exact:
        return 0.0
    score = 0.0
    total = set(expected) | set(actual)
    for key in set(expected) & set(actual):
        if expected[key] == actual[key]:
            score += 1 / len(total)
        elif isinstance(expected[key], dict) and isinstance(actual[key], dict):
            score += compare_dicts(expected[key], actual[key], exact) / len(total)
    return score


class ToolCorrectnessOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    should_consider_ordering: bool = False
    should_exact_match: bool = False
    evaluation_params: list[Literal["input_parameters", "output"]] = []
    strict_mode: bool = False


def tool_correctness(expected: list[_Tool], called: list[_Tool], options: ToolCorrectnessOptions) -> float:
    params = "input_parameters" in options.evaluation_params
    output = "output" in options.evaluation_params

    def pair_score(e: _Tool, c: _Tool) -> float:
        score = 1.0
        if params:
            score *= compare_dicts(e.params, c.params, options.should_exact_match)
        if output and e.output != c.output:
            score = 0.0
        return score

    if options.should_exact_match:
        if len(called) != len(expected):
            return 0.0
        for e, c in zip(expected, called, strict=True):
            if e.name != c.name or (params and e.params != c.params) or (output and e.output != c.output):
                return 0.0
        return 1.0
    if options.should_consider_ordering:
        if not expected:
            return 1.0 if not called else 0.0
        return _weighted_lcs(expected, called, pair_score) / len(expected)
    total = 0.0
    used: list[_Tool] = []
    for e in expected:
        best, best_tool = 0.0, None
        for c in called:
            if c in used:  # DeepEval's set membership: equal calls count as used
                continue
            if e.name == c.name:
                score = pair_score(e, c)
                if score > best:
                    best, best_tool = score, c
        if best > 0 and best_tool is not None:
            total += best
            used.append(best_tool)
    if not expected:
        return 1.0 if not called else 0.0
    return total / len(expected)


def _weighted_lcs(expected: list[_Tool], called: list[_Tool], pair_score: Any) -> float:
    m, n = len(expected), len(called)
    dp = [[0.0] * (n + 1) for _ in range(m + 1)]
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            e, c = expected[i - 1], called[j - 1]
            if e.name != c.name:
                dp[i][j] = max(dp[i - 1][j], dp[i][j - 1])
                continue
            score = pair_score(e, c)
            dp[i][j] = max(dp[i - 1][j], dp[i][j - 1], dp[i - 1][j - 1] + score if score > 0 else 0)
    i, j, total = m, n, 0.0
    while i > 0 and j > 0:
        if dp[i][j] == dp[i - 1][j]:
            i -= 1
        elif dp[i][j] == dp[i][j - 1]:
            j -= 1
        else:
            total += dp[i][j] - dp[i - 1][j - 1]
            i, j = i - 1, j - 1
    return total


def case_tools(case: EvalCase, output: AgentOutput) -> tuple[list[_Tool], list[_Tool]]:
    """(expected, called): every invocation's and every turn's tool calls, in order."""
    expected = [_Tool(c) for invocation in case.conversation for c in invocation.expected_tool_trajectory]
    called = [_Tool(c) for turn in output.turns for c in turn.tool_calls]
    return expected, called


@register
class DeepEvalToolCorrectnessEvaluator(Evaluator):
    name = "deepeval_tool_correctness"
    group = "trajectory"
    Options = ToolCorrectnessOptions

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        options: ToolCorrectnessOptions = self.options(config)
        threshold = self.threshold(config)
        expected, called = case_tools(case, output)
        score = tool_correctness(expected, called, options)
        if options.strict_mode and score < 1:
            score = 0.0
        passed = threshold.passes(score) if not options.strict_mode else score >= 1
        return [ScoreResult(
            criterion=criterion, score=score, passed=passed, raw_value=score, threshold=threshold,
            justification={"expected": [t.as_dict() for t in expected], "actual": [t.as_dict() for t in called],
                           "options": options.model_dump()},
        )]


def last_expected_text(case: EvalCase) -> str | None:
    for invocation in reversed(case.conversation):
        if invocation.expected_final_response is not None:
            return invocation.expected_final_response.get_text()
    return None


def last_actual_text(output: AgentOutput) -> str | None:
    if not output.turns or output.turns[-1].final_response is None:
        return None
    return text_of(actual_value(output.turns[-1].final_response))


@register
class DeepEvalExactMatchEvaluator(Evaluator):
    name = "deepeval_exact_match"
    group = "output"

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        threshold = self.threshold(config)
        expected, actual = last_expected_text(case), last_actual_text(output)
        if expected is None or not actual:  # DeepEval raises MissingTestCaseParamsError on both
            why = ("the case has no expected response (DeepEval: 'expected_output' cannot be None)" if expected is None
                   else "the agent gave no response (DeepEval: 'actual_output' cannot be empty)")
            return [ScoreResult(criterion=criterion, score=None, passed=None, threshold=threshold, error=why)]
        score = float(expected.strip() == actual.strip())
        return [ScoreResult(criterion=criterion, score=score, passed=threshold.passes(score), raw_value=score,
                            threshold=threshold, justification={"expected": expected, "actual": actual})]
