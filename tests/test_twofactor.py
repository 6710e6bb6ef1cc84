"""A second factor for local accounts: TOTP (codes computed here by RFC 6238 from the secret
the set-up page shows, not by django-otp) and single-use recovery codes; required for
superusers by a setting; API tokens unaffected, basic auth refused; the lockout still on
the password form; every sign-in and failure in the superusers' sign-in log."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import struct
import time
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from evaluations.accounts.tokens import token_create
from evaluations.models import AuditEvent

pytestmark = pytest.mark.django_db


def totp(secret: str, at: float | None = None) -> str:
    """RFC 6238: HMAC-SHA1 over the 30-second step count, dynamically truncated to 6 digits."""
    key = base64.b32decode(secret.replace(" ", "") + "=" * (-len(secret.replace(" ", "")) % 8))
    digest = hmac.new(key, struct.pack(">Q", int((at or time.time()) // 30)), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    return f"{(struct.unpack('>I', digest[offset:offset + 4])[0] & 0x7FFFFFFF) % 1_000_000:06d}"


def _wait_out_throttle(user: Any, limit: float = 10.0) -> None:
    """Until django-otp lets the user's devices verify again after a wrong code (its delay
    doubles with each failure in a row), rather than a fixed sleep a loaded machine outruns."""
    from django_otp import devices_for_user

    deadline = time.monotonic() + limit
    while not all(d.verify_is_allowed()[0] for d in devices_for_user(user, confirmed=None)):
        assert time.monotonic() < deadline, "still throttled"
        time.sleep(0.1)


def _unspent_code(user: Any, secret: str) -> str:
    """A code the device takes: the current 30-second step's, or the next one when the current
    step's code is the one already spent (a code works once). Never two steps ahead: a set-up
    that straddled a step boundary leaves the device's drift at -1."""
    from django_otp.plugins.otp_totp.models import TOTPDevice

    spent = TOTPDevice.objects.get(user=user, confirmed=True).last_t
    return totp(secret, at=max(int(time.time() // 30), spent + 1) * 30)


def _login(client: Client, username: str = "alice", password: str = "alice-pass-123") -> Any:
    return client.post(reverse("login"), {"username": username, "password": password})


def _secret(page: Any) -> str:
    found = re.search(r'data-testid="totp-secret">([A-Z2-7 ]+)<', page.content.decode())
    assert found is not None
    return found.group(1)


def _enrol(client: Client) -> tuple[str, list[str]]:
    secret = _secret(client.get(reverse("twofactor_setup")))
    done = client.post(reverse("twofactor_setup"), {"code": totp(secret)})
    assert done.status_code == 200 and done["Cache-Control"] == "no-store"
    codes = re.findall(r"<li>([a-z0-9]+)</li>", done.content.decode())
    assert len(codes) == 10
    return secret, codes


def test_the_rfc_6238_oracle_gives_the_rfcs_own_test_vector() -> None:
    secret = base64.b32encode(b"12345678901234567890").decode()
    assert totp(secret, at=59) == "287082" and totp(secret, at=1111111109) == "081804"


def test_set_up_then_signing_in_needs_the_code(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    wrong = client.post(reverse("twofactor_setup"), {"code": "000000"})
    assert wrong.status_code == 400 and b"not right" in wrong.content
    _wait_out_throttle(alice)
    secret, _ = _enrol(client)
    assert b"on</span>" in client.get(reverse("twofactor")).content
    fresh = Client()
    step = _login(fresh)
    assert step.status_code == 302 and step["Location"] == reverse("twofactor_verify")
    assert fresh.get(reverse("account")).status_code == 302  # the password alone is not a session
    assert fresh.post(reverse("twofactor_verify"), {"code": "123456"}).status_code == 400
    _wait_out_throttle(alice)
    # The set-up's code is spent (a code works once); an unspent one within the drift allowed signs in.
    done = fresh.post(reverse("twofactor_verify"), {"code": _unspent_code(alice, secret)})
    assert done.status_code == 302 and done["Location"] == reverse("home")
    assert fresh.get(reverse("account")).status_code == 200
    methods = list(AuditEvent.objects.filter(project=None).order_by("pk").values_list("verb", "data__method"))
    assert methods == [("twofactor.enabled", None), ("signin.failed", "password + second factor"),
                       ("signin.succeeded", "password + TOTP")]


def test_a_recovery_code_works_once(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    _, codes = _enrol(client)
    first = Client()
    _login(first)
    assert first.post(reverse("twofactor_verify"), {"code": codes[0]})["Location"] == reverse("home")
    again = Client()
    _login(again)
    assert again.post(reverse("twofactor_verify"), {"code": codes[0]}).status_code == 400
    assert b"9 recovery codes left" in first.get(reverse("twofactor")).content


def test_a_wrong_authenticator_code_does_not_hold_up_a_recovery_code(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    _, codes = _enrol(client)
    fresh = Client()
    _login(fresh)
    wrong = fresh.post(reverse("twofactor_verify"), {"code": "123456"})
    assert wrong.status_code == 400 and b"That code is not right" in wrong.content
    done = fresh.post(reverse("twofactor_verify"), {"code": codes[3]})  # at once: no wait for the other kind
    assert done.status_code == 302 and done["Location"] == reverse("home")


def test_a_recovery_code_refused_for_now_says_how_long_to_wait_and_still_works_after(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    _, codes = _enrol(client)
    fresh = Client()
    _login(fresh)
    for _ in range(3):  # django-otp doubles the wait after each wrong one: 1, 2, then 4 seconds
        _wait_out_throttle(alice)
        wrong = fresh.post(reverse("twofactor_verify"), {"code": "zzzz-zzzz"})
        assert b"That recovery code is not right (or was used already)." in wrong.content
    held = fresh.post(reverse("twofactor_verify"), {"code": codes[0]})
    said = re.search(rb"Too many wrong recovery codes in a row: wait (\d) seconds? and try again "
                     rb"\(this code was not checked\)", held.content)
    assert held.status_code == 400 and said is not None and 1 <= int(said.group(1)) <= 4, held.content[-600:]
    assert b"not right" not in held.content
    _wait_out_throttle(alice)
    assert fresh.post(reverse("twofactor_verify"), {"code": codes[0]})["Location"] == reverse("home")
    reasons = list(AuditEvent.objects.filter(verb="signin.failed", project=None).order_by("pk")
                   .values_list("data__reason", flat=True))
    assert reasons == ["wrong or reused code"] * 3 + ["recovery code not checked: throttled"]


def test_turning_it_off_takes_a_current_code(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    secret, _ = _enrol(client)
    assert client.post(reverse("twofactor_disable"), {"code": "000000"}).status_code == 400
    _wait_out_throttle(alice)
    assert client.post(reverse("twofactor_disable"), {"code": _unspent_code(alice, secret)}).status_code == 302
    assert _login(Client())["Location"] == reverse("home")  # the password alone again
    assert AuditEvent.objects.filter(verb=AuditEvent.Verb.TWOFACTOR_DISABLED).count() == 1


def test_api_tokens_are_unaffected_and_basic_auth_is_refused(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    _enrol(client)
    secret = token_create(user=alice, name="ci").secret
    assert Client().get("/api/v1/runs/", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 200
    credentials = base64.b64encode(b"alice:alice-pass-123").decode()
    basic = Client().get("/api/v1/runs/", HTTP_AUTHORIZATION=f"Basic {credentials}")
    assert basic.status_code == 401 and "second factor" in basic.json()["message"]


def test_superusers_must_set_one_up_when_the_setting_says_so(settings: Any, db: None) -> None:
    settings.EVALSITE_REQUIRE_2FA_SUPERUSERS = True
    get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-123456")
    client = Client()
    step = _login(client, "root", "root-pass-123456")
    assert step["Location"] == reverse("twofactor_setup")
    assert client.get("/admin/").status_code == 302  # not signed in yet
    page = client.get(reverse("twofactor_setup"))
    assert b"Superusers need a second factor" in page.content
    done = client.post(reverse("twofactor_setup"), {"code": totp(_secret(page))})
    assert done.status_code == 200 and client.get("/admin/").status_code == 200
    assert client.post(reverse("twofactor_disable"), {"code": "x"}).status_code == 400  # must keep it
    assert Client().get("/admin/login/")["Location"].startswith(reverse("login"))


def test_the_lockout_still_applies_to_the_password_form(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    _enrol(client)
    for _ in range(4):
        assert _login(Client(), password="wrong").status_code == 200
    assert _login(Client(), password="wrong").status_code == 429
    assert _login(Client()).status_code == 429  # the right password: locked out before any code
    reasons = list(AuditEvent.objects.filter(verb=AuditEvent.Verb.SIGNIN_FAILED, project=None)
                   .values_list("data__reason", flat=True))
    assert reasons.count("wrong username or password") == 4 and "locked out after too many failures" in reasons


def test_the_sign_in_log_is_for_superusers_and_pages_by_keyset(alice: Any, django_assert_max_num_queries: Any) -> None:
    for _ in range(60):
        _login(Client(), "nobody", "wrong")
    carol = Client()
    carol.force_login(alice)
    assert carol.get(reverse("signin_log")).status_code == 403
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-123456")
    client = Client()
    client.force_login(admin)
    first = client.get(reverse("signin_log") + "?failures=1").content.decode()
    assert first.count("sign-in failed for nobody") == 50 and "← Newest</span>" in first
    older = re.search(r'href="\?([^"]*before=\d+[^"]*)" rel="next">Older', first)
    assert older is not None
    with django_assert_max_num_queries(6):  # session, user, the cursor, the page: whatever the log's length
        second = client.get(reverse("signin_log") + "?" + older.group(1).replace("&amp;", "&"))
    body = second.content.decode()
    assert body.count("sign-in failed for nobody") == 10 and "Older →</span>" in body


def test_the_sign_in_log_through_the_api_for_superusers_only(alice: Any) -> None:
    _login(Client(), "nobody", "wrong")
    _login(Client())
    member = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=alice, name='x').secret}")
    assert member.get("/api/v1/signins/").status_code == 403
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-123456")
    client = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=admin, name='siem').secret}")
    body = client.get("/api/v1/signins/").json()
    assert [(e["verb"], e["data"]["method"]) for e in body["results"]] == [
        ("signin.succeeded", "password"), ("signin.failed", "password")]
    failures = client.get("/api/v1/signins/?failures=true").json()["results"]
    assert [e["data"]["reason"] for e in failures] == ["wrong username or password"]
    assert client.get("/api/v1/signins/?failures=maybe").status_code == 400


def test_an_sso_account_without_a_password_is_told_the_providers_factor_applies(db: None) -> None:
    user = get_user_model().objects.create_user("sam", "sam@corp.example")  # no usable password, as SSO makes
    client = Client()
    client.force_login(user)
    page = client.get(reverse("twofactor")).content.decode()
    assert "identity provider's own second factor applies" in page and "Set up an authenticator" not in page
    assert reverse("password_change") not in client.get(reverse("account")).content.decode()


def test_sign_ins_reach_the_feeds_of_the_accounts_projects_only(alice: Any, bob: Any, globex: Any) -> None:
    """Issue 34: sign-ins (method, success, failure reason) in the activity feed of the
    projects concerned: each project of the account, not the others, without the address;
    a try naming no account reaches no feed."""
    from evaluations.models import Membership, Project

    archived = Project.objects.create(slug="old", name="Old")
    Membership.objects.create(project=archived, user=alice, role=Membership.Role.MEMBER)
    archived.archived_at = archived.created_at
    archived.save(update_fields=["archived_at"])
    Membership.objects.create(project=globex, user=alice, role=Membership.Role.VIEWER)
    assert _login(Client(), "alice", "wrong-pass").status_code == 200
    assert _login(Client()).status_code == 302
    assert _login(Client(), "nobody", "wrong").status_code == 200
    feeds = sorted(AuditEvent.objects.filter(project__isnull=False, verb__startswith="signin.")
                   .values_list("project__slug", "verb", "data__method", "data__reason"))
    assert feeds == [("acme", "signin.failed", "password", "wrong username or password"),
                     ("acme", "signin.succeeded", "password", ""),
                     ("globex", "signin.failed", "password", "wrong username or password"),
                     ("globex", "signin.succeeded", "password", "")]
    assert not AuditEvent.objects.filter(project__isnull=False, data__has_key="address").exists()
    assert AuditEvent.objects.filter(project=None, verb__startswith="signin.").count() == 3  # the site-wide log
    # bob, a member of globex only, reads alice's sign-ins in globex's feed, filtered by kind
    reader = Client()
    reader.force_login(bob)
    page = reader.get(reverse("project_activity", args=["globex"]) + "?kind=signin.failed").content.decode()
    assert "sign-in failed for alice (password): wrong username or password" in page
    assert "signed in (password)" not in page
    assert reader.get(reverse("project_activity", args=["acme"])).status_code == 404
