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
