"""Single sign-on and the second factor (issue 38): an account that must pass one (it has a
TOTP authenticator, or EVALSITE_REQUIRE_2FA_SUPERUSERS covers it) passes it after the provider
too — the ID token's `amr`/`acr` where EVALSITE_OIDC_MFA_VALUES accepts them, else evalsite's
own code — and is not signed in before; linking an account by e-mail is an event of its own;
an ID token's `jti` is taken once across processes (two real processes, one database).
Against the real OpenID provider of tests/oidc_idp/ on 127.0.0.1."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
import requests
from allauth.socialaccount.models import SocialAccount
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.urls import reverse
from django_otp.plugins.otp_totp.models import TOTPDevice

from evaluations.models import AuditEvent, Membership, Project
from tests.conftest import REPO
from tests.oidc_helpers import CLIENT_ID, Provider, http, sign_in
from tests.queue_helpers import database_url
from tests.test_sso import ROLE_MAP, idp, sso  # noqa: F401
from tests.test_twofactor import _wait_out_throttle, totp

pytestmark = pytest.mark.django_db(transaction=True)


def _superuser(username: str, email: str, *, with_totp: bool) -> tuple[Any, str]:
    user = get_user_model().objects.create_superuser(username, email, f"{username}-pass-123")
    if not with_totp:
        return user, ""
    device = TOTPDevice.objects.create(user=user, name="authenticator", confirmed=True)
    return user, base64.b32encode(bytes.fromhex(device.key)).decode()


def _csrf(page: requests.Response) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert found is not None, page.text[:500]
    return found.group(1)


def _signed_in(session: requests.Session, base: str) -> bool:
    return session.get(base + "/account/", allow_redirects=False).status_code == 200


def _signins() -> list[tuple[str, str]]:
    return list(AuditEvent.objects.filter(project=None, verb__in=["signin.succeeded", "signin.failed", "sso.linked"])
                .order_by("pk").values_list("verb", "data__method"))


def test_a_linked_superuser_is_asked_for_totp_after_sso_and_the_link_is_its_own_event(
        sso: Provider, live_server: Any, settings: Any, acme: Project) -> None:  # noqa: F811
    settings.EVALSITE_REQUIRE_2FA_SUPERUSERS = True
    root, secret = _superuser("root", "root@corp.example", with_totp=True)
    Membership.objects.create(project=acme, user=root, role="member")
    sso.set_person("root.corp", email="root@corp.example", email_verified=True, groups=["acme-evals-admins"])
    session = http()
    landed = sign_in(session, live_server.url, "root.corp", "root.corp-idp-pass")
    assert landed.status_code == 200 and landed.url == live_server.url + reverse("twofactor_verify")
    assert "Signed in with Acme SSO" in landed.text and "needs its second factor" in landed.text
    assert not _signed_in(session, live_server.url)  # the provider alone did not sign the superuser in
    assert SocialAccount.objects.get().user == root
    assert Membership.objects.get(user=root, project=acme).role == "member"  # roles wait for the sign-in
    linked = AuditEvent.objects.get(project=None, verb=AuditEvent.Verb.SSO_LINKED)
    assert linked.actor == root and linked.data["email"] == "root@corp.example" and linked.data["address"]
    assert "linked to root by the verified e-mail root@corp.example" in linked.summary
    feed = AuditEvent.objects.get(project=acme, verb=AuditEvent.Verb.SSO_LINKED)
    assert "address" not in feed.data and feed.summary == linked.summary
    assert _signins() == [("sso.linked", "sso link by e-mail")]

    wrong = session.post(landed.url, data={"csrfmiddlewaretoken": _csrf(landed), "code": "000000"})
    assert wrong.status_code == 400 and not _signed_in(session, live_server.url)
    _wait_out_throttle(root)  # django-otp's wait after a wrong code
    done = session.post(landed.url, data={"csrfmiddlewaretoken": _csrf(wrong), "code": totp(secret)},
                        allow_redirects=False)
    assert done.status_code == 302 and _signed_in(session, live_server.url)
    assert _signins() == [("sso.linked", "sso link by e-mail"), ("signin.failed", "sso + second factor"),
                          ("signin.succeeded", "sso + TOTP")]
    assert Membership.objects.get(user=root, project=acme).role == "admin"  # the groups, applied at the sign-in
    page = session.get(live_server.url + "/signins/")
    assert "↔ linked" in page.text and "root signed in (sso + TOTP)" in page.text
    activity = session.get(live_server.url + "/projects/acme/activity/?kind=sso.linked")
    assert activity.status_code == 200 and "linked to root by the verified e-mail" in activity.text


def test_a_superuser_without_totp_is_sent_to_set_it_up_not_let_in(sso: Provider, live_server: Any,  # noqa: F811
                                                                   settings: Any) -> None:
    settings.EVALSITE_REQUIRE_2FA_SUPERUSERS = True
    _superuser("boss", "boss@corp.example", with_totp=False)
    sso.set_person("boss.corp", email="boss@corp.example", email_verified=True)
    session = http()
    landed = sign_in(session, live_server.url, "boss.corp", "boss.corp-idp-pass")
    assert landed.url == live_server.url + reverse("twofactor_setup")
    assert "Superusers need a second factor on this server, after Acme SSO too" in landed.text
    assert not _signed_in(session, live_server.url)
    secret = re.search(r'data-testid="totp-secret">([A-Z2-7 ]+)<', landed.text)
    assert secret is not None
    done = session.post(landed.url, data={"csrfmiddlewaretoken": _csrf(landed), "code": totp(secret.group(1))})
    assert done.status_code == 200 and "recovery" in done.text.lower() and _signed_in(session, live_server.url)
    assert _signins()[-1] == ("signin.succeeded", "sso + TOTP (set up now)")


def test_the_providers_amr_counts_as_the_second_factor_where_configured(sso: Provider, live_server: Any,  # noqa: F811
                                                                        settings: Any) -> None:
    settings.EVALSITE_REQUIRE_2FA_SUPERUSERS = True
    settings.EVALSITE_OIDC_MFA_VALUES = ["mfa", "hwk"]
    _superuser("chief", "chief@corp.example", with_totp=False)
    sso.set_person("chief.corp", email="chief@corp.example", email_verified=True, amr=["pwd", "mfa"])
    session = http()
    landed = sign_in(session, live_server.url, "chief.corp", "chief.corp-idp-pass")
    assert landed.url == live_server.url + "/" and _signed_in(session, live_server.url)
    assert _signins()[-1] == ("signin.succeeded", "sso + provider's amr mfa")
    # A password alone at the provider does not count, nor does an acr nobody listed.
    sso.set_person("chief.corp", amr=["pwd"], acr="urn:example:loa:1")
    second = http()
    landed = sign_in(second, live_server.url, "chief.corp", "chief.corp-idp-pass")
    assert landed.url == live_server.url + reverse("twofactor_setup") and not _signed_in(second, live_server.url)
    settings.EVALSITE_OIDC_MFA_VALUES = ["urn:example:loa:1"]  # an acr the operator accepts
    third = http()
    assert sign_in(third, live_server.url, "chief.corp", "chief.corp-idp-pass").url == live_server.url + "/"
    assert _signins()[-1] == ("signin.succeeded", "sso + provider's acr urn:example:loa:1")


def test_an_sso_user_due_no_second_factor_signs_in_at_once(sso: Provider, live_server: Any,  # noqa: F811
                                                           settings: Any) -> None:
    settings.EVALSITE_REQUIRE_2FA_SUPERUSERS = True  # covers superusers only
    sso.set_person("pat", groups=["acme-evals"])
    session = http()
    assert sign_in(session, live_server.url, "pat", "pat-idp-pass").url == live_server.url + "/"
    assert _signins() == [("signin.succeeded", "sso")]


# --- jti: once across processes ---------------------------------------------------------------

PROBE = """
import json, sys
import django
django.setup()
from allauth.socialaccount.providers.oauth2.client import OAuth2Error
from evaluations.accounts.sso import id_token_verify
args = json.loads(sys.argv[1])
try:
    id_token_verify(args["token"], keys_url=args["keys"], issuer=args["issuer"], audience=args["audience"])
except OAuth2Error as e:
    print("refused:", e)
else:
    print("accepted")
"""


def _id_token(provider: Provider, jti: str) -> tuple[str, str]:
    """An ID token signed with the provider's own key (the one its JWKS publishes), and the
    JWKS URL: what a token the provider issued looks like to evalsite."""
    discovery = http().get(provider.issuer + "/.well-known/openid-configuration").json()
    [key] = http().get(discovery["jwks_uri"]).json()["keys"]
    now = int(time.time())
    claims = {"iss": discovery["issuer"], "aud": CLIENT_ID, "sub": "42", "iat": now, "exp": now + 300, "jti": jti}
    token = jwt.encode(claims, (provider.folder / "key.pem").read_bytes(), algorithm="RS256",
                       headers={"kid": key["kid"]})
    return token, discovery["jwks_uri"]


def _probe(tmp_path: Path, payload: dict[str, str]) -> str:
    """One verification in a process of its own, on the test database, without Redis (each
    process would have its own cache)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalsite.settings", "DATABASE_URL": database_url(),
           "EVALSITE_DATA_DIR": str(tmp_path), "SECRET_KEY": django_settings.SECRET_KEY}
    env.pop("REDIS_URL", None)
    env.pop("EVALSITE_CACHE_URL", None)
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(payload)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_a_replayed_jti_is_refused_by_another_process(idp: Provider, tmp_path: Path) -> None:  # noqa: F811
    token, keys = _id_token(idp, jti="jti-" + str(time.time_ns()))
    payload = {"token": token, "keys": keys, "issuer": idp.issuer, "audience": CLIENT_ID}
    assert _probe(tmp_path, payload) == "accepted"
    assert _probe(tmp_path, payload) == "refused: the ID token was used before (its jti was seen)"
    other, _ = _id_token(idp, jti="another-" + str(time.time_ns()))
    assert _probe(tmp_path, {**payload, "token": other}) == "accepted"
