"""How each kind of channel sends one message; each returns an `Outcome` for the log.

- webhook: the JSON body (payloads.webhook_body) POSTed with `X-Evalsite-Timestamp`,
  `X-Evalsite-Signature: sha256=HMAC(secret, "<timestamp>.<body>")` and
  `X-Evalsite-Delivery` (the idempotency id, also as `Idempotency-Key`);
- slack: `{"text": ...}` for a Slack-compatible incoming webhook: the verdict line and links
  to the comparison and its top causes, with Slack's control characters escaped;
- email: Django's mail settings (SMTP), plain text and HTML (autoescaped template);
- in-app: a `Notification` per person (the recipient, or every member for a project-wide rule).

URLs go through the HTTP targets' egress policy (runs.targets.egress): the address checked
is the one connected to, redirects are not followed. A receiver's answer is read as raw bytes,
at most `ANSWER_BYTES` of it and never decompressed (`Accept-Encoding: identity`), so no answer
can make a worker hold more than that.

A message that can never be sent (a header no mail server takes, an answer of 400, 413 or 422
about its body) fails alone: `Outcome.alone`, no retry, and it does not count toward pausing
its channel (see delivery.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import smtplib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string

from evaluations.models import Membership, Notification, NotifyChannel, NotifyDelivery, NotifyMessage
from evaluations.notify import payloads
from evaluations.notify.payloads import one_line
from evaluations.runs.targets import egress

EXCERPT = 300
ANSWER_BYTES = 4096  # raw bytes of a receiver's answer read at most; the rest is never read
# Answers that say the message itself is wrong: sending it again, or sending others, changes
# nothing about it. Other 4xx (401, 403, 404, 410, ...) say the channel's URL is wrong, and
# count toward pausing it; 408, 429 and 5xx are retried.
MESSAGE_REFUSED = frozenset({400, 413, 422})
_local = threading.local()


@dataclass(frozen=True)
class Outcome:
    ok: bool
    status_code: int | None
    excerpt: str
    retry: bool = True  # False: trying again cannot help (a refused URL)
    alone: bool = False  # True: this message can never be sent; the channel is not to blame


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """`sha256=` and the hex HMAC-SHA256 of "<timestamp>.<body>" under the channel's secret."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def _client() -> httpx.Client:
    client = getattr(_local, "client", None)
    if client is None:
        client = _local.client = httpx.Client(timeout=settings.EVALSITE_NOTIFY_TIMEOUT, follow_redirects=False,
                                              trust_env=False)
    return client


def _post(url: str, body: bytes, headers: dict[str, str]) -> Outcome:
    try:
        pinned, extra, extensions = egress.pinned_request(url)
    except egress.EgressRefused as exc:
        return Outcome(False, None, f"refused: {exc}"[:EXCERPT], retry=False)
    deadline = time.monotonic() + settings.EVALSITE_NOTIFY_TIMEOUT
    try:
        with _client().stream("POST", pinned, content=body, extensions=extensions,
                              headers={**headers, "Accept-Encoding": "identity", **extra}) as response:
            raw = answer_prefix(response.iter_raw(), deadline)
            status, encoding = response.status_code, response.headers.get("Content-Encoding", "")
    except httpx.HTTPError as exc:
        return Outcome(False, None, f"{type(exc).__name__}: {exc}"[:EXCERPT])
    text = answer_excerpt(raw, encoding)
    if 200 <= status < 300:
        return Outcome(True, status, text)
    if status in MESSAGE_REFUSED:
        return Outcome(False, status, text, retry=False, alone=True)
    return Outcome(False, status, text)


def answer_prefix(chunks: Iterator[bytes], deadline: float) -> bytes:
    """The first ANSWER_BYTES of the answer as sent (no decompression), read until then or
    until the deadline; leaving the stream unread closes the connection."""
    kept = bytearray()
    for chunk in chunks:
        kept += chunk[:ANSWER_BYTES - len(kept)]
        if len(kept) >= ANSWER_BYTES or time.monotonic() > deadline:
            break
    return bytes(kept)


def answer_excerpt(raw: bytes, encoding: str) -> str:
    """What the log shows of an answer: its text, or what it is when it is compressed (which
    is never decoded: a few hundred KiB of gzip can inflate to gigabytes)."""
    encoding = encoding.strip().lower()
    if encoding and encoding != "identity":
        return f"({len(raw):,}+ bytes of {encoding[:40]}-encoded answer, not decoded)"
    return raw.decode("utf-8", "replace").replace("\x00", "\ufffd")[:EXCERPT]


def send_webhook(delivery: NotifyDelivery, channel: NotifyChannel, message: NotifyMessage) -> Outcome:
    delivery_id = str(delivery.idempotency_id)
    body = json.dumps(payloads.webhook_body(message.payload, delivery_id=delivery_id,
                                            created_at=message.created_at.isoformat()),
                      separators=(",", ":"), ensure_ascii=False).encode()
    timestamp = str(int(time.time()))
    headers = {"Content-Type": "application/json", "User-Agent": "evalsite-notify/1",
               "X-Evalsite-Event": message.event, "X-Evalsite-Delivery": delivery_id, "Idempotency-Key": delivery_id,
               "X-Evalsite-Timestamp": timestamp, "X-Evalsite-Signature": signature(channel.secret, timestamp, body)}
    return _post(channel.url, body, headers)


def slack_escape(text: str) -> str:
    """Slack's mrkdwn control characters as entities, and control characters (line breaks) as
    spaces: untrusted text cannot make a link, a mention or a line of its own."""
    return one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_text(message: NotifyMessage) -> str:
    lines = [f"*{slack_escape(message.subject)}*"]
    for text, link in payloads.lines_of(message.payload):
        shown = slack_escape(text)
        lines.append(f"<{link}|{shown}>" if link and "|" not in link and ">" not in link else shown)
    return "\n".join(lines)


def send_slack(delivery: NotifyDelivery, channel: NotifyChannel, message: NotifyMessage) -> Outcome:
    body = json.dumps({"text": slack_text(message)}, ensure_ascii=False).encode()
    return _post(channel.url, body, {"Content-Type": "application/json", "User-Agent": "evalsite-notify/1",
                                     "X-Evalsite-Delivery": str(delivery.idempotency_id)})


def _emails(channel: NotifyChannel, message: NotifyMessage) -> list[str]:
    if message.recipient_id is not None:
        email = get_user_model().objects.filter(pk=message.recipient_id).values_list("email", flat=True).first()
        return [email] if email else []
    return [line.strip() for line in channel.emails.splitlines() if line.strip()]


def send_email(delivery: NotifyDelivery, channel: NotifyChannel, message: NotifyMessage) -> Outcome:
    to = _emails(channel, message)
    if not to:
        return Outcome(True, None, "no address to send to")
    lines = payloads.lines_of(message.payload)
    subject = one_line(message.subject)  # a name with CR/LF would be a header of its own
    text = "\n".join([subject, ""] + [f"{t}\n    {link}" if link else t for t, link in lines])
    html = render_to_string("evaluations/notify/email.html", {"subject": subject, "lines": lines})
    mail = EmailMultiAlternatives(subject=subject, body=text, to=to,
                                  headers={"X-Evalsite-Delivery": str(delivery.idempotency_id),
                                           "Message-ID": f"<{delivery.idempotency_id}@evalsite>"})
    mail.attach_alternative(html, "text/html")
    try:
        mail.send()
    except ValueError as exc:  # BadHeaderError, an address Django cannot encode: this message only
        return Outcome(False, None, f"{type(exc).__name__}: {exc}"[:EXCERPT], retry=False, alone=True)
    except smtplib.SMTPDataError as exc:
        alone = 500 <= exc.smtp_code < 600  # the server refused this message's content for good
        return Outcome(False, exc.smtp_code, f"{type(exc).__name__}: {exc}"[:EXCERPT], retry=not alone,
                       alone=alone)
    except smtplib.SMTPRecipientsRefused as exc:
        codes = [code for code, _ in exc.recipients.values()]
        alone = message.recipient_id is not None and all(500 <= c < 600 for c in codes)  # the person's address
        return Outcome(False, codes[0] if codes else None, f"{type(exc).__name__}: {exc}"[:EXCERPT],
                       retry=not alone, alone=alone)
    except Exception as exc:  # smtplib and socket errors alike
        return Outcome(False, None, f"{type(exc).__name__}: {exc}"[:EXCERPT])
    return Outcome(True, None, f"accepted for {len(to)} address{'es' if len(to) > 1 else ''}")


def send_inapp(delivery: NotifyDelivery, channel: NotifyChannel, message: NotifyMessage) -> Outcome:
    members = Membership.objects.filter(project_id=message.project_id)
    if message.recipient_id is not None:
        members = members.filter(user_id=message.recipient_id)
    users = list(members.values_list("user_id", flat=True))
    Notification.objects.bulk_create([Notification(user_id=u, project_id=message.project_id, message=message)
                                      for u in users], ignore_conflicts=True)
    return Outcome(True, None, f"listed for {len(users)} {'person' if len(users) == 1 else 'people'}")


SENDERS: dict[str, Any] = {NotifyChannel.Kind.WEBHOOK: send_webhook, NotifyChannel.Kind.SLACK: send_slack,
                           NotifyChannel.Kind.EMAIL: send_email, NotifyChannel.Kind.INAPP: send_inapp}


def send(delivery: NotifyDelivery, channel: NotifyChannel, message: NotifyMessage) -> Outcome:
    outcome: Outcome = SENDERS[channel.kind](delivery, channel, message)
    return outcome
