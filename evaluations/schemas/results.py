"""Result models of Upsonic's evals (seed 000), field for field: what the LLM judge, the
performance statistics and the reliability check produce, stored in score justifications
and exported as they are.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Result(BaseModel):
    model_config = ConfigDict(from_attributes=True)


# --- Accuracy (LLM judge) ---------------------------------------------------------------------


class EvaluationScore(_Result):
    """One judgment of the LLM judge."""

    score: float = Field(ge=1, le=10, description="1-10: quality and accuracy against the expected output")
    reasoning: str = Field(description="why the judge gave this score")
    is_met: bool = Field(description="whether the output meets the core requirements of the expected output")
    critique: str = Field(description="how the response could have been better")


class AccuracyEvaluationResult(_Result):
    """The judge's scores over the iterations, averaged (Upsonic's `AccuracyEvaluator`)."""

    evaluation_scores: list[EvaluationScore]
    average_score: float
    user_query: str
    expected_output: str
    generated_output: str


# --- Performance --------------------------------------------------------------------------------


class PerformanceRunResult(_Result):
    """One measured run. Memory is measured only by the Python target (tracemalloc); outputs
    from elsewhere carry None there."""

    latency_seconds: float
    memory_increase_bytes: int | None
    memory_peak_bytes: int | None


class PerformanceEvaluationResult(_Result):
    """Statistics over the measured runs; each `*_stats` holds average, median, min, max and
    std_dev (the sample standard deviation, 0.0 for one run), or is empty with no data."""

    all_runs: list[PerformanceRunResult]
    num_iterations: int
    warmup_runs: int
    latency_stats: dict[str, float]
    memory_increase_stats: dict[str, float]
    memory_peak_stats: dict[str, float]


# --- Reliability ------------------------------------------------------------------------------


class ToolCallCheck(BaseModel):
    """Whether one expected tool was called, and how often (Upsonic's `ToolCallCheck`)."""

    model_config = ConfigDict(from_attributes=True)
    tool_name: str
    was_called: bool
    times_called: int


class ReliabilityEvaluationResult(BaseModel):
    """Upsonic's reliability report: `unexpected_tool_calls` is filled only under `exact_match`."""

    model_config = ConfigDict(from_attributes=True)
    passed: bool
    summary: str
    expected_tool_calls: list[str]
    actual_tool_calls: list[str]
    checks: list[ToolCallCheck]
    missing_tool_calls: list[str]
    unexpected_tool_calls: list[str]

    def assert_passed(self) -> None:
        """Raise AssertionError with the summary unless the check passed (for pytest)."""
        if not self.passed:
            raise AssertionError(f"Reliability evaluation failed: {self.summary}")
