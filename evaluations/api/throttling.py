"""Optional rate limit for the API: off unless EVALSITE_API_RATE is set (e.g. "600/minute").

The rate is read when a request comes in (not at import), so a changed setting takes effect
without a restart of the class machinery, and tests can set it.
"""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle


class ApiRateThrottle(SimpleRateThrottle):
    """Per user (per client address for anonymous requests)."""

    scope = "api"

    def get_rate(self) -> str | None:
        rate: str | None = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
        return rate

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        ident = str(request.user.pk) if request.user and request.user.is_authenticated else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}
