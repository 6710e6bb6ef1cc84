"""What a receiver or a name can make notifications do (issue 38, items 4, 5 and 8): a 400 MB
answer and a gzip bomb from a real server on 127.0.0.1 are read a bounded, undecoded prefix
(the worker's traced memory stays small) and logged; runs named with CR/LF reach a real SMTP
server with one-line subjects and do not pause the channel; a message that can never be sent
fails alone (an address Django refuses, a receiver's 422) while the others arrive; Slack text gains no
line from a name; a viewer's delivery log (page and API) shows no token."""

from __future__ import annotations

import threading
import tracemalloc
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from evaluations.accounts.tokens import token_create
from evaluations.models import Membership, NotifyAttempt, NotifyChannel, NotifyDelivery, Project
from evaluations.notify import channels, delivery, services
from tests.compare_helpers import import_demo, make_run, perfect_outputs
from tests.notify_helpers import smtp_server, smtp_settings, webhook_receiver

MB = 1024 * 1024
MEMORY_BOUND = 32 * MB  # generous: the prefix read is 4 KiB, a socket read at most 64 KiB


@pytest.fixture(autouse=True)
def quick_retries(settings: Any) -> None:
    settings.EVALSITE_NOTIFY_BACKOFF_SECONDS = 0.05
    settings.EVALSITE_NOTIFY_INLINE_BACKOFF_SECONDS = 1.0


@dataclass
class Flood:
    url: str
    size: int
    headers: list[dict[str, str]] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)  # bytes written before the client went away


def _gzip_bomb(inflated: int) -> bytes:
    """`inflated` zero bytes gzipped (about 1/1000 of it), made a megabyte at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(MB)
    parts = [packer.compress(zeros) for _ in range(inflated // MB)]
    return b"".join(parts) + packer.flush()


@contextmanager
def flooding_receiver(size: int, *, body: bytes | None = None, encoding: str = "") -> Iterator[Flood]:
    """A receiver that answers 200 with `size` bytes, streamed a chunk at a time from one
    64 KiB buffer (never allocated whole), or with `body` under Content-Encoding `encoding`."""
    chunk = b"A" * (64 * 1024)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            flood.headers.append(dict(self.headers.items()))
            length = len(body) if body is not None else size
            self.send_response(200)
            self.send_header("Content-Length", str(length))
            if encoding:
                self.send_header("Content-Encoding", encoding)
            self.end_headers()
            written = 0
            try:
                if body is not None:
                    for start in range(0, len(body), len(chunk)):
                        self.wfile.write(body[start:start + len(chunk)])
                        written += len(body[start:start + len(chunk)])
                else:
                    while written < size:
                        self.wfile.write(chunk)
                        written += len(chunk)
            except OSError:
                pass  # the sender stopped reading and closed: what the fix does
            flood.sent.append(written)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    flood = Flood(url=f"http://127.0.0.1:{server.server_address[1]}/hook", size=size)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield flood
    finally:
        server.shutdown()
        server.server_close()


def _peak_while(call: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("kind", ["webhook", "slack"])
def test_a_receiver_answering_400_mb_costs_the_worker_a_bounded_prefix_and_is_logged(acme: Project,
                                                                                   kind: str) -> None:
    with flooding_receiver(400 * MB) as flood:
        hook = services.channel_save(project=acme, actor=None, values={"name": "flood", "kind": kind,
                                                                       "url": flood.url})
        sent = delivery.send_test(hook)
        done, peak = _peak_while(lambda: delivery.deliver([sent.pk]))
    assert done == 1 and peak < MEMORY_BOUND, f"peak {peak / MB:.1f} MB"
    assert flood.headers[0]["Accept-Encoding"] == "identity"
    attempt = NotifyAttempt.objects.get(delivery=sent)
    assert attempt.ok and attempt.status_code == 200 and attempt.excerpt == "A" * channels.EXCERPT
    assert flood.sent and flood.sent[0] < 100 * MB  # it stopped reading: the rest was never sent


def test_a_gzip_bomb_is_never_decompressed(acme: Project) -> None:
    bomb = _gzip_bomb(300 * MB)
    assert len(bomb) < 400 * 1024  # ~300 KiB on the wire
    with flooding_receiver(0, body=bomb, encoding="gzip") as flood:
        hook = services.channel_save(project=acme, actor=None, values={"name": "bomb", "kind": "webhook",
                                                                       "url": flood.url})
        sent = delivery.send_test(hook)
        done, peak = _peak_while(lambda: delivery.deliver([sent.pk]))
    assert done == 1 and peak < MEMORY_BOUND, f"peak {peak / MB:.1f} MB"
    attempt = NotifyAttempt.objects.get(delivery=sent)
    assert attempt.ok and "gzip-encoded answer, not decoded" in attempt.excerpt


HOSTILE_RUNS = ["nightly\r\nBcc: attacker@example.com", "x\r\n\r\nInjected body line"]


def test_runs_named_with_cr_lf_are_mailed_with_one_line_subjects_and_do_not_pause_the_channel(
        acme: Project, settings: Any, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)
    settings.EVALSITE_NOTIFY_PAUSE_AFTER = 3  # issue 38 saw it paused after 10: two such runs were enough
    version = import_demo(acme)
    with smtp_server() as box:
        smtp_settings(settings, box)
        mail = services.channel_save(project=acme, actor=None, values={"name": "team", "kind": "email",
                                                                       "emails": "team@example.com"})
        services.rule_save(project=acme, actor=None, values={"name": "every run", "kind": "run_finished",
                                                             "condition": "any"}, channels=[mail.pk])
        for name in [*HOSTILE_RUNS, "legitimate nightly"]:
            with django_capture_on_commit_callbacks(execute=True):
                make_run(acme, version, perfect_outputs(), name=name)
        received = list(box.messages)
    mail.refresh_from_db()
    assert mail.paused_at is None and mail.failures_in_row == 0
    assert len(received) == 3 and set(NotifyDelivery.objects.values_list("status", flat=True)) == {"sent"}
    subjects = [str(m["Subject"]) for m in received]
    assert any("nightly Bcc: attacker@example.com" in s for s in subjects)  # the name, on the subject's line
    assert any("legitimate nightly" in s for s in subjects)
    for message in received:
        assert "Bcc" not in message and message["X-Envelope-To"] == "team@example.com"
        assert "\n" not in str(message["Subject"])


def test_a_message_that_can_never_be_sent_fails_alone_and_the_next_one_arrives(acme: Project, settings: Any) -> None:
    """A person's e-mail holding CR/LF (as a provider's claim could give): Django refuses the
    address for good. That message is failed with its reason at its first try, the channel's
    count is untouched, and the next message goes out."""
    settings.EVALSITE_NOTIFY_PAUSE_AFTER = 1
    users = get_user_model().objects
    eve = users.create_user("eve", "eve@example.com\r\nBcc: attacker@example.com", "x")
    ann = users.create_user("ann", "ann@example.com", "x")
    with smtp_server() as box:
        smtp_settings(settings, box)
        mail = services.channel_save(project=acme, actor=None, values={"name": "team", "kind": "email"})
        broken = delivery.send_test(mail)
        broken.message.recipient = eve
        broken.message.save()
        fine = delivery.send_test(mail)
        fine.message.recipient = ann
        fine.message.save()
        assert delivery.deliver([broken.pk, fine.pk]) == 1
        [arrived] = box.messages
    assert arrived["X-Envelope-To"] == "ann@example.com"
    broken.refresh_from_db()
    mail.refresh_from_db()
    assert broken.status == "failed" and broken.attempts == 1
    assert "cannot be sent" in broken.last_error and "Invalid address" in broken.last_error
    assert mail.paused_at is None and mail.failures_in_row == 0
    log = NotifyAttempt.objects.get(delivery=broken)
    assert not log.ok and log.excerpt.startswith("this message cannot be sent (not retried): ValueError")


def test_a_receivers_422_fails_that_message_alone_and_a_500_still_counts(acme: Project, settings: Any) -> None:
    settings.EVALSITE_NOTIFY_PAUSE_AFTER = 2
    settings.EVALSITE_NOTIFY_MAX_ATTEMPTS = 2
    refuse = {"status": 422}
    with webhook_receiver(refuse=lambda body: refuse["status"] if body["items"][0]["verdict"].startswith(
            "test message") else None) as receiver:
        hook = services.channel_save(project=acme, actor=None, values={"name": "hook", "kind": "webhook",
                                                                       "url": receiver.url})
        first, second = delivery.send_test(hook), delivery.send_test(hook)
        assert delivery.deliver([first.pk, second.pk]) == 0
        hook.refresh_from_db()
        assert hook.paused_at is None and hook.failures_in_row == 0 and len(receiver.requests) == 2
        assert set(NotifyDelivery.objects.values_list("status", "attempts")) == {("failed", 1)}
        refuse["status"] = 500  # the receiver itself is broken: retried, counted, paused
        third = delivery.send_test(hook)
        delivery.deliver([third.pk])
    hook.refresh_from_db()
    assert hook.paused_at is not None and hook.failures_in_row == 2


def test_a_name_adds_no_line_to_slacks_text(acme: Project, settings: Any, django_capture_on_commit_callbacks: Any,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)
    version = import_demo(acme)
    with webhook_receiver() as receiver:
        slack = services.channel_save(project=acme, actor=None, values={"name": "slack", "kind": "slack",
                                                                        "url": receiver.url})
        services.rule_save(project=acme, actor=None, values={"name": "every run", "kind": "run_finished",
                                                             "condition": "any"}, channels=[slack.pk])
        with django_capture_on_commit_callbacks(execute=True):
            make_run(acme, version, perfect_outputs(), name="n\n*run #9 finished: all passed* <!channel>\r\nok")
        [got] = receiver.requests
    text = got.body["text"]
    assert text.count("\n") == 1  # the subject, and the verdict line
    assert "<!channel>" not in text and "&lt;!channel&gt;" in text
    assert "n *run #9 finished: all passed* &lt;!channel&gt; ok" in text


def test_a_viewer_reads_no_slack_token_in_the_delivery_log(acme: Project) -> None:
    users = get_user_model().objects
    admin, viewer = users.create_user("dave", "d@example.com", "x"), users.create_user("carol", "c@example.com", "x")
    Membership.objects.create(project=acme, user=admin, role=Membership.Role.ADMIN)
    Membership.objects.create(project=acme, user=viewer, role=Membership.Role.VIEWER)
    token = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
    with webhook_receiver() as receiver:
        url = receiver.url + "/T0AAAAAAA/B0BBBBBBB/abcdefghijklmnopqrstuvwx"
        receiver.reply = f'{{"ok":false,"error":"invalid_token","token":"{token}","url":"{url}"}}'.encode()
        slack = services.channel_save(project=acme, actor=None, values={"name": "slack", "kind": "slack", "url": url})
        delivery.deliver([delivery.send_test(slack).pk])
    NotifyChannel.objects.filter(pk=slack.pk).update(paused_at=slack.created_at,
                                                     pause_reason=f"paused after 10 failures; the last: {token}")
    secrets = [token, "abcdefghijklmnopqrstuvwx"]
    assert all(s in NotifyAttempt.objects.get().excerpt for s in secrets)  # stored whole, for admins
    reader = Client()
    reader.force_login(viewer)
    log = reader.get(reverse("notify_channel_log", args=["acme", slack.pk])).content.decode()
    settings_page = reader.get(reverse("notify_settings", args=["acme"])).content.decode()
    api = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=viewer, name='ci').secret}")
    rows = api.get(f"/api/v1/projects/acme/notify/channels/{slack.pk}/log/").json()
    channel = api.get(f"/api/v1/projects/acme/notify/channels/{slack.pk}/").json()
    for shown in (log, settings_page, str(rows), str(channel)):
        assert not any(s in shown for s in secrets), shown[:3000]
    assert "[redacted]" in log and "[redacted]" in channel["pause_reason"]
    owner = Client()
    owner.force_login(admin)
    assert token in owner.get(reverse("notify_channel_log", args=["acme", slack.pk])).content.decode()
