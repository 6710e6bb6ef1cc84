"""Read-only requests survive a dropped database connection: a GET or HEAD whose view fails
because the connection died under it (PostgreSQL restarted, a backend terminated, a proxy
timing out an idle connection) is answered by running the view once more on a new
connection, instead of a 500. Never for other methods: a POST may have done part of its
work before the connection died, and running it again could do it twice."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse

log = logging.getLogger(__name__)

SAFE_METHODS = frozenset({"GET", "HEAD"})


def _dropped() -> list[Any]:
    """The connections this request used that are dead now (none inside a transaction: a
    transaction cannot be carried over to a new connection)."""
    dead = []
    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        if conn.in_atomic_block:
            return []
        if not conn.is_usable():
            dead.append(conn)
    return dead


class ReconnectMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view: Callable[..., HttpResponse], args: Any, kwargs: Any) -> None:
        request._evalsite_view = (view, args, kwargs)  # type: ignore[attr-defined]

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if request.method not in SAFE_METHODS or not isinstance(exc, OperationalError | InterfaceError):
            return None
        called = getattr(request, "_evalsite_view", None)
        if called is None or getattr(request, "_evalsite_retried", False):
            return None  # once per request
        dead = _dropped()
        if not dead:
            return None  # a query that failed on a live connection fails again: not ours to hide
        request._evalsite_retried = True  # type: ignore[attr-defined]
        log.warning("%s %s: the database connection dropped (%s); answering from a new one",
                    request.method, request.path, str(exc).strip()[:200])
        for conn in dead:
            conn.close()  # the next query connects again
        view, args, kwargs = called
        response = view(request, *args, **kwargs)
        if callable(getattr(response, "render", None)) and not getattr(response, "is_rendered", True):
            response = response.render()  # Django renders it only on the first try's path
        return response
