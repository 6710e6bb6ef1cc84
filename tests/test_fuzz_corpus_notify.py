"""The hostile notification inputs of tests/data/fuzz/notify/ replayed (issue 38): every name
with control characters or Slack's control syntax gives a one-line subject that a real SMTP
server receives with no header of its own, Slack text with no line, link or mention of its own,
and one-line message lines; every receiver's answer holding a secret reaches a viewer's delivery
log (page and API) without it, and the stored excerpt is bounded and free of NUL."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from evaluations.accounts.tokens import token_create
from evaluations.models import Membership, NotifyAttempt, NotifyChannel, NotifyDelivery, NotifyMessage, Project
from evaluations.notify import channels, delivery, payloads, services
from evaluations.notify.redact import redact
from tests.notify_helpers import smtp_server, smtp_settings, webhook_receiver

CORPUS = Path(__file__).resolve().parent / "data" / "fuzz" / "notify"
NAMES: list[dict[str, str]] = json.loads((CORPUS / "names.json").read_text())
ANSWERS: list[dict[str, Any]] = json.loads((CORPUS / "answers.json").read_text())
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
LINK = re.compile(r"^<(http://[^|>\s]+)\|(.*)>$")


def _payload(project: Project, name: str) -> dict[str, Any]:
    item = {"type": "run_finished", "verdict": f"run #7 ({name}) finished on {name}: nothing to compare with",
            "run": {"id": 7, "name": name, "url": "http://testserver/runs/7/"}, "compare_url": None,
            "causes": [{"signature": name, "cases": 2, "change": "new", "url": "http://testserver/compare/?cause=1"}]}
    return payloads.message_payload(project=project, rule=None, event="run_finished", items=[item], recipient=None)


def test_the_corpus_is_there_and_each_case_says_why() -> None:
    assert len(NAMES) >= 10 and len(ANSWERS) >= 10
    assert all(case.get("why") for case in NAMES + ANSWERS)


@pytest.mark.parametrize("case", NAMES, ids=lambda c: c["why"][:40])
def test_a_hostile_name_makes_one_line_subjects_and_slack_text_with_nothing_of_its_own(case: dict[str, str]) -> None:
    name = case["name"]
    project = Project(slug="acme", name=name)
    payload = _payload(project, name)
    assert not CONTROL.search(payload["subject"])
    lines = payloads.lines_of(payload)
    assert len(lines) == 2 and not any(CONTROL.search(text) for text, _ in lines)
    text = channels.slack_text(NotifyMessage(project=project, event="run_finished", subject=payload["subject"],
                                             payload=payload))
    shown = text.split("\n")
    assert len(shown) == 1 + len(lines)  # the subject and one line per line: none added by the name
    assert shown[0].startswith("*") and "<" not in shown[0] and ">" not in shown[0]
    for line in shown[1:]:
        link = LINK.match(line)
        assert link is not None, line
        label = link.group(2)
        assert "<" not in label and ">" not in label  # no mention, no link, no <!channel> of the name's
        assert not re.search(r"&(?!amp;|lt;|gt;)", label)  # every & escaped


@pytest.mark.django_db
def test_every_hostile_name_is_mailed_through_real_smtp_with_one_subject_line(acme: Project, settings: Any) -> None:
    with smtp_server() as box:
        smtp_settings(settings, box)
        mail = services.channel_save(project=acme, actor=None, values={"name": "mail", "kind": "email",
                                                                       "emails": "team@example.com"})
        now = timezone.now()
        ids = []
        for case in NAMES:
            name = case["name"].replace("\x00", "")  # a stored name has no NUL (PostgreSQL refuses it)
            payload = _payload(Project(slug="acme", name=name), name)
            message = NotifyMessage.objects.create(project=acme, event="run_finished", subject=payload["subject"],
                                                   payload=payload, created_at=now)
            ids.append(NotifyDelivery.objects.create(message=message, channel=mail, idempotency_id=uuid.uuid4(),
                                                     next_attempt_at=now, created_at=now).pk)
        assert delivery.deliver(ids) == len(NAMES)
        received = list(box.messages)
    assert len(received) == len(NAMES)
    for message in received:
        assert set(message.keys()) >= {"Subject", "To", "From"}
        assert not {"Bcc", "X-Injected"} & set(message.keys())
        assert message["X-Envelope-To"] == "team@example.com"
        assert "\n" not in str(message["Subject"]) and "\r" not in str(message["Subject"])
    mail.refresh_from_db()
    assert mail.failures_in_row == 0 and mail.paused_at is None


@pytest.mark.parametrize("case", ANSWERS, ids=lambda c: c["why"][:40])
def test_a_secret_in_an_answer_is_redacted_and_the_excerpt_is_bounded(case: dict[str, Any]) -> None:
    shown = redact(case["answer"])
    for secret in case["secrets"]:
        assert secret not in shown, (secret, shown)
    if case.get("keep"):
        assert case["keep"] in shown
    stored = channels.answer_excerpt(case["answer"].encode() * 20, "")
    assert "\x00" not in stored and len(stored) <= channels.EXCERPT


@pytest.mark.django_db
def test_every_hostile_answer_reaches_a_viewers_log_page_and_api_without_its_secrets(acme: Project) -> None:
    users = get_user_model().objects
    admin, viewer = users.create_user("dave", "d@example.com", "x"), users.create_user("carol", "c@example.com", "x")
    Membership.objects.create(project=acme, user=admin, role=Membership.Role.ADMIN)
    Membership.objects.create(project=acme, user=viewer, role=Membership.Role.VIEWER)
    for case in ANSWERS:
        with webhook_receiver(reply=case["answer"].encode()) as receiver:
            hook = services.channel_save(project=acme, actor=None, values={
                "name": f"hook-{len(case['why'])}-{case['why'][:20]}", "kind": "slack", "url": receiver.url})
            assert delivery.deliver([delivery.send_test(hook).pk]) == 1
        attempt = NotifyAttempt.objects.get(channel=hook)
        assert "\x00" not in attempt.excerpt
        page = Client()
        page.force_login(viewer)
        html = page.get(reverse("notify_channel_log", args=["acme", hook.pk])).content.decode()
        api = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=viewer, name=f'v{hook.pk}').secret}").get(
            f"/api/v1/projects/acme/notify/channels/{hook.pk}/log/").json()
        [row] = api["results"] if isinstance(api, dict) else api
        for secret in case["secrets"]:
            assert secret not in html and secret not in row["excerpt"], secret
        if case["secrets"]:
            owner = Client()
            owner.force_login(admin)
            as_admin = owner.get(reverse("notify_channel_log", args=["acme", hook.pk])).content.decode()
            assert case["secrets"][0].replace("&", "&amp;") in as_admin  # admins read the log as stored
    assert NotifyChannel.objects.count() == len(ANSWERS)
