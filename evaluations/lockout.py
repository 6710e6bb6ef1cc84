"""Brute-force protection for passwords: django-axes on the login form and on HTTP basic
auth of the API (API tokens are random secrets and are not guessed).

After EVALSITE_LOGIN_FAILURE_LIMIT failed passwords for one username from one address,
that username is locked out from that address for EVALSITE_LOGIN_LOCKOUT_MINUTES, even with
the right password: the login page answers 429 with a page saying so, the API 429 in its
error shape. A username that does not exist is counted and locked the same way, so neither
the messages nor the lockout tell whether an account exists. An administrator lifts a
lockout early with `manage.py axes_reset_username USERNAME` (or `axes_reset` for all), or in
the admin under "Axes"; a successful login resets the count.
"""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.exceptions import AxesBackendPermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


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


def lockout_response(request: HttpRequest, original_response: HttpResponse | None = None,
                     credentials: Any = None, *args: Any, **kwargs: Any) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the same answer whether or not the username exists."""
    from django.conf import settings

    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    message = (f"too many failed logins: this username is locked out from your address for {minutes} minutes "
               "(an administrator can lift it earlier)")
    if request.path.startswith("/api/"):
        return JsonResponse({"code": "locked_out", "message": message,
                             "problems": [], "problem_count": 0}, status=429,
                            headers={"Retry-After": str(minutes * 60)})
    response = render(request, "registration/locked_out.html", {"minutes": minutes}, status=429)
    response["Retry-After"] = str(minutes * 60)
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
