"""The notification pages, API and CLI: admins make rules and channels (a refused URL is a
field error and writes nothing), everyone in the project reads them and the delivery log,
"send a test" and "resume" work, each person sees their own notifications with the unread
count, untrusted text stays text, and the pages do not grow in queries with their rows."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from evaluations.accounts.tokens import token_create
from evaluations.models import (
    AuditEvent,
    Membership,
    Monitor,
    Notification,
    NotifyAttempt,
    NotifyChannel,
    NotifyDelivery,
    NotifyMessage,
    NotifyRule,
    Project,
)
from evaluations.notify import delivery
from tests.conftest import REPO
from tests.notify_helpers import webhook_receiver

HOSTILE = '<script>alert("x")</script>'


@pytest.fixture
def dave(acme: Project) -> Any:
    user = get_user_model().objects.create_user("dave", "dave@example.com", "x")
    Membership.objects.create(project=acme, user=user, role=Membership.Role.ADMIN)
    return user


@pytest.fixture
def dave_client(dave: Any) -> Client:
    client = Client()
    client.force_login(dave)
    return client


def test_an_admin_adds_a_channel_and_a_rule_through_the_pages(acme: Project, dave_client: Client) -> None:
    response = dave_client.post(reverse("notify_channel_new", args=["acme"]),
                                {"name": "team", "kind": "email", "emails": "a@example.com\nb@example.com",
                                 "enabled": "on"})
    assert response.status_code == 302
    channel = NotifyChannel.objects.get()
    assert channel.emails == "a@example.com\nb@example.com" and channel.secret
    response = dave_client.post(reverse("notify_rule_new", args=["acme"]),
                                {"name": "main regresses", "kind": "run_finished", "condition": "regressions",
                                 "branch": "main", "channels": [channel.pk], "enabled": "on",
                                 "cooldown_minutes": "30", "window_minutes": "60", "min_count": "20"})
    assert response.status_code == 302, response.content.decode()[:2000]
    rule = NotifyRule.objects.get()
    assert (rule.branch, rule.cooldown_minutes, list(rule.channels.all())) == ("main", 30, [channel])
    assert AuditEvent.objects.filter(verb="notify.changed").count() == 2
    page = dave_client.get(reverse("notify_settings", args=["acme"])).content.decode()
    assert "main regresses" in page and "branch main" in page and "team" in page


def test_a_monitor_rule_picks_a_monitor_of_the_project_and_names_a_wrong_criterion(
        acme: Project, globex: Project, dave_client: Client) -> None:
    mine = Monitor.objects.create(project=acme, name="answers", criteria={"safety": {"evaluator": "json_valid"}})
    theirs = Monitor.objects.create(project=globex, name="<b>theirs</b>", criteria={"safety": {}})
    form = dave_client.get(reverse("notify_rule_new", args=["acme"])).content.decode()
    assert f'<option value="{mine.pk}">answers (safety)</option>' in form and "theirs" not in form
    values = {"name": "safety drop", "kind": "monitor", "monitor_id": str(mine.pk), "criterion": "nope",
              "threshold": "0.9", "window_minutes": "60", "min_count": "20", "cooldown_minutes": "0"}
    refused = dave_client.post(reverse("notify_rule_new", args=["acme"]), values)
    assert refused.status_code == 400 and "has no criterion &#x27;nope&#x27;" in refused.content.decode()
    other = dave_client.post(reverse("notify_rule_new", args=["acme"]), {**values, "monitor_id": str(theirs.pk)})
    assert other.status_code == 400 and not NotifyRule.objects.exists()
    saved = dave_client.post(reverse("notify_rule_new", args=["acme"]), {**values, "criterion": "safety"})
    assert saved.status_code == 302
    assert NotifyRule.objects.values_list("monitor_id", "criterion", "threshold").get() == (mine.pk, "safety", 0.9)


def test_a_metadata_webhook_url_is_a_field_error_and_writes_nothing(acme: Project, dave_client: Client) -> None:
    response = dave_client.post(reverse("notify_channel_new", args=["acme"]),
                                {"name": "evil", "kind": "webhook", "url": "http://169.254.169.254/latest/"})
    assert response.status_code == 400
    assert "is a cloud metadata address" in response.content.decode() and not NotifyChannel.objects.exists()


def test_bad_email_lines_are_named_by_line(acme: Project, dave_client: Client) -> None:
    response = dave_client.post(reverse("notify_channel_new", args=["acme"]),
                                {"name": "team", "kind": "email", "emails": "a@example.com\nnot an address"})
    assert response.status_code == 400
    assert "line 2: &#x27;not an address&#x27; is not an e-mail address" in response.content.decode()
    assert not NotifyChannel.objects.exists()


def test_a_member_reads_the_settings_but_cannot_change_them(acme: Project, alice_client: Client) -> None:
    channel = NotifyChannel.objects.create(project=acme, name="hook", kind="webhook", url="http://127.0.0.1:9/x",
                                           secret="k")
    page = alice_client.get(reverse("notify_settings", args=["acme"])).content.decode()
    assert "hook" in page and "http://127.0.0.1:9/x" not in page  # the URL may hold a token: admins only
    assert "New channel" not in page
    assert alice_client.post(reverse("notify_channel_test", args=["acme", channel.pk])).status_code == 403
    assert alice_client.post(reverse("notify_channel_edit", args=["acme", channel.pk]),
                             {"action": "delete"}).status_code == 403
    assert NotifyChannel.objects.filter(pk=channel.pk).exists() and not NotifyDelivery.objects.exists()


def test_send_a_test_queues_a_delivery_and_the_log_shows_its_attempt(acme: Project, dave_client: Client) -> None:
    with webhook_receiver() as receiver:
        channel = NotifyChannel.objects.create(project=acme, name="hook", kind="webhook", url=receiver.url,
                                               secret=receiver.secret)
        response = dave_client.post(reverse("notify_channel_test", args=["acme", channel.pk]))
        assert response.status_code == 302
        queued = NotifyDelivery.objects.get()
        assert queued.status == "pending"
        delivery.deliver([queued.pk])  # what the queued task does
    assert receiver.requests[0].signed and receiver.requests[0].body["event"] == "test"
    page = dave_client.get(reverse("notify_channel_log", args=["acme", channel.pk])).content.decode()
    assert "✓ sent" in page and str(queued.idempotency_id) in page and "200" in page


def test_a_paused_channel_says_so_and_resumes(acme: Project, dave_client: Client) -> None:
    channel = NotifyChannel.objects.create(project=acme, name="hook", kind="inapp", paused_at=timezone.now(),
                                           pause_reason="paused after 10 failures in a row; the last: 503")
    page = dave_client.get(reverse("notify_channel_log", args=["acme", channel.pk])).content.decode()
    assert "‖ Paused" in page and "503" in page
    assert "‖ paused" in dave_client.get(reverse("notify_settings", args=["acme"])).content.decode()
    assert dave_client.post(reverse("notify_channel_resume", args=["acme", channel.pk])).status_code == 302
    channel.refresh_from_db()
    assert channel.paused_at is None and channel.failures_in_row == 0


def test_the_api_resumes_a_paused_channel_and_queues_what_waited(acme: Project, dave_client: Client,
                                                                 alice_client: Client) -> None:
    channel = NotifyChannel.objects.create(project=acme, name="hook", kind="inapp", paused_at=timezone.now(),
                                           failures_in_row=10, pause_reason="paused after 10 failures in a row")
    message = _message(acme)
    NotifyDelivery.objects.create(message=message, channel=channel, idempotency_id=uuid.uuid4())
    url = reverse("api_notify_channel_resume", args=["acme", channel.pk])
    detail = reverse("api_notify_channel", args=["acme", channel.pk])
    assert alice_client.get(detail).json()["paused"] is True
    assert alice_client.post(url).status_code == 403  # a member who is not an admin
    channel.refresh_from_db()
    assert channel.paused_at is not None
    response = dave_client.post(url)
    assert response.status_code == 200 and response.json() == {"waiting": 1}
    channel.refresh_from_db()
    assert channel.paused_at is None and channel.failures_in_row == 0
    assert alice_client.get(detail).json()["paused"] is False  # a boolean, never null
    assert "resumed the paused notification channel hook" in dave_client.get(
        reverse("project_activity", args=["acme"])).content.decode()


def _message(project: Project, subject: str = f"[Acme] {HOSTILE}") -> NotifyMessage:
    payload = {"items": [{"type": "test", "verdict": HOSTILE, "url": "http://localhost:8000/"}]}
    return NotifyMessage.objects.create(project=project, event="test", subject=subject, payload=payload)


def test_your_notifications_escape_their_text_count_the_unread_and_mark_read(acme: Project, alice: Any,
                                                                              alice_client: Client, dave: Any) -> None:
    for _ in range(3):
        Notification.objects.create(user=alice, project=acme, message=_message(acme))
    Notification.objects.create(user=dave, project=acme, message=_message(acme, "dave's own"))
    assert 'data-testid="nav-unread"' in alice_client.get(reverse("notification_count")).content.decode()
    assert ">3<" in alice_client.get(reverse("notification_count")).content.decode()
    page = alice_client.get(reverse("notification_list")).content.decode()
    assert HOSTILE not in page and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert page.count('data-testid="notification"') == 3 and "dave&#x27;s own" not in page
    one = Notification.objects.filter(user=alice).first()
    assert one is not None
    alice_client.post(reverse("notification_read"), {"notification": one.pk})
    assert Notification.objects.filter(user=alice, read_at=None).count() == 2
    alice_client.post(reverse("notification_read"))
    assert not Notification.objects.filter(user=alice, read_at=None).exists()
    assert Notification.objects.filter(user=dave, read_at=None).count() == 1  # only your own
    assert 'nav-unread' not in alice_client.get(reverse("notification_count")).content.decode()


def test_the_log_escapes_the_response_excerpt(acme: Project, dave_client: Client) -> None:
    channel = NotifyChannel.objects.create(project=acme, name="hook", kind="inapp")
    sent = NotifyDelivery.objects.create(message=_message(acme), channel=channel, idempotency_id="0" * 32)
    NotifyAttempt.objects.create(delivery=sent, channel=channel, ok=False, status_code=500, latency_ms=3,
                                 excerpt=HOSTILE)
    page = dave_client.get(reverse("notify_channel_log", args=["acme", channel.pk])).content.decode()
    assert HOSTILE not in page and "&lt;script&gt;" in page


def test_the_pages_do_not_grow_in_queries_with_their_rows(acme: Project, alice: Any, alice_client: Client,
                                                          dave_client: Client,
                                                          django_assert_max_num_queries: Any) -> None:
    channels = [NotifyChannel.objects.create(project=acme, name=f"c{i}", kind="inapp") for i in range(12)]
    for i in range(12):
        rule = NotifyRule.objects.create(project=acme, name=f"r{i}", kind="run_finished")
        rule.channels.set(channels[:3])
    message = _message(acme)
    for i in range(120):
        sent = NotifyDelivery.objects.create(message=message, channel=channels[0], idempotency_id=f"{i:032x}")
        NotifyAttempt.objects.create(delivery=sent, channel=channels[0], ok=True, status_code=200, latency_ms=1)
        Notification.objects.create(user=alice, project=acme, message=_message(acme, f"m{i}"))
    with django_assert_max_num_queries(14):
        assert dave_client.get(reverse("notify_settings", args=["acme"])).status_code == 200
    with django_assert_max_num_queries(14):
        assert dave_client.get(reverse("notify_channel_log", args=["acme", channels[0].pk])).status_code == 200
    with django_assert_max_num_queries(12):
        assert alice_client.get(reverse("notification_list")).status_code == 200


def test_the_api_makes_rules_and_channels_for_admins_only(acme: Project, alice: Any, dave: Any) -> None:
    admin = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=dave, name='ci').secret}")
    member = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=alice, name='ci').secret}")
    url = reverse("api_notify_channels", args=["acme"])
    refused = admin.post(url, {"name": "x", "kind": "webhook", "url": "http://[fd00:ec2::254]/"},
                         content_type="application/json")
    assert refused.status_code == 400 and "url" in json.dumps(refused.json()) and not NotifyChannel.objects.exists()
    made = admin.post(url, {"name": "hook", "kind": "webhook", "url": "http://127.0.0.1:9/hook"},
                      content_type="application/json")
    assert made.status_code == 201 and len(made.json()["secret"]) == 64
    assert member.post(url, {"name": "y", "kind": "inapp"}, content_type="application/json").status_code == 403
    listed = member.get(url).json()
    assert listed["results"][0]["url"] is None and "secret" not in listed["results"][0]
    rules = reverse("api_notify_rules", args=["acme"])
    monitor = Monitor.objects.create(project=acme, name="answers", criteria={"safety": {"evaluator": "json_valid"}})
    bad = admin.post(rules, {"name": "m", "kind": "monitor", "monitor_id": monitor.pk},
                     content_type="application/json")
    assert bad.status_code == 400 and "criterion" in json.dumps(bad.json()) and not NotifyRule.objects.exists()
    rule = admin.post(rules, {"name": "m", "kind": "monitor", "monitor_id": monitor.pk, "criterion": "safety",
                              "threshold": 0.9, "min_count": 50, "channels": [made.json()["id"]]},
                      content_type="application/json")
    assert rule.status_code == 201 and rule.json()["channels"] == [made.json()["id"]]
    patched = admin.patch(reverse("api_notify_rule", args=["acme", rule.json()["id"]]), {"cooldown_minutes": 15},
                          content_type="application/json")
    assert patched.status_code == 200 and patched.json()["cooldown_minutes"] == 15
    tested = admin.post(reverse("api_notify_channel_test", args=["acme", made.json()["id"]]))
    assert tested.status_code == 202 and NotifyDelivery.objects.get().idempotency_id.hex == tested.json()[
        "delivery_id"].replace("-", "")
    assert admin.delete(reverse("api_notify_rule", args=["acme", rule.json()["id"]])).status_code == 204


def test_the_cli_adds_lists_and_removes_and_refuses_bad_input(acme: Project) -> None:
    out = StringIO()
    call_command("notify", "channel-add", "--project", "acme", "--name", "inbox", "--kind", "inapp", stdout=out)
    channel = json.loads(out.getvalue())
    out = StringIO()
    call_command("notify", "rule-add", "--project", "acme", "--name", "slow", "--kind", "run_finished",
                 "--condition", "pass_rate_below", "--pass-rate-below", "0.8", "--channel", str(channel["id"]),
                 stdout=out)
    rule = json.loads(out.getvalue())
    assert rule["pass_rate_below"] == 0.8 and rule["channels"] == [channel["id"]]
    out = StringIO()
    call_command("notify", "rules", "--project", "acme", stdout=out)
    assert [json.loads(line)["name"] for line in out.getvalue().splitlines()] == ["slow"]
    call_command("notify", "rule-remove", "--project", "acme", str(rule["id"]), stdout=StringIO())
    assert not NotifyRule.objects.exists()


def test_the_cli_says_which_field_is_wrong_and_exits_1(tmp_path: Any, embedded_data_dir: Any) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env["EVALSITE_DATA_DIR"] = str(embedded_data_dir(tmp_path))
    subprocess.run([sys.executable, "manage.py", "shell", "-c",
                    "from evaluations.models import Project; Project.objects.create(slug='acme', name='Acme')"],
                   cwd=REPO, env=env, check=True)
    done = subprocess.run([sys.executable, "manage.py", "notify", "channel-add", "--project", "acme", "--name", "x",
                           "--kind", "webhook", "--url", "http://100.100.100.200/"], cwd=REPO, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert "nothing was saved" in done.stderr and "url:" in done.stderr and "metadata" in done.stderr
