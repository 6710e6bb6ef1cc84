"""AgentFlow's deterministic criteria, computed as 10xscale-agentflow 0.10.1 computes them
(`agentflow/qa/evaluation/criteria/trajectory.py` and `response.py`).

A case is scored the way AgentFlow scores one eval case: the actual tool calls are every
turn's, in order, against every invocation's expected tool calls, in order; the actual
response is the last turn's, against the last invocation that has an expected response
(its text parts joined by spaces, as AgentFlow's `MessageContent.get_text`).

- `agentflow_trajectory_match` (AgentFlow's `trajectory_match` / `trajectory` /
  `tool_trajectory_avg_score`): `match_type` EXACT (position by position, over the expected
  count), IN_ORDER (how far the expected list is walked in order) or ANY_ORDER (expected calls
  found among the actual ones, each used once); a call matches on its name, and with option
  `check_args` on equal args too, except that an expected call with no args accepts any.
  No expected calls: 1 (EXACT: 1 only when nothing was called).
- `agentflow_tool_name_match` (`tool_name_match`): the expected names found among the actual
  ones, each used once; no expected calls: 1 when nothing was called, else 0.5.
- `agentflow_rouge_match` (`rouge_match`): ROUGE-1 F1 over the *sets* of words (lower case,
  punctuation to spaces, `\\w` Unicode words); no expected response: 1 when the actual one is
  empty, else 0.5.
- `agentflow_exact_match` (`exact_match`): the stripped texts are equal.

AgentFlow's `response_match` is an LLM judge (gemini), not a computation: see docs/evaluators.md.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from evaluations.evaluators.base import Evaluator, ScoreResult, register, text_of
from evaluations.evaluators.output import actual_value
from evaluations.schemas.evalset import CriterionConfig, EvalCase, MatchType, MessageContent, StepType, ToolCall
from evaluations.schemas.outputs import AgentOutput


def _calls(case: EvalCase, output: AgentOutput) -> tuple[list[ToolCall], list[ToolCall]]:
    expected = [c for invocation in case.conversation for c in invocation.expected_tool_trajectory]
    actual: list[ToolCall] = [c for turn in output.turns for c in turn.tool_calls]
    return expected, actual


def _matches(actual: ToolCall, expected: ToolCall, check_args: bool) -> bool:
    """AgentFlow's `ToolCall.matches(expected, check_args=..., check_call_id=False)`."""
    if actual.name != expected.name:
        return False
    return not (check_args and expected.args and actual.args != expected.args)


def trajectory_score(actual: list[ToolCall], expected: list[ToolCall], match_type: MatchType,
                     check_args: bool) -> float:
    if match_type == MatchType.EXACT:
        if not expected:
            return 1.0 if not actual else 0.0
        matched = sum(1 for a, e in zip(actual, expected, strict=False) if _matches(a, e, check_args))
        return matched / len(expected)
    if not expected:
        return 1.0
    if match_type == MatchType.IN_ORDER:
        index = 0
        for call in actual:
            if index >= len(expected):
                break
            if _matches(call, expected[index], check_args):
                index += 1
        return index / len(expected)
    matched = 0
    remaining = list(actual)
    for e in expected:
        for position, a in enumerate(remaining):
            if _matches(a, e, check_args):
                matched += 1
                remaining.pop(position)
                break
    return matched / len(expected)


def tool_name_score(actual: list[str], expected: list[str]) -> float:
    if not expected:
        return 1.0 if not actual else 0.5
    matched = 0
    remaining = list(actual)
    for name in expected:
        if name in remaining:
            matched += 1
            remaining.remove(name)
    return matched / len(expected)


def _tokens(text: str) -> set[str]:
    return set(re.sub(r"[^\w\s]", " ", text.lower()).split())


def rouge_set_f1(actual: str, expected: str) -> tuple[float, float, float]:
    """AgentFlow's `_rouge1_score`: (precision, recall, f1) over token sets."""
    actual_tokens, expected_tokens = _tokens(actual), _tokens(expected)
    if not expected_tokens:
        return (1.0, 1.0, 1.0) if not actual_tokens else (0.0, 0.0, 0.0)
    if not actual_tokens:
        return 0.0, 0.0, 0.0
    overlap = len(actual_tokens & expected_tokens)
    precision, recall = overlap / len(actual_tokens), overlap / len(expected_tokens)
    f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return precision, recall, f1


def agentflow_text(message: MessageContent) -> str:
    """AgentFlow's `MessageContent.get_text`: a string as is, else the blocks' `text`
    joined by spaces (other blocks left out)."""
    if isinstance(message.content, str):
        return message.content
    return " ".join(str(block["text"]) for block in message.content if isinstance(block, dict) and "text" in block)


def expected_response(case: EvalCase) -> str:
    text = ""
    for invocation in case.conversation:
        if invocation.expected_final_response is not None:
            text = agentflow_text(invocation.expected_final_response)
    return text


def actual_response(output: AgentOutput) -> str:
    if not output.turns:
        return ""
    return text_of(actual_value(output.turns[-1].final_response))


class TrajectoryOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    check_args: bool = False


class _AgentFlowEvaluator(Evaluator):
    def result(self, config: CriterionConfig, criterion: str, score: float,
               justification: dict[str, Any]) -> list[ScoreResult]:
        threshold = self.threshold(config)
        return [ScoreResult(criterion=criterion, score=score, passed=threshold.passes(score), raw_value=score,
                            threshold=threshold, justification=justification)]


@register
class AgentFlowTrajectoryMatchEvaluator(_AgentFlowEvaluator):
    name = "agentflow_trajectory_match"
    group = "trajectory"
    Options = TrajectoryOptions

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        options: TrajectoryOptions = self.options(config)
        expected, actual = _calls(case, output)
        score = trajectory_score(actual, expected, config.match_type, options.check_args)
        return self.result(config, criterion, score, {
            "expected": [c.model_dump(include={"name", "args"}) for c in expected],
            "actual": [c.model_dump(include={"name", "args"}) for c in actual],
            "match_type": config.match_type.value, "check_args": options.check_args})


@register
class AgentFlowToolNameMatchEvaluator(_AgentFlowEvaluator):
    name = "agentflow_tool_name_match"
    group = "trajectory"

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        expected, actual = _calls(case, output)
        names, expected_names = [c.name for c in actual], [c.name for c in expected]
        return self.result(config, criterion, tool_name_score(names, expected_names),
                           {"expected": expected_names, "actual": names})


@register
class AgentFlowRougeMatchEvaluator(_AgentFlowEvaluator):
    name = "agentflow_rouge_match"
    group = "output"

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        expected, actual = expected_response(case), actual_response(output)
        if not expected:
            return self.result(config, criterion, 1.0 if not actual else 0.5,
                               {"expected": expected, "actual": actual, "note": "No expected response defined"})
        precision, recall, f1 = rouge_set_f1(actual, expected)
        return self.result(config, criterion, f1, {"expected": expected, "actual": actual,
                                                   "precision": precision, "recall": recall, "f1": f1})


@register
class AgentFlowExactMatchEvaluator(_AgentFlowEvaluator):
    name = "agentflow_exact_match"
    group = "output"

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        expected, actual = expected_response(case).strip(), actual_response(output).strip()
        score = float(expected == actual)
        return self.result(config, criterion, score, {"expected": expected, "actual": actual})


def node_order_score(actual: list[str], expected: list[str], match_type: MatchType) -> float:
    """AgentFlow's `NodeOrderMatchCriterion`: EXACT compares position by position (over the
    expected length), IN_ORDER counts expected nodes met in order, ANY_ORDER expected nodes
    present (each visit used once); 1.0 when no node order is expected."""
    if not expected:
        return 1.0
    if match_type is MatchType.EXACT:
        return sum(1 for a, e in zip(actual, expected, strict=False) if a == e) / len(expected)
    if match_type is MatchType.IN_ORDER:
        found = 0
        for node in actual:
            if found < len(expected) and node == expected[found]:
                found += 1
        return found / len(expected)
    remaining = list(actual)
    matched = 0
    for node in expected:
        if node in remaining:
            matched += 1
            remaining.remove(node)
    return matched / len(expected)


@register
class AgentFlowNodeOrderEvaluator(_AgentFlowEvaluator):
    """AgentFlow's `node_order`: the graph nodes the agent visited (its trajectory's NODE
    steps, in order) against every turn's `expected_node_order`, joined."""

    name = "agentflow_node_order"
    group = "trajectory"

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        expected = [node for invocation in case.conversation for node in invocation.expected_node_order]
        actual = [step.name for step in output.trajectory if step.step_type is StepType.NODE]
        score = node_order_score(actual, expected, config.match_type)
        return self.result(config, criterion, score, {"expected_node_order": expected, "actual_node_order": actual,
                                                      "match_type": config.match_type.value})


@register
class NodeOrderEvaluator(AgentFlowNodeOrderEvaluator):
    """`node_order`, the name AgentFlow's configs use: the same number (evalsite had no node
    order criterion of its own to keep)."""

    name = "node_order"
