"""Received traces and their spans (evaluations/ingest)."""

from __future__ import annotations

from rest_framework import serializers

from evaluations.api.serializers.fields import id_field


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
