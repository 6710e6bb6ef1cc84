"""Monitors (issue 31) through the API: list and create a project's monitors, read and
edit one (a new version when what scores changes), its figures over a window, its failing
traces and threads, a backfill; and the project's threads of received traces."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from pydantic import ValidationError as PydanticError
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.api.common import (
    project_named,
    query,
    require_admin,
    require_writer,
    responses,
    visible_projects,
)
from evaluations.api.errors import READ_ERRORS, WRITE_ERRORS
from evaluations.api.serializers.fields import count_field
from evaluations.models import Monitor, MonitorResult, Retention, RetentionSweep, TraceThread
from evaluations.monitors import stats
from evaluations.monitors.pending import pending_waiting
from evaluations.monitors.retention import retention_set
from evaluations.monitors.services import MonitorError, monitor_backfill, monitor_create, monitor_update, spec_of
from evaluations.monitors.spec import MonitorSpec, spec_errors


class MonitorSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    project = serializers.SlugField(source="project.slug")
    name = serializers.CharField()
    level = serializers.ChoiceField(choices=["trace", "thread"])
    version = serializers.IntegerField(help_text="scores name the version that made them")
    enabled = serializers.BooleanField()
    sample_rate = serializers.FloatField()
    idle_seconds = serializers.IntegerField(help_text="a thread is scored once idle this long")
    filters = serializers.DictField(help_text="service, root_name, environment, end_user, thread, attributes")
    criteria = serializers.DictField(help_text="name -> {evaluator, threshold, options}")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class MonitorWriteSerializer(serializers.Serializer):
    project = serializers.SlugField(required=False, help_text="a project's slug; default: your only project")
    name = serializers.CharField(max_length=200)
    level = serializers.ChoiceField(choices=["trace", "thread"], required=False)
    enabled = serializers.BooleanField(required=False)
    sample_rate = serializers.FloatField(required=False, min_value=0, max_value=1)
    idle_seconds = count_field(required=False, min_value=1)
    filters = serializers.DictField(required=False)
    criteria = serializers.DictField(help_text="name -> {evaluator, threshold, options}; reference-free evaluators")


class MonitorQuery(serializers.Serializer):
    project = serializers.SlugField(required=False, help_text="a project's slug; default: your only project")


class WindowQuery(serializers.Serializer):
    hours = serializers.IntegerField(required=False, min_value=1, max_value=24 * 90, default=24)
    step = serializers.ChoiceField(required=False, choices=["hour", "day"], default="hour")
    environment = serializers.CharField(required=False, max_length=100, default="")
    end_user = serializers.CharField(required=False, max_length=200, default="")


class PointSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    total = serializers.IntegerField()
    passed = serializers.IntegerField()
    pass_rate = serializers.FloatField(allow_null=True)
    traces = serializers.IntegerField()
    tokens = serializers.FloatField()
    cost = serializers.FloatField()
    criteria = serializers.DictField(help_text="criterion -> mean score (null when none)")


class CriterionStatsSerializer(serializers.Serializer):
    passed = serializers.IntegerField()
    total = serializers.IntegerField()
    mean_score = serializers.FloatField(allow_null=True)


class StatsSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    total = serializers.IntegerField()
    passed = serializers.IntegerField()
    pass_rate = serializers.FloatField(allow_null=True)
    traces = serializers.IntegerField()
    tokens = serializers.FloatField()
    cost = serializers.FloatField()
    latency_p50 = serializers.FloatField(allow_null=True)
    latency_p95 = serializers.FloatField(allow_null=True)
    criteria = serializers.DictField(child=CriterionStatsSerializer())
    points = PointSerializer(many=True)
    pending = serializers.IntegerField(help_text="the project's received traces still waiting to be scored by its "
                                                 "trace monitors (the sweep scores any whose task was lost)")
    pending_since = serializers.DateTimeField(allow_null=True, help_text="when the oldest of them was stored")


class FailingSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    version = serializers.IntegerField()
    trace = serializers.IntegerField(source="trace_id", allow_null=True)
    thread_id = serializers.CharField()
    at = serializers.DateTimeField()
    failed = serializers.ListField(child=serializers.CharField())
    end_user = serializers.CharField()
    environment = serializers.CharField()
    latency_seconds = serializers.FloatField(allow_null=True)


class BackfillSerializer(serializers.Serializer):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField(required=False, help_text="default: now")


class ThreadSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    end_user = serializers.CharField()
    traces = serializers.IntegerField()
    errors = serializers.IntegerField(help_text="traces with a failed span")
    first_at = serializers.DateTimeField()
    last_at = serializers.DateTimeField()


class ThreadQuery(MonitorQuery):
    end_user = serializers.CharField(required=False, max_length=200)


def _monitors(request: Request) -> QuerySet[Monitor]:
    return Monitor.objects.filter(project__in=visible_projects(request)).select_related("project")


def _monitor(request: Request, pk: int) -> Monitor:
    monitor = _monitors(request).filter(pk=pk).first()
    if monitor is None:
        raise NotFound(f"no monitor {pk} in your projects")
    return monitor


def _spec(data: dict[str, Any], base: dict[str, Any] | None = None) -> MonitorSpec:
    merged = {**(base or {}), **{k: v for k, v in data.items() if k != "project"}}
    try:
        return MonitorSpec.model_validate(merged)
    except PydanticError as exc:
        raise ValidationError({"spec": spec_errors(exc)}) from None


class MonitorList(ListAPIView):
    serializer_class = MonitorSerializer

    @extend_schema(summary="A project's monitors", parameters=[MonitorQuery],
                   responses=responses(MonitorSerializer(many=True), *READ_ERRORS))
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> Any:
        params = query(MonitorQuery, self.request)
        project = project_named(self.request, params.get("project"), read=True)
        return Monitor.objects.filter(project=project).select_related("project").order_by("name", "pk")

    @extend_schema(summary="Create a monitor", request=MonitorWriteSerializer,
                   responses=responses(MonitorSerializer, *WRITE_ERRORS, status=201))
    def post(self, request: Request) -> Response:
        body = MonitorWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        project = project_named(request, body.validated_data.get("project"))
        require_writer(request, project, "create monitors")
        try:
            monitor = monitor_create(project=project, spec=_spec(dict(request.data)), user=request.user)
        except MonitorError as exc:
            raise ValidationError({"spec": exc.messages}) from None
        return Response(MonitorSerializer(monitor).data, status=201)


class MonitorDetail(APIView):
    @extend_schema(summary="One monitor", responses=responses(MonitorSerializer, *READ_ERRORS))
    def get(self, request: Request, pk: int) -> Response:
        return Response(MonitorSerializer(_monitor(request, pk)).data)

    @extend_schema(summary="Edit a monitor (fields left out keep their value); a change to what scores "
                           "makes a new version", request=MonitorWriteSerializer,
                   responses=responses(MonitorSerializer, *WRITE_ERRORS))
    def patch(self, request: Request, pk: int) -> Response:
        monitor = _monitor(request, pk)
        require_writer(request, monitor.project, "edit monitors")
        try:
            monitor = monitor_update(monitor=monitor, spec=_spec(dict(request.data), spec_of(monitor)),
                                     user=request.user)
        except MonitorError as exc:
            raise ValidationError({"spec": exc.messages}) from None
        return Response(MonitorSerializer(monitor).data)


class MonitorStats(APIView):
    @extend_schema(summary="A monitor's current version over the last hours: pass rate, each criterion, "
                           "latency p50/p95, tokens, cost, volume, per hour or day",
                   parameters=[WindowQuery], responses=responses(StatsSerializer, *READ_ERRORS))
    def get(self, request: Request, pk: int) -> Response:
        monitor = _monitor(request, pk)
        params = query(WindowQuery, request)
        since = (timezone.now() - timedelta(hours=params["hours"])).replace(minute=0, second=0, microsecond=0)
        s = stats.summary(monitor, since=since, step=params["step"], environment=params["environment"],
                          end_user=params["end_user"])
        waiting = pending_waiting(monitor.project_id)
        body: dict[str, Any] = {
                "version": monitor.version, "total": s.total, "passed": s.passed, "pass_rate": s.pass_rate,
                "traces": s.traces, "tokens": s.tokens, "cost": s.cost, "latency_p50": s.p50, "latency_p95": s.p95,
                "criteria": {k: {"passed": v[0], "total": v[1], "mean_score": v[2]} for k, v in s.criteria.items()},
                "points": [{"at": p.at, "total": p.total, "passed": p.passed, "pass_rate": p.pass_rate,
                            "traces": p.traces, "tokens": p.tokens, "cost": p.cost, "criteria": p.criteria}
                           for p in s.points]}
        body.update(pending=waiting.count, pending_since=waiting.oldest)
        return Response(StatsSerializer(body).data)


class MonitorFailing(ListAPIView):
    serializer_class = FailingSerializer

    @extend_schema(summary="A monitor's failing traces and threads (current version), newest first",
                   parameters=[OpenApiParameter("end_user", str), OpenApiParameter("environment", str)],
                   responses=responses(FailingSerializer(many=True), *READ_ERRORS))
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> Any:
        monitor = _monitor(self.request, self.kwargs["pk"])
        qs = MonitorResult.objects.filter(monitor=monitor, version=monitor.version, passed=False)
        for name in ("end_user", "environment"):
            value = self.request.query_params.get(name, "").strip()
            if value:
                qs = qs.filter(**{name: value})
        return qs.order_by("-at", "-pk")


class MonitorBackfill(APIView):
    @extend_schema(summary="Queue a backfill: the current version over the traces received in [since, until)",
                   request=BackfillSerializer, responses=responses(MonitorSerializer, *WRITE_ERRORS, status=202))
    def post(self, request: Request, pk: int) -> Response:
        monitor = _monitor(request, pk)
        require_writer(request, monitor.project, "backfill monitors")
        body = BackfillSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        until: datetime = body.validated_data.get("until") or timezone.now()
        try:
            monitor_backfill(monitor=monitor, since=body.validated_data["since"], until=until, user=request.user)
        except MonitorError as exc:
            raise ValidationError({"until": exc.messages}) from None
        return Response(MonitorSerializer(monitor).data, status=202)


class ThreadList(ListAPIView):
    serializer_class = ThreadSerializer

    @extend_schema(summary="A project's threads of received traces (conversations), latest activity first",
                   parameters=[ThreadQuery], responses=responses(ThreadSerializer(many=True), *READ_ERRORS))
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> Any:
        params = query(ThreadQuery, self.request)
        project = project_named(self.request, params.get("project"), read=True)
        qs = TraceThread.objects.filter(project=project)
        if params.get("end_user"):
            qs = qs.filter(end_user=params["end_user"])
        return qs.order_by("-last_at", "-pk")


class SweepSerializer(serializers.Serializer):
    ran_at = serializers.DateTimeField()
    cutoff = serializers.DateTimeField()
    traces = serializers.IntegerField(help_text="received traces deleted")
    results = serializers.IntegerField(help_text="monitor results deleted")


class RetentionSerializer(serializers.Serializer):
    days = serializers.IntegerField(allow_null=True, help_text="traces and their scores older than this are "
                                                               "deleted by the hourly schedule; null keeps everything")
    sweeps = SweepSerializer(many=True, read_only=True, help_text="the last 20 sweeps: what each deleted")


class RetentionWriteSerializer(serializers.Serializer):
    days = serializers.IntegerField(allow_null=True, min_value=1, max_value=3650)


class ProjectRetention(APIView):
    """A project's retention of received traces (issue 31): read by its members, set by its admins."""

    def _answer(self, project: Any) -> Response:
        retention = Retention.objects.filter(project=project).first()
        sweeps = RetentionSweep.objects.filter(project=project)[:20]
        return Response({"days": retention.days if retention else None,
                         "sweeps": SweepSerializer(sweeps, many=True).data})

    @extend_schema(summary="The project's retention and what its last sweeps deleted",
                   responses=responses(RetentionSerializer, *READ_ERRORS))
    def get(self, request: Request, slug: str) -> Response:
        return self._answer(get_object_or_404(visible_projects(request), slug=slug))

    @extend_schema(summary="Set the project's retention (project admins)", request=RetentionWriteSerializer,
                   responses=responses(RetentionSerializer, *WRITE_ERRORS))
    def put(self, request: Request, slug: str) -> Response:
        project = get_object_or_404(visible_projects(request), slug=slug)
        require_admin(request, project, "set the retention")
        form = RetentionWriteSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        retention_set(project=project, days=form.validated_data["days"], user=request.user)
        return self._answer(project)
