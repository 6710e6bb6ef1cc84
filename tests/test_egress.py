"""The HTTP target's SSRF policy (evaluations/runs/targets/egress.py): refusals with a message at
run creation and in the worker, allowed hosts reached, redirects to refused addresses not
followed, the checked address pinned for the connection."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.test import Client

from evaluations.models import Project, Run
from evaluations.runs.targets import egress
from tests.engine_helpers import import_demo
from tests.test_target_http import case, run


class Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: RecordingServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.hits.append((self.path, self.headers.get("Host", "")))
        if self.server.redirect_to:
            status, headers, data = 302, {"Location": self.server.redirect_to}, b""
        else:
            status, headers, data = 200, {"Content-Type": "application/json"}, json.dumps(
                {"final_response": "hello"}).encode()
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class RecordingServer(ThreadingHTTPServer):
    daemon_threads = True
    hits: list[tuple[str, str]]
    redirect_to = ""


def _serve(host: str) -> Iterator[RecordingServer]:
    server = RecordingServer((host, 0), Recorder)
    server.hits = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def agent() -> Iterator[RecordingServer]:
    yield from _serve("127.0.0.1")


@pytest.fixture
def other() -> Iterator[RecordingServer]:
    yield from _serve("127.0.0.2")  # another loopback address, to deny while 127.0.0.1 is allowed


def _url(server: RecordingServer, host: str | None = None) -> str:
    return f"http://{host or server.server_address[0]}:{server.server_address[1]}/agent"


# --- The policy ------------------------------------------------------------------------------

@pytest.mark.parametrize("url,says", [
    ("http://169.254.169.254/latest/meta-data/", "a cloud metadata address"),
    ("http://169.254.10.1/", "a link-local address"),
    ("http://[fe80::1]/", "a link-local address"),
    ("http://[::ffff:169.254.169.254]/", "a cloud metadata address"),
    ("http://100.100.100.200/", "a cloud metadata address"),
    ("http://[fd00:ec2::254]/", "a cloud metadata address"),
    ("http://0.0.0.0:8000/", "the unspecified address"),
    ("http://224.0.0.1/", "a multicast address"),
    ("http://255.255.255.255/", "the broadcast address"),
    ("ftp://127.0.0.1/", "http:// or https://"),
])
def test_link_local_metadata_and_odd_addresses_are_refused_by_default(url: str, says: str) -> None:
    why = egress.refusal(url)
    assert why is not None and says in why, why


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/demo/agent/", "http://localhost:9/", "http://10.1.2.3/",
                                 "http://192.168.1.20:8080/agent", "http://[::1]:8000/"])
def test_loopback_and_private_networks_are_allowed_by_default(url: str) -> None:
    assert egress.refusal(url) is None


def test_the_deny_list_checks_the_resolved_addresses_and_names(settings: Any) -> None:
    settings.EVALSITE_TARGET_DENY = ["127.0.0.0/8", "::1", ".corp.example"]
    why = egress.refusal("http://localhost:8000/")
    assert why is not None and "refused by EVALSITE_TARGET_DENY" in why and "localhost (" in why
    assert "EVALSITE_TARGET_DENY" in (egress.refusal("http://agent.corp.example/") or "")
    assert egress.refusal("http://10.0.0.5/") is None


def test_the_allow_list_admits_only_its_entries_and_can_lift_a_builtin_refusal(settings: Any) -> None:
    settings.EVALSITE_TARGET_ALLOW = ["10.0.0.0/8", "169.254.7.7"]
    assert egress.refusal("http://10.2.3.4/") is None
    assert egress.refusal("http://169.254.7.7/") is None
    assert "not in EVALSITE_TARGET_ALLOW" in (egress.refusal("http://127.0.0.1:8000/") or "")
    assert "not in EVALSITE_TARGET_ALLOW" in (egress.refusal("http://169.254.169.254/") or "")
    settings.EVALSITE_TARGET_DENY = ["10.9.0.0/16"]
    assert "EVALSITE_TARGET_DENY" in (egress.refusal("http://10.9.1.1/") or "")  # deny wins


def test_a_host_that_does_not_resolve_is_refused_with_the_reason() -> None:
    why = egress.refusal("http://no-such-host.invalid/")
    assert why is not None and "cannot resolve the host 'no-such-host.invalid'" in why


def test_the_connection_goes_to_the_checked_address_with_the_name_in_host() -> None:
    url, headers, extensions = egress.pinned_request("https://localhost:8443/agent?x=1")
    assert url in ("https://127.0.0.1:8443/agent?x=1", "https://[::1]:8443/agent?x=1")
    assert headers == {"Host": "localhost:8443"}
    assert extensions == {"sni_hostname": "localhost"}  # the certificate is checked for the name


@pytest.fixture
def no_resolver(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The resolver is stubbed: a lookup is recorded and fails, so no test asks DNS anything."""
    asked: list[str] = []

    def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "stubbed resolver")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


@pytest.mark.parametrize("url,says", [
    ("http://240.0.0.1/", "a reserved address"),  # Python counts 240.0.0.0/4 as private too
    ("http://255.255.255.254/", "a reserved address"),
    ("http://[2002:a9fe:a9fe::1]/", "a cloud metadata address (169.254.169.254, carried in that IPv6 address)"),
    ("http://[2002:a9fe:0101::1]/", "a link-local address"),  # 6to4 of 169.254.1.1
    ("http://[64:ff9b::a9fe:a9fe]/", "a cloud metadata address"),  # NAT64 well-known prefix
    ("http://[64:ff9b::169.254.169.254]/", "a cloud metadata address"),
    ("http://[64:ff9b:1:a9fe:a9:fe00::]/", "a cloud metadata address"),  # local-use NAT64, /48 layout
    ("http://[64:ff9b:1::a9fe:a9fe]/", "a cloud metadata address"),  # local-use NAT64, /96 layout
    ("http://[::a9fe:a9fe]/", "a cloud metadata address"),  # IPv4-compatible
    ("http://[::ffff:240.0.0.1]/", "a reserved address"),
    ("http://[2001:0:a9fe:a9fe::1]/", "(169.254.169.254, carried"),  # Teredo, server 169.254.169.254
    ("http://[2001:0:4136:e378:8000:63bf:5601:5501]/", "a link-local address"),  # Teredo, client 169.254.170.254
    ("http://0xa9fea9fe/", "a cloud metadata address"),  # hex, one part
    ("http://2852039166/", "a cloud metadata address"),  # decimal, one part
    ("http://169.254.43518/", "a cloud metadata address"),  # two parts
    ("http://0xa9.0376.43518/", "a cloud metadata address"),  # three parts, hex and octal
    ("http://0xe0.1/", "a multicast address"),
    ("http://0/", "the unspecified address"),
])
def test_reserved_addresses_and_ipv4_hidden_in_other_forms_are_refused(url: str, says: str,
                                                                       no_resolver: list[str]) -> None:
    why = egress.refusal(url)
    assert why is not None and says in why, why
    assert no_resolver == []  # numeric forms are read here, never handed to a resolver


@pytest.mark.parametrize("url,address", [
    ("http://127.1:8000/", "127.0.0.1"), ("http://0x7f000001/", "127.0.0.1"), ("http://012.1.515/", "10.1.2.3"),
    ("http://[64:ff9b::a00:5]/", "64:ff9b::a00:5"), ("http://[2002:c000:221::1]/", "2002:c000:221::1"),
])
def test_numeric_and_carried_forms_of_allowed_addresses_are_allowed(url: str, address: str,
                                                                   no_resolver: list[str]) -> None:
    assert egress.refusal(url) is None
    assert str(egress.check(url)[1]) == address
    assert no_resolver == []


def test_the_deny_list_also_refuses_its_addresses_in_other_forms(settings: Any, no_resolver: list[str]) -> None:
    settings.EVALSITE_TARGET_DENY = ["127.0.0.0/8", "10.0.0.0/8"]
    for url in ("http://127.1/", "http://0x7f.0.0.1/", "http://[::ffff:127.0.0.1]/", "http://[64:ff9b::7f00:1]/",
                "http://[2002:0a00:0001::1]/", "http://[::10.0.0.1]/"):
        assert "EVALSITE_TARGET_DENY" in (egress.refusal(url) or ""), url
    settings.EVALSITE_TARGET_ALLOW = ["192.0.2.0/24"]
    settings.EVALSITE_TARGET_DENY = []
    assert egress.refusal("http://[64:ff9b::c000:207]/") is None  # the same destination as 192.0.2.7
    assert "not in EVALSITE_TARGET_ALLOW" in (egress.refusal("http://[2002:c000:0207::1]/") or "")  # only via it


@pytest.mark.parametrize("url", ["http://0251.0376.0251.0376/", "http://0251.254.169.254/", "http://[::1/",
                                 "http://[fe80::1%eth0/", "http://exa mple.com/", "http://:80/", "http://a..b/"])
def test_a_url_the_parser_refuses_is_a_refusal_never_an_exception(url: str, no_resolver: list[str]) -> None:
    why = egress.refusal(url)
    assert why is not None and why, url
    with pytest.raises(egress.EgressRefused):
        egress.pinned_request(url)  # the worker's check refuses it the same way


# --- Run creation -----------------------------------------------------------------------------

@pytest.mark.django_db
@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://[::ffff:a9fe:a9fe]/"])
def test_run_creation_refuses_a_metadata_target_with_400_and_writes_nothing(alice_client: Client, acme: Project,
                                                                            url: str) -> None:
    version = import_demo(acme)
    response = alice_client.post("/api/v1/runs/", data=json.dumps(
        {"evalset": version.evalset_id, "target_kind": "http", "target": {"url": url}}), content_type="application/json")
    assert response.status_code == 400, response.content
    assert "the target URL is refused" in response.json()["message"]
    assert "metadata" in response.json()["message"]
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_the_new_run_page_shows_the_refusal(alice_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    response = alice_client.post("/runs/new/", {
        "version": version.pk, "config_source": "default", "target_kind": "http",
        "http_url": "http://169.254.169.254/latest/meta-data/", "iterations": 1, "warmups": 0})
    assert response.status_code == 400
    assert "the target URL is refused" in response.content.decode()
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_run_creation_accepts_an_allowed_agent(alice_client: Client, acme: Project,
                                               agent: RecordingServer) -> None:
    version = import_demo(acme)
    response = alice_client.post("/api/v1/runs/", data=json.dumps(
        {"evalset": version.evalset_id, "target_kind": "http", "target": {"url": _url(agent)}}),
        content_type="application/json")
    assert response.status_code == 201, response.content


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["http://0251.0376.0251.0376/", "http://0251.254.169.254/", "http://[::1/",
                                 "http://240.0.0.1/", "http://[2002:a9fe:a9fe::1]/"])
def test_run_creation_answers_400_for_unparseable_and_hidden_addresses(alice_client: Client, acme: Project, url: str,
                                                                       no_resolver: list[str]) -> None:
    version = import_demo(acme)
    response = alice_client.post("/api/v1/runs/", data=json.dumps(
        {"evalset": version.evalset_id, "target_kind": "http", "target": {"url": url}}), content_type="application/json")
    assert response.status_code == 400, response.content
    assert "the target URL is refused" in response.json()["message"]
    page = alice_client.post("/runs/new/", {
        "version": version.pk, "config_source": "default", "target_kind": "http",
        "http_url": url, "iterations": 1, "warmups": 0})
    assert page.status_code == 400
    assert "the target URL is refused" in page.content.decode() or "not a valid URL" in page.content.decode()
    assert Run.objects.count() == 0


# --- In the worker ----------------------------------------------------------------------------

def test_an_allowed_host_is_called_by_name_on_its_checked_address(agent: RecordingServer) -> None:
    (output,) = run(_url(agent, "localhost"), [(case("a", "hi"), 0)])
    assert output.error is None, output.error
    assert output.turns[0].final_response == "hello"
    assert agent.hits == [("/agent", f"localhost:{agent.server_address[1]}")]


def test_the_worker_checks_again_and_calls_nothing_refused(agent: RecordingServer, settings: Any) -> None:
    settings.EVALSITE_TARGET_DENY = ["127.0.0.1"]
    outputs = run(_url(agent), [(case("a", "hi"), 0), (case("b", "hi"), 0)])
    assert [o.error for o in outputs] == [
        "the target URL is refused: 127.0.0.1 (127.0.0.1) is refused by EVALSITE_TARGET_DENY"] * 2
    assert agent.hits == []


def test_a_redirect_to_a_refused_address_is_not_followed(agent: RecordingServer, other: RecordingServer,
                                                         settings: Any) -> None:
    settings.EVALSITE_TARGET_DENY = ["127.0.0.2"]
    agent.redirect_to = _url(other)
    (output,) = run(_url(agent), [(case("a", "hi"), 0)])
    assert output.error is not None and "HTTP 302" in output.error
    assert len(agent.hits) == 1
    assert other.hits == []  # the refused address was never called
    assert egress.refusal(_url(other)) is not None
