"""Prompts through the API: list and create them, read one with its versions, save a new
version, read one version, and diff two. The same services and selectors as the pages
(`evaluations.prompts`).

`GET|POST /api/v1/prompts/`, `GET /api/v1/prompts/<id>/`, `POST /api/v1/prompts/<id>/versions/`,
`GET /api/v1/prompts/<id>/versions/<n>/`, `GET /api/v1/prompts/<id>/diff/?from=<n>&to=<n>`.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.api.common import project_named, query, require_writer, visible_projects
from evaluations.api.errors import READ_ERRORS, WRITE_ERRORS, ApiError, error_responses, problem
from evaluations.api.serializers.fields import id_field
from evaluations.audit import audit_record
from evaluations.converters import whole_number
from evaluations.models import AuditEvent, Prompt
from evaluations.prompts import selectors
from evaluations.prompts.services import PromptError, Saved, prompt_create, prompt_version_save


class PromptQuery(serializers.Serializer):
    project = serializers.SlugField(required=False)


class PromptCreateSerializer(serializers.Serializer):
    project = serializers.SlugField(required=False, help_text="default: your only project")
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, default="", allow_blank=True, max_length=5000)
    system = serializers.CharField(required=False, default="", allow_blank=True, trim_whitespace=False,
                                   help_text="the system message (a template)")
    user = serializers.CharField(required=False, default="{{input}}", trim_whitespace=False,
                                 help_text="the user message template: {{input}} is the case's message")
    note = serializers.CharField(required=False, default="", allow_blank=True, max_length=500)


class PromptVersionSerializer(serializers.Serializer):
    system = serializers.CharField(required=False, default="", allow_blank=True, trim_whitespace=False)
    user = serializers.CharField(trim_whitespace=False)
    note = serializers.CharField(required=False, default="", allow_blank=True, max_length=500)
    based_on = id_field(required=False,
                        help_text="the version the edit began from: a 409 when it is no longer the "
                                                  "latest")


class VersionOut(serializers.Serializer):
    number = serializers.IntegerField()
    system = serializers.CharField()
    user = serializers.CharField()
    note = serializers.CharField()
    author = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    content_hash = serializers.CharField(help_text="the first 12 hex digits of the text's sha256")
    variables = serializers.ListField(child=serializers.CharField(), help_text="the placeholders the text uses")


class PromptOut(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    latest_version = serializers.IntegerField(allow_null=True)
    versions = serializers.IntegerField(help_text="how many")
    updated_at = serializers.DateTimeField()


class PromptDetailOut(PromptOut):
    history = VersionOut(many=True, help_text="every version, newest first")


class SavedOut(serializers.Serializer):
    created = serializers.BooleanField(help_text="false when the text was the latest version's already")
    prompt = serializers.IntegerField()
    version = VersionOut()


def _row(row: selectors.PromptRow) -> dict[str, Any]:
    return {"id": row.pk, "project": row.project, "name": row.name, "description": row.description,
            "latest_version": row.latest, "versions": row.versions, "updated_at": row.updated_at.isoformat()}


def _prompt(request: Request, pk: int) -> Prompt:
    return get_object_or_404(Prompt.objects.visible_to(request.user).select_related("project"), pk=pk)


def _problems(exc: PromptError) -> ApiError:
    problems = [problem(message, field) for field, messages in exc.problems.items() for message in messages]
    if "based_on" in exc.problems:
        return ApiError(409, "conflict", exc.problems["based_on"][0], problems)
    return ApiError(400, "invalid", str(exc), problems)


def _record(saved: Saved, actor: Any, via: str) -> None:
    if saved.created:
        audit_record(project=saved.prompt.project, actor=actor, verb=AuditEvent.Verb.PROMPT_SAVED, obj=saved.prompt,
                     summary=f"saved prompt {saved.prompt.name} v{saved.version.number} through {via}",
                     data={"version": saved.version.number})


def _saved(saved: Saved) -> dict[str, Any]:
    version = selectors.prompt_version_get(project=saved.prompt.project, prompt_id=saved.prompt.pk,
                                           number=saved.version.number)
    assert version is not None
    return {"created": saved.created, "prompt": saved.prompt.pk, "version": version.as_dict()}


class PromptList(APIView):
    @extend_schema(operation_id="prompts_list", summary="The prompts of your projects", parameters=[PromptQuery],
                   responses={200: PromptOut(many=True), **error_responses(*READ_ERRORS)})
    def get(self, request: Request) -> Response:
        params = query(PromptQuery, request)
        prompts = Prompt.objects.filter(project__in=visible_projects(request))
        if params.get("project"):
            prompts = prompts.filter(project__slug=params["project"])
        return Response([_row(row) for row in selectors.prompt_rows(prompts)])

    @extend_schema(summary="Create a prompt with its first version",
                   description="The templates are checked: an unknown `{{variable}}` is a 400 saying where.",
                   request=PromptCreateSerializer, responses={201: SavedOut, **error_responses(*WRITE_ERRORS)})
    def post(self, request: Request) -> Response:
        form = PromptCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        v = form.validated_data
        project = project_named(request, v.get("project"))
        require_writer(request, project, "create prompts")
        try:
            saved = prompt_create(project=project, name=v["name"], system=v["system"], user=v["user"],
                                  description=v["description"], note=v["note"], actor=request.user)
        except PromptError as exc:
            raise _problems(exc) from None
        _record(saved, request.user, "the API")
        return Response(_saved(saved), status=status.HTTP_201_CREATED)


class PromptDetail(APIView):
    @extend_schema(summary="A prompt with every version's text",
                   responses={200: PromptDetailOut, **error_responses(*READ_ERRORS)})
    def get(self, request: Request, pk: int) -> Response:
        prompt = _prompt(request, pk)
        [row] = selectors.prompt_rows(Prompt.objects.filter(pk=prompt.pk))
        return Response({**_row(row), "history": [v.as_dict() for v in selectors.prompt_versions(prompt=prompt)]})


class PromptVersions(APIView):
    @extend_schema(summary="Save a new version of a prompt",
                   description="201 with the new version; 200 with `created: false` when the text is the latest "
                               "version's already; 409 when `based_on` is no longer the latest.",
                   request=PromptVersionSerializer,
                   responses={201: SavedOut, 200: SavedOut, **error_responses(*WRITE_ERRORS, 409)})
    def post(self, request: Request, pk: int) -> Response:
        prompt = _prompt(request, pk)
        require_writer(request, prompt.project, "change prompts")
        form = PromptVersionSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        v = form.validated_data
        try:
            saved = prompt_version_save(prompt=prompt, system=v["system"], user=v["user"], note=v["note"],
                                        based_on=v.get("based_on"), actor=request.user)
        except PromptError as exc:
            raise _problems(exc) from None
        _record(saved, request.user, "the API")
        return Response(_saved(saved), status=status.HTTP_201_CREATED if saved.created else status.HTTP_200_OK)


class PromptVersionDetail(APIView):
    @extend_schema(summary="One version of a prompt", responses={200: VersionOut, **error_responses(*READ_ERRORS)})
    def get(self, request: Request, pk: int, number: int) -> Response:
        prompt = _prompt(request, pk)
        version = selectors.prompt_version_get(project=prompt.project, prompt_id=prompt.pk, number=number)
        if version is None:
            raise ApiError(404, "not_found", f"no version {number} of this prompt")
        return Response(version.as_dict())


class PromptDiff(APIView):
    @extend_schema(summary="What changed between two versions of a prompt, line by line",
                   parameters=[OpenApiParameter("from", int, required=True),
                               OpenApiParameter("to", int, required=True)],
                   responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **error_responses(*READ_ERRORS)})
    def get(self, request: Request, pk: int) -> Response:
        prompt = _prompt(request, pk)
        numbers = []
        for name in ("from", "to"):
            value = request.query_params.get(name, "")
            if whole_number(value, maximum=999_999_999) is None:
                raise ApiError(400, "invalid", f"`{name}` must be a version number",
                               [problem("a version number", name)])
            numbers.append(int(value))
        diff = selectors.prompt_diff(prompt=prompt, before=numbers[0], after=numbers[1])
        if diff is None:
            raise ApiError(404, "not_found", "no such version of this prompt")
        lines = {part: [{"kind": line.kind, "text": line.text, "old": line.old, "new": line.new}
                        for line in getattr(diff, part)] for part in ("system", "user")}
        return Response({"from": diff.before.number, "to": diff.after.number, "changed": diff.changed, **lines})
