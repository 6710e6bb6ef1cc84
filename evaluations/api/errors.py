"""One error shape for the whole API: `{"code", "message", "problems": [...], "problem_count"}`.

Every API error has it: validation errors (400), authentication (401), permissions (403),
unknown objects and unknown URLs under /api/ (404), methods (405), content types (415),
bodies too large (413), throttling (429) and unhandled exceptions (500, logged). A problem
says what is wrong and where: a field path for request bodies and query strings, or a file,
case, line and column for uploads.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response

from evaluations.interop import EvalSetImportError

log = logging.getLogger("evalsite.api")
SAFE_METHODS = frozenset({"GET", "HEAD"})


class ProblemSerializer(serializers.Serializer):
    """One problem: what is wrong and where (a field path, or a file/case/line for uploads)."""

    message = serializers.CharField()
    path = serializers.CharField(allow_null=True, allow_blank=True,
                                 help_text="the field (dotted for nested fields), or the JSON path in a file")
    file = serializers.CharField(allow_null=True, help_text="the uploaded file it is in")
    case = serializers.CharField(allow_null=True, help_text="the eval case (eval_id) it is in")
    line = serializers.IntegerField(allow_null=True)
    column = serializers.IntegerField(allow_null=True)


class ErrorSerializer(serializers.Serializer):
    """The body of every API error (4xx and 5xx)."""

    code = serializers.CharField(help_text="machine-readable error code, e.g. `not_found`, `invalid`, `too_large`")
    message = serializers.CharField(help_text="one-line human-readable summary")
    problems = ProblemSerializer(many=True, help_text="what is wrong and where; empty when the message says it all")
    problem_count = serializers.IntegerField(min_value=0, help_text="all problems found (`problems` may be cut short)")


ERROR_DESCRIPTIONS = {
    400: "Invalid request: `problems` says what is wrong and where.",
    401: "Not authenticated: send `Authorization: Token <token>`.",
    403: "Authenticated, but not allowed: your role in the project does not permit this (or a "
         "session request without its CSRF token).",
    404: "No such object, or it belongs to a project you are not a member of.",
    405: "Method not allowed.",
    409: "Conflict: the object changed since the request was prepared (e.g. an eval set has a newer version "
         "than `base_version`): read it again and retry.",
    413: "The body or an uploaded file is larger than the upload limit (EVALSITE_MAX_UPLOAD_MB).",
    415: "Unsupported content type.",
    429: "Too many requests: wait `Retry-After` seconds.",
}


def error_responses(*codes: int) -> dict[Any, OpenApiResponse]:
    """`extend_schema(responses=...)` entries for these error statuses, all in the one shape
    (always JSON, whatever the endpoint's own content type)."""
    return {(code, "application/json"): OpenApiResponse(ErrorSerializer, description=ERROR_DESCRIPTIONS[code])
            for code in codes}


# What endpoints can answer: every one needs a user (401), may meet an unknown id (404), a
# bad query parameter (400), a role that does not allow it (403) and the optional rate
# limit (429); writes also take bodies (413, 415).
READ_ERRORS = (400, 401, 403, 404, 429)
WRITE_ERRORS = (400, 401, 403, 404, 413, 415, 429)


class ApiError(exceptions.APIException):
    """An API error with its own code and problems, e.g. `ApiError(413, "too_large", "...")`."""

    def __init__(self, status_code: int, code: str, message: str,
                 problems: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.code = code
        self.message = message
        self.problems = problems or []


def problem(message: str, path: str | None = None) -> dict[str, Any]:
    return {"message": message, "path": path, "file": None, "case": None, "line": None, "column": None}


def _flatten(detail: Any, path: str = "") -> Iterator[dict[str, Any]]:
    """DRF's nested error detail as problems with dotted paths (`outputs.0.turns`)."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = "" if key == "non_field_errors" else str(key)
            yield from _flatten(value, f"{path}.{name}" if path and name else path or name)
    elif isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            for item in detail:
                yield problem(str(item), path or None)
        else:
            for index, item in enumerate(detail):
                if item:  # a list of per-item errors has {} for the items that were fine
                    yield from _flatten(item, f"{path}.{index}" if path else str(index))
    else:
        yield problem(str(detail), path or None)


def body(code: str, message: str, problems: list[dict[str, Any]] | None = None,
         total: int | None = None) -> dict[str, Any]:
    problems = problems or []
    return {"code": code, "message": message, "problems": problems,
            "problem_count": total if total is not None else len(problems)}


def set_rollback() -> None:
    # Imported here: rest_framework.views builds APIView from the settings, whose parsers
    # import this module.
    from rest_framework.views import set_rollback as drf_set_rollback

    drf_set_rollback()


def _code_of(exc: exceptions.APIException) -> str:
    codes = exc.get_codes()
    if isinstance(codes, str):
        return codes
    return "invalid" if isinstance(exc, exceptions.ValidationError) else str(exc.default_code)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, EvalSetImportError):
        set_rollback()
        return Response(exc.as_dict(), status=413 if exc.code == "too_large" else 400)
    if isinstance(exc, ApiError):
        set_rollback()
        return Response(body(exc.code, exc.message, exc.problems), status=exc.status_code)
    if isinstance(exc, RequestDataTooBig):
        set_rollback()
        return Response(body("too_large", str(exc)), status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, SuspiciousOperation):  # too many fields or files, a bad multipart boundary...
        set_rollback()
        return Response(body("bad_request", str(exc) or "bad request"), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, Http404 | DjangoPermissionDenied | exceptions.APIException):
        from rest_framework.views import exception_handler as drf_exception_handler

        response = drf_exception_handler(exc, context)
        assert response is not None  # DRF handles these three
        detail = response.data
        api_exc = exc if isinstance(exc, exceptions.APIException) else (
            exceptions.NotFound() if isinstance(exc, Http404) else exceptions.PermissionDenied())
        code = _code_of(api_exc)
        if isinstance(detail, dict) and set(detail) == {"detail"}:
            response.data = body(code, str(detail["detail"]))
        else:
            problems = list(_flatten(detail))
            message = problems[0]["message"] if len(problems) == 1 else f"{len(problems)} problems in the request"
            if problems and problems[0]["path"] and len(problems) == 1:
                message = f"{problems[0]['path']}: {message}"
            response.data = body(code, message, problems)
        return response
    request = context.get("request")
    if (isinstance(exc, OperationalError | InterfaceError) and request is not None
            and request.method in SAFE_METHODS and not getattr(request, "_evalsite_retried", False)):
        # A read whose database connection may have dropped: raised on, so the reconnect
        # middleware (evaluations/web/reconnect.py) answers it from a new connection, as it
        # does the pages; if the connection is alive, Django's handler answers 500 (handler500).
        return None
    # Anything else is a bug: log it with the traceback and answer in the same shape.
    view = context.get("view")
    log.exception("unhandled error in API view %s", type(view).__name__ if view is not None else "?")
    set_rollback()
    return Response(body("server_error", "internal server error: the error has been logged"),
                    status=status.HTTP_500_INTERNAL_SERVER_ERROR)


# --- Outside DRF views: unknown URLs under /api/, and Django's own error handlers --------------


def is_api_path(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


@csrf_exempt  # a POST to an unknown URL is a 404, not the CSRF page
def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Any URL under /api/ that no endpoint matches: JSON, never the HTML 404 page."""
    hint = [] if request.path.endswith("/") else [problem("API paths end with a slash", "path")]
    return JsonResponse(body("not_found", f"no API endpoint at {request.path}", hint), status=404)


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_path(request):
        return api_not_found(request)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception or Http404())


def handler500(request: HttpRequest) -> HttpResponse:
    if is_api_path(request):
        return JsonResponse(body("server_error", "internal server error: the error has been logged"), status=500)
    from django.views.defaults import server_error

    return server_error(request)


def handler400(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_path(request):
        if isinstance(exception, RequestDataTooBig):
            return JsonResponse(body("too_large", str(exception)), status=413)
        return JsonResponse(body("bad_request", str(exception or "") or "bad request"), status=400)
    from django.views.defaults import bad_request

    return bad_request(request, exception or SuspiciousOperation())


def handler403(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_path(request):
        return JsonResponse(body("permission_denied", str(exception or "") or "forbidden"), status=403)
    from django.views.defaults import permission_denied

    return permission_denied(request, exception or DjangoPermissionDenied())


# --- NUL characters in query strings --------------------------------------------------------


class NulMiddleware:
    """A query string with a NUL character in a name or a value (`%00`) is a 400 before any
    view reads it, on every page and endpoint alike; the API answers in its error shape, naming
    the parameter. PostgreSQL keeps no NUL in text, so a filter or a search holding one reached
    a query there and failed (a 500), while SQLite read it. Forms and JSON bodies are their
    fields' to refuse, with the field's own message (a name: "no control characters")."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "%00" in request.META.get("QUERY_STRING", ""):
            name = next((key for key, values in request.GET.lists()
                         if "\x00" in key or any("\x00" in value for value in values)), None)
            if name is not None:
                shown = name.replace("\x00", "%00")
                message = f"the query string's {shown!r} holds a NUL character (%00)"
                if is_api_path(request):
                    return JsonResponse(body("invalid", message, [problem("a NUL character (%00)", shown)]),
                                        status=400)
                return HttpResponse(f"Bad request: {message}.\n", status=400, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
