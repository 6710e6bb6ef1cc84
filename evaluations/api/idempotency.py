"""`Idempotency-Key` on the API's creating requests (`POST /api/v1/runs/`, the eval-set upload
`POST /api/v1/evalsets/`, the results import `POST /api/v1/runs/import/`).

A client that got no answer (a dropped connection, a web worker killed mid-request) cannot
tell whether its request was done; sent again with the same key, it gets the first answer
instead of a second run. The record (`IdempotentRequest`, unique per user and key) is claimed
before the work and filled with the answer in the same transaction: a second request with the
key waits for the first to commit and then replays its answer; a request that failed or was cut
off leaves no record, so its retry does the work. Only successful answers (2xx) are kept, for
`EVALSITE_IDEMPOTENCY_SECONDS` (a day); the same key on another endpoint is refused (422).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder

from evaluations.api.errors import ApiError, problem
from evaluations.models import IdempotentRequest

HEADER = "HTTP_IDEMPOTENCY_KEY"
MAX_KEY = 255
REPLAYED = "Idempotent-Replayed"
KEY_PARAMETER = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
    description="any unique string (a UUID) per request you mean to make once: sent again with the same key "
                "within a day, the request is answered with its first answer (header `Idempotent-Replayed: true`) "
                "instead of being done twice")


def _key(request: Request) -> str | None:
    key = request.META.get(HEADER, "").strip()
    if not key:
        return None
    if len(key) > MAX_KEY or not key.isprintable():
        raise ApiError(400, "invalid", f"Idempotency-Key: at most {MAX_KEY} printable characters",
                       [problem("too long or not printable", "Idempotency-Key")])
    return key


def _replay(record: IdempotentRequest, request: Request) -> Response:
    if (record.method, record.path) != (request.method, request.path):
        raise ApiError(422, "idempotency_key_reused",
                       f"this Idempotency-Key was used for {record.method} {record.path}: use a new key per request",
                       [problem("used for another request", "Idempotency-Key")])
    response = Response(json.loads(record.body), status=record.status)
    response[REPLAYED] = "true"
    return response


def _live(user: Any, key: str) -> Any:
    since = timezone.now() - timedelta(seconds=settings.EVALSITE_IDEMPOTENCY_SECONDS)
    return IdempotentRequest.objects.filter(user=user, key=key, created_at__gte=since)


def idempotent(handler: Callable[..., Response]) -> Callable[..., Response]:
    """For a DRF view method `(self, request, ...)` that creates something."""

    @functools.wraps(handler)
    def wrapped(view: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = _key(request)
        if key is None or not request.user.is_authenticated:
            return handler(view, request, *args, **kwargs)
        found = _live(request.user, key).first()
        if found is not None:
            return _replay(found, request)
        with transaction.atomic():
            # An expired record of the key makes room; a live one committed meanwhile is replayed.
            IdempotentRequest.objects.filter(user=request.user, key=key).exclude(
                pk__in=_live(request.user, key).values("pk")).delete()
            try:
                with transaction.atomic():
                    record = IdempotentRequest.objects.create(user=request.user, key=key, method=request.method,
                                                              path=request.path[:255])
            except IntegrityError:  # the same key, committed by a request that ran at the same time
                found = _live(request.user, key).first()
                if found is None:
                    raise
                return _replay(found, request)
            response = handler(view, request, *args, **kwargs)
            if 200 <= response.status_code < 300:
                record.status = response.status_code
                record.body = json.dumps(response.data, cls=JSONEncoder)
                record.save(update_fields=["status", "body"])
            else:
                record.delete()
        return response

    return wrapped


def idempotency_sweep() -> int:
    """Forget the answers older than EVALSITE_IDEMPOTENCY_SECONDS; how many."""
    since = timezone.now() - timedelta(seconds=settings.EVALSITE_IDEMPOTENCY_SECONDS)
    return int(IdempotentRequest.objects.filter(created_at__lt=since).delete()[0])
