"""Notifications on a real django-q2 cluster: a run finished by the cluster with regressions
reaches a webhook, an SMTP server and the in-app list; a worker killed mid-delivery loses
nothing (the delivery is sent again, with the same idempotency id)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from evaluations.models import Notification, NotifyAttempt, NotifyDelivery, Project
from evaluations.notify import delivery, services
from evaluations.runs import services as runs
from evaluations.schemas.outputs import AgentOutput
from tests.compare_helpers import make_run
from tests.engine_helpers import import_demo, perfect_outputs, regressed_outputs
from tests.notify_helpers import Mailbox, parts, smtp_server, webhook_receiver
from tests.queue_helpers import qcluster, wait_for


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    with smtp_server() as box:
        yield box


@pytest.fixture
def cluster(tmp_path: Any, mailbox: Mailbox) -> Iterator[subprocess.Popen[bytes]]:
    with qcluster(tmp_path, EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(mailbox.port), EMAIL_USE_TLS="0",
                  EVALSITE_NOTIFY_LEASE_SECONDS="3", EVALSITE_NOTIFY_BACKOFF_SECONDS="0.1") as proc:
        yield proc


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_run_finishing_with_regressions_on_the_cluster_reaches_webhook_email_and_inbox(
        acme: Project, alice: Any, cluster: subprocess.Popen[bytes], mailbox: Mailbox) -> None:
    with webhook_receiver() as receiver:
        hook = services.channel_save(project=acme, actor=None, values={"name": "ci", "kind": "webhook",
                                                                         "url": receiver.url})
        hook.secret = receiver.secret
        hook.save()
        mail = services.channel_save(project=acme, actor=None, values={"name": "team", "kind": "email",
                                                                         "emails": "team@example.com"})
        inbox = services.channel_save(project=acme, actor=None, values={"name": "inbox", "kind": "inapp"})
        services.rule_save(project=acme, actor=None, values={"name": "regressions", "kind": "run_finished",
                                                             "condition": "regressions"},
                           channels=[hook.pk, mail.pk, inbox.pk])
        version = import_demo(acme)
        make_run(acme, version, perfect_outputs(), name="baseline")  # here; nothing to regress against
        run = runs.run_create(project=acme, version=version, target_kind="uploaded", name="nightly",
                              outputs=[AgentOutput.model_validate(o) for o in regressed_outputs()])
        wait_for(lambda: NotifyDelivery.objects.filter(status="sent").count() == 3, 90,
                 lambda: f"deliveries: {list(NotifyDelivery.objects.values_list('channel__kind', 'status'))}")
        [got] = receiver.requests
        assert got.signed and got.body["items"][0]["run"]["id"] == run.pk and got.body["items"][0]["regressions"] == 2
        [message] = mailbox.messages
        text, html = parts(message)
        assert message["X-Envelope-To"] == "team@example.com" and "2 regressions" in text and "2 regressions" in html
        assert Notification.objects.filter(user=alice, message__rule__name="regressions").count() == 1
        workers = {o.rsplit(":", 1)[1] for o in NotifyDelivery.objects.values_list("owner", flat=True)}
        assert str(cluster.pid) not in workers  # sent by the cluster's workers


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_delivery_still_delivers_with_the_same_id(
        acme: Project, cluster: subprocess.Popen[bytes]) -> None:
    with webhook_receiver(hold_first=True) as receiver:
        hook = services.channel_save(project=acme, actor=None, values={"name": "ci", "kind": "webhook",
                                                                         "url": receiver.url})
        sent = delivery.send_test(hook)  # queued for the cluster
        assert receiver.holding.wait(60), "the cluster never sent the delivery"
        owner = NotifyDelivery.objects.get(pk=sent.pk).owner
        victim = psutil.Process(int(owner.rsplit(":", 1)[1]))
        assert victim.pid in {p.pid for p in psutil.Process(cluster.pid).children(True)}
        victim.send_signal(signal.SIGKILL)  # mid-send: the request is out, no answer is back
        victim.wait(10)
        receiver.released.set()
        assert NotifyDelivery.objects.get(pk=sent.pk).status == "sending"
        deadline = time.monotonic() + 60
        while NotifyDelivery.objects.get(pk=sent.pk).status != "sent":  # the minute sweep's work, sooner
            assert time.monotonic() < deadline, "the delivery was lost with its worker"
            delivery.sweep()
            time.sleep(0.5)
        ids = {r.delivery_id for r in receiver.requests}
        assert ids == {str(sent.idempotency_id)} and len(receiver.requests) >= 2
        sent.refresh_from_db()
        assert sent.attempts >= 2 and NotifyAttempt.objects.filter(delivery=sent, ok=True).count() == 1
        assert cluster.poll() is None
