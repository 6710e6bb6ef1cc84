"""Accounts: log in and out, change and reset a password (the email holds a working link),
project members managed by admins, and production settings that `check --deploy` accepts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.urls import reverse

from evaluations.models import AuditEvent, Membership, Project

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def dave(acme: Project) -> Any:
    """An admin of acme."""
    user = get_user_model().objects.create_user("dave", "dave@example.com", "dave-pass-123")
    Membership.objects.create(project=acme, user=user, role=Membership.Role.ADMIN)
    return user


@pytest.fixture
def dave_client(dave: Any) -> Client:
    client = Client()
    client.force_login(dave)
    return client


def test_logging_in_and_out(alice: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    page = client.get(reverse("login"))
    token = page.cookies["csrftoken"].value
    assert b"Forgot your password?" in page.content
    response = client.post(reverse("login"), {"username": "alice", "password": "alice-pass-123",
                                              "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert client.get(reverse("account")).status_code == 200
    token = client.cookies["csrftoken"].value
    assert client.post(reverse("logout"), {"csrfmiddlewaretoken": token}).status_code == 302
    assert client.get(reverse("account")).status_code == 302


def test_a_wrong_password_does_not_log_in(alice: Any) -> None:
    client = Client()
    response = client.post(reverse("login"), {"username": "alice", "password": "nope"})
    assert response.status_code == 200 and b"didn't match" in response.content
    assert client.get(reverse("account")).status_code == 302


def test_a_wrong_password_is_checked_once_and_recorded_once(alice: Any) -> None:
    """Two backends are listed (ours, then Django's for older sessions): a failed login ends
    at ours, so the password is hashed once and one failure is signalled."""
    from django.contrib.auth import authenticate
    from django.contrib.auth.signals import user_login_failed

    failures: list[dict[str, Any]] = []

    def record(sender: Any, credentials: dict[str, Any], **kwargs: Any) -> None:
        failures.append(credentials)

    user_login_failed.connect(record)
    try:
        assert authenticate(None, username="alice", password="nope") is None
        assert authenticate(None, username="nobody", password="nope") is None
        assert authenticate(None, username="alice", password="alice-pass-123") == alice
    finally:
        user_login_failed.disconnect(record)
    assert [f["username"] for f in failures] == ["alice", "nobody"]


def test_the_session_user_is_read_in_one_statement_and_older_sessions_stay_valid(
        alice: Any, django_assert_num_queries: Any) -> None:
    from django.contrib.auth import BACKEND_SESSION_KEY, get_user
    from django.http import HttpRequest

    new, old = Client(), Client()
    new.force_login(alice)  # as a login now stores it: our backend
    old.force_login(alice, backend="django.contrib.auth.backends.ModelBackend")  # as before it existed
    session = new.session
    assert session[BACKEND_SESSION_KEY] == "evaluations.auth_backends.ModelBackend"  # loaded now
    for client in (new, old):
        page = client.get(reverse("account"))
        assert page.status_code == 200 and b"alice" in page.content
    request = HttpRequest()
    request.session = session
    with django_assert_num_queries(1):
        user = get_user(request)
    assert user == alice and user.is_authenticated
    alice.is_active = False
    alice.save()
    for client in (new, old):  # a deactivated user is logged out by either backend
        assert client.get(reverse("account")).status_code == 302


def test_changing_the_password(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    assert b"Change password" in client.get(reverse("password_change")).content
    response = client.post(reverse("password_change"), {
        "old_password": "alice-pass-123", "new_password1": "a-new-long-secret-9", "new_password2": "a-new-long-secret-9"})
    assert response.status_code == 302 and response["Location"] == reverse("password_change_done")
    alice.refresh_from_db()
    assert alice.check_password("a-new-long-secret-9")


def test_the_old_password_is_required_to_change_it(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    response = client.post(reverse("password_change"), {
        "old_password": "wrong", "new_password1": "a-new-long-secret-9", "new_password2": "a-new-long-secret-9"})
    assert response.status_code == 200
    alice.refresh_from_db()
    assert alice.check_password("alice-pass-123")


def test_a_password_reset_email_holds_a_link_that_sets_a_new_password(alice: Any, settings: Any) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    client = Client()
    response = client.post(reverse("password_reset"), {"email": "alice@example.com"})
    assert response.status_code == 302 and response["Location"] == reverse("password_reset_done")
    [message] = mail.outbox
    assert message.to == ["alice@example.com"]
    assert message.subject == "Reset your evalsite password"
    link = re.search(r"http://testserver(/accounts/reset/\S+/)", message.body)
    assert link, message.body
    form = client.get(link.group(1), follow=True)
    assert b"Choose a new password" in form.content
    done = client.post(form.redirect_chain[-1][0], {"new_password1": "brand-new-secret-7",
                                                    "new_password2": "brand-new-secret-7"})
    assert done.status_code == 302 and done["Location"] == reverse("password_reset_complete")
    alice.refresh_from_db()
    assert alice.check_password("brand-new-secret-7")
    used = client.get(link.group(1), follow=True)
    assert b"This link does not work" in used.content


def test_an_unknown_address_sends_nothing_and_says_the_same(alice: Any, settings: Any) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    response = Client().post(reverse("password_reset"), {"email": "nobody@example.com"})
    assert response.status_code == 302 and response["Location"] == reverse("password_reset_done")
    assert mail.outbox == []


def settings_in_subprocess(env: dict[str, str], code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # A clean environment: the browser tests set DJANGO_ALLOW_ASYNC_UNSAFE in this process.
    skip = ("EMAIL_", "EVALSITE_", "DEBUG", "SECRET_KEY", "DJANGO_", "ALLOWED_HOSTS", "DATABASE_URL")
    full = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    full.update({"EVALSITE_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "evalsite.settings", **env})
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=full, capture_output=True, text=True,
                          timeout=120)


def test_email_goes_to_the_console_by_default_and_to_smtp_when_a_host_is_set(tmp_path: Path) -> None:
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "print(s.EMAIL_BACKEND, s.EMAIL_HOST, s.EMAIL_PORT, s.EMAIL_USE_TLS, s.DEFAULT_FROM_EMAIL)")
    default = settings_in_subprocess({}, code, tmp_path)
    assert default.stdout.startswith("django.core.mail.backends.console.EmailBackend"), default.stderr
    smtp = settings_in_subprocess({"EMAIL_HOST": "smtp.example.com", "EMAIL_PORT": "2525", "EMAIL_USE_TLS": "0",
                                   "DEFAULT_FROM_EMAIL": "evals@example.com"}, code, tmp_path)
    assert smtp.stdout.split() == ["django.core.mail.backends.smtp.EmailBackend", "smtp.example.com", "2525",
                                   "False", "evals@example.com"], smtp.stderr


DEPLOY = "from django.core.management import execute_from_command_line as m; m(['manage.py', 'check', '--deploy'])"


def test_check_deploy_is_clean_with_production_settings(tmp_path: Path) -> None:
    result = settings_in_subprocess({"DEBUG": "0", "EVALSITE_HTTPS": "1", "ALLOWED_HOSTS": "evals.example.com"},
                                    DEPLOY, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout + result.stderr
    assert "WARNINGS" not in result.stderr


def test_check_deploy_does_complain_without_https(tmp_path: Path) -> None:
    """The clean result above is not vacuous: the same check flags plain-HTTP cookies."""
    result = settings_in_subprocess({"DEBUG": "0", "ALLOWED_HOSTS": "evals.example.com"}, DEPLOY, tmp_path)
    assert "security.W012" in result.stderr  # SESSION_COOKIE_SECURE
    assert "security.W004" in result.stderr  # HSTS


def test_production_cookies_are_secure_and_http_only(tmp_path: Path) -> None:
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SESSION_COOKIE_HTTPONLY, s.X_FRAME_OPTIONS, "
            "s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS > 0, len(s.SECRET_KEY) >= 50)")
    result = settings_in_subprocess({"DEBUG": "0", "EVALSITE_HTTPS": "1"}, code, tmp_path)
    assert result.stdout.split() == ["True", "True", "True", "DENY", "True", "True", "True"], result.stderr


# --- Members ------------------------------------------------------------------------------------


def members_url() -> str:
    return reverse("project_members", args=["acme"])


def test_an_admin_adds_a_user_by_email_with_a_role(dave_client: Client, bob: Any, acme: Project) -> None:
    response = dave_client.post(members_url(), {"action": "add", "user": "BOB@example.com", "role": "viewer"})
    assert response.status_code == 302
    assert Membership.objects.get(project=acme, user=bob).role == "viewer"
    event = AuditEvent.objects.get(verb=AuditEvent.Verb.MEMBER_ADDED)
    assert event.project == acme and event.actor is not None and event.actor.username == "dave"
    assert event.summary == "added bob as viewer"


def test_adding_an_unknown_user_or_a_member_twice_is_refused(dave_client: Client, alice: Any) -> None:
    unknown = dave_client.post(members_url(), {"action": "add", "user": "zed", "role": "member"})
    assert unknown.status_code == 400 and b"No active user with the username or email &#x27;zed&#x27;" in unknown.content
    twice = dave_client.post(members_url(), {"action": "add", "user": "alice", "role": "admin"})
    assert twice.status_code == 400 and b"Alice is already a member of Acme" in twice.content
    assert Membership.objects.get(user=alice).role == "member"


def test_an_admin_changes_a_role_and_the_change_is_recorded(dave_client: Client, alice: Any) -> None:
    membership = Membership.objects.get(user=alice)
    dave_client.post(members_url(), {"action": "change", "membership": membership.pk, "role": "viewer"})
    membership.refresh_from_db()
    assert membership.role == "viewer"
    event = AuditEvent.objects.get(verb=AuditEvent.Verb.MEMBER_CHANGED)
    assert event.data == {"user": "alice", "from": "member", "to": "viewer"}


def test_an_admin_removes_a_member(dave_client: Client, alice: Any) -> None:
    membership = Membership.objects.get(user=alice)
    dave_client.post(members_url(), {"action": "remove", "membership": membership.pk})
    assert not Membership.objects.filter(pk=membership.pk).exists()
    assert AuditEvent.objects.filter(verb=AuditEvent.Verb.MEMBER_REMOVED, summary="removed alice (member)").exists()


def test_the_last_admin_can_be_neither_removed_nor_demoted(dave_client: Client, dave: Any) -> None:
    mine = Membership.objects.get(user=dave)
    removed = dave_client.post(members_url(), {"action": "remove", "membership": mine.pk})
    assert removed.status_code == 400 and b"at least one admin" in removed.content
    demoted = dave_client.post(members_url(), {"action": "change", "membership": mine.pk, "role": "member"})
    assert demoted.status_code == 400
    mine.refresh_from_db()
    assert mine.role == "admin"


def test_with_a_second_admin_the_first_may_step_down(dave_client: Client, dave: Any, alice: Any) -> None:
    Membership.objects.filter(user=alice).update(role="admin")
    mine = Membership.objects.get(user=dave)
    dave_client.post(members_url(), {"action": "change", "membership": mine.pk, "role": "member"})
    mine.refresh_from_db()
    assert mine.role == "member"


def test_members_see_the_list_but_no_admin_controls(alice_client: Client, dave: Any) -> None:
    page = alice_client.get(members_url()).content.decode()
    assert "dave" in page and "alice" in page
    assert 'name="action"' not in page


def test_an_admin_sees_the_controls(dave_client: Client) -> None:
    page = dave_client.get(members_url()).content.decode()
    assert 'value="add"' in page and 'value="remove"' in page


def test_a_membership_of_another_project_cannot_be_touched_from_this_one(dave_client: Client, bob: Any) -> None:
    bobs = Membership.objects.get(user=bob)
    response = dave_client.post(members_url(), {"action": "remove", "membership": bobs.pk})
    assert response.status_code == 400
    assert Membership.objects.filter(pk=bobs.pk).exists()


def test_the_header_links_to_activity_and_account(alice_client: Client) -> None:
    page = alice_client.get(reverse("home")).content.decode()
    assert f'href="{reverse("project_activity", args=["acme"])}"' in page
    assert f'href="{reverse("account")}"' in page
