"""Received traces and spans, monitors (online evaluation) with their results and
aggregates, retention, and conversation threads.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from evaluations.models.accounts import Project
from evaluations.models.runs import CaseResult, Run


class Trace(models.Model):
    """An agent trace, grouped by thread as Confident AI models them: trace -> spans; a thread
    is usually one conversation. Either embedded in an uploaded output (`received` False: it
    belongs to that run's result), or received on `POST /v1/traces` (`received` True: one row
    per project and trace id, in the project's trace list; tied to a run's case when it named
    one, see evaluations/ingest/otlp.py)."""

    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.CASCADE, related_name="traces")
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.CASCADE, related_name="traces")
    result = models.ForeignKey(CaseResult, null=True, blank=True, on_delete=models.CASCADE, related_name="traces")
    trace_id = models.CharField(max_length=64)
    thread_id = models.CharField(max_length=200, blank=True)
    name = models.CharField(max_length=255, blank=True)
    start_ns = models.BigIntegerField(null=True, blank=True)
    end_ns = models.BigIntegerField(null=True, blank=True)
    # Received traces only.
    received = models.BooleanField(default=False)
    received_at = models.DateTimeField(null=True, blank=True)
    service_name = models.CharField(max_length=255, blank=True)
    eval_id = models.CharField(max_length=255, blank=True)  # the evalsite.eval_id it named
    span_count = models.PositiveIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0)
    complete = models.BooleanField(default=False)  # its root span (no parent) has arrived
    resource = models.JSONField(default=dict, blank=True)  # the first resource's attributes
    end_user = models.CharField(max_length=200, blank=True)  # enduser.id / user.id (issue 31)
    environment = models.CharField(max_length=100, blank=True)  # deployment.environment (issue 31)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["result", "trace_id"], name="trace_unique"),
            models.UniqueConstraint(fields=["project", "trace_id"], condition=models.Q(received=True),
                                    name="trace_received_unique"),
        ]
        # The trace list reads received traces newest first (all, failed, by service, thread or end
        # user), and the list of services by skipping through the service index
        # (evaluations/ingest/selectors.py): partial indexes whose condition is the list's own
        # `received` (and `error_count > 0`), so SQLite uses them without statistics too; each
        # ends with the list's order, so a page and its capped count read the index alone.
        indexes = [models.Index(fields=["project", "-start_ns", "-id"], condition=models.Q(received=True),
                                name="trace_received_start"),
                   models.Index(fields=["project", "service_name", "-start_ns", "-id"],
                                condition=models.Q(received=True), name="trace_received_service"),
                   models.Index(fields=["project", "-start_ns", "-id"],
                                condition=models.Q(received=True, error_count__gt=0), name="trace_received_errors"),
                   models.Index(fields=["project", "received_at"], name="trace_project_received_at"),
                   models.Index(fields=["project", "thread_id", "start_ns", "id"], condition=models.Q(received=True),
                                name="trace_received_thread"),
                   models.Index(fields=["project", "end_user", "-start_ns", "-id"], condition=models.Q(received=True),
                                name="trace_received_end_user")]

    def __str__(self) -> str:
        return self.trace_id


class Span(models.Model):
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="spans")
    span_id = models.CharField(max_length=32)
    parent_span_id = models.CharField(max_length=32, blank=True)
    name = models.CharField(max_length=255)
    kind = models.CharField(max_length=32, blank=True)  # AGENT, LLM, TOOL, CHAIN, ... or OTel kind
    start_ns = models.BigIntegerField(null=True, blank=True)
    end_ns = models.BigIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, blank=True)
    attributes = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["trace", "span_id"], name="span_unique")]

    def __str__(self) -> str:
        return self.name


class Monitor(models.Model):
    """A filter over a project's received traces, a sample rate and reference-free criteria,
    scored on the task queue as traces arrive (`level` trace) or per thread once it has been
    idle `idle_seconds` (`level` thread). Editing makes a new `version`; scores name the
    version they were made by (see evaluations/monitors/)."""

    class Level(models.TextChoices):
        TRACE = "trace", "Each trace"
        THREAD = "thread", "Each thread"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="monitors")
    name = models.CharField(max_length=200)
    level = models.CharField(max_length=8, choices=Level.choices, default=Level.TRACE)
    version = models.PositiveIntegerField(default=1)
    filters = models.JSONField(default=dict, blank=True)
    sample_rate = models.FloatField(default=1.0)
    criteria = models.JSONField(default=dict)  # name -> CriterionConfig (evaluations/schemas/evalset.py)
    idle_seconds = models.PositiveIntegerField(default=300)
    enabled = models.BooleanField(default=True)
    threads_swept_to = models.DateTimeField(null=True, blank=True)  # threads idle before this were looked at
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["name", "pk"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="monitor_unique_name")]

    def __str__(self) -> str:
        return self.name


class MonitorVersion(models.Model):
    """What a monitor was at one version: the scores of that version were made by this."""

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    spec = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["monitor", "number"], name="monitor_version_unique")]

    def __str__(self) -> str:
        return f"{self.monitor_id} v{self.number}"


class MonitorResult(models.Model):
    """One trace (or one thread) as a monitor version scored it: passed when no criterion
    failed. Unique per (monitor, version, trace) and (monitor, version, thread): a retried
    task, a killed worker or a backfill over scored traces writes nothing new."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="results")
    version = models.PositiveIntegerField()
    trace = models.ForeignKey(Trace, null=True, blank=True, on_delete=models.CASCADE, related_name="monitor_results")
    thread_id = models.CharField(max_length=200, blank=True)
    at = models.DateTimeField()  # when the trace was received (a thread: its last trace)
    environment = models.CharField(max_length=100, blank=True)
    end_user = models.CharField(max_length=200, blank=True)
    passed = models.BooleanField()
    failed = models.JSONField(default=list, blank=True)  # the criteria that failed
    traces = models.PositiveIntegerField(default=1)
    latency_seconds = models.FloatField(null=True, blank=True)
    tokens = models.FloatField(null=True, blank=True)
    cost_usd = models.FloatField(null=True, blank=True)
    scored_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["monitor", "version", "trace"], condition=Q(trace__isnull=False),
                                    name="monitor_result_trace_unique"),
            models.UniqueConstraint(fields=["monitor", "version", "thread_id"], condition=Q(trace__isnull=True),
                                    name="monitor_result_thread_unique"),
        ]
        indexes = [
            models.Index(fields=["monitor", "version", "at"], name="monitor_result_at"),
            models.Index(fields=["monitor", "version", "passed", "at"], name="monitor_result_failing"),
            models.Index(fields=["monitor", "version", "end_user", "at"], name="monitor_result_user"),
            models.Index(fields=["project", "thread_id"], condition=Q(trace__isnull=True),
                         name="monitor_result_thread"),
            models.Index(fields=["project", "at"], name="monitor_result_project_at"),
        ]

    def __str__(self) -> str:
        return f"{self.monitor_id} v{self.version}: {'pass' if self.passed else 'fail'}"


class MonitorScore(models.Model):
    """One criterion of one monitor result: unique per (result, criterion), so per monitor
    version, trace or thread and criterion."""

    result = models.ForeignKey(MonitorResult, on_delete=models.CASCADE, related_name="scores")
    criterion = models.CharField(max_length=100)
    passed = models.BooleanField(null=True)  # None: the criterion could not be computed (error)
    score = models.FloatField(null=True, blank=True)
    value = models.FloatField(null=True, blank=True)  # on the evaluator's own scale
    error = models.CharField(max_length=500, blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["result", "criterion"], name="monitor_score_unique")]

    def __str__(self) -> str:
        return f"{self.criterion}: {self.passed}"


class MonitorBucket(models.Model):
    """An hour of one monitor version's results in one environment, per criterion ("" for
    the result as a whole): counts and sums, so that a monitor's page reads a few hundred
    rows whatever the number of traces. Written in the transaction that inserts the results,
    for new results only."""

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="buckets")
    version = models.PositiveIntegerField()
    hour = models.DateTimeField()
    environment = models.CharField(max_length=100, blank=True)
    criterion = models.CharField(max_length=100, blank=True)
    total = models.PositiveIntegerField(default=0)
    passed = models.PositiveIntegerField(default=0)
    scored = models.PositiveIntegerField(default=0)  # results with a score (errors have none)
    score_sum = models.FloatField(default=0)
    traces = models.PositiveIntegerField(default=0)
    tokens_sum = models.FloatField(default=0)
    cost_sum = models.FloatField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["monitor", "version", "hour", "environment", "criterion"],
                                               name="monitor_bucket_unique")]
        indexes = [models.Index(fields=["monitor", "criterion", "hour"], name="monitor_bucket_hour")]

    def __str__(self) -> str:
        return f"{self.monitor_id} {self.hour:%Y-%m-%d %H}h {self.criterion or 'all'}"


class Retention(models.Model):
    """A project's retention: received traces and monitor results older than `days` are
    deleted by the schedule (evaluations/monitors/retention.py). None keeps everything."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="retention")
    days = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.project_id}: {self.days or 'forever'}"


class RetentionSweep(models.Model):
    """What one retention sweep deleted in one project."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="retention_sweeps")
    ran_at = models.DateTimeField(default=timezone.now)
    cutoff = models.DateTimeField()
    traces = models.PositiveIntegerField(default=0)
    results = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-ran_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.project_id} {self.ran_at:%Y-%m-%d}: {self.traces} traces"


class MonitorLatencyBucket(models.Model):
    """An hour's latency histogram of one monitor version's results in one environment: how
    many fell in each bin of `evaluations.monitors.stats.LATENCY_EDGES` (p50 / p95 read from it)."""

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="latency_buckets")
    version = models.PositiveIntegerField()
    hour = models.DateTimeField()
    environment = models.CharField(max_length=100, blank=True)
    bin = models.PositiveSmallIntegerField()
    count = models.PositiveIntegerField(default=0)
    # the slowest latency counted here, so a percentile read from the bins never passes what
    # was observed (null: counted before it was kept)
    max_seconds = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["monitor", "version", "hour", "environment", "bin"],
                                               name="monitor_latency_unique")]

    def __str__(self) -> str:
        return f"{self.monitor_id} {self.hour:%Y-%m-%d %H}h bin {self.bin}: {self.count}"


class TraceThread(models.Model):
    """A thread of received traces (a conversation: traces sharing `session.id` /
    `gen_ai.conversation.id`), kept by ingest as traces arrive, so that lists of threads and
    the monitors' idle sweep read one row per thread rather than grouping every trace."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="threads")
    thread_id = models.CharField(max_length=200)
    first_at = models.DateTimeField()
    last_at = models.DateTimeField()
    traces = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)  # traces with a failed span
    end_user = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "thread_id"], name="trace_thread_unique")]
        indexes = [models.Index(fields=["project", "last_at"], name="trace_thread_last"),
                   models.Index(fields=["project", "end_user", "last_at"], name="trace_thread_end_user")]

    def __str__(self) -> str:
        return self.thread_id


class MonitorPending(models.Model):
    """A received trace the project's trace monitors have yet to score: written by ingest in
    the transaction that stores the trace, deleted once it is scored. The queued task is the
    fast path; the sweep (evaluations/monitors/pending.py) scores what a lost task left, so
    the broker is a courier and this row the ledger. `touches` counts requests that stored
    spans of the trace since the row was written: a scorer deletes the row only if nobody
    touched it after it read it (a root span that came meanwhile is scored by a later pass)."""

    trace = models.OneToOneField(Trace, primary_key=True, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    touches = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["created_at"], name="monitor_pending_at"),
                   models.Index(fields=["project", "created_at"], name="monitor_pending_project")]

    def __str__(self) -> str:
        return f"trace {self.trace_id} waits for its monitors"
