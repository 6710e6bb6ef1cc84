"""Single sign-on against a real OpenID provider on 127.0.0.1 (django-oauth-toolkit in a
subprocess, tests/oidc_idp/), evalsite on pytest-django's live server, the flow driven with
real HTTP: discovery, PKCE, state and nonce; groups mapped to roles at every sign-in; the
ID token's audience, expiry and nonce checked; linking by verified e-mail only."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from allauth.socialaccount.models import SocialAccount
from django.contrib.auth import get_user_model
from django.test import Client

from evaluations.models import AuditEvent, Membership, Project
from tests.oidc_helpers import CLIENT_ID, Provider, http, provider, sign_in, start, to_callback
from tests.test_access_matrix import ADMIN, PUBLIC, READ, ROUTES, WRITE, call, fast_hashing, fresh_world  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

ROLE_MAP = "acme-evals-admins=acme:admin,acme-evals=acme:viewer,globex-evals=globex:member"


@pytest.fixture(scope="module")
def idp(live_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    with provider(Path(tmp_path_factory.mktemp("idp")), live_server.url) as p:
        yield p


@pytest.fixture
def sso(idp: Provider, settings: Any, acme: Project, globex: Project) -> Provider:
    idp.set_mode("")
    idp.configure(settings, role_map=ROLE_MAP)
    return idp


def _failures() -> list[str]:
    return [e.data["reason"] for e in AuditEvent.objects.filter(verb=AuditEvent.Verb.SIGNIN_FAILED, project=None)]


def test_the_button_sends_the_browser_to_the_provider_with_pkce_nonce_and_state(sso: Provider,
                                                                                 live_server: Any) -> None:
    answer = start(http(), live_server.url)
    assert answer.status_code == 302
    location = answer.headers["Location"]
    assert location.startswith(sso.issuer + "/authorize/")  # from the provider's discovery document
    query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
    assert query["client_id"] == CLIENT_ID and query["response_type"] == "code"
    assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) >= 43
    assert len(query["nonce"]) >= 32 and len(query["state"]) >= 16
    assert set(query["scope"].split()) == {"openid", "profile", "email", "groups"}
    second = start(http(), live_server.url).headers["Location"]
    assert parse_qs(urlsplit(second).query)["nonce"][0] != query["nonce"]  # fresh each time


def test_a_first_sign_in_creates_the_user_with_the_roles_of_their_groups(sso: Provider, live_server: Any) -> None:
    sso.set_person("erin", groups=["acme-evals-admins", "unrelated"])
    session = http()
    landed = sign_in(session, live_server.url, "erin", "erin-idp-pass")
    assert landed.status_code == 200 and landed.url == live_server.url + "/"
    erin = get_user_model().objects.get(username="erin")
    assert erin.email == "erin@corp.example" and not erin.has_usable_password()
    assert Membership.objects.get(user=erin, project__slug="acme").role == "admin"
    assert not Membership.objects.filter(user=erin, project__slug="globex").exists()
    assert session.get(live_server.url + "/projects/acme/members/").status_code == 200
    added = AuditEvent.objects.get(project__slug="acme", verb=AuditEvent.Verb.MEMBER_ADDED)
    assert "from Acme SSO's groups" in added.summary and added.data["via"] == "sso"
    signed = AuditEvent.objects.get(verb=AuditEvent.Verb.SIGNIN_SUCCEEDED, project=None)
    assert signed.actor == erin and signed.data["method"] == "sso" and signed.data["address"]
    # and in the feed of the project the groups gave her, without the address; not in globex's
    feed = AuditEvent.objects.get(verb=AuditEvent.Verb.SIGNIN_SUCCEEDED, project__slug="acme")
    assert feed.actor == erin and feed.summary == "erin signed in (sso)" and "address" not in feed.data
    assert not AuditEvent.objects.filter(verb=AuditEvent.Verb.SIGNIN_SUCCEEDED, project__slug="globex").exists()
    page = session.get(live_server.url + "/projects/acme/activity/?kind=signin.succeeded")
    assert page.status_code == 200 and "erin signed in (sso)" in page.text


def test_groups_are_applied_again_at_every_sign_in_and_a_removed_group_removes_the_role(
        sso: Provider, live_server: Any) -> None:
    sso.set_person("frank", groups=["acme-evals-admins"])
    sign_in(http(), live_server.url, "frank", "frank-idp-pass")
    frank = get_user_model().objects.get(username="frank")
    other = Project.objects.create(slug="initech", name="Initech")  # not in the map: left alone
    Membership.objects.create(project=other, user=frank, role="member")
    sso.set_person("frank", groups=["acme-evals", "globex-evals"])
    sign_in(http(), live_server.url, "frank", "frank-idp-pass")
    roles = dict(Membership.objects.filter(user=frank).values_list("project__slug", "role"))
    assert roles == {"acme": "viewer", "globex": "member", "initech": "member"}
    sso.set_person("frank", groups=[])
    session = http()
    sign_in(session, live_server.url, "frank", "frank-idp-pass")
    assert dict(Membership.objects.filter(user=frank).values_list("project__slug", "role")) == {"initech": "member"}
    assert session.get(live_server.url + "/projects/acme/activity/").status_code == 404  # no longer a member
    removed = AuditEvent.objects.filter(project__slug="acme", verb=AuditEvent.Verb.MEMBER_REMOVED).get()
    assert "no group of Acme SSO gives a role here" in removed.summary
    changed = AuditEvent.objects.get(project__slug="acme", verb=AuditEvent.Verb.MEMBER_CHANGED)
    assert changed.data["from"] == "admin" and changed.data["to"] == "viewer"
    assert AuditEvent.objects.filter(verb=AuditEvent.Verb.SSO_ROLES_CHANGED, project=None).count() == 3


@pytest.mark.parametrize(("mode", "reason"), [
    ("wrong_aud", "the ID token is for another client (audience)"),
    ("expired", "the ID token has expired"),
    ("bad_nonce", "the ID token's nonce is not the one this sign-in sent"),
])
def test_an_id_token_that_fails_a_check_is_refused_and_logged(mode: str, reason: str, sso: Provider,
                                                               live_server: Any) -> None:
    sso.set_person("gina", groups=["acme-evals"])
    sso.set_mode(mode)
    session = http()
    answer = sign_in(session, live_server.url, "gina", "gina-idp-pass")
    assert answer.status_code == 401
    assert reason.capitalize()[0] + reason[1:] in html.unescape(answer.text)  # the page starts it capitalised
    assert not get_user_model().objects.filter(username="gina").exists()
    assert session.get(live_server.url + "/account/", allow_redirects=False).status_code == 302  # not signed in
    assert _failures() == [reason]


def test_a_replayed_callback_is_refused_its_state_is_used_up(sso: Provider, live_server: Any) -> None:
    sso.set_person("hank", groups=["acme-evals"])
    session = http()
    callback = to_callback(session, live_server.url, "hank", "hank-idp-pass")
    assert session.get(callback).status_code == 200
    session.post(live_server.url + "/accounts/logout/", data={"csrfmiddlewaretoken": session.cookies["csrftoken"]})
    replay = session.get(callback)
    assert replay.status_code == 401 and "Unknown or already used state" in replay.text
    stranger = http().get(callback)  # another browser with the same URL: no state in its session
    assert stranger.status_code == 401
    assert _failures() == ["unknown or already used state (a replayed or expired sign-in)"] * 2


def test_an_account_with_the_same_verified_email_is_linked(sso: Provider, live_server: Any, alice: Any) -> None:
    sso.set_person("alice.corp", email="ALICE@example.com", email_verified=True, groups=["acme-evals-admins"])
    session = http()
    sign_in(session, live_server.url, "alice.corp", "alice.corp-idp-pass")
    assert SocialAccount.objects.get().user == alice
    assert get_user_model().objects.count() == 1
    assert Membership.objects.get(user=alice, project__slug="acme").role == "admin"
    assert "alice" in session.get(live_server.url + "/account/").text


def test_an_unverified_email_is_never_linked_to_an_existing_account(sso: Provider, live_server: Any,
                                                                    alice: Any) -> None:
    sso.set_person("mallory", email="alice@example.com", email_verified=False, groups=["acme-evals-admins"])
    session = http()
    answer = sign_in(session, live_server.url, "mallory", "mallory-idp-pass")
    assert answer.status_code == 403
    assert "has not verified the e-mail alice@example.com" in answer.text
    assert SocialAccount.objects.count() == 0 and get_user_model().objects.count() == 1
    assert Membership.objects.get(user=alice, project__slug="acme").role == "member"  # unchanged
    assert session.get(live_server.url + "/account/", allow_redirects=False).status_code == 302
    assert "not linked" in _failures()[0]


def test_sso_only_hides_and_refuses_the_password_form_and_basic_auth(sso: Provider, live_server: Any,
                                                                     alice: Any, settings: Any) -> None:
    settings.EVALSITE_SSO_ONLY = True
    page = Client().get("/accounts/login/")
    assert b"Sign in with Acme SSO" in page.content and b'name="password"' not in page.content
    refused = Client().post("/accounts/login/", {"username": "alice", "password": "alice-pass-123"})
    assert refused.status_code == 403 and b"Password sign-in is off" in refused.content
    assert Client().get("/account/").status_code == 302
    credentials = base64.b64encode(b"alice:alice-pass-123").decode()
    basic = Client().get("/api/v1/runs/", HTTP_AUTHORIZATION=f"Basic {credentials}")
    assert basic.status_code == 401 and "single sign-on only" in basic.json()["message"]
    sso.set_person("ivan", groups=["acme-evals"])
    assert sign_in(http(), live_server.url, "ivan", "ivan-idp-pass").status_code == 200


def test_the_login_page_offers_both_without_sso_only(sso: Provider) -> None:
    page = Client().get("/accounts/login/").content.decode()
    assert "Sign in with Acme SSO" in page and 'name="password"' in page
    assert page.index("Sign in with Acme SSO") < page.index('name="password"')


def _client_of(session: Any) -> Client:
    client = Client()
    client.cookies["sessionid"] = session.cookies["sessionid"]
    return client


def test_the_access_matrix_is_the_same_for_sso_users(sso: Provider, live_server: Any,
                                                     fresh_world: dict[str, Any]) -> None:  # noqa: F811
    """An SSO viewer of acme answers as carol (a local viewer) does on every page and API
    route of the matrix; an SSO member of globex only, as bob does (404 for acme's objects)."""
    sso.set_person("sam", groups=["acme-evals"])
    sam_session = http()
    sign_in(sam_session, live_server.url, "sam", "sam-idp-pass")
    sam, carol = _client_of(sam_session), Client()
    world = fresh_world
    carol.force_login(world["carol"])
    for route in ROUTES:
        if route.kind in {READ, WRITE, ADMIN} and route.name not in {"project_switch", "demo_agent"}:
            ours, theirs = call(sam, route, world).status_code, call(carol, route, world).status_code
            assert ours == theirs, route.name
    sso.set_person("gus", groups=["globex-evals"])
    gus_session = http()
    sign_in(gus_session, live_server.url, "gus", "gus-idp-pass")
    gus = _client_of(gus_session)
    for route in ROUTES:
        if route.kind != PUBLIC and route.scoped and not route.api:
            assert call(gus, route, world).status_code == 404, route.name
