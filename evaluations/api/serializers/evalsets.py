"""Eval sets, their versions and cases, uploads and the trend."""

from __future__ import annotations

from rest_framework import serializers

from evaluations.converters import MAX_ID
from evaluations.models import EvalCase, EvalSet, EvalSetVersion


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
        child=serializers.CharField(), help_text="per run (oldest first): pass, fail, error, mixed, unscored or none")
    failing_since = serializers.IntegerField(allow_null=True, help_text="the run where its failing streak began, "
                                             "counted on the latest run's branch (as the page's \"since #N\")")
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
