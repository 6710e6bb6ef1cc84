"""A DeepEval metric collection as evalsite reads and writes it: the metrics a DeepEval user
runs together, each in DeepEval's own terms (its class, and the keyword arguments its
constructor takes), as JSON."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class DeepEvalMetricSpec(BaseModel):
    """One metric: `metric` is DeepEval's class (`FaithfulnessMetric`, `GEval`) or its display
    name (`Faithfulness`); every other key is a constructor argument (`threshold`,
    `strict_mode`, `include_reason`, `criteria`, `evaluation_params`, ...)."""

    model_config = ConfigDict(extra="allow")
    metric: str = Field(min_length=1, max_length=100)
    threshold: float | None = Field(default=None, ge=0, le=1)
    model: str | None = None  # the judge model


class DeepEvalMetricCollection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(default="", max_length=200)
    metrics: list[DeepEvalMetricSpec] = Field(min_length=1, max_length=50)

    def extra_of(self, index: int) -> dict[str, Any]:
        return dict(self.metrics[index].model_extra or {})
