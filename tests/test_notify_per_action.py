"""Issue 41, item 4: one message per person per action. A bulk action of the review queue on
three cases that assigns them to bob with one comment @mentioning him reaches bob once, listing
the three cases (it sent six messages: three assignments and three mentions); so does one
triage that assigns and mentions. Delivered to a real SMTP server and a real webhook receiver
on 127.0.0.1. And the notifications page says which personal rules are on, with one click to
have your own assignments and mentions sent to you."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from django.test import Client
from django.urls import reverse

from evaluations.models import AuditEvent, Notification, NotifyMessage, NotifyRule, Project
from evaluations.notify import services
from tests.notify_helpers import parts, smtp_server, smtp_settings, webhook_receiver
from tests.team_helpers import REGRESSED, day_run, eval_id, team_version, user_in

THREE = [eval_id(i) for i in sorted(REGRESSED)[:3]]


@pytest.fixture(autouse=True)
def quick_retries(settings: Any) -> None:
    settings.EVALSITE_NOTIFY_BACKOFF_SECONDS = 0.05
    settings.EVALSITE_NOTIFY_INLINE_BACKOFF_SECONDS = 1.0


@pytest.fixture
def sync_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)  # django-q2 runs each task where it is queued


@pytest.fixture
def week(acme: Project, alice: Any) -> dict[str, Any]:
    version = team_version(acme)
    base = day_run(acme, version)
    run = day_run(acme, version, wrong=REGRESSED)
    return {"bob": user_in(acme, "bob", "member"), "base": base, "run": run}


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def project_rules(project: Project, *channels: Any) -> None:
    for kind in ("triage_assigned", "mention"):
        services.rule_save(project=project, actor=None, values={"name": kind, "kind": kind},
                           channels=[c.pk for c in channels])


def bulk(client: Client, week: dict[str, Any], cases: list[str], **posted: Any) -> Any:
    keys = [f"{week['run'].pk}:{week['base'].pk}:{case}" for case in cases]
    response = client.post(reverse("triage_bulk"), {"tab": "untriaged", "case": keys, **posted})
    assert response.status_code == 302
    return response


def test_a_bulk_action_that_assigns_and_mentions_reaches_the_person_once_listing_the_cases(
        acme: Project, alice: Any, week: dict[str, Any], settings: Any, sync_queue: None,
        django_capture_on_commit_callbacks: Any) -> None:
    bob = week["bob"]
    with smtp_server() as box, webhook_receiver() as receiver:
        smtp_settings(settings, box)
        mail = services.channel_save(project=acme, actor=None, values={"name": "mail", "kind": "email"})
        hook = services.channel_save(project=acme, actor=None, values={"name": "hook", "kind": "webhook",
                                                                       "url": receiver.url})
        hook.secret = receiver.secret
        hook.save()
        inbox = services.channel_save(project=acme, actor=None, values={"name": "inbox", "kind": "inapp"})
        project_rules(acme, mail, hook, inbox)
        with django_capture_on_commit_callbacks(execute=True):
            bulk(client_for(alice), week, THREE, status="confirmed", assignee=bob.pk,
                 comment="@bob the lookup change broke these")
        assert AuditEvent.objects.filter(verb__in=["triage.changed", "comment.added"]).count() == 6
        [email] = box.messages
        assert len(receiver.accepted()) == 1
    assert email["X-Envelope-To"] == "bob@example.com"
    assert email["Subject"] == f"[Acme] alice assigned you 3 cases and mentioned you on 3 cases: {', '.join(THREE)}"
    text, _ = parts(email)
    assert text.count("@bob the lookup change broke these") == 1  # the comment once, not once per case
    assert all(text.count(case) >= 1 for case in THREE)
    body = receiver.accepted()[0].body
    jsonschema.validate(body, json.loads((Path(__file__).resolve().parent.parent / "docs"
                                          / "notify-webhook.schema.json").read_text()))
    assert body["recipient"] == "bob" and body["event"] == "triage_assigned"
    assert sorted((i["type"], i["eval_id"]) for i in body["items"]) == sorted(
        [("triage_assigned", c) for c in THREE] + [("mention", c) for c in THREE])
    [note] = Notification.objects.filter(user=bob)
    assert NotifyMessage.objects.count() == 1 and note.message.recipient == bob
    page = client_for(bob).get(reverse("notification_list")).content.decode()
    assert page.count('data-testid="notification"') == 1
    assert "alice assigned 3 cases to bob" in page and "alice mentioned @bob on 3 cases" in page


def test_one_triage_that_assigns_and_mentions_is_one_message_and_two_actions_are_two(
        acme: Project, alice: Any, week: dict[str, Any], sync_queue: None,
        django_capture_on_commit_callbacks: Any) -> None:
    bob = week["bob"]
    project_rules(acme, services.channel_save(project=acme, actor=None, values={"name": "inbox", "kind": "inapp"}))
    result = week["run"].results.get(case__eval_id=THREE[0], iteration=0)
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(alice).post(reverse("triage_update"), {
            "candidate": week["run"].pk, "baseline": week["base"].pk, "result": result.pk,
            "assignee": bob.pk, "body": "@bob yours"})
    assert response.status_code in (200, 302)
    [first] = NotifyMessage.objects.all()
    assert [i["type"] for i in first.payload["items"]] == ["triage_assigned", "mention"]
    assert first.subject == f"[Acme] alice assigned you 1 case and mentioned you on 1 case: {THREE[0]}"
    with django_capture_on_commit_callbacks(execute=True):
        bulk(client_for(alice), week, THREE[1:], assignee=bob.pk)
    assert NotifyMessage.objects.count() == 2 and Notification.objects.filter(user=bob).count() == 2
    latest = NotifyMessage.objects.order_by("-pk").first()
    assert latest is not None and [i["eval_id"] for i in latest.payload["items"]] == THREE[1:]


def test_a_persons_own_rule_and_the_projects_rule_still_make_one_message(
        acme: Project, alice: Any, week: dict[str, Any], sync_queue: None,
        django_capture_on_commit_callbacks: Any) -> None:
    bob = week["bob"]
    project_rules(acme, services.channel_save(project=acme, actor=None, values={"name": "inbox", "kind": "inapp"}))
    services.personal_rules_enable(project=acme, user=bob)
    with django_capture_on_commit_callbacks(execute=True):
        bulk(client_for(alice), week, THREE, assignee=bob.pk, comment="@bob and @alice")
    [message] = NotifyMessage.objects.filter(recipient=bob)
    assert len(message.payload["items"]) == 6  # each assignment and mention once, through two rules
    assert Notification.objects.filter(user=bob).count() == 1
    assert not NotifyMessage.objects.filter(recipient=alice).exists()  # the author is not told of her own words


def test_someones_own_rule_tells_them_only(acme: Project, alice: Any, week: dict[str, Any], sync_queue: None,
                                           django_capture_on_commit_callbacks: Any) -> None:
    bob, carol = week["bob"], user_in(acme, "carol", "member")
    services.personal_rules_enable(project=acme, user=carol)  # carol's rules; bob has none
    with django_capture_on_commit_callbacks(execute=True):
        bulk(client_for(alice), week, THREE[:1], assignee=bob.pk, comment="@bob @carol look")
    assert list(NotifyMessage.objects.values_list("recipient__username", flat=True)) == ["carol"]
    assert [i["type"] for i in NotifyMessage.objects.get().payload["items"]] == ["mention"]


def routes(page: str, project: str = "acme") -> dict[str, str]:
    block = page.split(f'data-project="{project}"', 1)[1].split("</ul>", 1)[0]
    found = re.findall(r'data-kind="(\w+)">(.*?)</li>', block, re.S)
    return {kind: re.sub(r"<[^>]+>", "", text).strip() for kind, text in found}


def test_the_notifications_page_says_which_personal_rules_are_on_and_turns_mine_on_in_one_click(
        acme: Project, alice: Any, week: dict[str, Any], sync_queue: None,
        django_capture_on_commit_callbacks: Any) -> None:
    bob = week["bob"]
    client = client_for(bob)
    page = client.get(reverse("notification_list")).content.decode()
    assert "come to you by name" not in page.split('data-testid="personal-rules"', 1)[0]
    assert routes(page) == {"triage_assigned": "off Cases assigned to you: nothing is sent — no rule is on",
                            "mention": "off Your @mentions: nothing is sent — no rule is on"}
    assert 'data-testid="personal-on"' in page
    response = client.post(reverse("notification_personal", args=["acme"]), {"action": "on"}, follow=True)
    page = response.content.decode()
    assert "now come to you" in page
    shown = routes(page)
    assert shown["triage_assigned"].startswith("✓ on Cases assigned to you: In-app (rule")
    assert "bob: my assignments" in shown["triage_assigned"] and "bob: my @mentions" in shown["mention"]
    assert 'data-testid="personal-on"' not in page and 'data-testid="personal-off"' in page
    assert NotifyRule.objects.filter(owner=bob, enabled=True).count() == 2
    with django_capture_on_commit_callbacks(execute=True):
        bulk(client_for(alice), week, THREE, assignee=bob.pk)
    page = client.get(reverse("notification_list")).content.decode()
    assert page.count('data-testid="notification"') == 1 and "alice assigned 3 cases to bob" in page
    client.post(reverse("notification_personal", args=["acme"]), {"action": "off"})
    assert not NotifyRule.objects.filter(owner=bob, enabled=True).exists()
    assert NotifyRule.objects.filter(owner=bob).count() == 2  # turned off, kept for next time


def test_a_rule_without_a_channel_is_said_to_send_nothing(acme: Project, alice: Any) -> None:
    services.rule_save(project=acme, actor=None, values={"name": "assigned", "kind": "triage_assigned"}, channels=[])
    page = client_for(alice).get(reverse("notification_list")).content.decode()
    assert routes(page)["triage_assigned"] == ("⚠ off Cases assigned to you: nothing is sent — the rule “assigned” "
                                               "has no active channel")


def test_someone_outside_the_project_cannot_turn_rules_on_there(acme: Project, bob_client: Client) -> None:
    assert bob_client.post(reverse("notification_personal", args=["acme"]), {"action": "on"}).status_code == 404
    assert not NotifyRule.objects.exists()
