"""Brute force: wrong passwords on the login form and on the API's basic auth lock the
username out from that address (django-axes, evaluations/lockout.py), the right password
included, with answers that do not tell whether the account exists."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

LIMIT = 5  # AXES_FAILURE_LIMIT's default (EVALSITE_LOGIN_FAILURE_LIMIT)


def _login(client: Client, username: str, password: str) -> Any:
    return client.post(reverse("login"), {"username": username, "password": password})


def _basic(username: str, password: str, **extra: str) -> Any:
    credentials = base64.b64encode(f"{username}:{password}".encode()).decode()
    return Client().get("/api/v1/runs/", HTTP_AUTHORIZATION=f"Basic {credentials}", **extra)


def _visible(response: Any) -> str:
    """The page without what differs between any two requests (the CSRF token, the nonce)."""
    page = re.sub(r'(value|content|nonce)="[^"]*"', "", response.content.decode())
    return re.sub(r'"X-CSRFToken": "[^"]*"', "", page)


def test_the_right_password_after_the_limit_of_wrong_ones_does_not_log_in(alice: Any) -> None:
    client = Client()
    for _ in range(LIMIT - 1):
        assert _login(client, "alice", "wrong").status_code == 200
    locked = _login(client, "alice", "wrong")
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.content.decode()
    assert "15 more minutes" in locked.content.decode()
    assert 840 < int(locked["Retry-After"]) <= 900  # just locked: (nearly) the whole cool-off is left
    response = _login(client, "alice", "alice-pass-123")
    assert response.status_code == 429
    assert client.get(reverse("account")).status_code == 302  # not logged in


def test_a_username_that_does_not_exist_is_locked_the_same_way(alice: Any) -> None:
    """No user enumeration: the failures and the lockout read the same for both."""
    real, ghost = Client(), Client()
    for _ in range(LIMIT - 1):
        assert _visible(_login(real, "alice", "wrong")).replace("alice", "X") == \
            _visible(_login(ghost, "nobody", "wrong")).replace("nobody", "X")
    a, b = _login(real, "alice", "wrong"), _login(ghost, "nobody", "wrong")
    assert a.status_code == b.status_code == 429
    assert _visible(a) == _visible(b)


def test_basic_auth_on_the_api_is_locked_out_too_with_429_in_the_error_shape(alice: Any) -> None:
    for _ in range(LIMIT):
        _basic("alice", "wrong")
    response = _basic("alice", "alice-pass-123")
    assert response.status_code == 429
    body = response.json()
    assert body["code"] == "locked_out" and "too many failed logins" in body["message"]
    assert 840 < int(response["Retry-After"]) <= 900
    ghost = [_basic("nobody", "wrong").status_code for _ in range(LIMIT + 1)]
    assert ghost[-1] == 429  # the same for a username that does not exist


def test_failures_on_the_api_count_towards_the_login_form(alice: Any) -> None:
    for _ in range(LIMIT):
        _basic("alice", "wrong")
    assert _login(Client(), "alice", "alice-pass-123").status_code == 429


def test_the_lockout_is_per_address_so_others_cannot_lock_a_user_out_everywhere(alice: Any) -> None:
    attacker = Client(REMOTE_ADDR="203.0.113.9")
    for _ in range(LIMIT):
        _login(attacker, "alice", "wrong")
    assert _login(attacker, "alice", "alice-pass-123").status_code == 429
    response = _login(Client(REMOTE_ADDR="198.51.100.7"), "alice", "alice-pass-123")
    assert response.status_code == 302


def test_an_administrator_lifts_a_lockout_with_axes_reset_username(alice: Any) -> None:
    client = Client()
    for _ in range(LIMIT):
        _login(client, "alice", "wrong")
    assert _login(client, "alice", "alice-pass-123").status_code == 429
    call_command("axes_reset_username", "alice")
    assert _login(client, "alice", "alice-pass-123").status_code == 302


def test_a_successful_login_resets_the_count(alice: Any) -> None:
    client = Client()
    for _ in range(LIMIT - 1):
        _login(client, "alice", "wrong")
    assert _login(client, "alice", "alice-pass-123").status_code == 302
    other = Client()
    for _ in range(LIMIT - 1):
        assert _login(other, "alice", "wrong").status_code == 200
    assert _login(other, "alice", "alice-pass-123").status_code == 302


def test_behind_a_proxy_the_forwarded_address_is_counted(alice: Any, settings: Any) -> None:
    settings.EVALSITE_LOGIN_PROXY_COUNT = 1
    attacker = Client(REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.9")
    for _ in range(LIMIT):
        _login(attacker, "alice", "wrong")
    assert _login(attacker, "alice", "alice-pass-123").status_code == 429
    # Another client behind the same proxy is not locked out.
    colleague = Client(REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="198.51.100.7")
    assert _login(colleague, "alice", "alice-pass-123").status_code == 302


@pytest.mark.parametrize("way", ["form", "api"])
def test_the_failure_that_reaches_the_limit_is_a_429_on_the_form_and_the_api_alike(alice: Any, way: str) -> None:
    client = Client()
    attempt = (lambda: _login(client, "alice", "wrong")) if way == "form" else (lambda: _basic("alice", "wrong"))
    codes = [attempt().status_code for _ in range(LIMIT + 1)]
    assert codes == [200 if way == "form" else 401] * (LIMIT - 1) + [429, 429]


def _age_the_lockout(seconds: int) -> None:
    from datetime import timedelta

    from axes.models import AccessAttempt

    for attempt in AccessAttempt.objects.all():
        attempt.attempt_time -= timedelta(seconds=seconds)
        attempt.save(update_fields=["attempt_time"])


def test_retry_after_is_the_time_left_and_tries_during_the_lockout_do_not_extend_it(alice: Any) -> None:
    client = Client()
    for _ in range(LIMIT):
        _login(client, "alice", "wrong")
    _age_the_lockout(600)  # locked ten minutes ago: five of the fifteen are left
    page = _login(client, "alice", "alice-pass-123")
    assert page.status_code == 429
    assert 240 < int(page["Retry-After"]) <= 300
    assert "5 more minutes" in page.content.decode()
    api = _basic("alice", "wrong")
    assert api.status_code == 429 and 240 < int(api["Retry-After"]) <= 300  # the try did not restart it
    assert "5 more minutes" in api.json()["message"]
    _age_the_lockout(300)  # the fifteen minutes are over
    assert _login(client, "alice", "alice-pass-123").status_code == 302
