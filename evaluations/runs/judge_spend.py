"""What a run's LLM judges will cost (the estimate made when it is created) and DeepEval's
default threshold for the `deepeval_*` judged criteria of a config that does not set one."""

from __future__ import annotations

from typing import Any

from evaluations.evaluators import get_evaluator_class
from evaluations.evaluators.deepeval_judged.estimate import Estimate, case_tokens, expected_calls
from evaluations.evaluators.judge import explicit_model
from evaluations.evaluators.llm import ChatClient
from evaluations.models import EvalCase
from evaluations.runs.exports import case_native_dict
from evaluations.schemas.evalset import EvalCase as NativeCase
from evaluations.schemas.evalset import EvalConfig

SAMPLE = 200  # cases read to estimate a larger run


def with_default_thresholds(config: EvalConfig) -> EvalConfig:
    """The config with each criterion whose evaluator has a default threshold of its own
    (DeepEval's 0.5) given it, unless the config set one."""
    changed = {}
    for name, criterion in config.criteria.items():
        if "threshold" in criterion.model_fields_set:
            continue
        try:
            default = getattr(get_evaluator_class(criterion.evaluator or name), "default_threshold", None)
        except KeyError:
            continue
        if isinstance(default, float):
            changed[name] = criterion.model_copy(update={"threshold": default})
    if not changed:
        return config
    return config.model_copy(update={"criteria": {**config.criteria, **changed}})


def judge_estimate(config: EvalConfig, case_pks: list[int], iterations: int) -> dict[str, Any] | None:
    """Calls, tokens and cost of the config's judged criteria over the run's cases (from a
    sample of up to SAMPLE cases, scaled); None when no criterion calls a judge."""
    judged = []
    for name, criterion in config.criteria.items():
        if not criterion.enabled:
            continue
        evaluator = criterion.evaluator or name
        try:
            cls = get_evaluator_class(evaluator)
        except KeyError:
            continue
        if getattr(cls, "calls_judge", False):
            judged.append((evaluator, criterion))
    if not judged or not case_pks:
        return None
    sample = case_pks[:SAMPLE]
    cases = [NativeCase.model_validate(case_native_dict(row)) for row in EvalCase.objects.filter(pk__in=sample)]
    estimate = Estimate()
    default_model = ChatClient().model
    times = iterations * len(case_pks) / max(1, len(cases))
    for case in cases:
        tokens = case_tokens(case)
        for evaluator, criterion in judged:
            model = explicit_model(criterion) or default_model
            estimate.add(expected_calls(evaluator, case, criterion.options), tokens, model)
    return {key: (round(value * times) if isinstance(value, int) else None if value is None else value * times)
            for key, value in estimate.as_dict().items()}
