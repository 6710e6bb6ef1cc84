"""Result shapes evalsite exports: AgentFlow's EvalReport (seed 004) and watsonx.governance
style metric records (seed 001)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class CriterionResult(BaseModel):
    criterion: str
    score: float
    passed: bool
    threshold: float
    details: dict[str, Any] = Field(default_factory=dict)


class EvalCaseResult(BaseModel):
    eval_id: str
    name: str | None = None
    passed: bool
    criterion_results: list[CriterionResult] = Field(default_factory=list)
    error: str | None = None
    duration_seconds: float = 0.0


class CriterionStats(BaseModel):
    count: int
    mean: float | None = None
    median: float | None = None
    min: float | None = None
    max: float | None = None
    std_dev: float | None = None
    pass_rate: float | None = None


class EvalSummary(BaseModel):
    total_cases: int
    passed_cases: int
    failed_cases: int
    pass_rate: float
    avg_score: float
    criterion_stats: dict[str, CriterionStats] = Field(default_factory=dict)


class EvalReport(BaseModel):
    report_id: str
    eval_set_id: str
    eval_set_name: str | None = None
    results: list[EvalCaseResult] = Field(default_factory=list)
    summary: EvalSummary
    config_used: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    duration_seconds: float


class MetricRecord(BaseModel):
    """One metric value at the level it applies to (watsonx `AgentMetricResult`)."""

    id: str
    name: str
    value: float | None
    applies_to: str  # conversation / interaction / node
    conversation_id: str
    interaction_id: str | None = None
    node_name: str | None = None
    group: str | None = None
    thresholds: list[dict[str, Any]] = Field(default_factory=list)
    errors: list[dict[str, str]] = Field(default_factory=list)
    passed: bool | None = None


class AggregateMetricRecord(BaseModel):
    """A metric aggregated over a run (watsonx `AggregateAgentMetricResult`)."""

    name: str
    applies_to: str
    node_name: str | None = None
    value: float | None
    count: int
    mean: float | None = None
    min: float | None = None
    max: float | None = None
    individual_results: list[MetricRecord] | None = None
