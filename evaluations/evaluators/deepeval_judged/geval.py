"""DeepEval's G-Eval (`GEval`) on evalsite's judge, scored as DeepEval 4.3.1 scores it for a
model without log-probabilities: the judge's `score` mapped from the rubric's range (0-10
without one) onto 0-1, `(score - low) / (high - low)`; in strict mode the judge answers 0 or 1
and the score is `int(score)`. The evaluation steps are the option's, else the judge writes
them from `criteria` first."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evaluations.evaluators.base import register
from evaluations.evaluators.deepeval_judged import prompts
from evaluations.evaluators.deepeval_judged import schemas as s
from evaluations.evaluators.deepeval_judged.core import (
    Judge,
    JudgedOptions,
    Measured,
    Unmeasurable,
    missing,
    single_turn,
)
from evaluations.evaluators.deepeval_judged.rag import _SingleTurn
from evaluations.schemas.evalset import EvalCase
from evaluations.schemas.outputs import AgentOutput

Param = Literal["input", "actual_output", "expected_output", "context", "retrieval_context", "tools_called",
                "expected_tools"]
PARAM_LABELS = {"input": "Input", "actual_output": "Actual Output", "expected_output": "Expected Output",
                "context": "Context", "retrieval_context": "Retrieval Context", "tools_called": "Tools Called",
                "expected_tools": "Expected Tools"}


class GEvalRubric(BaseModel):
    model_config = ConfigDict(extra="forbid")
    score_range: tuple[int, int]
    expected_outcome: str

    @field_validator("score_range")
    @classmethod
    def _range(cls, value: tuple[int, int]) -> tuple[int, int]:
        start, end = value
        if not (0 <= start <= 10 and 0 <= end <= 10):
            raise ValueError("both ends of a rubric's score_range are between 0 and 10")
        if start > end:
            raise ValueError("a rubric's score_range starts at or below its end")
        return value


class GEvalOptions(JudgedOptions):
    name: str = ""
    criteria: str | None = None
    evaluation_steps: list[str] | None = None
    evaluation_params: list[Param] = Field(min_length=1)
    rubric: list[GEvalRubric] | None = None
    top_logprobs: int = Field(20, ge=0, le=20)  # DeepEval's; evalsite never asks for log-probabilities

    @model_validator(mode="after")
    def _deepeval_rules(self) -> GEvalOptions:
        if self.criteria is None and self.evaluation_steps is None:
            raise ValueError("give criteria or evaluation_steps")
        if self.criteria is not None and not self.criteria.strip():
            raise ValueError("criteria cannot be empty")
        if self.evaluation_steps is not None and len(self.evaluation_steps) == 0:
            raise ValueError("evaluation_steps cannot be an empty list: leave it out or give steps")
        rubric = sorted(self.rubric or [], key=lambda r: r.score_range[0])
        for i, a in enumerate(rubric):
            for b in rubric[i + 1:]:
                if a.score_range[1] >= b.score_range[0]:
                    raise ValueError(f"rubric score ranges overlap: {list(a.score_range)} and {list(b.score_range)}")
        self.rubric = rubric or None
        return self


def params_text(params: list[str]) -> str:
    labels = [PARAM_LABELS[p] for p in params]
    if len(labels) == 1:
        return labels[0]
    if len(labels) == 2:
        return " and ".join(labels)
    return ", ".join(labels[:-1]) + ", and " + labels[-1]


def score_range(rubric: list[GEvalRubric] | None) -> tuple[int, int]:
    return (0, 10) if not rubric else (rubric[0].score_range[0], rubric[-1].score_range[1])


def rubric_text(rubric: list[GEvalRubric] | None) -> str | None:
    if not rubric:
        return None
    return "\n".join(f"{r.score_range[0]}: {r.expected_outcome}" if r.score_range[0] == r.score_range[1]
                     else f"{r.score_range[0]}-{r.score_range[1]}: {r.expected_outcome}" for r in rubric)


@register
class GEval(_SingleTurn):
    """G-Eval: a criterion of your own, in words, judged over the test case's fields."""

    name = "deepeval_g_eval"
    deepeval_name = "GEval"
    title = "G-Eval"
    Options = GEvalOptions

    @staticmethod
    def references(options: GEvalOptions) -> list[str]:
        """The evaluation params that come from the golden, not the exchange (a monitor has none)."""
        return [p for p in options.evaluation_params if p in ("expected_output", "context", "expected_tools")]

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        title = f"{options.name or 'G-Eval'} [GEval]"
        tc = single_turn(case, output)
        why = missing(tc, tuple(options.evaluation_params), title)
        if why:
            raise Unmeasurable(why)
        params = params_text(options.evaluation_params)
        evaluation_steps = options.evaluation_steps or judge.extract(
            prompts.geval_steps(options.criteria or "", params), s.Steps, lambda d: d["steps"])
        steps["evaluation_steps"] = evaluation_steps
        numbered = "".join(f"{i}. {step}\n" for i, step in enumerate(evaluation_steps, start=1))
        content = "".join(f"{PARAM_LABELS[p]}:\n{_value(getattr(tc, p))} \n\n" for p in options.evaluation_params)
        low, high = score_range(options.rubric)
        raw, reason = judge.extract(
            prompts.geval_result(numbered, content, params, strict=options.strict_mode,
                                 rubric=rubric_text(options.rubric), score_range=(low, high)),
            s.ReasonScore, lambda d: (d["score"], d["reason"]))
        steps["judge_score"] = raw
        steps["score_range"] = [low, high]
        score = (float(raw) - low) / (high - low) if not options.strict_mode else int(raw)
        return Measured(score, reason if options.include_reason else None, steps)


def _value(value: Any) -> Any:
    if isinstance(value, list) and value and not isinstance(value[0], str):
        return [v.as_dict() if hasattr(v, "as_dict") else v for v in value]
    return value
