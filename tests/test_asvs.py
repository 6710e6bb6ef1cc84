"""The OWASP ASVS level-1 pass (docs/SECURITY.md, "ASVS level 1"): one test per finding or
requirement checked here; the requirements other test files hold are named there."""

from __future__ import annotations

import base64
import json
import logging
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from evaluations.accounts.tokens import token_create, token_revoke
from evaluations.models import ApiToken, EvalSetVersion, Membership, Project
from evaluations.web.charts import to_html
from evaluations.web.charts.run import TagRate, pass_rate_by_tag
from tests.api_helpers import assert_error

pytestmark = pytest.mark.django_db


# --- V2 Authentication ------------------------------------------------------------------------


def test_v2_1_1_passwords_shorter_than_12_characters_are_refused(alice: Any, alice_client: Client) -> None:
    response = alice_client.post(reverse("password_change"), {
        "old_password": "alice-pass-123", "new_password1": "k9#fw!zq2m", "new_password2": "k9#fw!zq2m"})
    assert response.status_code == 200
    assert "at least 12 characters" in response.content.decode()
    alice.refresh_from_db()
    assert alice.check_password("alice-pass-123")


def test_v2_1_2_long_passphrases_are_accepted(alice: Any, alice_client: Client) -> None:
    phrase = "correct horse battery staple " * 4  # 116 characters, spaces included
    response = alice_client.post(reverse("password_change"), {
        "old_password": "alice-pass-123", "new_password1": phrase, "new_password2": phrase})
    assert response.status_code == 302
    alice.refresh_from_db()
    assert alice.check_password(phrase)


def test_v7_1_1_failed_logins_are_logged_without_the_password(alice: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    Client().post(reverse("login"), {"username": "alice", "password": "Sup3r-s3cret-guess"})
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "AXES" in text  # the failure is recorded
    assert "Sup3r-s3cret-guess" not in text


# --- V3 Session management --------------------------------------------------------------------


def test_v3_2_1_logging_in_issues_a_new_session_key(alice: Any) -> None:
    client = Client()
    client.get(reverse("login"))
    client.session["planted"] = "by an attacker"  # a session that exists before login
    before = client.session.session_key
    client.session.save()
    client.post(reverse("login"), {"username": "alice", "password": "alice-pass-123"})
    assert client.session.session_key != before


def test_v3_3_1_logging_out_ends_the_session_on_the_server(alice: Any) -> None:
    client = Client()
    client.post(reverse("login"), {"username": "alice", "password": "alice-pass-123"})
    stolen = client.cookies["sessionid"].value
    assert client.post(reverse("logout")).status_code == 302
    replay = Client()
    replay.cookies["sessionid"] = stolen
    assert replay.get(reverse("account")).status_code == 302  # sent to log in


def test_v3_4_2_and_3_4_3_the_session_cookie_is_httponly_and_samesite(alice: Any) -> None:
    response = Client().post(reverse("login"), {"username": "alice", "password": "alice-pass-123"})
    cookie = response.cookies["sessionid"]
    assert cookie["httponly"] is True
    assert cookie["samesite"] == "Lax"


# --- V4 Access control ------------------------------------------------------------------------


def test_v4_2_2_a_login_without_the_csrf_token_is_refused(alice: Any) -> None:
    response = Client(enforce_csrf_checks=True).post(reverse("login"), {"username": "alice",
                                                                       "password": "alice-pass-123"})
    assert response.status_code == 403


def _token_post(client: Client, **extra: Any) -> Any:
    return client.post("/api/v1/tokens/", data=json.dumps({"name": "minted"}), content_type="application/json",
                       **extra)


@pytest.mark.parametrize("role", ["viewer", "member", "admin"])
@pytest.mark.parametrize("keyword", ["Bearer", "Token"])
def test_v3_5_an_api_token_cannot_create_tokens_whatever_its_role(acme: Project, role: str, keyword: str) -> None:
    user = get_user_model().objects.create_user(f"u-{role}", f"{role}@example.com", "a-long-pass-123")
    Membership.objects.create(project=acme, user=user, role=role)
    made = token_create(user=user, name="leaked CI token")
    body = assert_error(_token_post(Client(HTTP_AUTHORIZATION=f"{keyword} {made.secret}")), 403, "permission_denied")
    assert "session" in body["message"]
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["leaked CI token"]


def test_v3_5_a_password_sent_as_basic_auth_cannot_create_tokens(alice: Any) -> None:
    basic = base64.b64encode(b"alice:alice-pass-123").decode()
    assert_error(_token_post(Client(HTTP_AUTHORIZATION=f"Basic {basic}")), 403, "permission_denied")
    assert not ApiToken.objects.exists()


def test_v3_5_a_session_creates_tokens_only_with_its_csrf_token(alice: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert_error(_token_post(client), 403, "permission_denied")
    assert not ApiToken.objects.exists()
    client.get(reverse("account"))  # the page sets the CSRF cookie, as a browser would get it
    created = _token_post(client, HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)
    assert created.status_code == 201, created.content
    assert Client(HTTP_AUTHORIZATION=f"Bearer {created.json()['token']}").get("/api/v1/projects/").status_code == 200


def test_v3_5_revoking_a_token_leaves_nothing_it_made_behind(alice: Any) -> None:
    made = token_create(user=alice, name="CI")
    bearer = Client(HTTP_AUTHORIZATION=f"Bearer {made.secret}")
    assert_error(_token_post(bearer), 403)
    token_revoke(token=made.token, user=alice)
    assert all(t.revoked_at for t in ApiToken.objects.filter(user=alice))
    assert_error(bearer.get("/api/v1/projects/"), 401, "authentication_failed")


# --- V5 Validation and output encoding --------------------------------------------------------


def test_v5_3_3_text_in_a_chart_cannot_end_its_data_block() -> None:
    html = to_html(pass_rate_by_tag([TagRate("</script><script>alert(1)</script>", 1, 1)]))
    opened = html.index(">", html.index('class="plotly-figure"')) + 1  # the data block's content
    block = html[opened:html.index("</script>", opened)]
    assert "alert(1)" in block and "<" not in block  # the text is there, escaped inside the JSON
    assert html.count("</script>") == 1  # only the block's own end: the data table escapes the text too
    assert "<script>alert" not in html


# --- V12 Files and resources ------------------------------------------------------------------


def test_v12_5_2_an_uploaded_file_is_downloaded_never_rendered(alice_client: Client, acme: Project) -> None:
    csv = b"input,expected_output\n<script>alert(1)</script>,<img src=x onerror=alert(2)>\n"
    upload = alice_client.post("/api/v1/evalsets/", {
        "project": "acme", "file": [SimpleUploadedFile("evil.csv", csv, content_type="text/html")]})
    assert upload.status_code == 201, upload.content
    version = EvalSetVersion.objects.get()
    response = alice_client.get(reverse("version_original", args=[version.pk]))
    assert response.content == csv
    assert response["Content-Type"] == "text/csv"  # chosen by the server, not the upload's
    assert response["Content-Disposition"].startswith("attachment")
    assert response["X-Content-Type-Options"] == "nosniff"


# --- V14 Configuration ------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/runs/", "/api/v1/runs/", "/accounts/login/"])
def test_v14_4_every_answer_carries_the_security_headers(alice_client: Client, acme: Project, path: str) -> None:
    response = alice_client.get(path)
    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    # The directives, in whatever order django-csp writes them.
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
    assert re.fullmatch(r"'self'( 'nonce-[^']+')?", directives["script-src"]), policy
    assert directives["frame-ancestors"] == "'none'"
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
