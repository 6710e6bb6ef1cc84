"""A second factor for local accounts: a TOTP authenticator (RFC 6238, django-otp's
TOTPDevice, 30-second steps, one step of drift either way) and ten single-use recovery
codes (django-otp's StaticDevice). A wrong code makes the next try of its kind wait 1, 2,
4, ... seconds (django-otp's throttling, per device: a wrong authenticator code does not
hold up a recovery code), and a refusal says how long. API tokens never ask for it: they are random secrets of
their own, and basic auth is refused to accounts with a second factor."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
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


@dataclass(frozen=True)
class CodeCheck:
    """What a second-factor code did: the method that accepted it ("TOTP", "recovery code"),
    or, when the code was not even checked because a wrong one of its kind came a moment
    ago, how many seconds to wait (the code itself may be right: it still works then)."""

    method: str | None = None
    kind: str = "code"  # "TOTP code" or "recovery code": which kind the code looked like
    wait_seconds: int = 0


def _is_totp(code: str) -> bool:
    # an authenticator's code; recovery codes are letters and digits
    return code.isascii() and code.isdigit() and len(code) <= 8


def _wait(device: Any) -> int:
    """Seconds until the device checks a code again after wrong ones (django-otp's throttle), 0 if it does now."""
    allowed, why = device.verify_is_allowed()
    if allowed:
        return 0
    until = (why or {}).get("locked_until")
    return max(1, math.ceil((until - timezone.now()).total_seconds())) if until else 1


def second_factor_verify(*, user: Any, code: str) -> CodeCheck:
    """Check a code against the device of its kind only: digits go to the authenticator,
    anything else to the recovery codes (a recovery code works once). Each kind has its own
    throttle, so a mistyped authenticator code does not hold up a recovery code."""
    code = code.strip().replace(" ", "").replace("-", "")
    if not code:
        return CodeCheck()
    if _is_totp(code):
        totp = totp_of(user)
        if totp is None:
            return CodeCheck(kind="TOTP code")
        wait = _wait(totp)
        if wait:
            return CodeCheck(kind="TOTP code", wait_seconds=wait)
        if not totp.verify_token(code):
            return CodeCheck(kind="TOTP code")
        # django-otp refuses a step at or before the device's last one, as read when the device
        # was loaded: two processes checking the same code at once would both pass. The step
        # is taken once in the database as well.
        taken = once_take(scope="totp", value=f"{totp.pk}:{totp.last_t}", seconds=TOTP_KEPT)
        return CodeCheck("TOTP" if taken else None, kind="TOTP code")
    devices = list(StaticDevice.objects.filter(user=user, confirmed=True))
    waits = [_wait(d) for d in devices]
    if devices and all(waits):
        return CodeCheck(kind="recovery code", wait_seconds=min(waits))
    for device, wait in zip(devices, waits, strict=True):
        if not wait and device.verify_token(code.lower()):  # deletes it; two requests could both have read it
            taken = once_take(scope="recovery-code", value=f"{device.pk}:{code.lower()}", seconds=RECOVERY_KEPT)
            return CodeCheck("recovery code" if taken else None, kind="recovery code")
    return CodeCheck(kind="recovery code")


def refusal(check: CodeCheck) -> str:
    """What a person is told when their code was refused."""
    if check.wait_seconds:
        return (f"Too many wrong {check.kind}s in a row: wait {check.wait_seconds} second"
                f"{'' if check.wait_seconds == 1 else 's'} and try again (this code was not checked).")
    if check.kind == "recovery code":
        return "That recovery code is not right (or was used already)."
    return "That code is not right (or was used already). Try the current one."


@transaction.atomic
def second_factor_disable(*, user: Any, actor: Any) -> None:
    TOTPDevice.objects.filter(user=user).delete()
    StaticDevice.objects.filter(user=user).delete()
    account_event(user=actor, verb=AuditEvent.Verb.TWOFACTOR_DISABLED,
                  summary=f"{actor.get_username()} turned off the second factor of {user.get_username()}")
