"""Real receivers for the notification tests and benchmark: an HTTP server on 127.0.0.1 that
checks each webhook's signature and counts deliveries by idempotency id (and can fail its
first requests, or hold one until released), and an SMTP server on 127.0.0.1 (aiosmtpd)."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    delivery_id: str
    body: Any
    signed: bool  # the signature matched the body, the timestamp and the secret
    headers: dict[str, str]
    answered: int


@dataclass
class Receiver:
    url: str
    secret: str
    fail_first: int = 0
    hold_first: bool = False
    reply: bytes | None = None  # the body of a 200 answer (default {"ok": true})
    refuse: Callable[[Any], int | None] | None = None  # the body -> a status to answer instead
    requests: list[Received] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    holding: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def accepted(self) -> list[Received]:
        return [r for r in self.requests if r.answered == 200]

    def distinct_ids(self) -> set[str]:
        return {r.delivery_id for r in self.accepted()}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        receiver = self.server.receiver
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        timestamp = self.headers.get("X-Evalsite-Timestamp", "")
        expected = "sha256=" + hmac.new(receiver.secret.encode(), timestamp.encode() + b"." + raw,
                                        hashlib.sha256).hexdigest()
        signed = hmac.compare_digest(expected, self.headers.get("X-Evalsite-Signature", ""))
        with receiver.lock:
            index = len(receiver.requests)
            status = 500 if index < receiver.fail_first else 200
            body = json.loads(raw or b"null")
            if status == 200 and receiver.refuse is not None:
                status = receiver.refuse(body) or 200
            entry = Received(self.headers.get("X-Evalsite-Delivery", ""), body, signed,
                             dict(self.headers.items()), status)
            receiver.requests.append(entry)
        if receiver.hold_first and index == 0:
            receiver.holding.set()
            receiver.released.wait(30)
        data = (receiver.reply or b'{"ok": true}') if status == 200 else b"receiver says no (test)"
        try:
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            entry.answered = 0  # the sender was gone before the answer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: Receiver


@contextmanager
def webhook_receiver(secret: str = "s3cret", **options: Any) -> Iterator[Receiver]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.receiver = Receiver(url=f"http://127.0.0.1:{server.server_address[1]}/hook", secret=secret, **options)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server.receiver
    finally:
        server.receiver.released.set()
        server.shutdown()
        server.server_close()


@dataclass
class Mailbox:
    port: int
    messages: list[EmailMessage] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(message, EmailMessage)
        message["X-Envelope-To"] = ", ".join(envelope.rcpt_tos)
        self.messages.append(message)
        return "250 OK"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def smtp_server() -> Iterator[Mailbox]:
    from aiosmtpd.controller import Controller

    box = Mailbox(free_port())
    controller = Controller(box, hostname="127.0.0.1", port=box.port)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()


def smtp_settings(settings: Any, box: Mailbox) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", box.port
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""


def parts(message: EmailMessage) -> tuple[str, str]:
    """(plain text, HTML) of a multipart/alternative message."""
    text = message.get_body(preferencelist=("plain",))
    html = message.get_body(preferencelist=("html",))
    assert text is not None and html is not None
    return str(text.get_content()), str(html.get_content())
