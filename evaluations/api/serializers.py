"""Endpoint shapes of the REST API (the file formats themselves are pydantic schemas)."""

from __future__ import annotations

from rest_framework import serializers

from evaluations.models import EvalCase, EvalSet, EvalSetVersion


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
