"""A second factor for local accounts: a TOTP authenticator (RFC 6238, django-otp's
TOTPDevice, 30-second steps, one step of drift either way) and ten single-use recovery
codes (django-otp's StaticDevice). A wrong code makes the next try wait 1, 2, 4, ...
seconds (django-otp's throttling). API tokens never ask for it: they are random secrets of
their own, and basic auth is refused to accounts with a second factor."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.db import transaction
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from evaluations.accounts.signins import account_event
from evaluations.models import AuditEvent
from evaluations.once import once_take

RECOVERY_CODES = 10
PENDING = "evalsite_2fa_pending"  # the session's key: who passed the first factor, and when
PENDING_SECONDS = 300
TOTP_KEPT = 5 * 60  # seconds a used step stays taken: past the step plus the drift accepted
RECOVERY_KEPT = 3600  # a used recovery code is deleted; its key only closes the race of two requests


def totp_of(user: Any) -> TOTPDevice | None:
    return TOTPDevice.objects.filter(user=user, confirmed=True).first()


def has_second_factor(user: Any) -> bool:
    return bool(getattr(user, "pk", None)) and TOTPDevice.objects.filter(user=user, confirmed=True).exists()


def second_factor_required(user: Any) -> bool:
    """Superusers must have one when EVALSITE_REQUIRE_2FA_SUPERUSERS is on."""
    return bool(settings.EVALSITE_REQUIRE_2FA_SUPERUSERS and getattr(user, "is_superuser", False))


def second_factor_due(user: Any) -> bool:
    """Whether signing in must pass a second factor, whatever the first was (a password, or the
    identity provider): the account has one, or a setting requires one of it."""
    return has_second_factor(user) or second_factor_required(user)


def pending_start(session: Any, *, user: Any, next_url: str, sso: dict[str, Any] | None = None) -> str:
    """Remember, for PENDING_SECONDS, who passed the first factor (and, after single sign-on,
    what the provider said that the sign-in still needs); the URL name of the second step."""
    session[PENDING] = {"user": user.pk, "at": time.time(), "next": next_url, "sso": sso}
    return "twofactor_verify" if has_second_factor(user) else "twofactor_setup"


def pending_of(session: Any) -> tuple[Any, str, dict[str, Any] | None] | None:
    """(user, where to go next, the single sign-on's data or None) while a sign-in waits for
    its second factor; None when none does or it waited too long."""
    from django.contrib.auth import get_user_model

    pending = session.get(PENDING)
    if not isinstance(pending, dict) or time.time() - float(pending.get("at", 0)) > PENDING_SECONDS:
        session.pop(PENDING, None)
        return None
    user = get_user_model().objects.filter(pk=int(pending.get("user") or 0), is_active=True).first()
    if user is None:
        return None
    sso = pending.get("sso")
    return user, str(pending.get("next") or "/"), sso if isinstance(sso, dict) else None


def totp_pending(user: Any) -> TOTPDevice:
    """The authenticator being set up: the unconfirmed device, made once (reloading the
    set-up page keeps its secret)."""
    device = TOTPDevice.objects.filter(user=user, confirmed=False).order_by("pk").first()
    return device or TOTPDevice.objects.create(user=user, name="authenticator", confirmed=False)


@transaction.atomic
def totp_confirm(*, user: Any, device: TOTPDevice, code: str) -> list[str] | None:
    """The first code from the authenticator: the device is confirmed and recovery codes
    made (returned, to show once). None when the code is wrong."""
    if not device.verify_token(code.strip().replace(" ", "")):
        return None
    device.confirmed = True
    device.save(update_fields=["confirmed"])
    TOTPDevice.objects.filter(user=user).exclude(pk=device.pk).delete()
    codes = recovery_codes_reset(user=user)
    account_event(user=user, verb=AuditEvent.Verb.TWOFACTOR_ENABLED,
                  summary=f"{user.get_username()} set up a TOTP authenticator and {len(codes)} recovery codes")
    return codes


@transaction.atomic
def recovery_codes_reset(*, user: Any) -> list[str]:
    StaticDevice.objects.filter(user=user).delete()
    device = StaticDevice.objects.create(user=user, name="recovery codes", confirmed=True)
    codes = [StaticToken.random_token() for _ in range(RECOVERY_CODES)]
    StaticToken.objects.bulk_create([StaticToken(device=device, token=c) for c in codes])
    return codes


def recovery_codes_left(user: Any) -> int:
    return StaticToken.objects.filter(device__user=user).count()


def second_factor_check(*, user: Any, code: str) -> str | None:
    """The method that accepted the code ("TOTP", "recovery code"), or None. A recovery
    code works once."""
    code = code.strip().replace(" ", "").replace("-", "")
    if not code:
        return None
    totp = totp_of(user)
    if totp is not None and code.isdigit() and totp.verify_token(code):
        # django-otp refuses a step at or before the device's last one, as read when the device
        # was loaded: two processes checking the same code at once would both pass. The step
        # is taken once in the database as well.
        return "TOTP" if once_take(scope="totp", value=f"{totp.pk}:{totp.last_t}", seconds=TOTP_KEPT) else None
    for device in StaticDevice.objects.filter(user=user, confirmed=True):
        if device.verify_token(code.lower()):  # deletes the code; two requests at once could both have read it
            return "recovery code" if once_take(scope="recovery-code", value=f"{device.pk}:{code.lower()}",
                                                seconds=RECOVERY_KEPT) else None
    return None


def throttled(user: Any) -> bool:
    """A wrong code was entered a moment ago: the next one is not even checked yet."""
    totp = totp_of(user)
    return totp is not None and not totp.verify_is_allowed()[0]


@transaction.atomic
def second_factor_disable(*, user: Any, actor: Any) -> None:
    TOTPDevice.objects.filter(user=user).delete()
    StaticDevice.objects.filter(user=user).delete()
    account_event(user=actor, verb=AuditEvent.Verb.TWOFACTOR_DISABLED,
                  summary=f"{actor.get_username()} turned off the second factor of {user.get_username()}")
