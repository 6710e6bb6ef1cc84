"""API tokens: created on the profile page and shown once, stored hashed, usable by the API
as `Token` or `Bearer`, revoked for good, and last_used_at kept roughly current."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from evaluations.accounts.tokens import token_create
from evaluations.models import ApiToken, AuditEvent


def create_on_page(client: Client, name: str = "CI on main") -> tuple[str, Any]:
    response = client.post(reverse("account"), {"name": name})
    assert response.status_code == 200
    match = re.search(r'value="(es_[A-Za-z0-9_-]+)"', response.content.decode())
    assert match, "the new token is on the response page"
    return match.group(1), response


def test_a_token_created_on_the_profile_page_is_shown_once_and_stored_only_as_a_digest(
        alice_client: Client, alice: Any) -> None:
    secret, response = create_on_page(alice_client)
    assert response["Cache-Control"] == "no-store"
    token = ApiToken.objects.get(user=alice)
    assert token.name == "CI on main"
    assert token.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert secret.startswith(token.prefix) and len(token.prefix) < len(secret)
    for field in ("name", "prefix", "digest"):
        assert secret not in getattr(token, field)
    again = alice_client.get(reverse("account")).content.decode()
    assert secret not in again
    assert token.prefix in again and "CI on main" in again


def test_a_token_needs_a_name(alice_client: Client) -> None:
    assert alice_client.post(reverse("account"), {"name": ""}).status_code == 400
    assert ApiToken.objects.count() == 0


@pytest.mark.parametrize("scheme", ["Token", "Bearer", "token"])
def test_the_api_takes_the_token_as_token_or_bearer(scheme: str, alice: Any) -> None:
    secret = token_create(user=alice, name="script").secret
    response = Client().get(reverse("api_evalsets"), HTTP_AUTHORIZATION=f"{scheme} {secret}")
    assert response.status_code == 200


def test_a_wrong_token_is_401_with_the_error_shape(alice: Any) -> None:
    response = Client().get(reverse("api_evalsets"), HTTP_AUTHORIZATION="Token es_nope")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"
    assert response["WWW-Authenticate"].startswith("Token")


def test_a_revoked_token_stops_working(alice_client: Client, alice: Any) -> None:
    secret, _ = create_on_page(alice_client)
    token = ApiToken.objects.get(user=alice)
    assert Client().get(reverse("api_runs"), HTTP_AUTHORIZATION=f"Token {secret}").status_code == 200
    response = alice_client.post(reverse("account_token_revoke", args=[token.pk]))
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert Client().get(reverse("api_runs"), HTTP_AUTHORIZATION=f"Token {secret}").status_code == 401
    verbs = list(AuditEvent.objects.filter(object_type="apitoken", object_id=str(token.pk))
                 .values_list("verb", flat=True))
    assert sorted(verbs) == ["token.created", "token.revoked"]


def test_nobody_revokes_another_users_token(alice: Any, bob_client: Client) -> None:
    token = token_create(user=alice, name="mine").token
    assert bob_client.post(reverse("account_token_revoke", args=[token.pk])).status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_last_used_at_is_written_at_most_once_a_minute(alice: Any) -> None:
    new = token_create(user=alice, name="busy")
    client = Client(HTTP_AUTHORIZATION=f"Token {new.secret}")
    client.get(reverse("api_runs"))
    new.token.refresh_from_db()
    first = new.token.last_used_at
    assert first is not None
    client.get(reverse("api_runs"))
    new.token.refresh_from_db()
    assert new.token.last_used_at == first  # within the minute: no write
    ApiToken.objects.filter(pk=new.token.pk).update(last_used_at=timezone.now() - timedelta(minutes=2))
    client.get(reverse("api_runs"))
    new.token.refresh_from_db()
    assert new.token.last_used_at is not None and new.token.last_used_at > first - timedelta(seconds=1)
    assert timezone.now() - new.token.last_used_at < timedelta(seconds=30)
    almost = timezone.now() - timedelta(seconds=50)  # still within the minute: kept as it is
    ApiToken.objects.filter(pk=new.token.pk).update(last_used_at=almost)
    assert client.get(reverse("api_runs")).status_code == 200
    new.token.refresh_from_db()
    assert new.token.last_used_at == almost


def test_a_deactivated_users_token_stops_working(alice: Any) -> None:
    secret = token_create(user=alice, name="script").secret
    client = Client(HTTP_AUTHORIZATION=f"Token {secret}")
    assert client.get(reverse("api_runs")).status_code == 200
    alice.is_active = False
    alice.save()
    response = client.get(reverse("api_runs"))
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


def test_a_token_acts_as_its_user_and_sees_only_their_projects(alice: Any, bob: Any, acme: Any) -> None:
    from tests.engine_helpers import import_demo

    import_demo(acme)
    alice_secret = token_create(user=alice, name="a").secret
    bob_secret = token_create(user=bob, name="b").secret
    seen = Client().get(reverse("api_evalsets"), HTTP_AUTHORIZATION=f"Token {alice_secret}").json()
    assert seen["count"] == 1
    hidden = Client().get(reverse("api_evalsets"), HTTP_AUTHORIZATION=f"Token {bob_secret}").json()
    assert hidden["count"] == 0


def test_basic_auth_still_works(alice: Any) -> None:
    import base64

    credentials = base64.b64encode(b"alice:alice-pass-123").decode()
    assert Client().get(reverse("api_runs"), HTTP_AUTHORIZATION=f"Basic {credentials}").status_code == 200
