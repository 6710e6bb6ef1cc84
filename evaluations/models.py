"""What evalsite persists.

Project -> EvalSet -> EvalSetVersion (immutable, content-hashed) -> EvalCase.
Run (pins a version) -> CaseResult (per case and iteration) -> Score (per evaluator, level,
turn and node). Membership gives users their role in a project.

A case's conversation is stored as the native JSON (it is read whole, never queried into);
the columns beside it are what lists filter and sort on.
"""

from __future__ import annotations

import gzip
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone


class ProjectQuerySet(models.QuerySet["Project"]):
    def visible_to(self, user: Any) -> ProjectQuerySet:
        """The projects `user` works in: an archived project is nobody's (its data is kept;
        Django's admin brings it back by clearing `archived_at`)."""
        if not user.is_authenticated:
            return self.none()
        live = self.filter(archived_at__isnull=True)
        if user.is_superuser:
            return live
        return live.filter(memberships__user=user)


class Project(models.Model):
    """A team's workspace: every eval set, run and comment belongs to exactly one."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    archived_at = models.DateTimeField(null=True, blank=True)  # set: hidden everywhere, data kept

    objects = ProjectQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def role_of(self, user: Any) -> str | None:
        """The user's role here ("admin" for superusers), or None for outsiders."""
        if not user.is_authenticated:
            return None
        if user.is_superuser:
            return Membership.Role.ADMIN
        return self.memberships.filter(user=user).values_list("role", flat=True).first()

    def can_write(self, user: Any) -> bool:
        return self.role_of(user) in {Membership.Role.MEMBER, Membership.Role.ADMIN}


class Membership(models.Model):
    class Role(models.TextChoices):
        VIEWER = "viewer", "Viewer"
        MEMBER = "member", "Member"
        ADMIN = "admin", "Admin"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


class EvalSetQuerySet(models.QuerySet["EvalSet"]):
    def visible_to(self, user: Any) -> EvalSetQuerySet:
        return self.filter(project__in=Project.objects.visible_to(user))


class EvalSet(models.Model):
    """A named eval set within a project; its content lives in immutable versions."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="evalsets")
    eval_set_id = models.CharField(max_length=255)  # the id inside the file
    name = models.CharField(max_length=255, blank=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    latest_version = models.ForeignKey(
        "EvalSetVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The run new comparisons default to (pinned by a project admin; a later issue).
    baseline_run = models.ForeignKey("Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    objects = EvalSetQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        constraints = [models.UniqueConstraint(fields=["project", "eval_set_id"], name="evalset_unique_id")]

    def __str__(self) -> str:
        return self.name or self.eval_set_id

    def get_absolute_url(self) -> str:
        return reverse("evalset_detail", args=[self.pk])

    @property
    def display_name(self) -> str:
        return self.name or self.eval_set_id


class EvalSetVersion(models.Model):
    """One immutable state of an eval set: an upload, or a save of edits to the latest state.
    The same content uploaded again is the newest version with that content."""

    class How(models.TextChoices):
        UPLOAD = "upload"
        EDIT = "edit"
        PROMOTION = "promotion"
        API = "api"

    evalset = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)  # sha256 of the canonical native content
    source_format = models.CharField(max_length=32)
    source_variant = models.CharField(max_length=64, blank=True)
    source_filename = models.CharField(max_length=255)
    name = models.CharField(max_length=255, blank=True)
    description = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # AgentFlow EvalConfig the file brought (ADK test_config.json, UiPath evaluators).
    default_config = models.JSONField(null=True, blank=True)
    default_criteria_order = models.JSONField(default=list, blank=True)  # see evaluations/ordering.py
    # UiPath evaluator definitions as uploaded, keyed by evaluator id.
    evaluator_config = models.JSONField(null=True, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    case_count = models.PositiveIntegerField(default=0)
    turn_count = models.PositiveIntegerField(default=0)
    tool_call_count = models.PositiveIntegerField(default=0)
    tags = models.JSONField(default=list, blank=True)  # every tag used, sorted: filter choices
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    # How it came to be, the change note its author gave, and the version the edits began from.
    how_created = models.CharField(max_length=16, choices=How.choices, default=How.UPLOAD)
    note = models.TextField(blank=True, default="")
    based_on = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["evalset", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["evalset", "number"], name="version_unique_number"),
        ]
        # Not unique: an edit may bring back the content of an older version (a revert).
        indexes = [models.Index(fields=["evalset", "content_hash"], name="version_content")]

    def __str__(self) -> str:
        return f"{self.evalset} v{self.number}"

    def get_absolute_url(self) -> str:
        return reverse("evalset_detail", args=[self.evalset_id]) + f"?version={self.number}"


class EvalSetSource(models.Model):
    """The original bytes of a version's upload, kept apart so lists never load them.

    Stored gzip-compressed: eval sets are JSON or CSV and shrink ten- to twentyfold, and a
    large upload then costs little in the database and in memory while it is written."""

    version = models.OneToOneField(EvalSetVersion, on_delete=models.CASCADE, related_name="source")
    filename = models.CharField(max_length=255)
    content_type = models.CharField(max_length=100)
    size = models.PositiveBigIntegerField(default=0)  # of the original, uncompressed
    data = models.BinaryField()  # gzip

    def __str__(self) -> str:
        return self.filename

    def content(self) -> bytes:
        """The original bytes, exactly as uploaded."""
        return gzip.decompress(bytes(self.data))

    @staticmethod
    def compress(original: bytes) -> bytes:
        # Level 3: 0.15 s for a 50 MB eval set (level 6 doubles that for a few % less).
        return gzip.compress(original, compresslevel=3, mtime=0)


class JSONText(str):
    """JSON already serialised: the import writes each case's canonical text once, for its
    content hash and for the row, instead of keeping dicts and serialising them again."""


class CaseJSONField(models.JSONField):
    """A JSONField that also takes `JSONText` and stores it as it is."""

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if isinstance(value, JSONText):
            if connection.vendor == "postgresql":
                from psycopg.types.json import Jsonb

                return Jsonb(value, dumps=str)  # psycopg sends dumps(value): the text itself
            return str(value)
        return super().get_db_prep_value(value, connection, prepared)


# `EvalCase.valid_to` of a case still in the latest version.
OPEN_VERSION = 2_147_483_647


class EvalCaseQuerySet(models.QuerySet["EvalCase"]):
    def in_version(self, version: EvalSetVersion) -> EvalCaseQuerySet:
        """The cases of `version`: the rows whose range of version numbers holds it."""
        return self.filter(evalset_id=version.evalset_id, valid_from__lte=version.number,
                           valid_to__gt=version.number)

    def in_version_ordered_by_eval_id(self, version: EvalSetVersion) -> EvalCaseQuerySet:
        """The cases of `version` in eval_id order, walked along the (eval set, eval id) index
        so a page of them needs no sort of the whole version: the upper bound is read as an
        expression, or the planner takes the range index and sorts every case (the trend page
        of a 100,000-case eval set)."""
        return (self.filter(evalset_id=version.evalset_id, valid_from__lte=version.number)
                .alias(upper=F("valid_to") + 0).filter(upper__gt=version.number).order_by("eval_id"))

    def in_version_by_eval_id(self, version: EvalSetVersion, eval_ids: str | list[str]) -> EvalCaseQuerySet:
        """Cases of `version` by eval id, found through the (eval set, eval id) index: the
        version's upper bound is read as an expression, so no planner prefers the range index."""
        by_id = Q(eval_id=eval_ids) if isinstance(eval_ids, str) else Q(eval_id__in=eval_ids)
        return (self.filter(by_id, evalset_id=version.evalset_id, valid_from__lte=version.number)
                .alias(upper=F("valid_to") + 0).filter(upper__gt=version.number))

    def search(self, text: str) -> EvalCaseQuerySet:
        text = text.strip()
        if not text:
            return self
        return self.filter(Q(eval_id__icontains=text) | Q(name__icontains=text) | Q(search_text__icontains=text))

    def tagged(self, tag: str) -> EvalCaseQuerySet:
        # Tags are kept as "|a|b|" so one indexable LIKE works on SQLite and PostgreSQL alike
        # (SQLite has no JSON `contains`).
        return self.filter(tags_text__contains=f"|{tag}|") if tag else self


class EvalCase(models.Model):
    """One case's content, shared by every version from `valid_from` up to (not including)
    `valid_to`: a save of edits writes rows only for the cases it adds or changes and closes
    the rows it replaces, so versions share unchanged cases instead of copying them. Read a
    version's cases with `EvalCase.objects.in_version(version)`; `version` (and its reverse
    `version.cases`) is the version that introduced the row, which for an upload is all of
    its cases."""

    version = models.ForeignKey(EvalSetVersion, on_delete=models.CASCADE, related_name="cases")
    evalset = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="+")
    valid_from = models.PositiveIntegerField()  # version numbers
    valid_to = models.PositiveIntegerField(default=OPEN_VERSION)
    content_hash = models.CharField(max_length=64, blank=True, default="")  # sha256 of its canonical content
    position = models.PositiveIntegerField()
    eval_id = models.CharField(max_length=255)
    name = models.CharField(max_length=255, blank=True)
    description = models.TextField(blank=True, default="")  # AgentFlow 0.10's EvalCase.description
    tags = CaseJSONField(default=list, blank=True)
    tags_text = models.TextField(blank=True, default="")
    metadata = CaseJSONField(default=dict, blank=True)
    session_input = CaseJSONField(null=True, blank=True)
    conversation = CaseJSONField(default=list, blank=True)  # native Invocation dicts
    conversation_scenario = CaseJSONField(null=True, blank=True)
    rubrics = CaseJSONField(default=list, blank=True)
    criteria = CaseJSONField(default=dict, blank=True)  # per-case evaluator criteria
    turn_count = models.PositiveIntegerField(default=0)
    tool_call_count = models.PositiveIntegerField(default=0)
    # The first user message, for the cases table and search.
    search_text = models.TextField(blank=True, default="")

    objects = EvalCaseQuerySet.as_manager()

    class Meta:
        ordering = ["version", "position"]
        # One row per eval id a version introduces; also the index that finds a case by eval id.
        constraints = [
            models.UniqueConstraint(fields=["evalset", "eval_id", "valid_from"], name="case_unique_eval_id"),
        ]
        indexes = [models.Index(fields=["evalset", "valid_to", "position"], name="case_evalset_range")]

    def __str__(self) -> str:
        return self.eval_id

    def get_absolute_url(self) -> str:
        return reverse("case_detail", args=[self.pk])


class EvaluationConfig(models.Model):
    """A named, reusable evaluation config of a project (DeepEval's metric collection)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="eval_configs")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    config = models.JSONField(default=dict)  # AgentFlow EvalConfig
    criteria_order = models.JSONField(default=list, blank=True)  # see evaluations/ordering.py
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="evalconfig_unique_name")]

    def __str__(self) -> str:
        return self.name


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

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="results")
    case = models.ForeignKey(EvalCase, on_delete=models.CASCADE, related_name="results")
    iteration = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    output = models.JSONField(null=True, blank=True)  # the outputs-format object
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

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="scores")  # for aggregates
    result = models.ForeignKey(CaseResult, on_delete=models.CASCADE, related_name="scores")
    criterion = models.CharField(max_length=100)
    evaluator = models.CharField(max_length=100, blank=True)
    applies_to = models.CharField(max_length=16, choices=Level.choices, default=Level.CONVERSATION)
    # -1 for the whole conversation: NULLs would not collide in the unique constraint.
    turn_index = models.IntegerField(default=-1)
    node_name = models.CharField(max_length=200, blank=True, default="")
    score = models.FloatField(null=True, blank=True)  # normalised to [0, 1]
    raw_value = models.FloatField(null=True, blank=True)  # on the evaluator's own scale
    passed = models.BooleanField(null=True)
    threshold = models.JSONField(null=True, blank=True)  # {"lower_limit": x} / {"upper_limit": y}
    justification = models.JSONField(default=dict, blank=True)
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
                                name="score_run_not_passed")]

    #: The condition of the partial index above: filter on it (unchanged) to use the index.
    NOT_PASSED = ~models.Q(passed=True)

    def __str__(self) -> str:
        return f"{self.criterion}={self.score}"


class ToolUsage(models.Model):
    """Calls of one tool (at one node) in one case result: per-tool aggregates are a GROUP BY."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tool_usage")
    result = models.ForeignKey(CaseResult, on_delete=models.CASCADE, related_name="tool_usage")
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


class Comparison(models.Model):
    """A baseline-vs-candidate comparison, computed once and kept (see evaluations.review.comparison).

    Valid while both runs' `finished_at` are the ones stored here: a run that is retried
    finishes again at a new time, and its comparisons are recomputed on their next view."""

    baseline = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    candidate = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    baseline_finished_at = models.DateTimeField(null=True, blank=True)
    candidate_finished_at = models.DateTimeField(null=True, blank=True)
    computed_at = models.DateTimeField(default=timezone.now)
    summary = models.JSONField(default=dict)  # empty from summary version 4 on: see ComparisonSummary
    # What the case drill-down needs, readable without decoding the (large) summary: the
    # summary's version and status counts, and its case order as compact JSON
    # `[[status, candidate result id or null, eval_id], ...]` (see comparison.walk_rows).
    version = models.PositiveSmallIntegerField(default=0)
    counts = models.JSONField(default=dict)
    walk = models.TextField(default="", blank=True)  # no longer written: the case rows below replace it
    # The summary less its cases and points, as compact JSON (a few KB at any size): what the
    # compare page shows above its table (see comparison.head_of).
    head = models.TextField(default="", blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["baseline", "candidate"], name="comparison_unique_pair")]

    def __str__(self) -> str:
        return f"run {self.baseline_id} vs run {self.candidate_id}"


class ComparisonSummary(models.Model):
    """A stored comparison's whole summary (the API, the CSV and the N-way page read it), in a
    row of its own: left in the comparison's row it sat before the small columns every page
    reads (version, counts, head), and SQLite walked its overflow pages (20 MB at 100,000
    cases) to reach them. `Comparison.summary` is left empty from summary version 4 on."""

    comparison = models.OneToOneField(Comparison, on_delete=models.CASCADE, primary_key=True, related_name="full")
    summary = models.JSONField(default=dict)

    def __str__(self) -> str:
        return f"summary of {self.comparison_id}"


class ComparisonCase(models.Model):
    """One case of a stored comparison, in the comparison's order (`position`: severity, then
    eval_id), so a page of the table, a status's count or a case's neighbours is one indexed
    query whatever the size of the runs. Fields mirror the summary's case entries."""

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="case_rows")
    position = models.PositiveIntegerField()
    eval_id = models.CharField(max_length=255)
    status = models.CharField(max_length=16)
    baseline_passed = models.IntegerField(null=True)
    baseline_repeats = models.IntegerField(default=0)
    baseline_outcome = models.CharField(max_length=8, null=True)
    candidate_passed = models.IntegerField(null=True)
    candidate_repeats = models.IntegerField(default=0)
    candidate_outcome = models.CharField(max_length=8, null=True)
    baseline_result_id = models.BigIntegerField(null=True)  # not foreign keys: a page reads the ids only
    candidate_result_id = models.BigIntegerField(null=True)
    scores = models.TextField(default="{}")  # JSON {criterion: [baseline, candidate]}

    class Meta:
        constraints = [models.UniqueConstraint(fields=["comparison", "position"], name="comparison_case_position")]
        indexes = [
            models.Index(fields=["comparison", "status", "position"], name="comparison_case_status"),
            models.Index(fields=["comparison", "eval_id"], name="comparison_case_eval_id"),
        ]

    def __str__(self) -> str:
        return f"{self.eval_id}: {self.status}"


class ComparisonScatter(models.Model):
    """The paired scatter of one criterion of a stored comparison, its points already grouped
    (see comparison.scatter_groups): the page reads one criterion's, not every case's scores."""

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="scatters")
    criterion = models.CharField(max_length=200)
    points = models.TextField(default="[]")  # JSON [[x, y, status, eval_id, candidate result id, count], ...]
    scored = models.IntegerField(default=0)  # cases with both scores

    class Meta:
        constraints = [models.UniqueConstraint(fields=["comparison", "criterion"], name="comparison_scatter_unique")]

    def __str__(self) -> str:
        return f"{self.criterion} scatter"


class CauseSet(models.Model):
    """That a run's failures have been grouped by cause (evaluations.review.causes), and as of
    which finish: a retried run finishes again at a new time and is grouped again."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True, related_name="cause_set")
    version = models.PositiveSmallIntegerField(default=0)
    run_finished_at = models.DateTimeField(null=True, blank=True)
    computed_at = models.DateTimeField(default=timezone.now)
    failing_cases = models.IntegerField(default=0)  # cases with at least one cause

    def __str__(self) -> str:
        return f"causes of run {self.run_id}"


class RunCause(models.Model):
    """One cause of a run's failures: a signature that near-identical failures share (ids,
    numbers and dates in values normalised away), how many cases it hit, the criteria it
    failed, and one readable example."""

    cause_set = models.ForeignKey(CauseSet, on_delete=models.CASCADE, related_name="causes")
    rank = models.PositiveIntegerField()  # most cases first
    signature = models.CharField(max_length=500)
    kind = models.CharField(max_length=32)
    cases = models.IntegerField(default=0)
    criteria = models.JSONField(default=list)
    example_eval_id = models.CharField(max_length=255)
    example_result_id = models.BigIntegerField(null=True)  # not a foreign key: a page reads the id only
    example = models.CharField(max_length=500, blank=True)  # the example's own detail, values and all

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cause_set", "signature"], name="run_cause_unique")]
        indexes = [models.Index(fields=["cause_set", "rank"], name="run_cause_rank")]

    def __str__(self) -> str:
        return self.signature


class ResultCause(models.Model):
    """A failing (result, criterion) and its cause: what filters a cases table to one cause."""

    # No index of its own: both indexes below begin with it.
    cause = models.ForeignKey(RunCause, on_delete=models.CASCADE, related_name="results", db_index=False)
    result_id = models.BigIntegerField()
    eval_id = models.CharField(max_length=255)
    criterion = models.CharField(max_length=100, blank=True)  # "" for a result with no answer to judge

    class Meta:
        indexes = [models.Index(fields=["cause", "eval_id"], name="result_cause_eval_id"),
                   models.Index(fields=["cause", "result_id"], name="result_cause_result")]

    def __str__(self) -> str:
        return f"{self.eval_id}: {self.criterion}"


# --- Team review ----------------------------------------------------------------------------


class ApiToken(models.Model):
    """A user's API token. Only its SHA-256 digest is stored; the token is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12)  # the token's first characters, to tell tokens apart
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class AuditEvent(models.Model):
    """Who did what when: the project's activity feed and each object's history."""

    class Verb(models.TextChoices):
        EVALSET_UPLOADED = "evalset.uploaded"
        RUN_STARTED = "run.started"
        RUN_CANCELLED = "run.cancelled"
        RUN_RETRIED = "run.retried"
        BASELINE_PINNED = "baseline.pinned"
        TRIAGE_CHANGED = "triage.changed"
        RUN_FINISHED = "run.finished"
        COMMENT_ADDED = "comment.added"
        MEMBER_ADDED = "member.added"
        MEMBER_CHANGED = "member.changed"
        MEMBER_REMOVED = "member.removed"
        TOKEN_CREATED = "token.created"
        TOKEN_REVOKED = "token.revoked"
        GRADE_ADDED = "grade.added"
        GRADE_CHANGED = "grade.changed"
        EVALSET_EDITED = "evalset.edited"
        PROJECT_CREATED = "project.created"
        PROJECT_ARCHIVED = "project.archived"
        RUN_DELETED = "run.deleted"
        EVALSET_DELETED = "evalset.deleted"
        EVALSET_RENAMED = "evalset.renamed"
        NOTIFY_CHANGED = "notify.changed"
        # Issue 34: the site-wide sign-in log (project None)
        SIGNIN_SUCCEEDED = "signin.succeeded", "Sign-in succeeded"
        SIGNIN_FAILED = "signin.failed", "Sign-in failed"
        TWOFACTOR_ENABLED = "twofactor.enabled", "Second factor set up"
        TWOFACTOR_DISABLED = "twofactor.disabled", "Second factor turned off"
        SSO_ROLES_CHANGED = "sso.roles_changed", "SSO roles changed"
        MONITOR_CREATED = "monitor.created"
        MONITOR_EDITED = "monitor.edited"
        MONITOR_BACKFILLED = "monitor.backfilled"
        RETENTION_CHANGED = "retention.changed"

    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.CASCADE, related_name="events")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    verb = models.CharField(max_length=32, choices=Verb.choices)
    object_type = models.CharField(max_length=32, blank=True)  # "run", "evalset", "triage", ...
    object_id = models.CharField(max_length=64, blank=True)
    summary = models.CharField(max_length=500)  # plain text, shown escaped
    data = models.JSONField(default=dict, blank=True)  # before/after values
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["project", "-created_at"], name="event_project_time"),
            models.Index(fields=["object_type", "object_id"], name="event_object"),
        ]

    def __str__(self) -> str:
        return self.summary


class Triage(models.Model):
    """The review decision on one case of an eval set on one branch: it carries forward to
    every later comparison of that branch until the case passes again there (`Status.FIXED`,
    set when a run finishes) or someone changes it. `baseline` and `candidate` are the
    comparison it was last decided in."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        CONFIRMED = "confirmed", "Confirmed regression"
        EXPECTED = "expected", "Expected change"
        FLAKY = "flaky", "Flaky"
        FIXED = "fixed", "Fixed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="triage")
    evalset = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="triage")
    eval_id = models.CharField(max_length=255)
    branch = models.CharField(max_length=255, blank=True, default="")  # the candidate's branch
    baseline = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    candidate = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="triage")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="assigned_triage")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["evalset", "eval_id", "branch"],
                                               name="triage_unique_case_branch")]
        indexes = [models.Index(fields=["project", "status"], name="triage_project_status"),
                   models.Index(fields=["assignee", "status"], name="triage_assignee_status")]

    def __str__(self) -> str:
        return f"{self.eval_id}: {self.status}"


class Comment(models.Model):
    """A comment on a triaged case; `parent` makes threads. The body is Markdown, rendered
    through a sanitiser."""

    triage = models.ForeignKey(Triage, on_delete=models.CASCADE, related_name="comments")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="replies")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    body = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return self.body[:50]


class HumanGrade(models.Model):
    """A person's grade of one criterion of one result: pass or fail, an optional score on
    the automatic score's [0, 1] scale, a note. One per grader, result and criterion; it is
    changed in place (see evaluations.review.grades). `run` and `project` are copies of the
    result's, for the queue's and the calibration's GROUP BYs."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="grades")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="grades")
    result = models.ForeignKey(CaseResult, on_delete=models.CASCADE, related_name="grades")
    criterion = models.CharField(max_length=100)
    grader = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="grades")
    passed = models.BooleanField()
    score = models.FloatField(null=True, blank=True)
    note = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["result", "criterion", "grader"], name="grade_unique")]
        indexes = [models.Index(fields=["project", "criterion"], name="grade_project_criterion"),
                   models.Index(fields=["run", "criterion"], name="grade_run_criterion")]

    def __str__(self) -> str:
        return f"{self.criterion} of result {self.result_id}: {'pass' if self.passed else 'fail'}"


# --- Issue 32: notifications (evaluations/notify, docs/notifications.md) ----------------------


class NotifyChannel(models.Model):
    """Where a project's messages go: a signed webhook, a Slack-compatible incoming webhook,
    e-mail, or the in-app list of each person. A channel that failed `EVALSITE_NOTIFY_PAUSE_AFTER`
    times in a row is paused (`paused_at`) until someone resumes it."""

    class Kind(models.TextChoices):
        WEBHOOK = "webhook"
        SLACK = "slack"
        EMAIL = "email", "E-mail"
        INAPP = "inapp", "In-app"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="notify_channels")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    url = models.URLField(max_length=1000, blank=True)  # webhook and slack
    secret = models.CharField(max_length=100, blank=True)  # webhook: the HMAC key
    emails = models.TextField(blank=True)  # email: addresses for project-wide messages, one a line
    enabled = models.BooleanField(default=True)
    paused_at = models.DateTimeField(null=True, blank=True)
    pause_reason = models.CharField(max_length=300, blank=True)
    failures_in_row = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["name", "pk"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="notify_channel_unique_name")]

    def __str__(self) -> str:
        return self.name


class NotifyRule(models.Model):
    """When to tell whom: what fires the rule (a run finished, a monitor's criterion below a
    threshold, a triage assigned, an @mention, a digest), its filters, its cooldown, and the
    channels its messages go to."""

    class Kind(models.TextChoices):
        RUN_FINISHED = "run_finished", "run finished"
        MONITOR = "monitor", "monitor below threshold"
        TRIAGE_ASSIGNED = "triage_assigned", "triage assigned"
        MENTION = "mention", "@mention in a comment"
        DIGEST = "digest", "digest"

    class RunCondition(models.TextChoices):
        ANY = "any", "any"
        REGRESSIONS = "regressions", "with regressions vs its default baseline"
        NEW_CAUSES = "new_causes", "with new failure causes"
        PASS_RATE_BELOW = "pass_rate_below", "pass rate below"

    class Period(models.TextChoices):
        DAILY = "daily"
        WEEKLY = "weekly"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="notify_rules")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    enabled = models.BooleanField(default=True)
    channels = models.ManyToManyField(NotifyChannel, related_name="rules", blank=True)
    # run_finished
    condition = models.CharField(max_length=20, choices=RunCondition.choices, default=RunCondition.ANY)
    pass_rate_below = models.FloatField(null=True, blank=True)  # 0..1
    evalset = models.ForeignKey(EvalSet, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    branch = models.CharField(max_length=255, blank=True)
    model = models.CharField(max_length=200, blank=True)
    # monitor (issue 31's monitors; a plain id, so this model does not depend on theirs)
    monitor_id = models.BigIntegerField(null=True, blank=True)
    criterion = models.CharField(max_length=100, blank=True)
    threshold = models.FloatField(null=True, blank=True)  # 0..1, the pass rate below which it fires
    window_minutes = models.PositiveIntegerField(default=60)
    min_count = models.PositiveIntegerField(default=20)
    # digest
    period = models.CharField(max_length=8, choices=Period.choices, default=Period.DAILY)
    cooldown_minutes = models.PositiveIntegerField(default=0)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["name", "pk"]
        indexes = [models.Index(fields=["project", "kind", "enabled"], name="notify_rule_kind"),
                   models.Index(fields=["monitor_id"], name="notify_rule_monitor")]

    def __str__(self) -> str:
        return self.name


class NotifyAlert(models.Model):
    """One thing that fired a rule, waiting to be sent: alerts of a rule (and recipient) that
    are pending together, or that arrive during its cooldown, go out as one message."""

    rule = models.ForeignKey(NotifyRule, on_delete=models.CASCADE, related_name="alerts")
    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                                  related_name="+")
    key = models.CharField(max_length=200)  # what fired it, and for whom ("run:12|"), so an event fires a rule once
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)
    message = models.ForeignKey("NotifyMessage", null=True, blank=True, on_delete=models.CASCADE,
                                related_name="alerts")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["rule", "key"], name="notify_alert_once")]
        indexes = [models.Index(fields=["rule", "message"], name="notify_alert_pending")]

    def __str__(self) -> str:
        return self.key


class NotifyMessage(models.Model):
    """What a rule says once: the subject, a plain-text body, and the JSON payload every channel
    renders from (the webhook's body; Slack's and the e-mail's text are made from it)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="notify_messages")
    rule = models.ForeignKey(NotifyRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="messages")
    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                                  related_name="+")
    event = models.CharField(max_length=20)
    subject = models.CharField(max_length=300)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return self.subject


class NotifyDelivery(models.Model):
    """A message to one channel. `idempotency_id` is fixed at creation and sent with every
    attempt, so a receiver drops duplicates. The row is the state: a worker claims it with a
    lease (`leased_until`); one killed mid-send leaves the lease to expire, and the sweep
    queues it again."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        SENT = "sent"
        FAILED = "failed"  # out of attempts

    message = models.ForeignKey(NotifyMessage, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.ForeignKey(NotifyChannel, on_delete=models.CASCADE, related_name="deliveries")
    idempotency_id = models.UUIDField(unique=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    leased_until = models.DateTimeField(null=True, blank=True)
    owner = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="notify_delivery_due")]

    def __str__(self) -> str:
        return f"{self.idempotency_id}: {self.status}"


class NotifyAttempt(models.Model):
    """The delivery log: one row per attempt, per channel."""

    delivery = models.ForeignKey(NotifyDelivery, on_delete=models.CASCADE, related_name="log")
    channel = models.ForeignKey(NotifyChannel, on_delete=models.CASCADE, related_name="log")
    at = models.DateTimeField(default=timezone.now)
    ok = models.BooleanField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.FloatField()
    excerpt = models.CharField(max_length=500, blank=True)  # the response's start, or the error

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["channel", "-at"], name="notify_attempt_channel")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.status_code or ''} {'ok' if self.ok else 'failed'}"


class Notification(models.Model):
    """A message in a person's in-app list (the navigation shows how many are unread)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    message = models.ForeignKey(NotifyMessage, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["user", "message"], name="notification_once")]
        indexes = [models.Index(fields=["user", "read_at"], name="notification_unread")]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.message_id}"


class NotifyEvent(models.Model):
    """The outbox: an activity event some rule is about, written with it and handled by a
    worker (`done_at` once handled); the sweep queues again what a lost task left undone."""

    audit = models.OneToOneField(AuditEvent, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["done_at", "created_at"], name="notify_event_todo")]

    def __str__(self) -> str:
        return f"event {self.audit_id}: {'done' if self.done_at else 'to do'}"


# --- Online evaluation: monitors, their scores, retention (issue 31) -------------------------


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
