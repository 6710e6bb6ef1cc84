"""Runs, their results and summaries, evaluation configs and results imports."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from evaluations.api.serializers.evalsets import EvalCaseSerializer
from evaluations.api.serializers.fields import _DATETIME, id_field
from evaluations.converters import MAX_ID
from evaluations.models import CaseResult, EvaluationConfig, Run, Score
from evaluations.ordering import config_in_order, summary_in_order
from evaluations.schemas.outputs import MAX_ITERATIONS


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
            "cases_unscored", "summary", "created_at", "started_at", "finished_at", "created_by",
            "judge_calls", "judge_prompt_tokens", "judge_completion_tokens", "judge_cost_usd", "judge_estimate",
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
            "cases_not_runnable": instance.cases_not_runnable, "cases_unscored": instance.cases_unscored,
            "summary": summary_in_order(instance.summary, instance.criteria_order),
            "created_at": _DATETIME.to_representation(instance.created_at),
            "started_at": _DATETIME.to_representation(instance.started_at),
            "finished_at": _DATETIME.to_representation(instance.finished_at),
            "created_by": user.username if user is not None else None,
            "judge_calls": instance.judge_calls, "judge_prompt_tokens": instance.judge_prompt_tokens,
            "judge_completion_tokens": instance.judge_completion_tokens, "judge_cost_usd": instance.judge_cost_usd,
            "judge_estimate": instance.judge_estimate,
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
    done = serializers.IntegerField(help_text="evaluated: passed, failed, errored or not fully scored")
    passed = serializers.IntegerField()
    failed = serializers.IntegerField()
    errored = serializers.IntegerField()
    not_fully_scored = serializers.IntegerField(help_text="some enabled criterion was not scored and none failed")
    missing = serializers.IntegerField()
    not_runnable = serializers.IntegerField()
    percent = serializers.IntegerField()


class NoticeSerializer(serializers.Serializer):
    criterion = serializers.CharField()
    kind = serializers.ChoiceField(choices=["not_runnable", "evaluator_error"])
    reason = serializers.CharField(help_text="why, the message with its volatile parts folded")
    example = serializers.CharField(help_text="one case's message as it was")
    cases = serializers.IntegerField()
    results = serializers.IntegerField()
    text = serializers.CharField(help_text="the notice in words, as the pages say it")
    on_baseline = serializers.ChoiceField(choices=["same", "new"], required=False,
                                          help_text="on a comparison: whether the baseline had it too")
    baseline_cases = serializers.IntegerField(required=False, allow_null=True)


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
    pass_rate = serializers.FloatField(allow_null=True, help_text="passed / (passed + failed): errored and not "
                                                                 "fully scored cases are left out of it")
    passed = serializers.IntegerField()
    judged = serializers.IntegerField(help_text="passed + failed, the pass rate's denominator")
    errored = serializers.IntegerField()
    not_fully_scored = serializers.IntegerField(help_text="cases with a criterion not scored (see notices) and none "
                                                          "failed: neither passed nor failed")
    missing = serializers.IntegerField()
    not_runnable = serializers.IntegerField()
    notices = NoticeSerializer(many=True, help_text="criteria that could not be scored: which, why, on how many cases")
    latency = LatencySerializer()
    tokens = TokensSerializer()
    cost_usd = serializers.FloatField(allow_null=True)
    criteria = CriterionStatSerializer(many=True, help_text="conversation-level scores per criterion")
    tools = ToolStatSerializer(many=True)
    nodes = NodeStatSerializer(many=True)


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
    config = serializers.JSONField(help_text="AgentFlow EvalConfig (`criteria`: name -> settings), or a DeepEval "
                                   "metric collection (`metrics`: [{metric, threshold, ...its arguments}])")

    class Meta:
        model = EvaluationConfig
        fields = ["project", "name", "description", "config"]
        validators: list[Any] = []  # the unique (project, name) pair is checked by the view


class ResultsImportSerializer(serializers.Serializer):
    """The multipart upload of another tool's results file (see `evaluations/runs/imports.py`)."""

    file = serializers.FileField(allow_empty_file=True, help_text="ADK .evalset_result.json, DeepEval test run, "
                                 "AgentFlow EvalReport or UiPath `uipath eval --output-file` JSON")
    project = serializers.SlugField(required=False, help_text="project slug; default: your only project")
    evalset = id_field(required=False, help_text=(
        "the eval set (its number in evalsite) the results are of; default: created from the file when it "
        "carries the cases, else the project's eval set the file names"))
    rescore = serializers.BooleanField(required=False, default=False,
                                       help_text="also queue a run scoring the same outputs with evalsite")


class ResultsImportResultSerializer(serializers.Serializer):
    run = RunSerializer(help_text="the imported run, completed")
    rescored = RunSerializer(allow_null=True, help_text="the queued rescoring run, when asked for")
