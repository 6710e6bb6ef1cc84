"""Eval sets through the API: upload, list, versions (and their downloads), cases, and the
trend over runs. Views validate, check access, and call one service or selector."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db import transaction
from django.shortcuts import get_object_or_404
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import renderers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.generics import ListAPIView, RetrieveAPIView
from rest_framework.parsers import FormParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.api.common import (
    BinaryRenderer,
    CsvRenderer,
    DownloadView,
    download_renderers,
    project_named,
    query,
    require_admin,
    responses,
    streamed,
)
from evaluations.api.errors import READ_ERRORS, WRITE_ERRORS, ApiError, error_responses, problem
from evaluations.api.idempotency import KEY_PARAMETER, idempotent
from evaluations.api.parsers import MultiPartParser
from evaluations.api.serializers import (
    DeletedSerializer,
    EvalCaseDetailSerializer,
    EvalCaseQuery,
    EvalCaseSerializer,
    EvalSetQuery,
    EvalSetRenameSerializer,
    EvalSetSerializer,
    EvalSetUploadSerializer,
    EvalSetVersionSerializer,
    ImportOutcomeSerializer,
    ImportResultSerializer,
    TrendQuery,
    TrendSerializer,
)
from evaluations.audit import record_rename, record_uploads
from evaluations.evalsets import exports, selectors
from evaluations.evalsets.services import RenameError, evalset_import, evalset_rename
from evaluations.interop import SourceFile, check_size
from evaluations.models import CaseResult, EvalCase, EvalSet, EvalSetSource, EvalSetVersion, Project, Run
from evaluations.review import comparison
from evaluations.runs.exports import version_native_chunks


def _project_for_upload(request: Request, slug: str | None) -> Project:
    project = project_named(request, slug)
    if not project.can_write(request.user):
        raise PermissionDenied("viewers cannot upload eval sets")
    return project


@extend_schema_view(
    get=extend_schema(summary="List eval sets", parameters=[EvalSetQuery],
                      responses=responses(EvalSetSerializer(many=True), *READ_ERRORS)),
)
class EvalSetListCreate(ListAPIView):
    """GET: the eval sets you can see. POST (multipart): import an upload."""

    serializer_class = EvalSetSerializer
    parser_classes = [MultiPartParser, FormParser]

    def get_queryset(self) -> Any:
        params = query(EvalSetQuery, self.request)
        qs = EvalSet.objects.visible_to(self.request.user).select_related("project", "latest_version",
                                                                           "latest_version__created_by")
        if params.get("project"):
            qs = qs.filter(project__slug=params["project"])
        return qs.order_by("-updated_at", "pk")

    @extend_schema(
        summary="Upload an eval set",
        parameters=[KEY_PARAMETER],
        description="Multipart: one or more `file` parts (JSON, JSONL, CSV, an Inspect AI `.eval` log, or a zip), "
                    "any format evalsite reads. "
                    "201 when a new version was created, 200 when identical content already was one.",
        request={"multipart/form-data": EvalSetUploadSerializer},
        responses={201: ImportResultSerializer, 200: ImportResultSerializer, **error_responses(*WRITE_ERRORS)},
    )
    @idempotent
    def post(self, request: Request) -> Response:
        if not request.FILES.getlist("file"):
            raise ValidationError({"file": ["attach the eval-set file(s) as multipart field `file`"]})
        fields = {"file": request.FILES.getlist("file"), "format": request.data.get("format", "")}
        if request.data.get("project"):
            fields["project"] = request.data["project"]
        form = EvalSetUploadSerializer(data=fields)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        project = _project_for_upload(request, data.get("project"))
        files = []
        for f in data["file"]:
            check_size(f.name, f.size)  # before reading: an oversize file is never loaded whole
            files.append(SourceFile(f.name, f.read()))
        outcomes = evalset_import(project=project, files=files, format=data.get("format") or None,
                                  user=request.user)
        record_uploads(project=project, actor=request.user, outcomes=outcomes, via="the API")
        body = ImportOutcomeSerializer(
            [
                {"created": o.created, "format": o.format, "variant": o.variant, "case_count": o.case_count,
                 "warnings": o.warnings, "evalset": o.evalset, "version": o.version}
                for o in outcomes
            ],
            many=True,
        ).data
        created = any(o.created for o in outcomes)
        return Response({"results": body}, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


@extend_schema_view(get=extend_schema(summary="One eval set", responses=responses(EvalSetSerializer, *READ_ERRORS)))
class EvalSetDetail(RetrieveAPIView):
    serializer_class = EvalSetSerializer

    def get_queryset(self) -> Any:
        return EvalSet.objects.visible_to(self.request.user).select_related("project", "latest_version",
                                                                           "latest_version__created_by")

    @extend_schema(summary="Delete an eval set with its versions and runs (project admins)",
                   description="Every version and case, every run of it with its results, comparisons, grades and "
                               "traces, and its triage, in batches that never hold the database for long; "
                               "recorded in the activity feed. While one of its runs is still going: a 409.",
                   responses=responses(DeletedSerializer, *WRITE_ERRORS, 409))
    def delete(self, request: Request, pk: int) -> Response:
        from evaluations.review.deletion import evalset_delete, evalset_deletion_counts

        evalset = _evalset(request, pk)
        require_admin(request, evalset.project, "delete eval sets")
        counts = evalset_deletion_counts(evalset)
        try:
            rows = evalset_delete(evalset=evalset, actor=request.user, via="the API")
        except ValueError as exc:
            raise ApiError(409, "conflict", str(exc)) from None
        return Response({"runs": counts.runs, "results": counts.results, "versions": counts.versions, "rows": rows})

    @extend_schema(
        summary="Rename an eval set",
        description="`{\"name\": \"...\"}`: the name people read (1 to 255 characters). Uploads still match the "
        "eval set by its `eval_set_id`, its versions stay as they are, and the old name is kept in the "
        "activity feed (`evalset.renamed`). Members and admins only.",
        request=EvalSetRenameSerializer,
        responses=responses(EvalSetSerializer, *WRITE_ERRORS),
    )
    def patch(self, request: Request, pk: int) -> Response:
        evalset = self.get_object()
        if not evalset.project.can_write(request.user):
            raise PermissionDenied("viewers cannot rename eval sets")
        data = request.data if isinstance(request.data, dict) else {}
        extra = sorted(set(data) - {"name"})
        if extra or not isinstance(data.get("name"), str):
            problems = [problem("only the name can be changed here", key) for key in extra] or [
                problem("give the new name as a string", "name")]
            raise ApiError(400, "invalid", "the eval set was not renamed", problems)
        try:
            with transaction.atomic():
                before = evalset_rename(evalset=evalset, name=data["name"])
                if before is not None:
                    record_rename(evalset=evalset, actor=request.user, before=before, via="the API")
        except RenameError as exc:
            raise ApiError(400, "invalid", "the eval set was not renamed", [problem(str(exc), "name")]) from None
        return Response(EvalSetSerializer(self.get_queryset().get(pk=evalset.pk)).data)


def _evalset(request: Request, pk: int) -> EvalSet:
    return get_object_or_404(EvalSet.objects.visible_to(request.user).select_related("project"), pk=pk)


def _version(request: Request, pk: int, number: int) -> EvalSetVersion:
    evalset = _evalset(request, pk)
    return get_object_or_404(EvalSetVersion.objects.select_related("evalset", "created_by"),
                             evalset=evalset, number=number)


@extend_schema_view(get=extend_schema(summary="An eval set's versions, newest first",
                                      responses=responses(EvalSetVersionSerializer(many=True), *READ_ERRORS)))
class EvalSetVersionList(ListAPIView):
    serializer_class = EvalSetVersionSerializer

    def get_queryset(self) -> Any:
        evalset = _evalset(self.request, self.kwargs["pk"])
        return evalset.versions.select_related("created_by").order_by("-number")


@extend_schema_view(get=extend_schema(summary="One version of an eval set",
                                      responses=responses(EvalSetVersionSerializer, *READ_ERRORS)))
class EvalSetVersionDetail(RetrieveAPIView):
    serializer_class = EvalSetVersionSerializer

    def get_object(self) -> EvalSetVersion:
        return _version(self.request, self.kwargs["pk"], self.kwargs["number"])


class VersionNative(DownloadView):

    @extend_schema(summary="Download a version as native AgentFlow .evalset.json",
                   responses={(200, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT,
                                                                         description="the EvalSet JSON"),
                              **error_responses(*READ_ERRORS)})
    def get(self, request: Request, pk: int, number: int) -> Any:
        version = _version(request, pk, number)
        return streamed(version_native_chunks(version), "application/json",
                        f"{version.evalset.pk}-v{version.number}.evalset.json")


class JsonLinesRenderer(CsvRenderer):
    media_type = "application/x-ndjson"
    format = "jsonl"


class VersionOutputsSkeleton(DownloadView):
    """The outputs file to fill in for an uploaded-outputs run of this version."""

    renderer_classes = download_renderers(JsonLinesRenderer)

    @extend_schema(summary="Download the outputs skeleton of a version (JSON lines to fill in)",
                   description="One line per case: its `eval_id`, `iteration` 0, and per turn its `invocation_id`, "
                               "the user's message in `metadata.user` (evaluation ignores it) and an empty "
                               "`final_response` and `tool_calls` to fill in. It uploads as outputs as it is.",
                   responses={(200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR,
                                                                            description="JSON lines"),
                              **error_responses(*READ_ERRORS)})
    def get(self, request: Request, pk: int, number: int) -> Any:
        version = _version(request, pk, number)
        return streamed(selectors.outputs_skeleton_lines(version), "application/x-ndjson",
                        selectors.outputs_skeleton_filename(version))


class VersionExport(DownloadView):
    """`?format=native|adk|uipath|deepeval`: the version in that format. A tool's format is
    offered for eval sets that came from that tool; an export that would lose content is a
    409 listing each case and field (as `problems`, `case` and `path` set)."""

    renderer_classes = download_renderers(BinaryRenderer)

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # `format` names the eval-set format here, not DRF's renderer override.
        return renderers.JSONRenderer(), "application/json"

    @extend_schema(summary="Download a version in native or its tool's own format (ADK, UiPath, DeepEval)",
                   parameters=[OpenApiParameter("format", str, enum=["native", *exports.TOOL_FORMATS],
                                                description="default native")],
                   responses={(200, "application/json"): OpenApiResponse(
                       OpenApiTypes.OBJECT, description="format=native: the native .evalset.json"),
                              (200, "application/octet-stream"): OpenApiResponse(
                       OpenApiTypes.BINARY, description="a tool's format: the file (a .zip when companion files "
                                                        "come with it)"),
                              **error_responses(*READ_ERRORS, 409)})
    def get(self, request: Request, pk: int, number: int) -> Any:
        from django.http import HttpResponse

        from evaluations.api.errors import ApiError, problem

        version = _version(request, pk, number)
        fmt = request.query_params.get("format", "native")
        if fmt == "native":
            return streamed(version_native_chunks(version), "application/json",
                            f"{version.evalset.pk}-v{version.number}.evalset.json")
        try:
            export = exports.tool_export(version, fmt)
        except exports.ExportUnavailable as exc:
            raise ApiError(400, "invalid", str(exc), [problem(str(exc), "format")]) from None
        except exports.ExportLossError as exc:
            raise ApiError(409, "export_loses_content", str(exc), [
                {**problem(loss.message, loss.path), "case": loss.case} for loss in exc.losses]) from None
        response = HttpResponse(export.data, content_type="application/octet-stream")
        response["Content-Disposition"] = content_disposition_header(True, export.filename) or "attachment"
        return response


class VersionOriginal(DownloadView):
    renderer_classes = download_renderers(BinaryRenderer)

    @extend_schema(summary="Download the file a version was uploaded as, byte for byte",
                   responses={(200, "application/octet-stream"): OpenApiResponse(
                       OpenApiTypes.BINARY, description="the bytes as uploaded (the filename says what they are)"),
                              **error_responses(*READ_ERRORS)})
    def get(self, request: Request, pk: int, number: int) -> Any:
        from django.http import HttpResponse

        version = _version(request, pk, number)
        source = get_object_or_404(EvalSetSource, version=version)
        # Always octet-stream: a download of bytes, whatever they are (the page sends their own type).
        response = HttpResponse(source.content(), content_type="application/octet-stream")
        response["Content-Disposition"] = content_disposition_header(True, source.filename) or "attachment"
        return response


@extend_schema_view(get=extend_schema(summary="The cases of a version, in order", parameters=[EvalCaseQuery],
                                      responses=responses(EvalCaseSerializer(many=True), *READ_ERRORS)))
class EvalCaseList(ListAPIView):
    serializer_class = EvalCaseSerializer

    def get_queryset(self) -> Any:
        params = query(EvalCaseQuery, self.request)
        version = _version(self.request, self.kwargs["pk"], self.kwargs["number"])
        qs = EvalCase.objects.in_version(version).order_by("position")
        return qs.search(params.get("q", "")).tagged(params.get("tag", ""))


@extend_schema_view(get=extend_schema(summary="One eval case", responses=responses(EvalCaseDetailSerializer,
                                                                                   *READ_ERRORS)))
class EvalCaseDetail(RetrieveAPIView):
    serializer_class = EvalCaseDetailSerializer

    def get_queryset(self) -> Any:
        return selectors.cases_visible_to(self.request.user).select_related("version__evalset__project")


# --- Trend ------------------------------------------------------------------------------------


class EvalSetTrend(APIView):
    """The numbers of the trend page: pass rate and p95 latency of the last completed runs,
    and each case's outcome in each of them (paged by case), with where it started failing."""

    @extend_schema(summary="An eval set over its last completed runs", parameters=[TrendQuery],
                   responses=responses(TrendSerializer, *READ_ERRORS))
    def get(self, request: Request, pk: int) -> Response:
        from evaluations.review.selectors import TREND_RUNS, branch_streak, run_label

        params = query(TrendQuery, request)
        evalset = _evalset(request, pk)
        latest = list(Run.objects.filter(evalset_version__evalset=evalset, status=Run.Status.COMPLETED)
                      .only("pk", "name", "model", "branch", "git_commit", "created_at", "summary")
                      .order_by("-created_at", "-pk")[:TREND_RUNS + 1])
        runs = latest[:TREND_RUNS][::-1]
        run_ids = [run.pk for run in runs]
        limit, offset = params["limit"], params["offset"]
        eval_ids = CaseResult.objects.filter(run_id__in=run_ids)
        if params["failing"] and run_ids:
            eval_ids = eval_ids.filter(case__eval_id__in=CaseResult.objects.filter(
                run_id=run_ids[-1], status__in=[CaseResult.Status.FAILED, CaseResult.Status.ERROR]
            ).values("case__eval_id"))
        ordered = eval_ids.values_list("case__eval_id", flat=True).distinct().order_by("case__eval_id")
        count = ordered.count() if run_ids else 0
        shown = list(ordered[offset:offset + limit]) if run_ids else []
        outcomes: dict[tuple[str, int], list[str]] = defaultdict(list)
        if shown:
            for run_id, eval_id, result_status in (
                CaseResult.objects.filter(run_id__in=run_ids, case__eval_id__in=shown)
                .values_list("run_id", "case__eval_id", "status").order_by("iteration", "pk")
            ):
                outcome = comparison.result_outcome(result_status)
                if outcome is not None:
                    outcomes[(eval_id, run_id)].append(outcome)
        cases = []
        for eval_id in shown:
            cells = [comparison.case_outcome(outcomes.get((eval_id, run_id), [])) or "none" for run_id in run_ids]
            since, failing = branch_streak(cells, [run.branch for run in runs])
            cases.append({"eval_id": eval_id, "outcomes": cells,
                          "failing_since": run_ids[since] if since is not None else None,
                          "runs_failing": failing})

        def page_url(to: int | None) -> str | None:
            if to is None:
                return None
            from rest_framework.utils.urls import replace_query_param

            return replace_query_param(request.build_absolute_uri(), "offset", to)

        body = {
            "evalset": evalset.pk,
            "runs": [{"id": run.pk, "name": run.name, "label": run_label(run), "created_at": run.created_at,
                      "model": run.model, "branch": run.branch, "git_commit": run.git_commit,
                      "pass_rate": (run.summary or {}).get("pass_rate"),
                      "latency_p95": ((run.summary or {}).get("latency") or {}).get("p95")} for run in runs],
            "more_runs": len(latest) > TREND_RUNS,
            "count": count,
            "next": page_url(offset + limit if offset + limit < count else None),
            "previous": page_url(max(0, offset - limit) if offset > 0 else None),
            "cases": cases,
        }
        return Response(TrendSerializer(body).data)
