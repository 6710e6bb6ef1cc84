"""Token authentication for the API: `Authorization: Token <token>` (or `Bearer`). Tokens are
created, revoked and looked up in `evaluations.accounts.tokens`."""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from evaluations.accounts.tokens import KEYWORDS, user_for_token
from evaluations.models import ApiToken


class TokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Token <token>` or `Authorization: Bearer <token>`.

    Listed first in REST_FRAMEWORK, so its `authenticate_header` makes DRF answer an
    anonymous request 401 (with WWW-Authenticate) rather than 403.
    """

    def authenticate(self, request: Request) -> tuple[Any, ApiToken | None] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        parts = header.split()
        if not parts or parts[0].lower() not in KEYWORDS:
            return None  # another scheme (Basic) or none: let the next class try
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("malformed Authorization header: use `Token <token>`")
        user = user_for_token(parts[1])
        if user is None:
            raise exceptions.AuthenticationFailed("invalid or revoked token")
        return (user, None)

    def authenticate_header(self, request: Request) -> str:
        return 'Token realm="api"'


class BasicAuthentication(authentication.BasicAuthentication):
    """DRF's basic auth, authenticating against Django's request rather than DRF's wrapper:
    django-axes marks a lockout on the request it is given, and only Django's reaches the
    middleware that answers 429. So the failure that reaches the limit is a 429 here as it is
    on the login form (it was a 401 here: the mark stayed on the wrapper)."""

    def authenticate_credentials(self, userid: str, password: str, request: Any = None) -> tuple[Any, None]:
        from django.conf import settings

        from evaluations.accounts.twofactor import has_second_factor, second_factor_required

        if settings.EVALSITE_SSO_ONLY:
            raise exceptions.AuthenticationFailed("password sign-in is off on this server (single sign-on "
                                                  "only): use an API token")
        user, auth = super().authenticate_credentials(userid, password, getattr(request, "_request", request))
        # A password alone must not pass where the login form asks for a second factor.
        if has_second_factor(user) or second_factor_required(user):
            raise exceptions.AuthenticationFailed("this account signs in with a second factor: use an API token")
        return user, auth
