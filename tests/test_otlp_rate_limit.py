"""The per-token span budget of `POST /v1/traces` (EVALSITE_OTLP_SPANS_PER_MINUTE): checked
before the spans are read into rows, a refused request costs the token nothing, and a cache
(Redis) that is away starts the count again instead of failing the export."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from google.rpc.status_pb2 import Status

from evaluations.accounts.tokens import token_create
from evaluations.models import Project, Span, Trace
from tests.otlp_helpers import post, request_of, span
from tests.test_cache_redis_away import redis_away  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def token(alice: Any) -> Iterator[str]:
    cache.clear()  # a fresh budget in this process's cache
    yield token_create(user=alice, name="otel").secret
    cache.clear()


def _spans(count: int, *, bad_id: bool = False) -> Any:
    trace_id = os.urandom(16)
    spans = [span(trace_id, os.urandom(8), b"", f"step {i}", 1, 2, {}) for i in range(count)]
    if bad_id:  # a span id of 3 bytes: reading the spans into rows refuses it (400)
        spans[-1].span_id = b"abc"
    return request_of(spans)


def _message(response: Any) -> str:
    status = Status()
    status.ParseFromString(response.content)
    return status.message


def test_a_request_refused_for_the_rate_does_not_use_up_the_budget(acme: Project, token: str,
                                                                   settings: Any) -> None:
    settings.EVALSITE_OTLP_SPANS_PER_MINUTE = 10
    client = Client()
    assert post(client, _spans(6), token).status_code == 200
    for _ in range(3):  # each would pass the budget; none is charged
        refused = post(client, _spans(5), token)
        assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 60
    assert post(client, _spans(4), token).status_code == 200  # exactly the 4 left
    assert post(client, _spans(1), token).status_code == 429
    assert Span.objects.count() == 10


def test_a_request_refused_after_its_charge_gives_the_spans_back(acme: Project, token: str, settings: Any) -> None:
    settings.EVALSITE_OTLP_SPANS_PER_MINUTE = 10
    client = Client()
    refused = post(client, _spans(8, bad_id=True), token)
    assert refused.status_code == 400 and "span" in _message(refused)
    assert post(client, _spans(10), token).status_code == 200  # the 8 refused cost nothing
    assert Span.objects.count() == 10


def test_more_spans_than_a_minute_allows_are_refused_before_they_are_read(acme: Project, token: str,
                                                                          settings: Any) -> None:
    settings.EVALSITE_OTLP_SPANS_PER_MINUTE = 10
    # Reading the spans into rows would answer 400 for the bad id: the 413 shows the budget
    # was checked first, on the count alone.
    response = post(Client(), _spans(11, bad_id=True), token)
    assert response.status_code == 413
    assert "11 spans in one request" in _message(response) and "EVALSITE_OTLP_SPANS_PER_MINUTE" in _message(response)
    assert post(Client(), _spans(10), token).status_code == 200  # and charged nothing
    assert Trace.objects.count() == 1


@pytest.mark.usefixtures("redis_away")
def test_exports_are_stored_while_the_cache_holding_the_counts_is_away(acme: Project, token: str,
                                                                       settings: Any) -> None:
    settings.EVALSITE_OTLP_SPANS_PER_MINUTE = 10
    client = Client()
    for _ in range(3):  # the count starts again each time: nothing to count with
        assert post(client, _spans(5), token).status_code == 200
    assert Span.objects.count() == 15
    assert post(client, _spans(11), token).status_code == 413  # the per-request bound holds without a cache
