"""`POST /v1/traces`: the OTLP/HTTP trace receiver (binary protobuf or JSON, gzip or not).

Point an OpenTelemetry exporter at evalsite's base URL (it appends `/v1/traces`) with
`Authorization: Bearer <API token>`; a token of a user in several projects also sends
`X-Evalsite-Project: <slug>` (or `?project=<slug>`). The answer is an
`ExportTraceServiceResponse` in the request's encoding, with OTLP's partial success when
some spans were not taken (and why). What the statuses mean to an exporter (OTLP/HTTP):

- 200: stored (retrying changes nothing: spans are stored once per trace and span id);
- 400: the payload cannot be read, with why and where; nothing is stored (do not retry);
- 401 / 403: no valid token; not a member or admin of the project; a trace naming another
  project's run (nothing is stored);
- 413: over EVALSITE_OTLP_MAX_BODY_BYTES as sent, or EVALSITE_OTLP_MAX_DECOMPRESSED_BYTES
  inflated (read in bounded memory: a gzip bomb stops at the limit), or more spans in one
  request than EVALSITE_OTLP_SPANS_PER_MINUTE (it could never be taken: send smaller ones);
- 429 with Retry-After: these spans would take the token past EVALSITE_OTLP_SPANS_PER_MINUTE
  this minute (a refused request is not charged), or this process already has
  EVALSITE_OTLP_MAX_INFLIGHT requests in hand; the exporter retries after that many seconds.
- 503 with Retry-After: the spans could not be stored (the database is away or busy, its
  connection dropped): nothing of the batch is kept unless a retry stores it, and OTLP/HTTP
  exporters retry a 503. Once a batch is stored the answer is 200, whatever fails after
  the commit (queuing its monitors' scoring: the sweep scores it, `monitors/pending.py`).

Errors are a `google.rpc.Status` (protobuf, or its JSON for JSON requests), as OTLP asks.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, transaction
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from google.protobuf import json_format
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from evaluations.accounts.tokens import token_from_header, user_for_token
from evaluations.ingest.otlp import traces_store
from evaluations.ingest.runs import RunRefused
from evaluations.interop.otel.otlp import PayloadError, TooLarge, inflate, max_body, parse_request, rows_of
from evaluations.models import Membership, Project
from evaluations.monitors.queue import traces_arrived

log = logging.getLogger(__name__)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_WRITERS = (Membership.Role.MEMBER, Membership.Role.ADMIN)

# gRPC status codes, for google.rpc.Status.
_INVALID_ARGUMENT, _PERMISSION_DENIED, _UNAUTHENTICATED, _RESOURCE_EXHAUSTED, _UNAVAILABLE = 3, 7, 16, 8, 14
RETRY_AFTER_SECONDS = 2  # after a batch that could not be stored

_inflight_lock = threading.Lock()
_inflight = 0


def _json_request(request: HttpRequest) -> bool:
    return request.META.get("CONTENT_TYPE", "").split(";")[0].strip().lower() == JSON


def _status(request: HttpRequest, http: int, code: int, message: str, retry_after: int | None = None) -> HttpResponse:
    status = Status(code=code, message=message)
    if _json_request(request):
        response = HttpResponse(json_format.MessageToJson(status, indent=None), status=http, content_type=JSON)
    else:
        response = HttpResponse(status.SerializeToString(), status=http, content_type=PROTOBUF)
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    if http == 401:
        response["WWW-Authenticate"] = 'Token realm="otlp"'  # Token or Bearer, as the API
    return response


def _project(user: Any, slug: str) -> Project | str:
    """The project the spans go to (one the user may write to), or why there is none."""
    live = Project.objects.filter(archived_at__isnull=True)  # an archived project takes nothing
    writable = live if user.is_superuser else live.filter(memberships__user=user, memberships__role__in=_WRITERS)
    if slug:
        project = writable.filter(slug=slug).first()
        return project if project is not None else f"no project {slug!r} that you may send traces to"
    projects = list(writable[:2])
    if len(projects) != 1:
        return "say which project: send the header X-Evalsite-Project: <slug> (you may write to several, or none)"
    return projects[0]


def _close_if_broken() -> None:
    """A connection that died under the request is closed, so the next one starts on a new one."""
    from django.db import connection

    if connection.connection is not None and not connection.in_atomic_block and not connection.is_usable():
        connection.close()


def _rate_key(token_pk: int, now: float) -> str:
    return f"otlp-rate:{token_pk}:{int(now // 60)}"


def _incr(key: str, spans: int) -> int:
    """The window's count after adding `spans`. A window not in the cache starts at 0; a
    cache that is away (evaluations/cache.py makes every read a miss) starts the count again
    on each request, as the cache's contract says, instead of failing the request."""
    try:
        return int(cache.incr(key, spans))
    except ValueError:  # a new window, or the cache is away
        cache.add(key, 0, timeout=120)
        try:
            return int(cache.incr(key, spans))
        except ValueError:  # away: nothing to count with
            return spans


def _refund(key: str, spans: int) -> None:
    """Give back spans charged to a request that was then refused: a refused request costs
    the token nothing."""
    if not spans:
        return
    with contextlib.suppress(ValueError):  # the window ended (or the cache is away): nothing to give back
        cache.decr(key, spans)


def _over_rate(token_pk: int, spans: int) -> tuple[int | None, str]:
    """Charge these spans to the token's per-minute budget (a fixed one-minute window in the
    cache): (None, key) when they fit, else (seconds until the next window, key) with
    nothing charged."""
    limit = settings.EVALSITE_OTLP_SPANS_PER_MINUTE
    now = time.time()
    key = _rate_key(token_pk, now)
    if not limit:
        return None, key
    if _incr(key, spans) > limit:
        _refund(key, spans)
        return max(1, math.ceil((int(now // 60) + 1) * 60 - now)), key
    return None, key


@csrf_exempt
def otlp_traces(request: HttpRequest) -> HttpResponse:
    try:
        return _otlp_traces(request)
    except DatabaseError as exc:  # reading the token or the project: nothing was stored
        log.warning("OTLP ingest: the database is unavailable (%s: %s)", type(exc).__name__, exc)
        _close_if_broken()
        return _status(request, 503, _UNAVAILABLE, "the database is unavailable: retry shortly",
                       retry_after=RETRY_AFTER_SECONDS)


def _otlp_traces(request: HttpRequest) -> HttpResponse:
    global _inflight
    if request.method != "POST":
        response = _status(request, 405, _INVALID_ARGUMENT, "POST OTLP trace data here")
        response["Allow"] = "POST"
        return response
    secret = token_from_header(request.META.get("HTTP_AUTHORIZATION", ""))
    user = user_for_token(secret) if secret else None
    if user is None:
        return _status(request, 401, _UNAUTHENTICATED, "send an API token: Authorization: Bearer <token>")
    slug = request.META.get("HTTP_X_EVALSITE_PROJECT", "") or request.GET.get("project", "")
    project = _project(user, slug.strip())
    if isinstance(project, str):
        return _status(request, 403, _PERMISSION_DENIED, project)
    wait, _ = _over_rate(user.token_pk, 0)
    if wait is not None:  # already over: refuse before reading the body
        return _status(request, 429, _RESOURCE_EXHAUSTED, "this token sent too many spans this minute",
                       retry_after=wait)
    with _inflight_lock:
        if _inflight >= settings.EVALSITE_OTLP_MAX_INFLIGHT:
            busy = True
        else:
            busy = False
            _inflight += 1
    if busy:
        return _status(request, 429, _RESOURCE_EXHAUSTED, "the receiver is busy: retry shortly", retry_after=1)
    try:
        return _receive(request, project, user.token_pk)
    finally:
        with _inflight_lock:
            _inflight -= 1


def _receive(request: HttpRequest, project: Project, token_pk: int) -> HttpResponse:
    limit = max_body()
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    too_big = f"the body is over {limit} bytes (EVALSITE_OTLP_MAX_BODY_BYTES)"
    if length > limit:
        return _status(request, 413, _INVALID_ARGUMENT, too_big)
    body = request.read(limit + 1)  # never more than the limit in memory, whatever it claims
    if len(body) > limit:
        return _status(request, 413, _INVALID_ARGUMENT, too_big)
    if not body:  # an empty export (some clients send no Content-Type with it): nothing to store
        return HttpResponse(ExportTraceServiceResponse().SerializeToString(), content_type=PROTOBUF)
    try:
        data = inflate(body, request.META.get("HTTP_CONTENT_ENCODING", ""))
        del body
        message = parse_request(data, request.META.get("CONTENT_TYPE", ""))
        del data
    except TooLarge as exc:
        return _status(request, 413, _INVALID_ARGUMENT, str(exc))
    except PayloadError as exc:
        return _status(request, 400, _INVALID_ARGUMENT, str(exc))
    # The rate before the spans are read into rows (the costly step: seconds at a million
    # spans), from the count the decoded message already has.
    spans = sum(len(scope.spans) for resource in message.resource_spans for scope in resource.scope_spans)
    limit = settings.EVALSITE_OTLP_SPANS_PER_MINUTE
    if limit and spans > limit:  # can never fit in a minute: retrying would not help (413, not 429)
        return _status(request, 413, _INVALID_ARGUMENT,
                       f"{spans} spans in one request: more than this token may send in a minute ({limit}, "
                       "EVALSITE_OTLP_SPANS_PER_MINUTE); send them in smaller batches")
    wait, key = _over_rate(token_pk, spans)
    if wait is not None:
        return _status(
            request,
            429,
            _RESOURCE_EXHAUSTED,
            f"this token sent more than {limit} spans this minute (EVALSITE_OTLP_SPANS_PER_MINUTE)",
            retry_after=wait,
        )
    try:
        batch = rows_of(message)
        with transaction.atomic():  # the traces and their pending monitor scoring commit together
            stored = traces_store(project=project, batch=batch)
            traces_arrived(project.pk, list(stored.trace_pks.values()))  # the monitors score them on the queue
    except PayloadError as exc:
        _refund(key, spans)
        return _status(request, 400, _INVALID_ARGUMENT, str(exc))
    except RunRefused as exc:
        _refund(key, spans)
        return _status(request, 403, _PERMISSION_DENIED, str(exc))
    except DatabaseError as exc:  # away, dropped, or SQLite's "database is locked": ask to come back
        _refund(key, spans)
        log.warning("OTLP ingest: could not store the batch (%s: %s)", type(exc).__name__, exc)
        _close_if_broken()
        return _status(request, 503, _UNAVAILABLE, "the spans could not be stored now: retry shortly",
                       retry_after=RETRY_AFTER_SECONDS)
    answer = ExportTraceServiceResponse()
    if stored.rejected_spans or stored.messages:
        answer.partial_success.rejected_spans = stored.rejected_spans
        answer.partial_success.error_message = "; ".join(stored.messages)[:4000]
    if _json_request(request):
        return HttpResponse(json_format.MessageToJson(answer, indent=None), content_type=JSON)
    return HttpResponse(answer.SerializeToString(), content_type=PROTOBUF)
