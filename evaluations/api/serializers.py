"""Endpoint shapes of the REST API (the file formats themselves are pydantic schemas)."""

from __future__ import annotations

from rest_framework import serializers

from evaluations.models import CaseResult, EvalCase, EvalSet, EvalSetVersion, EvaluationConfig, Run, Score


class EvalSetVersionSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = EvalSetVersion
        fields = [
            "id", "number", "content_hash", "source_format", "source_variant", "source_filename",
            "name", "description", "case_count", "turn_count", "tool_call_count", "tags",
            "warnings", "default_config", "evaluator_config", "created_at", "created_by",
        ]


class EvalSetSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    latest_version = EvalSetVersionSerializer(read_only=True)

    class Meta:
        model = EvalSet
        fields = ["id", "project", "eval_set_id", "name", "description", "created_at", "updated_at",
                  "latest_version"]


class EvalCaseSerializer(serializers.ModelSerializer):
    class Meta:
        model = EvalCase
        fields = [
            "id", "position", "eval_id", "name", "tags", "metadata", "session_input", "conversation",
            "conversation_scenario", "rubrics", "criteria", "turn_count", "tool_call_count",
        ]


class ImportOutcomeSerializer(serializers.Serializer):
    created = serializers.BooleanField(help_text="false when identical content was already this version")
    format = serializers.CharField()
    variant = serializers.CharField()
    case_count = serializers.IntegerField()
    warnings = serializers.ListField(child=serializers.CharField())
    evalset = EvalSetSerializer()
    version = EvalSetVersionSerializer()


class EvalSetUploadSerializer(serializers.Serializer):
    """The multipart upload: one or more `file` parts (a zip is unpacked)."""

    file = serializers.ListField(child=serializers.FileField(allow_empty_file=True), allow_empty=False)
    project = serializers.SlugField(required=False, help_text="project slug; default: your only project")
    format = serializers.CharField(required=False, allow_blank=True, help_text="skip detection")


class RunSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    evalset = serializers.IntegerField(source="evalset_version.evalset_id", read_only=True)
    evalset_version = serializers.IntegerField(source="evalset_version.number", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Run
        fields = [
            "id", "project", "evalset", "evalset_version", "name", "status", "error", "target_kind", "target",
            "config", "iterations", "warmups", "eval_ids", "model", "git_commit", "branch", "tags",
            "cases_total", "cases_done", "cases_failed", "cases_errored", "cases_missing", "cases_not_runnable",
            "summary", "created_at", "started_at", "finished_at", "created_by",
        ]


class RunCreateSerializer(serializers.Serializer):
    """Start a run. Uploaded outputs come as `outputs` (a list in a JSON body) or as a
    multipart file part `outputs_file`; live targets as `target_kind` + `target`."""

    evalset = serializers.IntegerField()
    version = serializers.IntegerField(required=False, help_text="version number; default: the latest")
    target_kind = serializers.ChoiceField(choices=Run.TargetKind.choices, default=Run.TargetKind.UPLOADED)
    target = serializers.DictField(required=False, default=dict)
    outputs = serializers.ListField(child=serializers.DictField(), required=False)
    config = serializers.DictField(required=False, help_text="AgentFlow EvalConfig")
    preset = serializers.IntegerField(required=False, help_text="a saved evaluation config's id")
    iterations = serializers.IntegerField(required=False, default=1, min_value=1, max_value=100)
    warmups = serializers.IntegerField(required=False, default=0, min_value=0, max_value=100)
    eval_ids = serializers.ListField(child=serializers.CharField(), required=False)
    input_overrides = serializers.DictField(required=False, default=dict)
    name = serializers.CharField(required=False, default="", allow_blank=True, max_length=255)
    model = serializers.CharField(required=False, default="", allow_blank=True, max_length=200)
    git_commit = serializers.CharField(required=False, default="", allow_blank=True, max_length=64)
    branch = serializers.CharField(required=False, default="", allow_blank=True, max_length=255)
    tags = serializers.ListField(child=serializers.CharField(max_length=100), required=False, default=list)


class ScoreSerializer(serializers.ModelSerializer):
    class Meta:
        model = Score
        fields = ["criterion", "applies_to", "turn_index", "node_name", "score", "raw_value", "passed", "threshold",
                  "justification", "error"]


class CaseResultSerializer(serializers.ModelSerializer):
    eval_id = serializers.CharField(source="case.eval_id", read_only=True)
    scores = ScoreSerializer(many=True, read_only=True)

    class Meta:
        model = CaseResult
        fields = ["id", "eval_id", "iteration", "status", "error", "latency_seconds", "prompt_tokens",
                  "completion_tokens", "cost_usd", "output", "scores"]


class EvaluationConfigSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = EvaluationConfig
        fields = ["id", "project", "name", "description", "config", "created_at"]
        read_only_fields = ["created_at"]
