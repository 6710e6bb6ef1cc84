"""POST /v1/traces: OTLP/HTTP in protobuf and JSON, gzip, token auth, limits, and what is
stored (traces per project and trace id, spans once each), through Django's test client."""

from __future__ import annotations

import gzip
import os
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from google.rpc.status_pb2 import Status

from evaluations.accounts.tokens import token_create, token_revoke
from evaluations.models import Membership, Project, Span, Trace
from tests.engine_helpers import perfect_outputs
from tests.otlp_helpers import answer, case_spans, demo_requests, post, request_of, span


@pytest.fixture
def token(alice: Any) -> str:
    return token_create(user=alice, name="otel").secret


def _error(response: Any) -> str:
    status = Status()
    status.ParseFromString(response.content)
    return status.message


@pytest.mark.django_db
@pytest.mark.parametrize("as_json,gzipped", [(False, False), (True, False), (False, True), (True, True)])
def test_traces_are_stored_per_project_and_trace(acme: Project, token: str, as_json: bool, gzipped: bool) -> None:
    requests = demo_requests(run_id=None)
    client = Client()
    for message in requests:
        response = post(client, message, token, as_json=as_json, gzipped=gzipped)
        assert response.status_code == 200, response.content
        assert not answer(response).HasField("partial_success")
    traces = Trace.objects.filter(project=acme, received=True)
    assert traces.count() == 8
    spans = sum(len(m.resource_spans[0].scope_spans[0].spans) for m in requests)
    assert Span.objects.filter(trace__in=traces).count() == spans
    trace = traces.get(trace_id=requests[1].resource_spans[0].scope_spans[0].spans[0].trace_id.hex())
    assert trace.name == "agent" and trace.complete and trace.service_name == "travel-agent"
    assert trace.span_count == len(requests[1].resource_spans[0].scope_spans[0].spans)
    assert trace.run_id is None and trace.result_id is None
    tool = Span.objects.get(trace=trace, name="tool get_weather")
    assert tool.kind == "TOOL" and tool.attributes["tool.name"] == "get_weather"


@pytest.mark.django_db
def test_a_retried_export_doubles_nothing(acme: Project, token: str) -> None:
    [message] = demo_requests(run_id=None, eval_ids=["weather_tokyo"])
    client = Client()
    for _ in range(3):
        assert post(client, message, token).status_code == 200
    trace = Trace.objects.get(project=acme)
    assert trace.span_count == Span.objects.filter(trace=trace).count() == 3


@pytest.mark.django_db
def test_spans_of_a_trace_in_several_requests_make_one_trace(acme: Project, token: str) -> None:
    trace_id = os.urandom(16)
    spans = case_spans(perfect_outputs()[1], trace_id, run_id=None)  # three turns: root last
    client = Client()
    assert post(client, request_of(spans[:3]), token).status_code == 200
    trace = Trace.objects.get(project=acme)
    assert not trace.complete and trace.span_count == 3
    assert post(client, request_of(spans[3:]), token).status_code == 200
    trace.refresh_from_db()
    assert trace.complete and trace.name == "agent" and trace.span_count == len(spans)
    assert trace.start_ns == min(s.start_time_unix_nano for s in spans)
    assert trace.end_ns == max(s.end_time_unix_nano for s in spans)


@pytest.mark.django_db
def test_no_token_a_revoked_token_and_a_viewer_are_refused(acme: Project, alice: Any) -> None:
    [message] = demo_requests(run_id=None, eval_ids=["weather_tokyo"])
    client = Client()
    response = client.generic("POST", "/v1/traces", message.SerializeToString(), content_type="application/x-protobuf")
    assert response.status_code == 401 and "API token" in _error(response)
    new = token_create(user=alice, name="gone")
    token_revoke(token=new.token, user=alice)
    assert post(client, message, new.secret).status_code == 401
    viewer = get_user_model().objects.create_user("vera", "v@example.com", "vera-pass-1234")
    Membership.objects.create(project=acme, user=viewer, role=Membership.Role.VIEWER)
    response = post(client, message, token_create(user=viewer, name="v").secret, project="acme")
    assert response.status_code == 403 and _error(response) == "no project 'acme' that you may send traces to"
    assert not Trace.objects.exists()


@pytest.mark.django_db
def test_a_member_of_several_projects_names_one(acme: Project, globex: Project, alice: Any, token: str) -> None:
    Membership.objects.create(project=globex, user=alice, role=Membership.Role.MEMBER)
    [message] = demo_requests(run_id=None, eval_ids=["weather_tokyo"])
    client = Client()
    response = post(client, message, token)
    assert response.status_code == 403 and "X-Evalsite-Project" in _error(response)
    assert post(client, message, token, project="globex").status_code == 200
    assert Trace.objects.get().project == globex


@pytest.mark.django_db
def test_a_malformed_payload_is_a_400_that_says_why_and_stores_nothing(acme: Project, token: str) -> None:
    client = Client()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    response = client.generic(
        "POST", "/v1/traces", b"\xff\xff\xff not protobuf", content_type="application/x-protobuf", **headers
    )
    assert response.status_code == 400 and "not an OTLP ExportTraceServiceRequest" in _error(response)
    # The second span's trace id is 3 bytes: the whole request is refused, the first span too.
    good = span(os.urandom(16), os.urandom(8), b"", "ok", 1, 2, {})
    bad = span(b"abc", os.urandom(8), b"", "bad", 1, 2, {})
    response = post(client, request_of([good, bad]), token)
    assert response.status_code == 400
    assert _error(response) == "resourceSpans[0].scopeSpans[0].spans[1].traceId: 3 bytes, not 16"
    response = client.generic(
        "POST",
        "/v1/traces",
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "0102030405060708"}]}]}]}',
        content_type="application/json",
        **headers,
    )
    assert response.status_code == 400
    assert "resourceSpans[0].scopeSpans[0].spans[0].traceId" in response.json()["message"]
    assert response.json()["code"] == 3
    response = client.generic("POST", "/v1/traces", b"{}", content_type="text/plain", **headers)
    assert response.status_code == 400 and "Content-Type" in _error(response)
    response = client.generic(
        "POST",
        "/v1/traces",
        b"not gzip",
        content_type="application/x-protobuf",
        HTTP_CONTENT_ENCODING="gzip",
        **headers,
    )
    assert response.status_code == 400 and "not valid gzip" in _error(response)
    assert not Trace.objects.exists() and not Span.objects.exists()


@pytest.mark.django_db
def test_size_limits_and_a_gzip_bomb(acme: Project, token: str, settings: Any) -> None:
    settings.EVALSITE_OTLP_MAX_BODY_BYTES = 10_000
    settings.EVALSITE_OTLP_MAX_DECOMPRESSED_BYTES = 100_000
    client = Client()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    response = client.generic("POST", "/v1/traces", b"\0" * 20_000, content_type="application/x-protobuf", **headers)
    assert response.status_code == 413 and "over 10000 bytes" in _error(response)
    bomb = gzip.compress(b"\0" * 5_000_000)  # 5 MB of zeros in ~5 KB
    assert len(bomb) < 10_000
    response = client.generic(
        "POST", "/v1/traces", bomb, content_type="application/x-protobuf", HTTP_CONTENT_ENCODING="gzip", **headers
    )
    assert response.status_code == 413 and "inflates past 100000 bytes" in _error(response)
    assert not Trace.objects.exists()


@pytest.mark.django_db
def test_rate_limit_per_token_answers_429_with_retry_after(
    acme: Project, alice: Any, token: str, settings: Any
) -> None:
    from django.core.cache import cache

    cache.clear()
    settings.EVALSITE_OTLP_SPANS_PER_MINUTE = 10
    requests = demo_requests(run_id=None)
    client = Client()
    codes = [post(client, m, token).status_code for m in requests[:4]]
    assert codes[0] == 200 and 429 in codes
    refused = post(client, requests[5], token)
    assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 60
    # another token of the same user has its own budget
    assert post(client, requests[6], token_create(user=alice, name="second").secret).status_code == 200
    cache.clear()


@pytest.mark.django_db
def test_back_pressure_when_the_process_is_busy(acme: Project, token: str, settings: Any) -> None:
    settings.EVALSITE_OTLP_MAX_INFLIGHT = 0  # every slot taken
    [message] = demo_requests(run_id=None, eval_ids=["weather_tokyo"])
    response = post(Client(), message, token)
    assert response.status_code == 429 and response["Retry-After"] == "1"
    assert not Trace.objects.exists()


@pytest.mark.django_db
def test_get_is_not_allowed(token: str) -> None:
    response = Client().get("/v1/traces", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 405 and response["Allow"] == "POST"


@pytest.mark.django_db
def test_nul_characters_and_nan_values_are_stored_on_every_database(acme: Project, token: str) -> None:
    trace_id = os.urandom(16)
    bad = span(trace_id, os.urandom(8), b"", "agent\x00root", 1, 2,
               {"input.value": "a\x00b", "score": float("nan"), "session.id": "s\x001"})
    response = post(Client(), request_of([bad], resource={"service.name": "svc\x00"}), token)
    assert response.status_code == 200
    trace = Trace.objects.get()
    assert trace.name == "agent\ufffdroot" and trace.thread_id == "s\ufffd1" and trace.service_name == "svc\ufffd"
    stored = Span.objects.get(trace=trace)
    assert stored.attributes["input.value"] == "a\ufffdb" and stored.attributes["score"] == "nan"


@pytest.mark.django_db
def test_a_run_reference_that_only_looks_like_digits_rejects_its_trace_not_the_server(
        acme: Project, token: str) -> None:
    """`evalsite.run_id: "³"` passes str.isdigit() and not int(): it answered 500 (nothing stored).
    Now that trace's spans are rejected, saying why, and the rest of the export is kept."""
    client = Client()
    named = span(os.urandom(16), os.urandom(8), b"", "agent", 1, 2,
                 {"evalsite.run_id": "³", "evalsite.eval_id": "weather_tokyo"})
    plain = span(os.urandom(16), os.urandom(8), b"", "other", 1, 2, {})
    response = post(client, request_of([named, plain]), token)
    assert response.status_code == 200
    partial = answer(response).partial_success
    assert partial.rejected_spans == 1 and "evalsite.run_id '³' is not a run id" in partial.error_message
    assert list(Trace.objects.values_list("name", flat=True)) == ["other"]
