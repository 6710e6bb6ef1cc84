"""API tokens: created and revoked from the profile page, the API or `manage.py tokens`, stored as
SHA-256 digests.

A token is `es_` + 43 random URL-safe characters. It is shown once, when created; the
database keeps only its digest (a lookup key, so a plain hash is enough: the token has 256
bits of entropy and needs no salt or slow hash) and its first characters as a prefix.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.http import HttpRequest
from django.utils import timezone

from evaluations.audit import audit_record
from evaluations.models import ApiToken, AuditEvent

TOKEN_PREFIX = "es_"


PREFIX_LENGTH = 10  # "es_" + 7 characters: enough to tell a user's tokens apart


KEYWORDS = ("token", "bearer")


# last_used_at is written at most this often per token, so a busy script costs no write per call.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class NewToken:
    token: ApiToken
    secret: str  # the only time the whole token exists outside the client


@transaction.atomic
def token_create(*, user: Any, name: str, via: str = "") -> NewToken:
    """A new token of `user`; `via` says where it was made when not by them on a page or the
    API (`manage.py tokens`)."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, prefix=secret[:PREFIX_LENGTH], digest=token_digest(secret))
    audit_record(project=None, actor=user, verb=AuditEvent.Verb.TOKEN_CREATED, obj=token,
                 summary=f"{user.get_username()} created API token {name!r} ({token.prefix}…)"
                         + (f" with {via}" if via else ""), data={"via": via} if via else None)
    return NewToken(token=token, secret=secret)


@transaction.atomic
def token_revoke(*, token: ApiToken, user: Any) -> bool:
    """False when the token was already revoked (revoking twice records nothing)."""
    revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    if revoked:
        audit_record(project=None, actor=user, verb=AuditEvent.Verb.TOKEN_REVOKED, obj=token,
                     summary=f"{user.get_username()} revoked API token {token.name!r} ({token.prefix}…)")
    return bool(revoked)


def user_for_token(secret: str) -> Any | None:
    """The active user a live token belongs to, else None. Touches last_used_at.

    Every API request asks this, so it is one hand-written statement (compiling the ORM's
    join cost more than running it), which also says whether last_used_at is due."""
    user_model = get_user_model()
    now = timezone.now()
    users: list[Any] = list(user_model.objects.raw(  # only the user table's quoted name is formatted in
        f"SELECT u.*, t.id AS token_pk, CASE WHEN t.last_used_at IS NULL OR t.last_used_at <= %s THEN 1 ELSE 0 END"  # noqa: S608
        f" AS token_due FROM evaluations_apitoken t"
        f" JOIN {connection.ops.quote_name(user_model._meta.db_table)} u ON u.id = t.user_id"
        f" WHERE t.digest = %s AND t.revoked_at IS NULL",
        [connection.ops.adapt_datetimefield_value(now - LAST_USED_RESOLUTION), token_digest(secret)]))
    if not users or not users[0].is_active:
        return None
    user = users[0]
    if user.token_due:
        ApiToken.objects.filter(pk=user.token_pk).update(last_used_at=now)
    return user


def token_from_header(header: str) -> str | None:
    """The token in `Token <t>` or `Bearer <t>`; None when the header is another scheme."""
    parts = header.split()
    if len(parts) != 2 or parts[0].lower() not in KEYWORDS:
        return None
    return parts[1]


def user_from_request_token(request: HttpRequest) -> Any | None:
    """For plain Django views that also accept a token (the demo agent)."""
    secret = token_from_header(request.META.get("HTTP_AUTHORIZATION", ""))
    return user_for_token(secret) if secret else None
