"""A DeepEval metric collection (`schemas/deepeval_collection.py`) to an evalsite evaluation
config and back. Each metric becomes the `deepeval_*` criterion that computes it: `threshold`
is the criterion's, `model` its `judge_model`, the other constructor arguments its options
(`evaluation_params` as DeepEval names them: `input`, or `LLMTestCaseParams.INPUT`); DeepEval's
execution settings (`async_mode`, `verbose_mode`, `evaluation_template`...) have no meaning
here and are dropped. A G-Eval is named after its `name` (`g_eval_correctness`); two metrics of
one kind are numbered."""

from __future__ import annotations

import re
from typing import Any

from evaluations.interop.deepeval.metrics import METRICS, criterion_for
from evaluations.schemas.deepeval_collection import DeepEvalMetricCollection

IGNORED = frozenset({"async_mode", "verbose_mode", "evaluation_template", "_include_g_eval_suffix", "flaky",
                     "eval_mode", "system_one_model"})
_PARAM = re.compile(r"^(?:LLMTestCaseParams|SingleTurnParams)\.([A-Z_]+)$")


class CollectionError(ValueError):
    """The collection names a metric evalsite does not compute, with where."""


def _param(value: Any) -> Any:
    if isinstance(value, str):
        match = _PARAM.match(value.strip())
        return match.group(1).lower() if match else value.strip()
    return value


def collection_to_config(collection: DeepEvalMetricCollection) -> dict[str, Any]:
    """The evalsite config (EvalConfig as a dict, criteria in the collection's order)."""
    criteria: dict[str, dict[str, Any]] = {}
    for index, spec in enumerate(collection.metrics):
        criterion = criterion_for(spec.metric)
        if criterion is None:
            known = ", ".join(sorted(cls for cls, _ in METRICS.values()))
            raise CollectionError(f"metrics[{index}].metric: evalsite does not compute {spec.metric!r} (it computes "
                                  f"{known})")
        options = {k: v for k, v in collection.extra_of(index).items() if k not in IGNORED}
        if "evaluation_params" in options and isinstance(options["evaluation_params"], list):
            options["evaluation_params"] = [_param(p) for p in options["evaluation_params"]]
        key = criterion
        if criterion == "deepeval_g_eval" and isinstance(options.get("name"), str) and options["name"].strip():
            key = "g_eval_" + (re.sub(r"[^a-z0-9]+", "_", options["name"].strip().lower()).strip("_") or "metric")
        base, number = key, 2
        while key in criteria:
            key, number = f"{base}_{number}", number + 1
        entry: dict[str, Any] = {"evaluator": criterion, "options": options}
        if spec.threshold is not None:
            entry["threshold"] = spec.threshold
        if spec.model:
            entry["judge_model"] = spec.model
        criteria[key] = entry
    return {"criteria": criteria}


def config_to_collection(config: dict[str, Any], name: str = "") -> tuple[dict[str, Any], list[str]]:
    """The config's DeepEval criteria as a metric collection, and the criteria left out (those
    DeepEval has no metric for)."""
    metrics: list[dict[str, Any]] = []
    skipped: list[str] = []
    for key, entry in (config.get("criteria") or {}).items():
        entry = entry if isinstance(entry, dict) else {}
        if entry.get("enabled") is False:
            continue
        evaluator = entry.get("evaluator") or key
        if evaluator not in METRICS:
            skipped.append(key)
            continue
        metric: dict[str, Any] = {"metric": METRICS[evaluator][0]}
        if "threshold" in entry:
            metric["threshold"] = entry["threshold"]
        if entry.get("judge_model") and entry["judge_model"] != "gpt-4o-mini":
            metric["model"] = entry["judge_model"]
        metric.update(entry.get("options") or {})
        metrics.append(metric)
    return {"name": name, "metrics": metrics}, skipped
