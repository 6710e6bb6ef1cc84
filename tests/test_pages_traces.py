"""The trace list (search, filters, pages; queries that do not grow with the traces) and one
trace's waterfall, on the pages and the API; span names are untrusted text."""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from evaluations.accounts.tokens import token_create
from evaluations.models import Project, Trace
from tests.api_helpers import token_client
from tests.otlp_helpers import T0, post, request_of, span


def _send(
    client: Client,
    token: str,
    count: int,
    *,
    service: str = "shop",
    error: bool = False,
    name: str = "checkout",
    thread: str = "",
) -> list[str]:
    spans, ids = [], []
    for n in range(count):
        trace_id = os.urandom(16)
        ids.append(trace_id.hex())
        root = os.urandom(8)
        attrs = {"session.id": thread} if thread else {}
        spans.append(span(trace_id, root, b"", name, T0 + n, T0 + n + 5_000_000, attrs, error="boom" if error else ""))
        spans.append(
            span(
                trace_id,
                os.urandom(8),
                root,
                "lookup",
                T0 + n + 1,
                T0 + n + 1_000_000,
                {"openinference.span.kind": "TOOL", "tool.name": "lookup"},
            )
        )
    assert post(client, request_of(spans, resource={"service.name": service}), token).status_code == 200
    return ids


@pytest.fixture
def token(alice: Any) -> str:
    return token_create(user=alice, name="otel").secret


@pytest.mark.django_db
def test_the_list_filters_and_its_queries_do_not_grow(
    acme: Project, alice: Any, alice_client: Client, token: str
) -> None:
    client = Client()
    _send(client, token, 3, service="shop")
    failing = _send(client, token, 2, service="billing", error=True, name="charge", thread="conv-7")

    def queries(url: str) -> tuple[int, str]:
        with CaptureQueriesContext(connection) as ctx:
            response = alice_client.get(url)
        assert response.status_code == 200
        return len(ctx.captured_queries), response.content.decode()

    few, html = queries("/traces/")
    assert "of 5 traces" in html and "billing" in html
    _send(client, token, 60, service="shop")
    many, html = queries("/traces/")
    assert many == few
    assert "of 65 traces" in html and "page 1 of 2" in html
    _, html = queries("/traces/?status=error")
    assert "of 2 traces" in html and "charge" in html
    _, html = queries("/traces/?service=shop")
    assert "of 63 traces" in html
    _, html = queries(f"/traces/?q={failing[0][:10]}")
    assert "of 1 trace" in html
    _, html = queries("/traces/?thread=conv-7")
    assert "of 2 traces" in html
    _, html = queries("/traces/?link=run")
    assert "No traces match these filters" in html


@pytest.mark.django_db
def test_a_trace_opens_in_the_waterfall_with_names_escaped(
    acme: Project, alice_client: Client, token: str, globex: Project, bob_client: Client
) -> None:
    [trace_id] = _send(Client(), token, 1, name="<script>alert(1)</script>")
    trace = Trace.objects.get(trace_id=trace_id)
    response = alice_client.get(f"/traces/{trace.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-testid="waterfall"' in html and "lookup" in html and "plotly-evalsite-" in html  # drawn
    assert "2 attributes" in html
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert bob_client.get(f"/traces/{trace.pk}/").status_code == 404  # another project's


@pytest.mark.django_db
def test_the_api_lists_and_opens_traces(acme: Project, alice: Any, bob: Any, token: str) -> None:
    ids = _send(Client(), token, 3, service="shop")
    _send(Client(), token, 1, service="billing", error=True)
    api = token_client(alice)
    body = api.get("/api/v1/traces/?service=shop").json()
    assert body["count"] == 3 and {t["trace_id"] for t in body["results"]} == set(ids)
    first = body["results"][0]
    assert first["span_count"] == 2 and first["complete"] and first["run"] is None
    assert api.get("/api/v1/traces/?status=error").json()["count"] == 1
    detail = api.get(f"/api/v1/traces/{first['id']}/").json()
    assert [s["name"] for s in detail["spans"]] == ["checkout", "lookup"]
    assert detail["spans"][1]["depth"] == 1 and detail["spans"][1]["attributes"]["tool.name"] == "lookup"
    assert detail["resource"]["service.name"] == "shop"
    assert token_client(bob).get(f"/api/v1/traces/{first['id']}/").status_code == 404
    assert api.get("/api/v1/traces/?status=sideways").status_code == 400
