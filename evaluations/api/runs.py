"""Runs through the API: start, follow, cancel, retry, read results and exports."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

from django.db.models import Prefetch, QuerySet
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from pydantic import ValidationError as PydanticValidationError
from rest_framework import status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.generics import ListAPIView, ListCreateAPIView, RetrieveAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations import exports, runs
from evaluations.api.serializers import (
    CaseResultSerializer,
    EvaluationConfigSerializer,
    RunCreateSerializer,
    RunSerializer,
)
from evaluations.audit import record_run
from evaluations.formats import EvalSetImportError, SourceFile
from evaluations.models import AuditEvent, CaseResult, EvalSet, EvaluationConfig, Project, Run, Score
from evaluations.schemas.evalset import EvalConfig
from evaluations.schemas.outputs import AgentOutput


def visible_runs(request: Request) -> QuerySet[Run]:
    return Run.objects.filter(project__in=Project.objects.visible_to(request.user))


def _writable(request: Request, project: Project) -> None:
    if not project.can_write(request.user):
        raise PermissionDenied("viewers cannot start or change runs")


class RunListCreate(ListCreateAPIView):
    serializer_class = RunSerializer

    def get_queryset(self) -> Any:
        qs = visible_runs(self.request).select_related("project", "evalset_version", "created_by")
        params = self.request.query_params
        for param, field in (("evalset", "evalset_version__evalset_id"), ("status", "status"),
                             ("model", "model"), ("branch", "branch"), ("git_commit", "git_commit")):
            if params.get(param):
                qs = qs.filter(**{field: params[param]})
        if params.get("tag"):
            qs = qs.filter(tags__icontains=f'"{params["tag"]}"')
        return qs.order_by("-created_at", "-pk")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = request.data.dict() if hasattr(request.data, "dict") else dict(request.data)
        upload = request.FILES.get("outputs_file")
        form = RunCreateSerializer(data=data)
        form.is_valid(raise_exception=True)
        v = form.validated_data
        evalset = get_object_or_404(EvalSet.objects.visible_to(request.user), pk=v["evalset"])
        _writable(request, evalset.project)
        version = (evalset.versions.filter(number=v["version"]).first() if "version" in v
                   else evalset.latest_version)
        if version is None:
            raise ValidationError({"version": [f"eval set {evalset.pk} has no version {v.get('version')}"]})
        outputs = None
        if v["target_kind"] == Run.TargetKind.UPLOADED:
            outputs = _outputs(v.get("outputs"), upload)
        config = None
        if "config" in v:
            try:
                config = EvalConfig.model_validate(v["config"])
            except PydanticValidationError as exc:
                raise ValidationError({"config": [str(e["msg"]) + " at " + ".".join(map(str, e["loc"]))
                                                  for e in exc.errors()]}) from None
        preset = None
        if "preset" in v:
            preset = get_object_or_404(EvaluationConfig, pk=v["preset"], project=evalset.project)
        try:
            run = runs.run_create(
                project=evalset.project, version=version, target_kind=v["target_kind"], target=v["target"],
                outputs=outputs, config=config, preset=preset, iterations=v["iterations"], warmups=v["warmups"],
                eval_ids=v.get("eval_ids"), input_overrides=v["input_overrides"], name=v["name"],
                labels={"model": v["model"], "git_commit": v["git_commit"], "branch": v["branch"],
                        "tags": v["tags"]},
                user=request.user,
            )
        except runs.RunError as exc:
            raise ValidationError({"run": [str(exc)]}) from None
        record_run(run=run, actor=request.user, verb=AuditEvent.Verb.RUN_STARTED, via="the API")
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)


def _outputs(inline: list[dict[str, Any]] | None, upload: Any) -> list[AgentOutput]:
    from evaluations.targets.uploaded import read_outputs

    if upload is not None:
        return read_outputs([SourceFile(upload.name, upload.read())])
    if inline is None:
        raise ValidationError({"outputs": ["give the agent outputs: `outputs` (a list) or a file `outputs_file`"]})
    import json

    try:
        return read_outputs([SourceFile("outputs.json", json.dumps(inline).encode())])
    except EvalSetImportError:
        raise
    except Exception as exc:  # pragma: no cover - read_outputs raises EvalSetImportError itself
        raise ValidationError({"outputs": [str(exc)]}) from None


class RunDetail(RetrieveAPIView):
    serializer_class = RunSerializer

    def get_queryset(self) -> Any:
        return visible_runs(self.request).select_related("project", "evalset_version", "created_by")


class RunCancel(APIView):
    def post(self, request: Request, pk: int) -> Response:
        run = get_object_or_404(visible_runs(request), pk=pk)
        _writable(request, run.project)
        if runs.run_cancel(run=run, user=request.user):
            record_run(run=run, actor=request.user, verb=AuditEvent.Verb.RUN_CANCELLED, via="the API")
        run.refresh_from_db()
        return Response(RunSerializer(run).data)


class RunRetry(APIView):
    def post(self, request: Request, pk: int) -> Response:
        run = get_object_or_404(visible_runs(request), pk=pk)
        _writable(request, run.project)
        try:
            reset = runs.run_retry_failed(run=run, user=request.user)
        except runs.RunError as exc:
            raise ValidationError({"run": [str(exc)]}) from None
        record_run(run=run, actor=request.user, verb=AuditEvent.Verb.RUN_RETRIED, via="the API", data={"reset": reset})
        run.refresh_from_db()
        return Response({"reset": reset, "run": RunSerializer(run).data})


class RunResults(ListAPIView):
    """Results with their scores and justifications, paginated; filter by `status`, and by
    `applies_to` (conversation / interaction / node) and `node` for the scores."""

    serializer_class = CaseResultSerializer

    def get_queryset(self) -> Any:
        run = get_object_or_404(visible_runs(self.request), pk=self.kwargs["pk"])
        params = self.request.query_params
        scores = Score.objects.order_by("criterion", "turn_index", "pk")
        if params.get("applies_to"):
            scores = scores.filter(applies_to=params["applies_to"])
        if params.get("node"):
            scores = scores.filter(node_name=params["node"])
        qs = (CaseResult.objects.filter(run=run).select_related("case")
              .prefetch_related(Prefetch("scores", queryset=scores)).order_by("case__position", "iteration"))
        if params.get("status"):
            qs = qs.filter(status=params["status"])
        return qs


def _run_or_404(request: Request, pk: int) -> Run:
    return get_object_or_404(visible_runs(request).select_related("evalset_version__evalset"), pk=pk)


def _download(chunks: Iterator[str], content_type: str, filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(chunks, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


class RunReport(APIView):
    """The AgentFlow EvalReport JSON, streamed."""

    def get(self, request: Request, pk: int) -> StreamingHttpResponse:
        run = _run_or_404(request, pk)
        return _download(exports.run_report_chunks(run), "application/json", f"run-{run.pk}-report.json")


class RunUpsonic(APIView):
    """The run in Upsonic's result shapes (accuracy, reliability, performance per case)."""

    def get(self, request: Request, pk: int) -> StreamingHttpResponse:
        run = _run_or_404(request, pk)
        return _download(exports.run_upsonic_chunks(run), "application/json", f"run-{run.pk}-upsonic.json")


class RunCsv(APIView):
    """Wide CSV: one row per case and iteration, one column per criterion."""

    def get(self, request: Request, pk: int) -> StreamingHttpResponse:
        run = _run_or_404(request, pk)
        return _download(_csv_lines(exports.run_wide_rows(run)), "text/csv", f"run-{run.pk}-results.csv")


def _csv_lines(rows: Iterator[list[Any]]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for row in rows:
        writer.writerow(row)
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()


class RunMetrics(APIView):
    """watsonx-style metric records: `?aggregated=1` for per-metric aggregates, with
    `&records=0` to leave the individual results out."""

    def get(self, request: Request, pk: int) -> Response:
        run = _run_or_404(request, pk)
        aggregated = request.query_params.get("aggregated") in {"1", "true"}
        with_records = request.query_params.get("records", "1") not in {"0", "false"}
        return Response({"results": list(exports.run_metric_records(run, aggregated=aggregated,
                                                                     with_records=with_records))})


class EvaluationConfigList(ListCreateAPIView):
    """A project's saved evaluation configs (DeepEval's metric collections)."""

    serializer_class = EvaluationConfigSerializer

    def get_queryset(self) -> Any:
        return EvaluationConfig.objects.filter(project__in=Project.objects.visible_to(self.request.user)) \
            .select_related("project").order_by("name")

    def perform_create(self, serializer: Any) -> None:
        slug = self.request.data.get("project")
        project = get_object_or_404(Project.objects.visible_to(self.request.user), slug=slug)
        _writable(self.request, project)
        try:
            EvalConfig.model_validate(serializer.validated_data["config"])
        except PydanticValidationError as exc:
            raise ValidationError({"config": [f"{e['msg']} at {'.'.join(map(str, e['loc']))}"
                                              for e in exc.errors()]}) from None
        serializer.save(project=project, created_by=self.request.user)
