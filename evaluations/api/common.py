"""What every API module shares: reading query strings through serializers, access checks
(the pages' rules: viewers read, members and admins write, admins manage; another
project's objects are 404), and the OpenAPI bits those need."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter
from rest_framework import renderers, serializers
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.fields import empty
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.api.errors import error_responses
from evaluations.models import Membership, Project, Run

WRITERS = {Membership.Role.MEMBER, Membership.Role.ADMIN}


def query(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    """The query string validated by `serializer_class` (400 in the error shape otherwise).
    Multiple-choice fields take repeated or comma-separated values."""
    params = request.query_params
    if not params and not any(f.default is not empty for f in serializer_class._declared_fields.values()):
        return {}  # nothing to validate, no defaults to fill in (a poll of a list, most often)
    data: dict[str, Any] = {}
    fields = serializer_class().fields
    for name, field in fields.items():
        if name not in params:
            continue
        if isinstance(field, serializers.MultipleChoiceField | serializers.ListField):
            data[name] = [v.strip() for raw in params.getlist(name) for v in raw.split(",") if v.strip()]
        else:
            data[name] = params.get(name)
    form = serializer_class(data=data)
    form.is_valid(raise_exception=True)
    return dict(form.validated_data)


def visible_projects(request: Request) -> QuerySet[Project]:
    return Project.objects.visible_to(request.user)


def project_named(request: Request, slug: str | None, *, read: bool = False) -> Project:
    """The project a request names by slug, or the caller's only project when it names none.
    Naming none with several (or no) projects is a 400 for a write and, with `read` (a list
    read by query parameters), a 404 saying which parameter to add."""
    visible = visible_projects(request)
    if slug:
        project = visible.filter(slug=slug).first()
        if project is None:
            raise NotFound(f"no project {slug!r} that you belong to")
        return project
    projects = list(visible[:2])
    if len(projects) != 1:
        if read:
            raise NotFound("say which project: ?project=<slug> (you belong to several, or none)")
        raise ValidationError({"project": ["say which project (you belong to several, or none)"]})
    return projects[0]


def visible_runs(request: Request) -> QuerySet[Run]:
    return Run.objects.filter(project__in=visible_projects(request))


def require_writer(request: Request, project: Project, what: str = "change this") -> str:
    role = project.role_of(request.user)
    if role not in WRITERS:
        raise PermissionDenied(f"only members and admins of the project may {what}")
    return str(role)


def require_admin(request: Request, project: Project, what: str) -> None:
    if project.role_of(request.user) != Membership.Role.ADMIN:
        raise PermissionDenied(f"only project admins {what}")


# --- OpenAPI ----------------------------------------------------------------------------------


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "evaluations.api.auth.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Token <token>` (or `Bearer <token>`): create a token on your account page "
                               "or with POST /api/v1/tokens/ from a logged-in session."}


class BasicAuthenticationScheme(OpenApiAuthenticationExtension):
    """The schema's name for evalsite's basic auth (DRF's, with django-axes's lockout)."""

    target_class = "evaluations.api.auth.BasicAuthentication"
    name = "basicAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "http", "scheme": "basic",
                "description": "A user's name and password; locked out after repeated failures (429)."}


def responses(ok: Any, *errors: int, status: int = 200) -> dict[int, Any]:
    return {status: ok, **error_responses(*errors)}


def paged(child: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """The paged list shape (`count`, `next`, `previous`, `results`) for views that page by hand."""
    name = child.__name__.removesuffix("Serializer")
    return type(f"Paginated{name}ListSerializer", (serializers.Serializer,), {
        "count": serializers.IntegerField(),
        "next": serializers.URLField(allow_null=True),
        "previous": serializers.URLField(allow_null=True),
        "results": child(many=True),
    })


PAGE_PARAMETERS = [
    OpenApiParameter("limit", int, description="items per page (default 50, at most 1000)"),
    OpenApiParameter("offset", int, description="items to skip"),
]


class CsvRenderer(renderers.BaseRenderer):
    """Lets a download be asked for by its type (`Accept: text/csv`) instead of a 406: the
    view streams the body itself, and DownloadView renders errors as JSON."""

    media_type = "text/csv"
    format = "csv"

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: dict[str, Any] | None = None) -> bytes:
        return renderers.JSONRenderer().render(data, accepted_media_type, renderer_context)


class BinaryRenderer(CsvRenderer):
    media_type = "application/octet-stream"
    format = "bin"


def download_renderers(renderer: type[renderers.BaseRenderer] | None = None) -> list[type[renderers.BaseRenderer]]:
    """JSON first, so an error answers in JSON whatever the client accepts (*/*)."""
    return [renderers.JSONRenderer, *([renderer] if renderer else [])]


class DownloadView(APIView):
    """A view whose success is a file (streamed by the view itself) and whose errors are
    JSON in the error shape, even when the client asked for the file's type."""

    renderer_classes = download_renderers()

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(response, Response) and response.status_code >= 400:
            request.accepted_renderer = renderers.JSONRenderer()
            request.accepted_media_type = "application/json"
        return super().finalize_response(request, response, *args, **kwargs)


def streamed(chunks: Any, content_type: str, filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(chunks, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response

