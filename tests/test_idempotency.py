"""`Idempotency-Key` on the creating API requests (issue 40): the same key gets the first
answer, not a second run or upload; and the client sends one, and retries with it after a
connection dropped with the request done (through a real proxy on 127.0.0.1 that cuts the
first answer off)."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client as DjangoClient
from django.utils import timezone

from evaluations.accounts.tokens import token_create
from evaluations.api.idempotency import idempotency_sweep
from evaluations.client import Client
from evaluations.models import EvalSetVersion, IdempotentRequest, Project, Run
from tests.engine_helpers import DEMO, import_demo, perfect_outputs


@pytest.fixture
def api(alice: Any) -> DjangoClient:
    return DjangoClient(HTTP_AUTHORIZATION=f"Token {token_create(user=alice, name='ci').secret}")


def _outputs(version: EvalSetVersion) -> list[dict[str, Any]]:
    return perfect_outputs()


def _start(api: DjangoClient, version: EvalSetVersion, key: str | None, **extra: Any) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return api.post("/api/v1/runs/", {"evalset": version.evalset_id, "outputs": _outputs(version), **extra},
                    content_type="application/json", **headers)


def test_a_run_started_twice_with_one_key_is_started_once(acme: Project, api: DjangoClient) -> None:
    version = import_demo(acme)
    first = _start(api, version, "run-7f3a")
    again = _start(api, version, "run-7f3a")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert Run.objects.count() == 1
    assert _start(api, version, "run-other").status_code == 201  # another key: another run
    assert _start(api, version, None).status_code == 201  # no key: as before
    assert Run.objects.count() == 3


def test_a_refused_request_keeps_no_answer_so_its_corrected_retry_is_done(acme: Project, api: DjangoClient) -> None:
    version = import_demo(acme)
    assert _start(api, version, "k1", iterations=0).status_code == 400
    assert IdempotentRequest.objects.count() == 0
    assert _start(api, version, "k1").status_code == 201
    assert Run.objects.count() == 1


def test_a_key_is_the_users_own_and_tied_to_its_endpoint(acme: Project, api: DjangoClient, alice: Any) -> None:
    from django.contrib.auth import get_user_model

    from evaluations.models import Membership

    version = import_demo(acme)
    assert _start(api, version, "shared").status_code == 201
    bob = get_user_model().objects.create_user("bob", "bob@example.com", "bob-pass-123")
    Membership.objects.create(project=acme, user=bob, role=Membership.Role.MEMBER)
    other = DjangoClient(HTTP_AUTHORIZATION=f"Token {token_create(user=bob, name='ci').secret}")
    assert _start(other, version, "shared").status_code == 201  # bob's key, not alice's
    assert Run.objects.count() == 2
    with open(DEMO, "rb") as f:
        upload = api.post("/api/v1/evalsets/", {"file": f, "project": "acme"}, HTTP_IDEMPOTENCY_KEY="shared")
    assert upload.status_code == 422 and upload.json()["code"] == "idempotency_key_reused"
    assert "POST /api/v1/runs/" in upload.json()["message"]


def test_an_upload_sent_again_with_its_key_gets_its_first_answer(acme: Project, api: DjangoClient) -> None:
    with open(DEMO, "rb") as f:
        first = api.post("/api/v1/evalsets/", {"file": f, "project": "acme"}, HTTP_IDEMPOTENCY_KEY="up-1")
    with open(DEMO, "rb") as f:
        again = api.post("/api/v1/evalsets/", {"file": f, "project": "acme"}, HTTP_IDEMPOTENCY_KEY="up-1")
    assert first.status_code == again.status_code == 201  # without the key the second would say 200
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"


def test_an_answer_is_kept_a_day(acme: Project, api: DjangoClient) -> None:
    version = import_demo(acme)
    assert _start(api, version, "daily").status_code == 201
    IdempotentRequest.objects.update(created_at=timezone.now() - timedelta(hours=23))
    assert _start(api, version, "daily")["Idempotent-Replayed"] == "true"
    IdempotentRequest.objects.update(created_at=timezone.now() - timedelta(hours=25))
    assert idempotency_sweep() == 1
    assert "Idempotent-Replayed" not in _start(api, version, "daily")
    assert Run.objects.count() == 2


class CuttingProxy:
    """Forwards each request to the server on 127.0.0.1 and relays its answer, except the first
    `cut` requests: those are done by the server, and their client's connection is then closed
    with no answer (a gunicorn worker killed as it answers, a load balancer's timeout)."""

    def __init__(self, target: str, cut: int = 1) -> None:
        self.target = target.removeprefix("http://")
        self.cut = cut
        self.keys: list[str] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self._one(conn)

    def _one(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        request_line = reader.readline().decode()
        headers: dict[str, str] = {}
        while (line := reader.readline().decode()) not in ("\r\n", ""):
            name, _, value = line.partition(":")
            headers[name.strip()] = value.strip()
        body = reader.read(int(headers.get("Content-Length", "0") or 0))
        method, path, _ = request_line.split(" ", 2)
        if method == "POST":
            self.keys.append(headers.get("Idempotency-Key", ""))
        upstream = http.client.HTTPConnection(self.target, timeout=60)
        upstream.request(method, path, body=body, headers={k: v for k, v in headers.items() if k != "Host"})
        answer = upstream.getresponse()
        data = answer.read()
        if method == "POST" and self.cut > 0:
            self.cut -= 1
            return  # done on the server; the client hears nothing
        head = [f"HTTP/1.1 {answer.status} {answer.reason}"] + [
            f"{k}: {v}" for k, v in answer.getheaders() if k.lower() not in {"transfer-encoding", "connection"}]
        conn.sendall(("\r\n".join(head) + "\r\nConnection: close\r\n\r\n").encode() + data)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def proxy(live_server: Any) -> Iterator[CuttingProxy]:
    p = CuttingProxy(live_server.url)
    yield p
    p.close()


@pytest.mark.django_db(transaction=True)
def test_the_client_retries_a_dropped_run_start_with_its_key_and_one_run_is_made(
        acme: Project, alice: Any, proxy: CuttingProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    import evaluations.client as client_module

    monkeypatch.setattr(client_module, "CREATE_RETRY_PAUSES", (0.1, 0.1))
    version = import_demo(acme)
    client = Client(proxy.url, token_create(user=alice, name="ci").secret, timeout=30)
    run = client.push_outputs(version.evalset_id, _outputs(version))
    assert Run.objects.count() == 1 and run.id == Run.objects.get().pk
    assert len(proxy.keys) == 2 and proxy.keys[0] == proxy.keys[1] and len(proxy.keys[0]) == 32
    proxy.cut = 1
    [evalset] = client.upload_evalsets(DEMO, project="acme")
    assert proxy.keys[2] == proxy.keys[3] != proxy.keys[0]
    assert evalset.id == version.evalset_id
