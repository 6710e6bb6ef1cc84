"""The site-wide sign-in log: every sign-in and failed try (method, success, the reason of
a failure), second factors set up or turned off, and the roles the identity provider
changed. Kept as audit events with no project; superusers read them on `/signins/`.

A sign-in, or a failed try naming an account, is also written into the activity feed of
each project that account belongs to (without the client's address); the provider's role
changes reach the feeds of the projects they change (evaluations/accounts/sso.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet
from django.http import HttpRequest

from evaluations.audit import audit_record
from evaluations.converters import parse_id
from evaluations.models import AuditEvent

SIGNIN_VERBS = [AuditEvent.Verb.SIGNIN_SUCCEEDED, AuditEvent.Verb.SIGNIN_FAILED,
                AuditEvent.Verb.TWOFACTOR_ENABLED, AuditEvent.Verb.TWOFACTOR_DISABLED,
                AuditEvent.Verb.SSO_ROLES_CHANGED, AuditEvent.Verb.SSO_LINKED]
PAGE_SIZE = 50
MAX_FEEDS = 200  # projects whose feeds get one sign-in


def _address(request: HttpRequest | None) -> str:
    from evaluations.lockout import client_address

    return (client_address(request) or "") if request is not None else ""


def signin_record(*, request: HttpRequest | None, user: Any, method: str, ok: bool, username: str = "",
                  reason: str = "", data: dict[str, Any] | None = None) -> AuditEvent:
    """One sign-in or failed try. `method`: "password", "password + TOTP", "password +
    recovery code", "sso", "api basic auth"; `reason` says why a try failed."""
    name = username or (user.get_username() if user is not None else "")
    if ok:
        summary = f"{name} signed in ({method})"
    else:
        summary = f"sign-in failed for {name or 'an unknown user'} ({method}): {reason}"
    verb = AuditEvent.Verb.SIGNIN_SUCCEEDED if ok else AuditEvent.Verb.SIGNIN_FAILED
    details = {"method": method, "username": name[:150], "reason": reason[:300], **(data or {})}
    event = audit_record(project=None, actor=user, verb=verb, summary=summary,
                         data={**details, "address": _address(request)})
    account = user if user is not None else _account_named(name)
    if account is not None:
        _to_project_feeds(account=account, actor=user, verb=verb, summary=summary, data=details)
    return event


def link_record(*, request: HttpRequest | None, user: Any, summary: str, data: dict[str, Any]) -> AuditEvent:
    """The provider's subject linked to an existing account by its verified e-mail: an event of
    its own in the sign-in log (with the address) and in the account's projects' feeds, before
    the sign-in it belongs to is logged."""
    details = {"method": "sso link by e-mail", "username": user.get_username()[:150], **data}
    event = audit_record(project=None, actor=user, verb=AuditEvent.Verb.SSO_LINKED, summary=summary,
                         data={**details, "address": _address(request)})
    _to_project_feeds(account=user, actor=user, verb=AuditEvent.Verb.SSO_LINKED, summary=summary, data=details)
    return event


def _account_named(name: str) -> Any:
    """The account a failed try named (its username, or the e-mail an SSO sign-in gave when
    one account has it); None for a name no account has."""
    if not name:
        return None
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    found = users.filter(username=name).first()
    if found is None and "@" in name:
        same = list(users.filter(email__iexact=name)[:2])
        found = same[0] if len(same) == 1 else None
    return found


def _to_project_feeds(*, account: Any, actor: Any, verb: str, summary: str, data: dict[str, Any]) -> None:
    """The sign-in in the activity feed of each project the account belongs to (one insert):
    its members see who signed in, how, and the tries that failed and why. The address stays
    in the site-wide log, which only superusers read."""
    from evaluations.models import Membership

    projects = list(Membership.objects.filter(user=account, project__archived_at__isnull=True)
                    .values_list("project_id", flat=True)[:MAX_FEEDS])
    if not projects:
        return
    actor = actor if actor is not None and getattr(actor, "is_authenticated", False) else None
    AuditEvent.objects.bulk_create([
        AuditEvent(project_id=pk, actor=actor, verb=verb, object_type="user", object_id=str(account.pk),
                   summary=summary[:500], data=data) for pk in projects])


def on_login_failed(sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None,
                    **kwargs: Any) -> None:
    """Django's user_login_failed: a wrong password (or a locked-out username) on the login
    form or the API's basic auth."""
    inner = getattr(request, "_request", request)
    reason = "locked out after too many failures" if getattr(inner, "axes_locked_out", False) \
        else "wrong username or password"
    method = "api basic auth" if inner is not None and inner.path.startswith("/api/") else "password"
    signin_record(request=inner, user=None, method=method, ok=False,
                  username=str(credentials.get("username") or "")[:150], reason=reason)


def account_event(*, user: Any, verb: str, summary: str, data: dict[str, Any] | None = None) -> AuditEvent:
    """A second factor set up or turned off, roles synced from the provider."""
    return audit_record(project=None, actor=user, verb=verb, summary=summary, data=data)


@dataclass(frozen=True)
class SigninRow:
    when: Any
    verb: str
    ok: bool
    summary: str
    method: str
    reason: str
    address: str


def signin_events(*, failures_only: bool = False) -> QuerySet[AuditEvent]:
    """The log's events, newest first: the page's and the API's."""
    events = AuditEvent.objects.filter(project=None, verb__in=SIGNIN_VERBS)
    if failures_only:
        events = events.filter(verb=AuditEvent.Verb.SIGNIN_FAILED)
    return events.order_by("-created_at", "-pk")


@dataclass(frozen=True)
class SigninPage:
    rows: list[SigninRow]
    older: int | None  # the cursor of the next page, None on the last
    first: bool


def signins_page(*, before: str | None, failures_only: bool = False) -> SigninPage:
    """One page of the log, newest first, by keyset: `before` is the id of the previous
    page's last event, so any page costs the same (one indexed range read, no COUNT and no
    OFFSET) however long the log grows."""
    events = signin_events(failures_only=failures_only)
    before_pk = parse_id(before)
    cursor = AuditEvent.objects.filter(project=None, pk=before_pk).values_list("created_at", "pk").first() \
        if before_pk is not None else None
    if cursor is not None:
        events = events.filter(Q(created_at__lt=cursor[0]) | Q(created_at=cursor[0], pk__lt=cursor[1]))
    found = list(events.only("pk", "created_at", "verb", "summary", "data")[:PAGE_SIZE + 1])
    rows = [SigninRow(when=e.created_at, verb=e.verb, ok=e.verb != AuditEvent.Verb.SIGNIN_FAILED,
                      summary=e.summary, method=str(e.data.get("method", "")),
                      reason=str(e.data.get("reason", "")), address=str(e.data.get("address", "")))
            for e in found[:PAGE_SIZE]]
    older = found[PAGE_SIZE - 1].pk if len(found) > PAGE_SIZE else None
    return SigninPage(rows=rows, older=older, first=cursor is None)
