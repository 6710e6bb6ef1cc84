"""The evaluator contract, thresholds, and the registry.

An evaluator is a class with a pydantic `Options` model and one pure method,
`score(case, output, config) -> list[ScoreResult]`: no database, no globals. Evaluators that
call the network take their client in the constructor. A criterion of an evaluation config
(`CriterionConfig`) names its evaluator in `evaluator` (default: the criterion's own name).

Custom evaluators: list dotted paths in the `EVALSITE_EVALUATORS` setting; each class is
imported on first use and registered under its `name`.
"""

from __future__ import annotations

import copy
import importlib
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from evaluations.schemas.evalset import CriterionConfig, EvalCase, Invocation
from evaluations.schemas.outputs import AgentOutput, TurnOutput


class Level(str, Enum):
    """What a score applies to (watsonx.governance's `applies_to`)."""

    CONVERSATION = "conversation"
    INTERACTION = "interaction"  # one turn
    NODE = "node"


class Threshold(BaseModel):
    """A score passes when it is at or above `lower_limit` and at or below `upper_limit`
    (watsonx `MetricThreshold`); latency and cost use upper limits."""

    # Frozen: an evaluator hands one threshold to every score of its criterion (see
    # `Evaluator.threshold`), so none may be changed in place.
    model_config = ConfigDict(extra="forbid", frozen=True)
    lower_limit: float | None = None
    upper_limit: float | None = None

    def passes(self, value: float | None) -> bool | None:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        if self.lower_limit is not None and value < self.lower_limit:
            return False
        return not (self.upper_limit is not None and value > self.upper_limit)

    def as_dict(self) -> dict[str, float]:
        return self.model_dump(exclude_none=True)


@dataclass
class ScoreResult:
    """One score: for the whole conversation, one turn, or one node."""

    criterion: str
    score: float | None  # normalised to [0, 1] where the evaluator has a natural scale
    passed: bool | None
    applies_to: Level = Level.CONVERSATION
    turn_index: int = -1  # -1 for the whole conversation
    node_name: str = ""
    raw_value: float | None = None  # on the evaluator's own scale (seconds, tokens, 1-10)
    threshold: Threshold | None = None
    justification: dict[str, Any] = field(default_factory=dict)  # expected, actual, details
    error: str = ""  # the evaluator failed here: recorded, the run goes on


class NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Evaluator(ABC):
    #: Registry key; also the default criterion name that selects it.
    name: ClassVar[str]
    #: Metric group (watsonx): "output", "trajectory", "llm_judge", "performance", ...
    group: ClassVar[str]
    #: Evaluator-specific options, validated from `CriterionConfig.options`.
    Options: ClassVar[type[BaseModel]] = NoOptions
    #: Whether `CriterionConfig.threshold` is a lower limit (scores) or an upper one (latency).
    threshold_direction: ClassVar[Literal["lower", "upper"]] = "lower"
    #: Whether `score` calls an LLM judge (a run scores those on its judge threads).
    calls_judge: ClassVar[bool] = False

    def threshold(self, config: CriterionConfig) -> Threshold:
        """The criterion's threshold, built once per limit: a run asks for it on every case,
        and a pydantic model is not free to build."""
        memo = self.__dict__.setdefault("_thresholds", {})
        found = memo.get(config.threshold)
        if found is None or config.threshold == 0:  # 0.0 and -0.0: one key, two thresholds
            found = memo[config.threshold] = (Threshold(upper_limit=config.threshold)
                                              if self.threshold_direction == "upper"
                                              else Threshold(lower_limit=config.threshold))
        return found

    def options(self, config: CriterionConfig) -> Any:
        """The criterion's options, validated once for as long as they stay the same (a run
        asks on every case); invalid options raise every time."""
        return self._memo_options(config.options, lambda: self.Options.model_validate(config.options))

    def _memo_options(self, raw: dict[str, Any], validate: Callable[[], Any]) -> Any:
        memo = self.__dict__.get("_options")
        if memo is not None and memo[0] == raw:
            return memo[1]
        options = validate()
        self.__dict__["_options"] = (copy.deepcopy(raw), options)
        return options

    @abstractmethod
    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        """Scores for one case's output. `criterion` is the config key being scored (results
        are named after it); per-case criteria are in `case.criteria.get(criterion)`."""


# --- Registry -------------------------------------------------------------------------------

_REGISTRY: dict[str, type[Evaluator]] = {}
_BUILTIN_MODULES: list[str] = []  # filled by evaluations.evaluators.__init__
_loaded = False


def register(cls: type[Evaluator]) -> type[Evaluator]:
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"two evaluators are named {cls.name!r}")
    _REGISTRY[cls.name] = cls
    return cls


def registry() -> dict[str, type[Evaluator]]:
    global _loaded
    if not _loaded:
        from django.conf import settings

        for module in _BUILTIN_MODULES:
            importlib.import_module(module)
        for path in getattr(settings, "EVALSITE_EVALUATORS", []):
            module_name, _, attr = path.rpartition(".")
            register(getattr(importlib.import_module(module_name), attr))
        _loaded = True
    return _REGISTRY


def get_evaluator_class(name: str) -> type[Evaluator]:
    try:
        return registry()[name]
    except KeyError:
        raise KeyError(f"no evaluator named {name!r}; known: {', '.join(sorted(registry()))}") from None


# --- Helpers every evaluator needs ----------------------------------------------------------


def aligned_turns(case: EvalCase, output: AgentOutput) -> list[tuple[Invocation, TurnOutput | None]]:
    """Each expected invocation with the actual turn that answers it: matched by
    invocation_id when the output names ids, else by position. Missing turns are None."""
    by_id = {t.invocation_id: t for t in output.turns if t.invocation_id}
    pairs: list[tuple[Invocation, TurnOutput | None]] = []
    for index, invocation in enumerate(case.conversation):
        turn = by_id.get(invocation.invocation_id)
        if turn is None and index < len(output.turns) and not output.turns[index].invocation_id:
            turn = output.turns[index]  # a turn that names no id answers by its position
        pairs.append((invocation, turn))
    return pairs


def text_of(value: Any) -> str:
    """The text of a response: strings as they are, structured values as compact JSON."""
    import json

    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, dict) for p in value):
        texts = [p["text"] for p in value if isinstance(p.get("text"), str)]
        if texts:
            return "\n".join(texts)
        if len(value) == 1 and "json" in value[0]:
            return json.dumps(value[0]["json"], ensure_ascii=False, sort_keys=True)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
