"""Reference-free checks for live traffic (issue 31's monitors; usable in any config too):
the answer is JSON, the answer matches a JSON schema, the tools did not fail, the agent did
not retry a call. Each reads the output alone; the case may be empty."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evaluations.evaluators.base import Evaluator, ScoreResult, Threshold, register
from evaluations.evaluators.output import options_error
from evaluations.jsonschemas import SchemaBoundExceeded, schema_problems, validation_problems
from evaluations.schemas.evalset import CriterionConfig, EvalCase
from evaluations.schemas.outputs import AgentOutput


def last_answer(output: AgentOutput) -> Any:
    """The final response of the last turn that has one (None when no turn answered)."""
    return next((t.final_response for t in reversed(output.turns) if t.final_response is not None), None)


def _parsed(value: Any) -> tuple[Any, str]:
    """The answer as JSON data, or why it is not JSON."""
    if value is None:
        return None, "no answer"
    if isinstance(value, dict | list):
        return value, ""
    text = value if isinstance(value, str) else str(value)
    try:
        return json.loads(text), ""
    except ValueError as exc:
        return None, f"not JSON: {exc}"
    except RecursionError:
        return None, "not JSON evalsite can read: nested too deeply"


class _Pass(Evaluator):
    group: ClassVar[str] = "output"

    def threshold(self, config: CriterionConfig) -> Threshold:
        return Threshold(lower_limit=1.0)


@register
class JsonValidEvaluator(_Pass):
    """Passes when the last answer is JSON (a structured answer, or text that parses)."""

    name = "json_valid"

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        _, why = _parsed(last_answer(output))
        return [ScoreResult(criterion=criterion, score=0.0 if why else 1.0, passed=not why,
                            threshold=self.threshold(config), justification={"problem": why} if why else {})]


class JsonSchemaOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    json_schema: dict[str, Any] = Field(alias="schema")

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        # Remote and file references, size, nesting and expansion: refused when saved (a
        # monitor, a run's or an eval set's config) and again when an old config is scored.
        problems = schema_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value


@register
class JsonSchemaEvaluator(_Pass):
    """Passes when the last answer is JSON valid against the `schema` option (draft 2020-12),
    validated within `evaluations.jsonschemas`' bounds (no reference outside the schema)."""

    name = "json_schema"
    Options = JsonSchemaOptions

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        try:
            options: JsonSchemaOptions = self.options(config)
        except ValidationError as exc:
            return options_error(criterion, exc)
        value, why = _parsed(last_answer(output))
        try:
            problems = [why] if why else validation_problems(options.json_schema, value)
        except SchemaBoundExceeded as exc:
            return [ScoreResult(criterion=criterion, score=None, passed=None, threshold=self.threshold(config),
                                error=str(exc))]
        return [ScoreResult(criterion=criterion, score=0.0 if problems else 1.0, passed=not problems,
                            threshold=self.threshold(config), justification={"problems": problems} if problems else {})]


class ToolLimitOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_count: int = Field(default=0, ge=0)


class _ToolLimitEvaluator(Evaluator):
    """Tool calls of one kind counted against `max_count`: passes at or below it; the score is
    the share of calls not of that kind. Subclasses say which calls count (`counted`) and what
    the justification lists them as (`listed`)."""

    group = "reliability"
    Options = ToolLimitOptions
    listed = ""

    def counted(self, output: AgentOutput) -> tuple[int, list[str]]:
        """(the output's tool calls, those that count against the limit, described)."""
        raise NotImplementedError

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        try:
            options: ToolLimitOptions = self.options(config)
        except ValidationError as exc:
            return options_error(criterion, exc)
        calls, found = self.counted(output)
        limit = Threshold(upper_limit=options.max_count)
        return [ScoreResult(criterion=criterion, score=1 - len(found) / calls if calls else 1.0,
                            passed=limit.passes(len(found)), raw_value=float(len(found)), threshold=limit,
                            justification={"calls": calls, self.listed: found[:10]})]


@register
class ToolErrorsEvaluator(_ToolLimitEvaluator):
    """Tool calls that failed: passes at or below `max_count` (default none); the score is
    the share of calls that did not fail."""

    name = "tool_errors"
    listed = "failed"

    def counted(self, output: AgentOutput) -> tuple[int, list[str]]:
        calls = [c for t in output.turns for c in t.tool_calls]
        return len(calls), [f"{c.name}: {c.error}" for c in calls if c.error]


@register
class ToolRetriesEvaluator(_ToolLimitEvaluator):
    """Retries: a tool called again right after itself with the same arguments. Passes at or
    below `max_count` (default none)."""

    name = "tool_retries"
    listed = "retried"

    def counted(self, output: AgentOutput) -> tuple[int, list[str]]:
        retried: list[str] = []
        for turn in output.turns:
            for before, call in zip(turn.tool_calls, turn.tool_calls[1:], strict=False):
                if call.name == before.name and call.args == before.args:
                    retried.append(call.name)
        return sum(len(t.tool_calls) for t in output.turns), retried
