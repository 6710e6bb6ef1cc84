"""What a monitor is made of, validated: its filter, sample rate and criteria (the same
`CriterionConfig` an evaluation config has, restricted to evaluators that need no reference),
and how a trace is matched and sampled."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evaluations.evaluators import get_evaluator_class
from evaluations.schemas.evalset import CriterionConfig

# Built-in evaluators that read the output alone (custom evaluators of EVALSITE_EVALUATORS,
# the LLM judges with rubrics and DeepEval's judged metrics that need no expected answer or
# golden context are allowed too: see `reference_free`).
REFERENCE_FREE = frozenset({
    "contains", "regex_match", "json_valid", "json_schema", "tool_errors", "tool_retries",
    "latency_seconds", "total_tokens", "cost_usd", "performance", "node_latency_seconds",
    "llm_judge", "rubric_based_final_response_quality_v1", "rubric_based_tool_use_quality_v1", "safety_v1",
})


def reference_free(name: str) -> bool:
    from django.conf import settings

    custom = {path.rpartition(".")[2] for path in getattr(settings, "EVALSITE_EVALUATORS", [])}
    if name in REFERENCE_FREE:
        return True
    try:
        cls = get_evaluator_class(name)
    except KeyError:
        return False
    if cls.calls_judge and getattr(cls, "reference_free", False):
        return True  # DeepEval's judged metrics that read the exchange alone (deepeval_judged/)
    return cls.__name__ in custom


class Filters(BaseModel):
    """Which received traces a monitor looks at; empty fields match everything."""

    model_config = ConfigDict(extra="forbid")
    service: str = Field(default="", max_length=255)
    root_name: str = Field(default="", max_length=255)
    environment: str = Field(default="", max_length=100)  # deployment.environment
    end_user: str = Field(default="", max_length=200)  # enduser.id / user.id
    thread: str = Field(default="", max_length=200)  # a thread id; "*" for any trace that has one
    attributes: dict[str, str | int | float | bool] = Field(default_factory=dict)  # on the resource or root span


class MonitorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200)
    level: Literal["trace", "thread"] = "trace"
    filters: Filters = Field(default_factory=Filters)
    sample_rate: float = Field(default=1.0, ge=0.0, le=1.0)
    idle_seconds: int = Field(default=300, ge=1, le=7 * 24 * 3600)
    enabled: bool = True
    criteria: dict[str, CriterionConfig] = Field(min_length=1, max_length=20)

    @field_validator("name")
    @classmethod
    def _strip(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a name is needed")
        return value.strip()

    @model_validator(mode="after")
    def _criteria(self) -> MonitorSpec:
        for name, config in self.criteria.items():
            if not name or len(name) > 100:
                raise ValueError(f"criteria.{name}: a criterion's name has 1 to 100 characters")
            evaluator = config.evaluator or name
            try:
                cls = get_evaluator_class(evaluator)
            except KeyError as exc:
                raise ValueError(f"criteria.{name}: {exc.args[0]}") from None
            if not reference_free(evaluator):
                raise ValueError(f"criteria.{name}: {evaluator!r} needs an expected answer; a monitor takes "
                                 f"only criteria that need none ({', '.join(sorted(REFERENCE_FREE))} or a custom one)")
            try:
                options = cls().options(config)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise ValueError(f"criteria.{name}.options{'.' + where if where else ''}: {first['msg']}") from None
            wanted: list[str] = getattr(cls, "references", lambda _: [])(options)
            if wanted:
                raise ValueError(f"criteria.{name}: {evaluator!r} reads {', '.join(wanted)}, which a received "
                                 "trace does not have")
        return self

    def stored(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_defaults=False)


def spec_errors(exc: ValidationError) -> list[str]:
    """A pydantic error as "field.path: message" lines, for forms, the API and the CLI."""
    out = []
    for e in exc.errors():
        where = ".".join(str(p) for p in e["loc"])
        message = str(e["msg"]).removeprefix("Value error, ")
        out.append(f"{where}: {message}" if where else message)
    return out


def sampled(key: str, rate: float) -> bool:
    """Deterministic: the same trace (or thread) id is in or out for a rate, on every worker."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < rate


def matches(filters: Filters, *, service: str, root_name: str, environment: str, end_user: str, thread_id: str,
            attributes: dict[str, Any]) -> bool:
    f = filters
    if f.service and service != f.service:
        return False
    if f.root_name and root_name != f.root_name:
        return False
    if f.environment and environment != f.environment:
        return False
    if f.end_user and end_user != f.end_user:
        return False
    if f.thread == "*" and not thread_id:
        return False
    if f.thread and f.thread != "*" and thread_id != f.thread:
        return False
    return all(str(attributes.get(k)) == str(v) if not isinstance(v, bool) else attributes.get(k) is v
               for k, v in f.attributes.items())
