"""A project's trace list is not counted past a cap (issue 31: pages flat to a million
stored traces): the page says "more than N", pages on by one row past the page, and knows the
exact count on the last page; the API says the same with `count_capped`. The list of services
is read by a skip scan through the service index (one query, in order, at most 100)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from evaluations.api.pagination import CappedCountPagination
from evaluations.ingest import selectors
from evaluations.models import Project, Trace
from tests.api_helpers import token_client

CAP = 60


def _traces(project: Project, count: int, *, service: str = "shop", offset: int = 0) -> None:
    Trace.objects.bulk_create([
        Trace(project=project, trace_id=f"{offset + n:04x}" + "a" * 28, name="checkout", received=True, start_ns=offset + n,
              end_ns=offset + n + 5, service_name=service, complete=True) for n in range(count)])


@pytest.fixture
def capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selectors, "COUNT_CAP", CAP)  # a setting of the list, not its behaviour
    monkeypatch.setattr(CappedCountPagination, "cap", CAP)


@pytest.mark.django_db
def test_the_page_stops_counting_at_the_cap_and_knows_the_last_page(acme: Project, alice_client: Client,
                                                                   capped: None) -> None:
    _traces(acme, 130)
    first = alice_client.get("/traces/").content.decode()
    assert "Showing 1\N{EN DASH}50 of more than 60 traces" in first
    assert "page 1</span>" in first and "Older →" in first and "← Newer" not in first
    second = alice_client.get("/traces/?page=2").content.decode()
    assert "Showing 51\N{EN DASH}100 of more than 60 traces" in second and "← Newer" in second and "Older →" in second
    last = alice_client.get("/traces/?page=3").content.decode()
    assert "Showing 101\N{EN DASH}130 of 130 traces" in last and "page 3 of 3" in last and "Older →" not in last
    # newest first, by start, across the pages
    newest, oldest, other = (f"{n:04x}" + "a" * 12 for n in (29, 0, 30))
    assert last.index(newest) < last.index(oldest) and other not in last
    beyond = alice_client.get("/traces/?page=999").content.decode()  # past the end: the first page
    assert "Showing 1\N{EN DASH}50 of more than 60 traces" in beyond


@pytest.mark.django_db
def test_under_the_cap_the_count_is_exact(acme: Project, alice_client: Client, capped: None) -> None:
    _traces(acme, 55)
    first = alice_client.get("/traces/").content.decode()
    assert "Showing 1\N{EN DASH}50 of 55 traces" in first and "page 1 of 2" in first


@pytest.mark.django_db
def test_the_api_says_when_the_count_is_capped(acme: Project, alice: Any, capped: None) -> None:
    _traces(acme, 130)
    client = token_client(alice)
    first = client.get("/api/v1/traces/?project=acme&limit=50").json()
    assert (first["count"], first["count_capped"], len(first["results"])) == (CAP, True, 50)
    assert "offset=50" in first["next"] and first["previous"] is None
    last = client.get("/api/v1/traces/?project=acme&limit=50&offset=100").json()
    assert (last["count"], last["count_capped"], last["next"], len(last["results"])) == (130, False, None, 30)
    small = client.get("/api/v1/traces/?project=acme&limit=200").json()
    assert (small["count"], small["count_capped"], small["next"]) == (130, False, None)


@pytest.mark.django_db
@pytest.mark.parametrize("offset", ["9223372036854775807", "55683338354090817542007974318843037667"])
def test_an_offset_past_any_row_is_an_empty_page_on_every_list(acme: Project, alice: Any, offset: str) -> None:
    """PostgreSQL answered 500 to an OFFSET past a bigint (schemathesis, in CI), and SQLite
    cannot bind one: every list answers an empty page instead."""
    _traces(acme, 3)
    client = token_client(alice)
    traces = client.get(f"/api/v1/traces/?project=acme&limit=50&offset={offset}")
    assert traces.status_code == 200, traces.content
    body = traces.json()
    assert (body["results"], body["next"], body["count"]) == ([], None, 3)
    assert "offset=" in body["previous"]
    runs = client.get(f"/api/v1/runs/?offset={offset}")  # a counted list (DRF's own paging)
    assert runs.status_code == 200, runs.content
    assert runs.json()["results"] == []


@pytest.mark.django_db
def test_the_services_are_listed_by_skip_scan_in_order(acme: Project, globex: Project,
                                                       django_assert_num_queries: Any) -> None:
    _traces(acme, 40, service="shop")
    _traces(acme, 30, service="billing", offset=100)
    _traces(acme, 5, service="", offset=200)  # no service.name: not listed
    _traces(globex, 10, service="other", offset=300)  # another project's
    Trace.objects.create(project=acme, trace_id="f" * 32, run=None, received=False, service_name="embedded")
    with django_assert_num_queries(1):
        assert selectors.services_of(acme) == ["billing", "shop"]
    assert selectors.services_of(acme, limit=1) == ["billing"]
    assert selectors.services_of(globex) == ["other"]
