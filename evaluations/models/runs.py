"""Runs, their queued batches, case results, scores and per-tool usage.

Run (pins a version) -> CaseResult (per case and iteration) -> Score (per evaluator, level,
turn and node).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from evaluations.models.accounts import Project
from evaluations.models.evalsets import EvalCase, EvalSetVersion, EvaluationConfig


class EngineJSONField(models.JSONField):
    """A JSONField whose SQLite column has no `JSON_VALID` check (migration 0033): for the
    columns the engine writes in bulk, from JSON that evalsite serialised itself (a score's
    threshold and justification, a result's output). SQLite parsed each value once more to
    check it: 0.15 s of CPU for the 110,000 scores of a 10,000-case run, a fifth of their
    insert. PostgreSQL's jsonb has no such check; reads and writes are JSONField's."""

    def db_check(self, connection: object) -> None:
        return None


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class TargetKind(models.TextChoices):
        UPLOADED = "uploaded"
        HTTP = "http"
        PYTHON = "python"
        TRACES = "traces"  # the agent runs elsewhere and sends its traces (evaluations/ingest)
        MODEL = "model"  # evalsite runs a model, a prompt and simulated tools (runs/targets/model.py)

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs")
    evalset_version = models.ForeignKey(EvalSetVersion, on_delete=models.PROTECT, related_name="runs")
    name = models.CharField(max_length=255, blank=True)
    config = models.JSONField(default=dict)  # the AgentFlow EvalConfig actually used
    criteria_order = models.JSONField(default=list, blank=True)  # its criteria's order (evaluations/ordering.py)
    config_preset = models.ForeignKey(EvaluationConfig, null=True, blank=True, on_delete=models.SET_NULL)
    target_kind = models.CharField(max_length=16, choices=TargetKind.choices)
    target = models.JSONField(default=dict)  # URL/headers/mapping, or the callable path
    iterations = models.PositiveIntegerField(default=1)
    warmups = models.PositiveIntegerField(default=0)
    eval_ids = models.JSONField(default=list, blank=True)  # a subset of the cases; empty = all
    input_overrides = models.JSONField(default=dict, blank=True)  # per eval_id, merged into inputs
    # Labels.
    model = models.CharField(max_length=200, blank=True)
    git_commit = models.CharField(max_length=64, blank=True)
    branch = models.CharField(max_length=255, blank=True)
    tags = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True)
    # Progress counters: only ever changed with F() expressions.
    cases_total = models.PositiveIntegerField(default=0)
    cases_done = models.PositiveIntegerField(default=0)
    cases_failed = models.PositiveIntegerField(default=0)
    cases_errored = models.PositiveIntegerField(default=0)
    cases_missing = models.PositiveIntegerField(default=0)  # uploaded outputs had nothing for them
    cases_not_runnable = models.PositiveIntegerField(default=0)  # e.g. scenario cases, no simulator
    # scored, but some enabled criterion could not be (not runnable here, or its evaluator
    # errored) and none failed: counted in cases_done, never passed (issue 41)
    cases_unscored = models.PositiveIntegerField(default=0)
    # What the LLM judges cost (issue 42): added up as each chunk's scores are written, in the
    # same transaction (F() expressions); the estimate is made when the run is created.
    judge_calls = models.PositiveIntegerField(default=0)
    judge_prompt_tokens = models.PositiveBigIntegerField(default=0)
    judge_completion_tokens = models.PositiveBigIntegerField(default=0)
    judge_cost_usd = models.FloatField(null=True, blank=True)
    judge_estimate = models.JSONField(null=True, blank=True)  # {calls, prompt_tokens, completion_tokens, cost_usd}
    # Lease: the worker holding the run renews heartbeat_at; a stale lease means resume.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    lease_owner = models.CharField(max_length=100, blank=True)
    summary = models.JSONField(null=True, blank=True)  # per-criterion and latency aggregates
    # What its charts count (runs.selectors.chart_bins), kept once it has finished: its page
    # reads them instead of every score. Stamped with the finish they count.
    chart_bins = models.JSONField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["project", "status"], name="run_project_status")]

    def __str__(self) -> str:
        return self.name or f"run {self.pk}"

    @property
    def is_finished(self) -> bool:
        return self.status in {self.Status.COMPLETED, self.Status.FAILED, self.Status.CANCELLED}

    @property
    def cases_settled(self) -> int:
        """Results that need no more work, whatever their outcome."""
        return self.cases_done + self.cases_missing + self.cases_not_runnable


class RunBatch(models.Model):
    """A batch of a run's pending results on its way through the task queue, with a lease of
    its own (evaluations/runs/queue.py): waiting for its run's turn (`queued_at` empty), handed
    to the broker, or in a worker's hands (`heartbeat_at`, renewed while it works). The row
    goes when the batch ends; a row whose worker went silent is lost work, found per batch."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="batches")
    first_pk = models.BigIntegerField()  # the CaseResult ids it covers, inclusive
    last_pk = models.BigIntegerField()
    queued_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    owner = models.CharField(max_length=100, blank=True)  # host:pid of the worker holding it
    # Its task could not be handed to the broker (Redis away): waiting again, and the watchdog
    # sends it as soon as the broker answers, not a lease later.
    unsent = models.BooleanField(default=False)

    class Meta:
        indexes = [models.Index(fields=["run", "first_pk"], name="batch_run_first")]

    def __str__(self) -> str:
        return f"results {self.first_pk}-{self.last_pk} of run {self.run_id}"


class CaseResult(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        PASSED = "passed"
        FAILED = "failed"
        ERROR = "error"
        NOT_RUNNABLE = "not_runnable"
        MISSING = "missing"  # uploaded outputs had nothing for this case
        # Some enabled criterion was not scored (not runnable here, its evaluator errored, a
        # promptfoo assertion evalsite does not compute) and nothing scored failed: no verdict.
        NOT_FULLY_SCORED = "not_fully_scored", "not fully scored"

    # No index of its own: the three below begin with the run (migration 0032).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="results", db_index=False)
    case = models.ForeignKey(EvalCase, on_delete=models.CASCADE, related_name="results")
    iteration = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    output = EngineJSONField(null=True, blank=True)  # the outputs-format object
    error = models.TextField(blank=True)
    latency_seconds = models.FloatField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.FloatField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)  # agent calls made for it (retries)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "case", "iteration"], name="result_unique")]
        indexes = [models.Index(fields=["run", "status"], name="result_run_status"),
                   # a run's results in id order, which is the eval set's (runs.page.results_table)
                   models.Index(fields=["run", "id"], name="result_run_order")]

    def __str__(self) -> str:
        return f"{self.case_id} #{self.iteration} in run {self.run_id}"


class Score(models.Model):
    class Level(models.TextChoices):
        CONVERSATION = "conversation"
        INTERACTION = "interaction"
        NODE = "node"

    # Neither key has an index of its own: `score_run_criterion` begins with the run and
    # `score_unique` with the result, and each of the 11 scores a case writes maintained two
    # indexes more (migration 0032).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="scores", db_index=False)  # for aggregates
    result = models.ForeignKey(CaseResult, on_delete=models.CASCADE, related_name="scores", db_index=False)
    criterion = models.CharField(max_length=100)
    evaluator = models.CharField(max_length=100, blank=True)
    applies_to = models.CharField(max_length=16, choices=Level.choices, default=Level.CONVERSATION)
    # -1 for the whole conversation: NULLs would not collide in the unique constraint.
    turn_index = models.IntegerField(default=-1)
    node_name = models.CharField(max_length=200, blank=True, default="")
    score = models.FloatField(null=True, blank=True)  # normalised to [0, 1]
    raw_value = models.FloatField(null=True, blank=True)  # on the evaluator's own scale
    passed = models.BooleanField(null=True)
    threshold = EngineJSONField(null=True, blank=True)  # {"lower_limit": x} / {"upper_limit": y}
    justification = EngineJSONField(default=dict, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["result", "criterion", "applies_to", "turn_index", "node_name"], name="score_unique"
            )
        ]
        indexes = [models.Index(fields=["run", "criterion"], name="score_run_criterion"),
                   # issue 30: a run's failing scores (a few % of its rows) read for its causes
                   # without a walk over every score; queries filter on the same `NOT_PASSED`.
                   models.Index(fields=["run", "result"], condition=~models.Q(passed=True),
                                name="score_run_not_passed"),
                   # a run's errored scores (none, mostly), counted into its notices as it
                   # completes: without it, SQLite read every score of the run to find none
                   models.Index(fields=["run", "criterion"], condition=~models.Q(passed=True) & ~models.Q(error=""),
                                name="score_run_errored")]

    #: The condition of the partial index above: filter on it (unchanged) to use the index.
    NOT_PASSED = ~models.Q(passed=True)
    #: With NOT_PASSED, the condition of `score_run_errored`.
    ERRORED = ~models.Q(error="")

    def __str__(self) -> str:
        return f"{self.criterion}={self.score}"


class ToolUsage(models.Model):
    """Calls of one tool (at one node) in one case result: per-tool aggregates are a GROUP BY."""

    # No index of its own for either key: `tool_usage_run_tool` begins with the run and
    # `tool_usage_unique` with the result (migration 0032).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tool_usage", db_index=False)
    result = models.ForeignKey(CaseResult, on_delete=models.CASCADE, related_name="tool_usage", db_index=False)
    tool_name = models.CharField(max_length=200)
    node_name = models.CharField(max_length=200, blank=True, default="")
    calls = models.PositiveIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0)
    latency_seconds = models.FloatField(null=True, blank=True)  # summed over the calls

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["result", "tool_name", "node_name"], name="tool_usage_unique")
        ]
        indexes = [models.Index(fields=["run", "tool_name"], name="tool_usage_run_tool")]

    def __str__(self) -> str:
        return f"{self.tool_name} x{self.calls}"
