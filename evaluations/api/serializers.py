"""Endpoint shapes of the REST API (the file formats themselves are pydantic schemas).

Request serializers (`...Serializer` with writable fields, `...Query` for query strings)
validate input; response serializers document what comes back (OpenAPI) and shape it.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from evaluations.converters import MAX_ID
from evaluations.models import (
    ApiToken,
    AuditEvent,
    CaseResult,
    Comment,
    EvalCase,
    EvalSet,
    EvalSetVersion,
    EvaluationConfig,
    HumanGrade,
    Membership,
    Project,
    Run,
    Score,
    Triage,
)
from evaluations.ordering import config_in_order, summary_in_order
from evaluations.schemas.outputs import MAX_ITERATIONS

# Formats datetimes as every DateTimeField here does (ISO 8601, UTC as "Z", in TIME_ZONE); it
# keeps no per-request state, so one instance serves every thread.
_DATETIME = serializers.DateTimeField(read_only=True)


def id_field(**kwargs: Any) -> serializers.IntegerField:
    """A database id in a body or query string: bounded, so it never overflows a column."""
    return serializers.IntegerField(min_value=1, max_value=MAX_ID, **kwargs)


# --- Eval sets ------------------------------------------------------------------------------


class EvalSetVersionSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = EvalSetVersion
        fields = [
            "id", "number", "content_hash", "source_format", "source_variant", "source_filename",
            "name", "description", "case_count", "turn_count", "tool_call_count", "tags",
            "warnings", "default_config", "evaluator_config", "created_at", "created_by",
        ]


class EvalSetSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    latest_version = EvalSetVersionSerializer(read_only=True, allow_null=True)
    baseline_run = serializers.IntegerField(source="baseline_run_id", read_only=True, allow_null=True,
                                            help_text="the pinned baseline run comparisons default to")

    class Meta:
        model = EvalSet
        fields = ["id", "project", "eval_set_id", "name", "description", "created_at", "updated_at",
                  "latest_version", "baseline_run"]


class EvalSetRenameSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=255, help_text="the eval set's new name")


class EvalCaseSerializer(serializers.ModelSerializer):
    class Meta:
        model = EvalCase
        fields = [
            "id", "position", "eval_id", "name", "description", "tags", "metadata", "session_input", "conversation",
            "conversation_scenario", "rubrics", "criteria", "turn_count", "tool_call_count",
        ]


class EvalCaseDetailSerializer(EvalCaseSerializer):
    project = serializers.CharField(source="version.evalset.project.slug", read_only=True)
    evalset = serializers.IntegerField(source="version.evalset_id", read_only=True)
    version = serializers.IntegerField(source="version.number", read_only=True)

    class Meta(EvalCaseSerializer.Meta):
        fields = ["project", "evalset", "version", *EvalCaseSerializer.Meta.fields]


class EvalCaseQuery(serializers.Serializer):
    q = serializers.CharField(required=False, allow_blank=True, max_length=200,
                              help_text="search eval_id, name and the first user message")
    tag = serializers.CharField(required=False, allow_blank=True, max_length=100)


class EvalSetQuery(serializers.Serializer):
    project = serializers.SlugField(required=False, help_text="a project slug")


class ImportOutcomeSerializer(serializers.Serializer):
    created = serializers.BooleanField(help_text="false when identical content was already this version")
    format = serializers.CharField()
    variant = serializers.CharField()
    case_count = serializers.IntegerField()
    warnings = serializers.ListField(child=serializers.CharField())
    evalset = EvalSetSerializer()
    version = EvalSetVersionSerializer()


class ImportResultSerializer(serializers.Serializer):
    results = ImportOutcomeSerializer(many=True)


class EvalSetUploadSerializer(serializers.Serializer):
    """The multipart upload: one or more `file` parts (a zip is unpacked)."""

    file = serializers.ListField(child=serializers.FileField(allow_empty_file=True), allow_empty=False)
    project = serializers.SlugField(required=False, help_text="project slug; default: your only project")
    format = serializers.CharField(required=False, allow_blank=True, max_length=32, help_text="skip detection")


class TrendRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    label = serializers.CharField(help_text="name, model, branch or commit: what the trend page shows")
    created_at = serializers.DateTimeField()
    model = serializers.CharField()
    branch = serializers.CharField()
    git_commit = serializers.CharField()
    pass_rate = serializers.FloatField(allow_null=True)
    latency_p95 = serializers.FloatField(allow_null=True)


class TrendCaseSerializer(serializers.Serializer):
    eval_id = serializers.CharField()
    outcomes = serializers.ListField(
        child=serializers.CharField(), help_text="per run (oldest first): pass, fail, error, mixed or none")
    failing_since = serializers.IntegerField(allow_null=True, help_text="the run where its failing streak began")
    runs_failing = serializers.IntegerField()


class TrendSerializer(serializers.Serializer):
    evalset = serializers.IntegerField()
    runs = TrendRunSerializer(many=True, help_text="the last completed runs, oldest first")
    more_runs = serializers.BooleanField(help_text="older completed runs exist beyond these")
    count = serializers.IntegerField(help_text="cases, for paging `cases`")
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    cases = TrendCaseSerializer(many=True)


class TrendQuery(serializers.Serializer):
    failing = serializers.BooleanField(required=False, default=False,
                                       help_text="only cases failing in the latest run")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=1000, default=50)
    offset = serializers.IntegerField(required=False, min_value=0, max_value=MAX_ID, default=0)


# --- Runs -------------------------------------------------------------------------------------


class RunSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    evalset = serializers.IntegerField(source="evalset_version.evalset_id", read_only=True)
    evalset_version = serializers.IntegerField(source="evalset_version.number", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True,
                                              help_text="null for runs started by the local CLI")

    class Meta:
        model = Run
        fields = [
            "id", "project", "evalset", "evalset_version", "name", "status", "error", "target_kind", "target",
            "config", "iterations", "warmups", "eval_ids", "model", "git_commit", "branch", "tags",
            "cases_total", "cases_done", "cases_failed", "cases_errored", "cases_missing", "cases_not_runnable",
            "summary", "created_at", "started_at", "finished_at", "created_by",
        ]

    def to_representation(self, instance: Run) -> dict[str, Any]:
        """The fields above, read straight off the run (and the project, version and user it
        was selected with). Same output as the field-by-field ModelSerializer path (a test
        holds them equal), without building and deep-copying ~30 field objects per request:
        the runs list and a run's detail are what CI jobs poll while a run is evaluated."""
        version = instance.evalset_version
        user = instance.created_by
        return {
            "id": instance.pk, "project": instance.project.slug, "evalset": version.evalset_id,
            "evalset_version": version.number, "name": instance.name, "status": instance.status,
            "error": instance.error, "target_kind": instance.target_kind, "target": instance.target,
            "config": config_in_order(instance.config, instance.criteria_order),
            "iterations": instance.iterations, "warmups": instance.warmups,
            "eval_ids": instance.eval_ids, "model": instance.model, "git_commit": instance.git_commit,
            "branch": instance.branch, "tags": instance.tags, "cases_total": instance.cases_total,
            "cases_done": instance.cases_done, "cases_failed": instance.cases_failed,
            "cases_errored": instance.cases_errored, "cases_missing": instance.cases_missing,
            "cases_not_runnable": instance.cases_not_runnable,
            "summary": summary_in_order(instance.summary, instance.criteria_order),
            "created_at": _DATETIME.to_representation(instance.created_at),
            "started_at": _DATETIME.to_representation(instance.started_at),
            "finished_at": _DATETIME.to_representation(instance.finished_at),
            "created_by": user.username if user is not None else None,
        }


class RunQuery(serializers.Serializer):
    project = serializers.SlugField(required=False)
    evalset = id_field(required=False)
    status = serializers.ChoiceField(choices=Run.Status.choices, required=False)
    model = serializers.CharField(required=False, max_length=200)
    branch = serializers.CharField(required=False, max_length=255)
    git_commit = serializers.CharField(required=False, max_length=64, help_text="a commit or its prefix")
    tag = serializers.CharField(required=False, max_length=100)
    created_after = serializers.DateField(required=False, help_text="on or after this day (YYYY-MM-DD)")
    created_before = serializers.DateField(required=False, help_text="on or before this day (YYYY-MM-DD)")


class RunCreateSerializer(serializers.Serializer):
    """Start a run. Uploaded outputs come as `outputs` (a list in a JSON body) or as a
    multipart file part `outputs_file`; live targets as `target_kind` + `target`."""

    evalset = id_field()
    version = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                       help_text="version number; default: the latest")
    target_kind = serializers.ChoiceField(choices=Run.TargetKind.choices, default=Run.TargetKind.UPLOADED)
    target = serializers.DictField(required=False, default=dict)
    outputs = serializers.ListField(child=serializers.DictField(), required=False)
    outputs_file = serializers.FileField(required=False, help_text="multipart only: outputs as JSON or JSONL")
    config = serializers.DictField(required=False, help_text="AgentFlow EvalConfig")
    preset = id_field(required=False, help_text="a saved evaluation config's id")
    iterations = serializers.IntegerField(required=False, default=1, min_value=1, max_value=MAX_ITERATIONS)
    warmups = serializers.IntegerField(required=False, default=0, min_value=0, max_value=100)
    eval_ids = serializers.ListField(child=serializers.CharField(max_length=255), required=False)
    input_overrides = serializers.DictField(required=False, default=dict)
    name = serializers.CharField(required=False, default="", allow_blank=True, max_length=255)
    model = serializers.CharField(required=False, default="", allow_blank=True, max_length=200)
    git_commit = serializers.CharField(required=False, default="", allow_blank=True, max_length=64)
    branch = serializers.CharField(required=False, default="", allow_blank=True, max_length=255)
    tags = serializers.ListField(child=serializers.CharField(max_length=100), required=False, default=list)


class RetrySerializer(serializers.Serializer):
    reset = serializers.IntegerField(help_text="how many failed or errored results run again")
    run = RunSerializer()


class PinSerializer(serializers.Serializer):
    changed = serializers.BooleanField(help_text="false when the run already was the pinned baseline")
    evalset = serializers.IntegerField()
    baseline_run = serializers.IntegerField()


class ScoreSerializer(serializers.ModelSerializer):
    class Meta:
        model = Score
        fields = ["criterion", "evaluator", "applies_to", "turn_index", "node_name", "score", "raw_value", "passed",
                  "threshold", "justification", "error"]


class CaseResultSerializer(serializers.ModelSerializer):
    eval_id = serializers.CharField(source="case.eval_id", read_only=True)
    scores = ScoreSerializer(many=True, read_only=True)

    class Meta:
        model = CaseResult
        fields = ["id", "eval_id", "iteration", "status", "error", "latency_seconds", "prompt_tokens",
                  "completion_tokens", "cost_usd", "output", "scores"]


RESULT_STATUSES = CaseResult.Status.choices
LEVELS = Score.Level.choices


class ResultQuery(serializers.Serializer):
    status = serializers.ChoiceField(choices=RESULT_STATUSES, required=False)
    criterion = serializers.CharField(required=False, max_length=100,
                                      help_text="only results scored on this criterion (and only its scores)")
    passed = serializers.BooleanField(required=False, allow_null=True, default=None,
                                      help_text="with `criterion`: its conversation-level verdict; alone: "
                                                "`false` keeps results that failed any criterion")
    applies_to = serializers.ChoiceField(choices=LEVELS, required=False, help_text="only scores at this level")
    node = serializers.CharField(required=False, max_length=200, help_text="only scores of this node")
    eval_id = serializers.CharField(required=False, max_length=255)
    tag = serializers.CharField(required=False, max_length=100, help_text="only cases with this tag")
    q = serializers.CharField(required=False, max_length=200, help_text="search eval_id and case name")


class TurnAlignmentSerializer(serializers.Serializer):
    invocation_id = serializers.CharField()
    turn_missing = serializers.BooleanField(help_text="the output has no turn answering this invocation")
    expected_response = serializers.CharField(allow_null=True)
    actual_response = serializers.CharField(allow_null=True)
    tool_calls = serializers.ListField(child=serializers.DictField(), help_text=(
        "expected and actual calls aligned as the run's trajectory settings align them: each row is "
        "{kind: matched|args_differ|missing|unexpected, expected, actual, arg_diffs}"))


class ToolUsageSerializer(serializers.Serializer):
    tool_name = serializers.CharField(help_text="empty for a node execution row")
    node_name = serializers.CharField()
    calls = serializers.IntegerField()
    failures = serializers.IntegerField()
    latency_seconds = serializers.FloatField(allow_null=True)


class SpanSerializer(serializers.Serializer):
    span_id = serializers.CharField()
    parent_span_id = serializers.CharField()
    name = serializers.CharField()
    kind = serializers.CharField()
    start_ns = serializers.IntegerField(allow_null=True)
    end_ns = serializers.IntegerField(allow_null=True)
    status = serializers.CharField()
    attributes = serializers.JSONField()


class TraceSerializer(serializers.Serializer):
    trace_id = serializers.CharField()
    thread_id = serializers.CharField()
    name = serializers.CharField()
    start_ns = serializers.IntegerField(allow_null=True)
    end_ns = serializers.IntegerField(allow_null=True)
    span_count = serializers.IntegerField()
    spans = SpanSerializer(many=True, help_text="the first spans by start time (see span_count)")


class CaseResultDetailSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    run = serializers.IntegerField()
    case = serializers.IntegerField(help_text="the eval case's id (GET /api/v1/cases/<id>/)")
    eval_id = serializers.CharField()
    iteration = serializers.IntegerField()
    status = serializers.ChoiceField(choices=RESULT_STATUSES)
    error = serializers.CharField(allow_blank=True)
    latency_seconds = serializers.FloatField(allow_null=True)
    prompt_tokens = serializers.IntegerField(allow_null=True)
    completion_tokens = serializers.IntegerField(allow_null=True)
    cost_usd = serializers.FloatField(allow_null=True)
    attempts = serializers.IntegerField()
    expected = EvalCaseSerializer(help_text="the eval case as it was in the run's version")
    output = serializers.JSONField(allow_null=True, help_text="the agent output (outputs format)")
    turns = TurnAlignmentSerializer(many=True)
    scores = ScoreSerializer(many=True)
    tool_usage = ToolUsageSerializer(many=True)
    traces = TraceSerializer(many=True)


class CriterionStatSerializer(serializers.Serializer):
    name = serializers.CharField()
    count = serializers.IntegerField()
    mean = serializers.FloatField(allow_null=True)
    median = serializers.FloatField(allow_null=True)
    min = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)
    std_dev = serializers.FloatField(allow_null=True)
    pass_rate = serializers.FloatField(allow_null=True)
    passed = serializers.IntegerField()
    errors = serializers.IntegerField()


class ToolStatSerializer(serializers.Serializer):
    tool = serializers.CharField()
    node = serializers.CharField()
    calls = serializers.IntegerField()
    failures = serializers.IntegerField()
    cases = serializers.IntegerField()
    latency_seconds = serializers.FloatField(allow_null=True, help_text="summed over the calls")
    mean_latency = serializers.FloatField(allow_null=True)
    failure_rate = serializers.FloatField(allow_null=True)


class NodeStatSerializer(serializers.Serializer):
    node = serializers.CharField()
    executions = serializers.IntegerField()
    tool_calls = serializers.IntegerField()
    failures = serializers.IntegerField()
    cases = serializers.IntegerField()
    latency_seconds = serializers.FloatField(allow_null=True)


class ProgressSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    settled = serializers.IntegerField(help_text="results that need no more work")
    done = serializers.IntegerField(help_text="evaluated: passed, failed or errored")
    passed = serializers.IntegerField()
    failed = serializers.IntegerField()
    errored = serializers.IntegerField()
    missing = serializers.IntegerField()
    not_runnable = serializers.IntegerField()
    percent = serializers.IntegerField()


class LatencySerializer(serializers.Serializer):
    count = serializers.IntegerField()
    mean = serializers.FloatField(allow_null=True)
    p50 = serializers.FloatField(allow_null=True)
    p95 = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)


class TokensSerializer(serializers.Serializer):
    prompt = serializers.IntegerField(allow_null=True)
    completion = serializers.IntegerField(allow_null=True)
    total = serializers.IntegerField(allow_null=True)


class RunSummarySerializer(serializers.Serializer):
    run = serializers.IntegerField()
    status = serializers.ChoiceField(choices=Run.Status.choices)
    final = serializers.BooleanField(help_text="false while the run is queued or running: the figures so far")
    progress = ProgressSerializer()
    statuses = serializers.DictField(child=serializers.IntegerField(), help_text="results per status")
    pass_rate = serializers.FloatField(allow_null=True, help_text="passed / (passed + failed)")
    passed = serializers.IntegerField()
    judged = serializers.IntegerField()
    errored = serializers.IntegerField()
    missing = serializers.IntegerField()
    not_runnable = serializers.IntegerField()
    latency = LatencySerializer()
    tokens = TokensSerializer()
    cost_usd = serializers.FloatField(allow_null=True)
    criteria = CriterionStatSerializer(many=True, help_text="conversation-level scores per criterion")
    tools = ToolStatSerializer(many=True)
    nodes = NodeStatSerializer(many=True)


# --- watsonx-style metric results -------------------------------------------------------------


class ThresholdSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=[("lower_limit", "lower_limit"), ("upper_limit", "upper_limit")])
    value = serializers.FloatField(allow_null=True)


class MetricErrorSerializer(serializers.Serializer):
    message = serializers.CharField()


class MetricRecordSerializer(serializers.Serializer):
    """One metric value at the level it applies to (watsonx `AgentMetricResult`)."""

    id = serializers.CharField()
    name = serializers.CharField(help_text="the metric (criterion)")
    value = serializers.FloatField(allow_null=True, help_text="the score in [0, 1]")
    applies_to = serializers.ChoiceField(choices=LEVELS)
    conversation_id = serializers.CharField(help_text="`<eval_id>#<iteration>`")
    interaction_id = serializers.CharField(allow_null=True, required=False,
                                           help_text="`<conversation_id>/turn<n>` for interaction scores")
    node_name = serializers.CharField(allow_null=True, required=False)
    group = serializers.CharField(allow_null=True, required=False, help_text="the metric group")
    thresholds = ThresholdSerializer(many=True)
    errors = MetricErrorSerializer(many=True)
    passed = serializers.BooleanField(allow_null=True)
    raw_value = serializers.FloatField(allow_null=True, help_text="on the evaluator's own scale (e.g. seconds)")
    result = serializers.IntegerField(help_text="the case result's id")
    eval_id = serializers.CharField()
    iteration = serializers.IntegerField()


class AggregateMetricSerializer(serializers.Serializer):
    """A metric aggregated over a run per level and node (watsonx `AggregateAgentMetricResult`)."""

    name = serializers.CharField()
    applies_to = serializers.ChoiceField(choices=LEVELS)
    node_name = serializers.CharField(allow_null=True)
    group = serializers.CharField(allow_null=True)
    value = serializers.FloatField(allow_null=True, help_text="the mean")
    count = serializers.IntegerField()
    mean = serializers.FloatField(allow_null=True)
    min = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)
    passed = serializers.IntegerField()
    judged = serializers.IntegerField()
    pass_rate = serializers.FloatField(allow_null=True)
    errors = serializers.IntegerField(help_text="scores whose evaluator reported an error")
    raw_mean = serializers.FloatField(allow_null=True, help_text="of the raw values (e.g. seconds)")
    raw_min = serializers.FloatField(allow_null=True)
    raw_max = serializers.FloatField(allow_null=True)
    individual_results = MetricRecordSerializer(
        many=True, required=False,
        help_text="with include_individual: the first individual_limit results (all of them: "
                  "GET .../metrics/results/?name=&level=&node=)")


class MetricQuery(serializers.Serializer):
    level = serializers.MultipleChoiceField(
        choices=LEVELS, required=False,
        help_text="conversation, interaction and/or node (repeat or comma-separate); default: all")
    applies_to = serializers.MultipleChoiceField(choices=LEVELS, required=False, help_text="alias of `level`")
    node = serializers.CharField(required=False, max_length=200, help_text="only this node's results")
    name = serializers.CharField(required=False, max_length=100, help_text="only this metric")


class AggregateMetricQuery(MetricQuery):
    include_individual = serializers.BooleanField(required=False, default=False)
    individual_limit = serializers.IntegerField(required=False, default=100, min_value=1, max_value=1000,
                                                help_text="individual results per metric, at most")


class MetricRecordQuery(MetricQuery):
    passed = serializers.BooleanField(required=False, allow_null=True, default=None)


class WideRowSerializer(serializers.Serializer):
    result = serializers.IntegerField(help_text="the case result's id")
    eval_id = serializers.CharField()
    iteration = serializers.IntegerField()
    status = serializers.ChoiceField(choices=RESULT_STATUSES)
    latency_seconds = serializers.FloatField(allow_null=True)
    prompt_tokens = serializers.IntegerField(allow_null=True)
    completion_tokens = serializers.IntegerField(allow_null=True)
    cost_usd = serializers.FloatField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    metrics = serializers.DictField(child=serializers.FloatField(allow_null=True),
                                    help_text="criterion -> conversation-level score (null: not scored)")
    passed = serializers.DictField(child=serializers.BooleanField(allow_null=True),
                                   help_text="criterion -> verdict (null: no verdict)")


class WideTableSerializer(serializers.Serializer):
    columns = serializers.ListField(child=serializers.CharField(),
                                    help_text="the CSV export's columns (results.csv), in order")
    metrics = serializers.ListField(child=serializers.CharField(), help_text="the run's criteria, in order")
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = WideRowSerializer(many=True)


class EvaluationConfigSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = EvaluationConfig
        fields = ["id", "project", "name", "description", "config", "created_at"]
        read_only_fields = ["created_at"]

    def to_representation(self, instance: EvaluationConfig) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["config"] = config_in_order(instance.config, instance.criteria_order)
        return data


class EvaluationConfigCreateSerializer(serializers.ModelSerializer):
    project = serializers.SlugField(help_text="the project's slug")
    config = serializers.JSONField(help_text="AgentFlow EvalConfig (`criteria`: name -> settings)")

    class Meta:
        model = EvaluationConfig
        fields = ["project", "name", "description", "config"]
        validators: list[Any] = []  # the unique (project, name) pair is checked by the view


# --- Triage -------------------------------------------------------------------------------------


def _username(user: Any) -> str | None:
    return user.get_username() if user is not None else None


class TriageSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    assignee = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    updated_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    evalset = serializers.IntegerField(source="evalset_id", read_only=True)
    baseline = serializers.IntegerField(source="baseline_id", read_only=True)
    candidate = serializers.IntegerField(source="candidate_id", read_only=True)
    comment_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Triage
        fields = ["id", "project", "evalset", "branch", "eval_id", "baseline", "candidate", "status", "assignee",
                  "created_at", "updated_at", "updated_by", "comment_count"]


class HistoryEntrySerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    actor = serializers.CharField(allow_blank=True, help_text="a username; '' when evalsite closed it (passed again)")
    kind = serializers.ChoiceField(choices=[("change", "change"), ("comment", "comment")])
    change = serializers.CharField(help_text="`status open → confirmed, assignee none → bob`, or `commented`")
    summary = serializers.CharField()
    before = serializers.DictField()
    after = serializers.DictField()
    comment_id = serializers.IntegerField(allow_null=True)


class TriageQuery(serializers.Serializer):
    project = serializers.SlugField(required=False)
    candidate = id_field(required=False)
    baseline = id_field(required=False)
    evalset = id_field(required=False)
    eval_id = serializers.CharField(required=False, max_length=255)
    status = serializers.ChoiceField(choices=Triage.Status.choices, required=False)
    assignee = serializers.CharField(required=False, max_length=150,
                                     help_text="a username, `me`, or `none` for unassigned")


class TriageChangeSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=Triage.Status.choices, required=False)
    assignee = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=150,
                                     help_text="a member's username; null or empty to unassign")


class TriageUpdateSerializer(TriageChangeSerializer):
    """Triage a case of a comparison: the row is created on first use."""

    candidate = id_field()
    baseline = id_field()
    eval_id = serializers.CharField(max_length=255, help_text="the case")
    comment = serializers.CharField(required=False, allow_blank=True, max_length=10_000,
                                    help_text="a first comment (Markdown), added with the change")


class CommentSerializer(serializers.ModelSerializer):
    author = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    triage = serializers.IntegerField(source="triage_id", read_only=True)
    parent = serializers.IntegerField(source="parent_id", read_only=True, allow_null=True)
    html = serializers.SerializerMethodField(help_text="the body rendered from Markdown and sanitised")

    class Meta:
        model = Comment
        fields = ["id", "triage", "parent", "author", "body", "html", "created_at"]

    def get_html(self, comment: Comment) -> str:
        from evaluations.review.triage import render_comment

        return str(render_comment(comment.body))


class CommentCreateSerializer(serializers.Serializer):
    body = serializers.CharField(max_length=10_000, help_text="Markdown")
    parent = id_field(required=False, allow_null=True, help_text="the comment this one answers")


class QueueRowSerializer(serializers.Serializer):
    evalset_id = serializers.IntegerField()
    evalset_name = serializers.CharField()
    branch = serializers.CharField(allow_blank=True, help_text="the candidate's branch: a triage decision "
                                   "belongs to the eval set, branch and case ('' for runs without a branch)")
    eval_id = serializers.CharField()
    baseline_id = serializers.IntegerField()
    baseline_name = serializers.CharField()
    candidate_id = serializers.IntegerField()
    candidate_name = serializers.CharField()
    status = serializers.ChoiceField(choices=Triage.Status.choices)
    triaged = serializers.BooleanField()
    assignee = serializers.CharField(allow_null=True)
    last_comment_at = serializers.DateTimeField(allow_null=True)
    url = serializers.CharField(allow_null=True, help_text="the case's drill-down page")


class QueuePageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    page = serializers.IntegerField()
    num_pages = serializers.IntegerField()
    results = QueueRowSerializer(many=True)


class ReviewQuery(serializers.Serializer):
    project = serializers.SlugField(required=False, help_text="default: your first project")
    tab = serializers.ChoiceField(choices=[("assigned", "assigned"), ("untriaged", "untriaged")],
                                  required=False, default="assigned")
    page = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, default=1)
    evalset = id_field(required=False)
    branch = serializers.CharField(required=False, allow_blank=True, max_length=255)
    criterion = serializers.CharField(required=False, max_length=100, help_text="untriaged: its score dropped")
    assignee = serializers.CharField(required=False, max_length=150,
                                     help_text="a username or `none`; on the assigned tab, whose (default: yours)")
    state = serializers.ChoiceField(choices=[("open", "open"), ("all", "all")], required=False, default="open",
                                    help_text="assigned tab: open cases only (default), or all")


class ActivityQuery(serializers.Serializer):
    actor = serializers.CharField(required=False, max_length=150, help_text="a username, or `system`")
    eval_id = serializers.CharField(required=False, max_length=255)
    branch = serializers.CharField(required=False, allow_blank=True, max_length=255)
    kind = serializers.CharField(required=False, max_length=32, help_text="a verb (`triage.changed`) or family")
    date_from = serializers.DateField(required=False, help_text="YYYY-MM-DD, included")
    date_to = serializers.DateField(required=False, help_text="YYYY-MM-DD, included")


# --- Human grades, the grading queue, judge calibration ----------------------------------------


class GradeSerializer(serializers.ModelSerializer):
    grader = serializers.SlugRelatedField(slug_field="username", read_only=True)
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    run = serializers.IntegerField(source="run_id", read_only=True)
    result = serializers.IntegerField(source="result_id", read_only=True)
    verdict = serializers.SerializerMethodField(help_text="pass or fail")

    class Meta:
        model = HumanGrade
        fields = ["id", "project", "run", "result", "criterion", "grader", "verdict", "passed", "score", "note",
                  "created_at", "updated_at"]

    def get_verdict(self, grade: HumanGrade) -> str:
        return "pass" if grade.passed else "fail"


class GradeChangeSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=[("pass", "pass"), ("fail", "fail")])
    score = serializers.FloatField(required=False, allow_null=True, min_value=0.0, max_value=1.0,
                                   help_text="optional, on the automatic score's scale [0, 1]")
    note = serializers.CharField(required=False, allow_blank=True, max_length=5_000, trim_whitespace=False)


class GradeCreateSerializer(GradeChangeSerializer):
    """Grade a criterion of a result: your grade is created, or changed if you graded it before."""

    result = id_field(help_text="the result (a case of a run)")
    criterion = serializers.CharField(max_length=100)


class GradeQuery(serializers.Serializer):
    project = serializers.SlugField(required=False)
    run = id_field(required=False)
    result = id_field(required=False)
    criterion = serializers.CharField(required=False, max_length=100)
    grader = serializers.CharField(required=False, max_length=150, help_text="a username, or `me`")


class GradingQueueQuery(serializers.Serializer):
    project = serializers.SlugField(required=False, help_text="default: your first project")
    evalset = id_field(required=False)
    run = id_field(required=False, help_text="sample this run instead of each eval set's latest")
    criterion = serializers.CharField(required=False, max_length=100)
    judge_model = serializers.CharField(required=False, max_length=200)
    prompt_version = serializers.CharField(required=False, max_length=64, help_text="`-` for none recorded")
    page = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, default=1)
    kind = serializers.ChoiceField(
        choices=[("llm", "LLM-judged only"), ("deterministic", "deterministic only")],
        required=False,
        help_text="`llm`: the criteria an LLM judge scored (what the calibration counts); `deterministic`: the others",
    )


class GradeRowSerializer(serializers.Serializer):
    grader = serializers.CharField()
    verdict = serializers.CharField()
    score = serializers.FloatField(allow_null=True)
    note = serializers.CharField()


class GradingTurnSerializer(serializers.Serializer):
    user = serializers.CharField(allow_null=True, help_text="the user's message; null for a turn nothing expected")
    expected_response = serializers.CharField(allow_null=True)
    actual_response = serializers.CharField(allow_null=True)
    tool_calls = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="the step-aligned calls counted by kind: matched, args_differ, missing, unexpected",
    )


class GradingQueueItemSerializer(serializers.Serializer):
    position = serializers.IntegerField()
    disagreement = serializers.BooleanField()
    run = serializers.IntegerField()
    result = serializers.IntegerField()
    criterion = serializers.CharField()
    eval_id = serializers.CharField()
    evalset = serializers.CharField()
    status = serializers.CharField()
    automatic_passed = serializers.BooleanField(allow_null=True)
    automatic_score = serializers.FloatField(allow_null=True)
    output = serializers.CharField(help_text="the first turn's final response, on one line")
    turns = GradingTurnSerializer(many=True, help_text="what the item is graded against, turn by turn")
    justification = serializers.JSONField(allow_null=True, help_text="the automatic score's justification")
    score_error = serializers.CharField(help_text="why the evaluator could not score, if it could not")
    grades = GradeRowSerializer(many=True)
    url = serializers.CharField(help_text="the result's drill-down page")


class GradingQueueSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    disagreements = serializers.IntegerField(help_text="the first this many items are disagreements")
    page = serializers.IntegerField()
    num_pages = serializers.IntegerField()
    results = GradingQueueItemSerializer(many=True)


class CalibrationQuery(serializers.Serializer):
    project = serializers.SlugField(required=False, help_text="default: your first project")
    criterion = serializers.CharField(required=False, max_length=100)


class ConfusionSerializer(serializers.Serializer):
    judge_pass_people_pass = serializers.IntegerField()
    judge_pass_people_fail = serializers.IntegerField()
    judge_fail_people_pass = serializers.IntegerField()
    judge_fail_people_fail = serializers.IntegerField()


class CalibrationSerializer(serializers.Serializer):
    criterion = serializers.CharField()
    judge_model = serializers.CharField()
    prompt_version = serializers.CharField(help_text="empty when none was recorded")
    items = serializers.IntegerField(help_text="graded results, tied votes included")
    compared = serializers.IntegerField(help_text="results with a majority verdict, compared with the judge")
    ties = serializers.IntegerField()
    accuracy = serializers.FloatField(allow_null=True)
    cohen_kappa = serializers.FloatField(allow_null=True)
    confusion = ConfusionSerializer()
    graders_items = serializers.IntegerField(help_text="results graded by two people or more")
    graders_observed_agreement = serializers.FloatField(allow_null=True)
    graders_fleiss_kappa = serializers.FloatField(allow_null=True)
    disagreements_url = serializers.CharField(help_text="the grading queue filtered to this judge")


# --- Projects, members, activity, tokens ----------------------------------------------------------


class ProjectSerializer(serializers.ModelSerializer):
    role = serializers.ChoiceField(choices=Membership.Role.choices, read_only=True,
                                   help_text="your role here")

    class Meta:
        model = Project
        fields = ["id", "slug", "name", "description", "created_at", "role"]


class ProjectCreateSerializer(serializers.Serializer):
    slug = serializers.SlugField(max_length=64, help_text="the project's name in URLs and the API")
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="", max_length=10_000)


class DeletedSerializer(serializers.Serializer):
    runs = serializers.IntegerField(help_text="runs deleted")
    results = serializers.IntegerField(help_text="their results")
    versions = serializers.IntegerField(help_text="eval-set versions deleted (0 for a run)")
    rows = serializers.IntegerField(help_text="database rows deleted, everything included")


class MemberSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)
    email = serializers.CharField(source="user.email", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "username", "email", "role", "created_at"]


class MemberAddSerializer(serializers.Serializer):
    user = serializers.CharField(max_length=254, help_text="an active user's username or email")
    role = serializers.ChoiceField(choices=Membership.Role.choices)


class MemberChangeSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Membership.Role.choices)


class EventSerializer(serializers.ModelSerializer):
    actor = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = AuditEvent
        fields = ["id", "created_at", "actor", "verb", "object_type", "object_id", "summary", "data"]


class TokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "last_used_at", "revoked_at"]


class TokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="what uses it, e.g. `CI on main`")


class NewTokenSerializer(TokenSerializer):
    token = serializers.CharField(help_text="the token itself: shown this once, never again")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]


class RevokedSerializer(serializers.Serializer):
    revoked = serializers.BooleanField(help_text="false when it already was revoked")
    token = TokenSerializer()


class ResultsImportSerializer(serializers.Serializer):
    """The multipart upload of another tool's results file (see `evaluations/runs/imports.py`)."""

    file = serializers.FileField(allow_empty_file=True, help_text="ADK .evalset_result.json, DeepEval test run, "
                                 "AgentFlow EvalReport or UiPath `uipath eval --output-file` JSON")
    project = serializers.SlugField(required=False, help_text="project slug; default: your only project")
    evalset = serializers.IntegerField(required=False, min_value=1, help_text=(
        "the eval set (its number in evalsite) the results are of; default: created from the file when it "
        "carries the cases, else the project's eval set the file names"))
    rescore = serializers.BooleanField(required=False, default=False,
                                       help_text="also queue a run scoring the same outputs with evalsite")


class ResultsImportResultSerializer(serializers.Serializer):
    run = RunSerializer(help_text="the imported run, completed")
    rescored = RunSerializer(allow_null=True, help_text="the queued rescoring run, when asked for")


# --- Received traces (evaluations/ingest) -------------------------------------------------------


class TraceQuery(serializers.Serializer):
    project = serializers.SlugField(required=False, help_text="a project's slug; default: your only project")
    q = serializers.CharField(required=False, max_length=200,
                              help_text="a trace id prefix, or text in the name, service, thread or eval id")
    service = serializers.CharField(required=False, max_length=255)
    status = serializers.ChoiceField(required=False, choices=["error", "ok"],
                                     help_text="error: some span failed; ok: none did")
    link = serializers.ChoiceField(required=False, choices=["run", "none"],
                                   help_text="run: traces that named a run's case; none: the others")
    run = id_field(required=False, help_text="only traces of this run")
    thread = serializers.CharField(required=False, max_length=200, help_text="a session / conversation id")
    end_user = serializers.CharField(required=False, max_length=200, help_text="an end user (enduser.id / user.id)")
    environment = serializers.CharField(required=False, max_length=100, help_text="deployment.environment")


class ReceivedTraceSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    trace_id = serializers.CharField()
    name = serializers.CharField()
    service_name = serializers.CharField()
    thread_id = serializers.CharField()
    eval_id = serializers.CharField()
    run = serializers.IntegerField(source="run_id", allow_null=True)
    result = serializers.IntegerField(source="result_id", allow_null=True)
    span_count = serializers.IntegerField()
    error_count = serializers.IntegerField()
    complete = serializers.BooleanField(help_text="its root span (no parent) has arrived")
    start_ns = serializers.IntegerField(allow_null=True)
    end_ns = serializers.IntegerField(allow_null=True)
    duration_seconds = serializers.FloatField(allow_null=True)
    end_user = serializers.CharField(help_text="enduser.id / user.id, when the trace named one")
    environment = serializers.CharField(help_text="deployment.environment, when the trace named one")


class ReceivedSpanSerializer(serializers.Serializer):
    span_id = serializers.CharField()
    parent_span_id = serializers.CharField()
    name = serializers.CharField()
    kind = serializers.CharField(help_text="TOOL, LLM, AGENT, CHAIN (OpenInference or GenAI), else the OTel kind")
    start_ns = serializers.IntegerField(allow_null=True)
    end_ns = serializers.IntegerField(allow_null=True)
    status = serializers.CharField()
    depth = serializers.IntegerField()
    attributes = serializers.DictField()


class ReceivedTraceDetailSerializer(ReceivedTraceSerializer):
    resource = serializers.DictField()
    spans = ReceivedSpanSerializer(many=True, help_text="in tree order, at most 400")


class CauseExampleSerializer(serializers.Serializer):
    eval_id = serializers.CharField()
    result_id = serializers.IntegerField(allow_null=True, help_text="the example's result (its drill-down)")
    run_id = serializers.IntegerField(help_text="whose result: the baseline's for a gone cause")
    detail = serializers.CharField(help_text="the example's own line, values and all")


class CauseSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True, help_text="the cause's id: `?cause=` on the pages")
    signature = serializers.CharField(help_text="what near-identical failures share: tools, argument paths, "
                                                "kinds of change, normalised messages")
    kind = serializers.CharField()
    cases = serializers.IntegerField(help_text="cases it hit (0 for a gone cause)")
    share = serializers.FloatField(help_text="of the run's failing cases")
    criteria = serializers.ListField(child=serializers.CharField(), help_text="criteria it failed")
    example = CauseExampleSerializer()
    change = serializers.ChoiceField(choices=["new", "grown", "shrunk", "same", "gone"], required=False,
                                     help_text="on a comparison: against the baseline's causes")
    baseline_cases = serializers.IntegerField(allow_null=True, required=False)


class CausesSerializer(serializers.Serializer):
    failing_cases = serializers.IntegerField()
    total = serializers.IntegerField(help_text="causes in all; `items` lists the first ones, most cases first")
    items = CauseSerializer(many=True)


class RunCausesSerializer(CausesSerializer):
    run = serializers.IntegerField()
    final = serializers.BooleanField(help_text="false while the run is going: its causes are grouped when it ends")
