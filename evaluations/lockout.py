"""Brute-force protection for passwords: django-axes on the login form and on HTTP basic
auth of the API (API tokens are random secrets and are not guessed).

After EVALSITE_LOGIN_FAILURE_LIMIT failed passwords for one username from one address,
that username is locked out from that address for EVALSITE_LOGIN_LOCKOUT_MINUTES from the
last failure that counted, even with the right password: the login page answers 429 with a
page saying so, the API 429 in its error shape, both from the failure that reaches the limit
on, with `Retry-After` the seconds left. Tries during the lockout do not extend it
(AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT is off), so the time left is what it says.
A username that does not exist is counted and locked the same way, so neither the messages
nor the lockout tell whether an account exists. An administrator lifts a lockout early with
`manage.py axes_reset_username USERNAME` (or `axes_reset` for all), or in the admin under
"Axes"; a successful login resets the count.
"""

from __future__ import annotations

import math
from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.exceptions import AxesBackendPermissionDenied
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from django.db.models import Max
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone


class LockoutBackend(AxesStandaloneBackend):
    """Axes' backend, first in AUTHENTICATION_BACKENDS.

    - A DRF request (basic auth) is unwrapped, so the lockout flag lands on the request the
      middleware sees and the API answers 429 rather than a bare 401.
    - A call without a request (`manage.py shell`, the test client's `login`) has no address
      to count against and is left to the other backends rather than refused.
    """

    def authenticate(self, request: Any, username: str | None = None, password: str | None = None,
                     **kwargs: Any) -> Any:
        if request is None:
            return None
        inner = getattr(request, "_request", request)
        try:
            return super().authenticate(inner, username, password, **kwargs)
        except AxesBackendPermissionDenied:
            inner.axes_locked_out = True  # for the middleware's 429, whichever view asked
            raise


def seconds_left(request: HttpRequest, credentials: Any = None) -> int:
    """How long this username stays locked out from this address: the cool-off counted from
    the last failure axes recorded for the pair (at least 1 second; the whole cool-off when
    there is no record, e.g. another handler than the database's)."""
    from django.conf import settings

    cool_off = settings.AXES_COOLOFF_TIME
    address = getattr(request, "axes_ip_address", None) or client_address(request)
    last = AccessAttempt.objects.filter(username=get_client_username(request, credentials),
                                        ip_address=address).aggregate(last=Max("attempt_time"))["last"]
    if last is None:
        return int(cool_off.total_seconds())
    return max(1, math.ceil((last + cool_off - timezone.now()).total_seconds()))


def lockout_response(request: HttpRequest, original_response: HttpResponse | None = None,
                     credentials: Any = None, *args: Any, **kwargs: Any) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the same answer whether or not the username exists."""
    seconds = seconds_left(request, credentials)
    minutes = math.ceil(seconds / 60)
    message = (f"too many failed logins: this username is locked out from your address for {minutes} more "
               f"minute{'s' if minutes != 1 else ''} (an administrator can lift it earlier)")
    if request.path.startswith("/api/"):
        return JsonResponse({"code": "locked_out", "message": message,
                             "problems": [], "problem_count": 0}, status=429,
                            headers={"Retry-After": str(seconds)})
    response = render(request, "registration/locked_out.html", {"minutes": minutes}, status=429)
    response["Retry-After"] = str(seconds)
    return response


def client_address(request: HttpRequest) -> str | None:
    """AXES_CLIENT_IP_CALLABLE: REMOTE_ADDR, or with EVALSITE_LOGIN_PROXY_COUNT = N the
    address the outermost of N trusted proxies saw (the Nth from the right of
    X-Forwarded-For; what a client writes further left is not trusted)."""
    from django.conf import settings

    count = int(getattr(settings, "EVALSITE_LOGIN_PROXY_COUNT", 0))
    forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()]
    if count and len(forwarded) >= count:
        return forwarded[-count]
    return request.META.get("REMOTE_ADDR")
