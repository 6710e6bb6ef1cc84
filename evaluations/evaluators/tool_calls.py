"""UiPath's trajectory evaluators, with UiPath's semantics (uipath-python,
`uipath/eval/_helpers/evaluators_helpers.py`):

- `uipath-tool-call-order`: LCS of the actual tool names and `toolCallsOrder`, over the
  expected length; `strict`: 1.0 only for exactly that sequence.
- `uipath-tool-call-args`: each expected call takes the first unused actual call of that name
  whose arguments hold every expected key with an equal value (extra actual keys are ignored,
  in `subset` mode and out of it, as in UiPath); matched over expected; `strict`: all or nothing.
- `uipath-tool-call-count`: per tool, the actual count compared with `[comparator, n]`
  (`=`, `==`, `!=`, `>`, `>=`, `<`, `<=`); the share of tools that pass; `strict`: 0 at the
  first failure.
- `uipath-tool-call-output`: each expected output takes the first unused actual call of that
  name whose output string is equal; matched over expected; `strict`: 0 at the first mismatch.

Empty on both sides scores 1.0; empty on one side 0.0. Names compare after UiPath's
sanitising (`"Web Search"` matches `Web_Search`). An actual output is the tool result as
UiPath's normalised span carries it: text as is, anything else as Python's `str()` (so
`{"humidity": 65}` reads `{'humidity': 65}`, as UiPath's eval sets write expected outputs).

The evaluators are registered under UiPath's `evaluatorTypeId`, which the UiPath importer puts
in `CriterionConfig.evaluator`; the criterion name is the UiPath evaluator id. Criteria come
from the case (`case.criteria[criterion]`, UiPath's `evaluationCriterias`); `null` there means
the evaluator's `defaultEvaluationCriteria` (in `CriterionConfig.options`); a case without
the key is not scored. UiPath evaluates the whole run's trace, so these score the conversation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from evaluations.evaluators.base import Evaluator, ScoreResult, Threshold, register
from evaluations.schemas.evalset import CriterionConfig, EvalCase
from evaluations.schemas.outputs import AgentOutput, OutputToolCall

NO_CRITERIA = "No evaluation criteria provided and no default evaluation criteria configured"

COMPARATORS = {
    ">": "gt",
    "<": "lt",
    ">=": "ge",
    "<=": "le",
    "=": "eq",
    "==": "eq",
    "!=": "ne",
}

_TOOL_NAME_DISALLOWED = re.compile(r"[^a-zA-Z0-9_-]")


def sanitize_tool_name(name: str | None) -> str:
    """UiPath's `_sanitize_tool_name` (the LangChain runtime's rule)."""
    if not name:
        return ""
    return _TOOL_NAME_DISALLOWED.sub("", "_".join(name.split()))[:64]


class _Camel(BaseModel):
    # UiPath's criteria and configs accept camelCase and snake_case.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class UiPathToolCall(BaseModel):
    """UiPath's `ToolCall`; `id` is the tool's stable id when the criterion names one."""

    name: str
    args: dict[str, Any]
    id: str | None = None

    def __repr_name__(self) -> str:  # justification strings read as UiPath's do
        return "ToolCall"


class UiPathToolOutput(BaseModel):
    name: str
    output: str
    id: str | None = None

    def __repr_name__(self) -> str:
        return "ToolOutput"


def _calls_match(actual: UiPathToolCall | UiPathToolOutput, expected: UiPathToolCall | UiPathToolOutput) -> bool:
    if actual.id is not None and expected.id is not None:
        return actual.id == expected.id
    return sanitize_tool_name(actual.name) == sanitize_tool_name(expected.name)


def _match_key(actual_name: str, actual_id: str | None, expected_key: str) -> bool:
    if actual_id is not None and expected_key == actual_id:
        return True
    return sanitize_tool_name(expected_key) == sanitize_tool_name(actual_name)


# --- The scoring functions, as UiPath's helpers -------------------------------------------------


def tool_calls_order_score(actual: Sequence[UiPathToolCall], expected: Sequence[str],
                           strict: bool = False) -> tuple[float, dict[str, Any]]:
    actual_keys = [c.id if c.id is not None else c.name for c in actual]
    justification: dict[str, Any] = {"expected": str(list(expected)), "actual": str(actual_keys), "lcs": []}
    if not expected and not actual:
        return 1.0, justification
    if not expected or not actual:
        return 0.0, justification
    if strict:
        if len(actual) != len(expected) or not all(
            _match_key(a.name, a.id, key) for a, key in zip(actual, expected, strict=True)
        ):
            return 0.0, justification
        justification["lcs"] = list(expected)
        return 1.0, justification
    m, n = len(actual), len(expected)
    table = [[0] * (n + 1) for _ in range(m + 1)]
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            if _match_key(actual[i - 1].name, actual[i - 1].id, expected[j - 1]):
                table[i][j] = table[i - 1][j - 1] + 1
            else:
                table[i][j] = max(table[i - 1][j], table[i][j - 1])
    lcs: list[str] = []
    i, j = m, n
    while i > 0 and j > 0:
        if _match_key(actual[i - 1].name, actual[i - 1].id, expected[j - 1]):
            lcs.append(expected[j - 1])
            i, j = i - 1, j - 1
        elif table[i - 1][j] > table[i][j - 1]:
            i -= 1
        else:
            j -= 1
    lcs.reverse()
    justification["lcs"] = lcs
    return len(lcs) / n, justification


def count_tool_calls(calls: Sequence[UiPathToolCall]) -> dict[str, int]:
    """Counts under each call's name and, when it has one, its id."""
    counts: dict[str, int] = {}
    for call in calls:
        counts[call.name] = counts.get(call.name, 0) + 1
        if call.id is not None and call.id != call.name:
            counts[call.id] = counts.get(call.id, 0) + 1
    return counts


def tool_calls_count_score(actual_counts: dict[str, int], expected_counts: dict[str, tuple[str, int]],
                           strict: bool = False) -> tuple[float, dict[str, Any]]:
    key = "explained_tool_calls_count"
    head = {"expected": str(dict(expected_counts)), "actual": str(dict(actual_counts))}
    if not expected_counts and not actual_counts:
        return 1.0, {**head, key: {"_result": "Both expected and actual tool calls are empty"}}
    if not expected_counts or not actual_counts:
        return 0.0, {**head, key: {"_result": "Either expected or actual tool calls are empty"}}
    score = 0.0
    explained: dict[str, str] = {}
    for tool_name, (comparator, expected_count) in expected_counts.items():
        actual_count = actual_counts.get(tool_name)
        if actual_count is None:
            actual_count = actual_counts.get(sanitize_tool_name(tool_name), 0)
        if comparator not in COMPARATORS:
            known = ", ".join(COMPARATORS)
            raise ValueError(f"unknown comparator {comparator!r} for {tool_name!r}; use one of {known}")
        to_add = float(getattr(actual_count, f"__{COMPARATORS[comparator]}__")(expected_count))
        explained[tool_name] = f"Actual: {actual_count}, Expected: {expected_count}, Score: {to_add}"
        if strict and to_add == 0.0:
            return 0.0, {**head, key: {tool_name: explained[tool_name]}}
        score += to_add
    return score / len(expected_counts), {**head, key: explained}


def tool_calls_args_score(actual: Sequence[UiPathToolCall], expected: Sequence[UiPathToolCall],
                          strict: bool = False, subset: bool = False) -> tuple[float, dict[str, Any]]:
    """`subset` is accepted to mirror UiPath's signature; it changes nothing (see below)."""
    key = "explained_tool_calls_args"
    head = {"expected": str(list(expected)), "actual": str(list(actual))}
    if not expected and not actual:
        return 1.0, {**head, key: {"_result": "Both expected and actual tool calls are empty"}}
    if not expected or not actual:
        return 0.0, {**head, key: {"_result": "Either expected or actual tool calls are empty"}}
    matched = 0
    visited: set[int] = set()
    explained: dict[str, str] = {}
    counters: dict[str, int] = {}
    for wanted in expected:
        for index, call in enumerate(actual):
            if not _calls_match(call, wanted) or index in visited:
                continue
            tool_key = f"{call.name}_{counters.get(call.name, 0)}"
            counters[call.name] = counters.get(call.name, 0) + 1
            # UiPath's exact mode reads `call.args[k]` for each expected key and its subset mode
            # checks `k in call.args` first: either way, a missing key fails and extra keys pass.
            args_match = all(k in call.args and call.args[k] == v for k, v in wanted.args.items())
            explained[tool_key] = f"Actual: {call.args}, Expected: {wanted.args}, Score: {float(args_match)}"
            if args_match:
                matched += 1
                visited.add(index)
                break
    score = float(matched == len(expected)) if strict else matched / len(expected)
    return score, {**head, key: explained}


def tool_calls_output_score(actual: Sequence[UiPathToolOutput], expected: Sequence[UiPathToolOutput],
                            strict: bool = False) -> tuple[float, dict[str, Any]]:
    key = "explained_tool_calls_outputs"
    head = {"expected": str(list(expected)), "actual": str(list(actual))}
    if not expected and not actual:
        return 1.0, {**head, key: {"_result": "Both expected and actual tool calls outputs are empty"}}
    if not expected or not actual:
        return 0.0, {**head, key: {"_result": "Either expected or actual tool calls outputs are empty"}}
    matched = 0
    explained: dict[str, str] = {}
    visited: set[int] = set()
    counters: dict[str, int] = {}
    for wanted in expected:
        found = False
        for index, out in enumerate(actual):
            if index in visited or not _calls_match(out, wanted):
                continue
            tool_key = f"{out.name}_{counters.get(out.name, 0)}"
            counters[out.name] = counters.get(out.name, 0) + 1
            equal = out.output == wanted.output
            explained[tool_key] = f"Actual: {out.output}, Expected: {wanted.output}, Score: {float(equal)}"
            if equal:
                matched += 1
                visited.add(index)
                found = True
                break
            if strict:
                return 0.0, {**head, key: {tool_key: explained[tool_key]}}
        if not found and strict:
            return 0.0, {**head, key: {"_result": f"No matching actual tool call found for expected {wanted.name}"}}
    score = float(matched == len(expected)) if strict else matched / len(expected)
    return score, {**head, key: explained}


# --- What the agent did, as UiPath sees it --------------------------------------------------------


def actual_calls(output: AgentOutput) -> list[UiPathToolCall]:
    return [UiPathToolCall(name=c.name, args=c.args) for c in output.all_tool_calls()]


def output_text(call: OutputToolCall) -> str:
    """The tool's output string: the result as is when it is text, else `str()` of it
    (UiPath: `str(content) if content else ""`)."""
    result = call.result
    if isinstance(result, str):
        return result
    return str(result) if result else ""


def actual_outputs(output: AgentOutput) -> list[UiPathToolOutput]:
    return [UiPathToolOutput(name=c.name, output=output_text(c)) for c in output.all_tool_calls()]


# --- Evaluators -------------------------------------------------------------------------------


class UiPathToolCallOptions(_Camel):
    """UiPath's evaluator config (`evaluatorConfig`); fields it does not use are ignored, as
    UiPath's own config models ignore them."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")
    name: str = ""
    description: str = ""
    default_evaluation_criteria: dict[str, Any] | None = None
    strict: bool = False


class UiPathToolCallArgsOptions(UiPathToolCallOptions):
    subset: bool = False


class OrderCriteria(_Camel):
    tool_calls_order: list[str]


class ArgsCriteria(_Camel):
    tool_calls: list[UiPathToolCall]


class CountCriteria(_Camel):
    tool_calls_count: dict[str, tuple[str, int]]


class OutputCriteria(_Camel):
    tool_outputs: list[UiPathToolOutput]


class _UiPathEvaluator(Evaluator):
    group = "trajectory"
    Options: ClassVar[type[BaseModel]] = UiPathToolCallOptions
    Criteria: ClassVar[type[BaseModel]]

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        if criterion not in case.criteria:
            return []  # UiPath runs an evaluator only for the cases that name it
        options = self.options(config)
        threshold = self.threshold(config)
        raw = case.criteria[criterion]
        if raw is None:
            raw = options.default_evaluation_criteria
        if raw is None:
            return [self._error(criterion, threshold, NO_CRITERIA)]
        try:
            criteria = self.Criteria.model_validate(raw)
            score, justification = self.compute(criteria, output, options)
        except ValidationError as exc:
            return [self._error(criterion, threshold, f"invalid evaluation criteria: {exc}")]
        except ValueError as exc:
            return [self._error(criterion, threshold, str(exc))]
        return [ScoreResult(criterion=criterion, score=score, passed=threshold.passes(score), threshold=threshold,
                            justification=justification)]

    def compute(self, criteria: Any, output: AgentOutput, options: Any) -> tuple[float, dict[str, Any]]:
        raise NotImplementedError

    @staticmethod
    def _error(criterion: str, threshold: Threshold, message: str) -> ScoreResult:
        return ScoreResult(criterion=criterion, score=None, passed=None, threshold=threshold, error=message)


@register
class ToolCallOrderEvaluator(_UiPathEvaluator):
    name = "uipath-tool-call-order"
    Criteria = OrderCriteria

    def compute(self, criteria: OrderCriteria, output: AgentOutput,
                options: UiPathToolCallOptions) -> tuple[float, dict[str, Any]]:
        calls = actual_calls(output)
        score, justification = tool_calls_order_score(calls, criteria.tool_calls_order, options.strict)
        # The lists as well as UiPath's strings: the justification schema of its evaluator
        # types names them `expected_tool_calls_order` / `actual_tool_calls_order`.
        justification["expected_tool_calls_order"] = list(criteria.tool_calls_order)
        justification["actual_tool_calls_order"] = [c.name for c in calls]
        return score, justification


@register
class ToolCallArgsEvaluator(_UiPathEvaluator):
    name = "uipath-tool-call-args"
    Options = UiPathToolCallArgsOptions
    Criteria = ArgsCriteria

    def compute(self, criteria: ArgsCriteria, output: AgentOutput,
                options: UiPathToolCallArgsOptions) -> tuple[float, dict[str, Any]]:
        return tool_calls_args_score(actual_calls(output), criteria.tool_calls, options.strict, options.subset)


@register
class ToolCallCountEvaluator(_UiPathEvaluator):
    name = "uipath-tool-call-count"
    Criteria = CountCriteria

    def compute(self, criteria: CountCriteria, output: AgentOutput,
                options: UiPathToolCallOptions) -> tuple[float, dict[str, Any]]:
        return tool_calls_count_score(count_tool_calls(actual_calls(output)), criteria.tool_calls_count,
                                      options.strict)


@register
class ToolCallOutputEvaluator(_UiPathEvaluator):
    name = "uipath-tool-call-output"
    Criteria = OutputCriteria

    def compute(self, criteria: OutputCriteria, output: AgentOutput,
                options: UiPathToolCallOptions) -> tuple[float, dict[str, Any]]:
        return tool_calls_output_score(actual_outputs(output), criteria.tool_outputs, options.strict)
