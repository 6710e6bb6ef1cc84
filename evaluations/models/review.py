"""What review keeps: stored comparisons, failure causes, the activity feed, triage,
comments and people's grades.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from evaluations.models.accounts import Project
from evaluations.models.evalsets import EvalSet
from evaluations.models.runs import CaseResult, Run


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
        SSO_LINKED = "sso.linked", "SSO linked to an account"
        MONITOR_CREATED = "monitor.created"
        MONITOR_EDITED = "monitor.edited"
        MONITOR_BACKFILLED = "monitor.backfilled"
        RETENTION_CHANGED = "retention.changed"
        PROMPT_SAVED = "prompt.saved"
        EXPERIMENT_STARTED = "experiment.started"

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
