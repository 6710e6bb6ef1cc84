"""What an agent produced for one case and iteration: the outputs format (docs/runs.md, "Targets").

Uploaded outputs (API, CLI `--outputs`, page) are read into these models; the HTTP and
Python targets produce the same models, so evaluators see one shape whatever the source.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evaluations.schemas.evalset import ToolCall, TrajectoryStep
from evaluations.schemas.text import without_nul

# An output's iteration sets how many iterations its run has: one stray number must not make
# a run of millions of results. Every entry point (API, page upload, CLI) reads outputs here.
MAX_ITERATIONS = 100


class _Output(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Usage(_Output):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = None

    def total(self) -> int | None:
        if self.total_tokens is not None:
            return self.total_tokens
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)


class OutputToolCall(ToolCall):
    """An actual tool call: the native ToolCall plus what only an execution has."""

    error: str | None = None  # the tool failed (counts as a failure in per-tool aggregates)
    latency_seconds: float | None = None
    node: str | None = None  # the agent node that made the call, when known
    # The model target: where evalsite's simulated result came from (evaluations/runs/simulation.py:
    # "expected", "mock", "llm" or "none"); None for a tool that really ran.
    simulated: str | None = None


class TurnOutput(_Output):
    invocation_id: str | None = None  # matched to the case's invocation; else by position
    # Text, or structured output (a JSON object / list) for agents that return data.
    final_response: Any | None = None
    tool_calls: list[OutputToolCall] = Field(default_factory=list)
    intermediate_responses: list[Any] = Field(default_factory=list)
    latency_seconds: float | None = None
    usage: Usage | None = None
    error: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class AgentOutput(_Output):
    eval_id: str
    iteration: int = Field(default=0, ge=0, lt=MAX_ITERATIONS)
    turns: list[TurnOutput] = Field(default_factory=list)
    trajectory: list[TrajectoryStep] = Field(default_factory=list)
    latency_seconds: float | None = None
    error: str | None = None  # the agent failed for the whole case (timeout, crash)
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Python callable target: memory measured with tracemalloc (Upsonic PerformanceRunResult).
    memory_increase_bytes: int | None = None
    memory_peak_bytes: int | None = None
    # The agent's trace as OTLP JSON (`resourceSpans`), kept for the trace pages; tool calls
    # and trajectory steps are derived from it when the turns carry none.
    trace: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        return without_nul(data)  # see evaluations.schemas.text

    def usage(self) -> Usage:
        """Token and cost totals over the turns (a turn's total counts even when it reports
        only prompt and completion tokens)."""
        prompt = completion = total = cost = None
        for turn in self.turns:
            usage = turn.usage
            if usage is None:
                continue
            if usage.prompt_tokens is not None:
                prompt = (prompt or 0) + usage.prompt_tokens
            if usage.completion_tokens is not None:
                completion = (completion or 0) + usage.completion_tokens
            turn_total = usage.total()
            if turn_total is not None:
                total = (total or 0) + turn_total
            if usage.cost_usd is not None:
                cost = (cost or 0.0) + usage.cost_usd
        # Built once (no model per turn, no assignment per field): the fields set are the
        # totals some turn reported, as when they were added up on the model.
        found: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total,
                                 "cost_usd": cost}
        return Usage.model_construct(**{k: v for k, v in found.items() if v is not None})

    def all_tool_calls(self) -> list[OutputToolCall]:
        return [call for turn in self.turns for call in turn.tool_calls]

    def total_latency(self) -> float | None:
        if self.latency_seconds is not None:
            return self.latency_seconds
        values = [t.latency_seconds for t in self.turns if t.latency_seconds is not None]
        return sum(values) if values else None
