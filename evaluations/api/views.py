"""REST API views: validate, check access, call one service or selector."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from rest_framework import status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.generics import ListAPIView, RetrieveAPIView
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from evaluations.api.serializers import (
    EvalCaseSerializer,
    EvalSetSerializer,
    EvalSetUploadSerializer,
    EvalSetVersionSerializer,
    ImportOutcomeSerializer,
)
from evaluations.audit import record_uploads
from evaluations.formats import SourceFile
from evaluations.models import EvalCase, EvalSet, EvalSetVersion, Project
from evaluations.services import evalset_import


def _project_for_upload(request: Request, slug: str | None) -> Project:
    visible = Project.objects.visible_to(request.user)
    if slug:
        project = visible.filter(slug=slug).first()
        if project is None:
            raise NotFound(f"no project {slug!r} that you belong to")
    else:
        projects = list(visible[:2])
        if len(projects) != 1:
            raise ValidationError({"project": ["say which project (you belong to several, or none)"]})
        project = projects[0]
    if not project.can_write(request.user):
        raise PermissionDenied("viewers cannot upload eval sets")
    return project


class EvalSetListCreate(ListAPIView):
    """GET: the eval sets you can see. POST (multipart): import an upload."""

    serializer_class = EvalSetSerializer
    parser_classes = [MultiPartParser, FormParser]

    def get_queryset(self) -> Any:
        qs = EvalSet.objects.visible_to(self.request.user).select_related("project", "latest_version",
                                                                           "latest_version__created_by")
        if project := self.request.query_params.get("project"):
            qs = qs.filter(project__slug=project)
        return qs.order_by("-updated_at", "pk")

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
        files = [SourceFile(f.name, f.read()) for f in data["file"]]
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


class EvalSetDetail(RetrieveAPIView):
    serializer_class = EvalSetSerializer

    def get_queryset(self) -> Any:
        return EvalSet.objects.visible_to(self.request.user).select_related("project", "latest_version")


class EvalSetVersionList(ListAPIView):
    serializer_class = EvalSetVersionSerializer

    def get_queryset(self) -> Any:
        evalset = get_object_or_404(EvalSet.objects.visible_to(self.request.user), pk=self.kwargs["pk"])
        return evalset.versions.select_related("created_by").order_by("-number")


class EvalCaseList(ListAPIView):
    serializer_class = EvalCaseSerializer

    def get_queryset(self) -> Any:
        evalset = get_object_or_404(EvalSet.objects.visible_to(self.request.user), pk=self.kwargs["pk"])
        version = get_object_or_404(EvalSetVersion, evalset=evalset, number=self.kwargs["number"])
        qs = EvalCase.objects.filter(version=version).order_by("position")
        params = self.request.query_params
        return qs.search(params.get("q", "")).tagged(params.get("tag", ""))

