"""Results import through the API: another tool's results file as a completed run, and
rescoring an imported run's outputs with evalsite (`evaluations/runs/imports.py`)."""

from __future__ import annotations

from django.db import transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import FormParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.api.common import project_named, require_writer, responses, visible_runs
from evaluations.api.errors import WRITE_ERRORS, error_responses
from evaluations.api.idempotency import KEY_PARAMETER, idempotent
from evaluations.api.parsers import MultiPartParser
from evaluations.api.serializers import ResultsImportResultSerializer, ResultsImportSerializer, RunSerializer
from evaluations.audit import record_run
from evaluations.interop import SourceFile, check_size
from evaluations.models import AuditEvent, EvalSet, Project
from evaluations.runs import services as runs
from evaluations.runs.imports import results_import, run_rescore


def _project(request: Request, slug: str | None) -> Project:
    project = project_named(request, slug)
    require_writer(request, project, "import results")
    return project


class ResultsImport(APIView):
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        summary="Import another tool's results as a completed run",
        parameters=[KEY_PARAMETER],
        description="Multipart: one `file` part, a results file of ADK (`.adk/eval_history/*.evalset_result.json`), "
                    "DeepEval / Confident AI (a test run with `testCases` or `conversationalTestCases`), AgentFlow "
                    "(`EvalReport`), UiPath (`uipath eval --output-file`) or Inspect AI (an eval log, `.eval` or "
                    "`.json`). The other tool's scores, thresholds, pass/fail and reasons are kept under its metric "
                    "names (`evaluator` is `imported:<tool>`). "
                    "A bad file is a 400 naming the file, case, field path and line; nothing is written.",
        request={"multipart/form-data": ResultsImportSerializer},
        responses={201: ResultsImportResultSerializer, **error_responses(*WRITE_ERRORS)},
    )
    @idempotent
    def post(self, request: Request) -> Response:
        slug = request.data.get("project")
        project = _project(request, slug if isinstance(slug, str) and slug else None)  # who may, before what
        if not request.FILES.get("file"):
            raise ValidationError({"file": ["attach the results file as multipart field `file`"]})
        form = ResultsImportSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        evalset = None
        if data.get("evalset"):
            evalset = EvalSet.objects.filter(project=project, pk=data["evalset"]).first()
            if evalset is None:
                raise NotFound(f"no eval set {data['evalset']} in project {project.slug!r}")
        upload = data["file"]
        check_size(upload.name, upload.size)
        rescored = None
        with transaction.atomic():  # a refused rescore leaves no import behind either
            run = results_import(project=project, file=SourceFile(upload.name, upload.read()), evalset=evalset,
                                 user=request.user)
            if data.get("rescore"):
                try:
                    rescored = run_rescore(run=run, user=request.user)
                except runs.RunError as exc:
                    raise ValidationError({"rescore": [str(exc)]}) from None
            record_run(run=run, actor=request.user, verb=AuditEvent.Verb.RUN_STARTED, via="the API",
                       data={"imported": run.target.get("imported")})
        body = {"run": RunSerializer(run).data, "rescored": RunSerializer(rescored).data if rescored else None}
        return Response(body, status=status.HTTP_201_CREATED)


class RunRescore(APIView):
    @extend_schema(summary="Queue a run scoring an imported run's outputs with evalsite",
                   request=inline_serializer("RunRescoreRequest", {"judge": serializers.BooleanField(
                       required=False, default=False,
                       help_text="also rescore the imported LLM-judged metrics (DeepEval's) with evalsite's judge")}),
                   responses=responses(RunSerializer, *WRITE_ERRORS, status=201))
    def post(self, request: Request, pk: int) -> Response:
        run = get_object_or_404(visible_runs(request).select_related("project", "evalset_version"), pk=pk)
        require_writer(request, run.project, "start or change runs")
        try:
            judge = isinstance(request.data, dict) and request.data.get("judge") in (True, "true", "on", "1")
            with transaction.atomic():  # the run and its audit event, together or neither
                rescored = run_rescore(run=run, user=request.user, judge=judge)
                record_run(run=rescored, actor=request.user, verb=AuditEvent.Verb.RUN_STARTED, via="the API")
        except runs.RunError as exc:
            raise ValidationError({"run": [str(exc)]}) from None
        return Response(RunSerializer(rescored).data, status=status.HTTP_201_CREATED)
