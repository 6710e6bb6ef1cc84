"""The eval-set API: upload, list, versions, cases, and who may do what."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from evaluations.models import EvalSet, Membership, Project
from tests.conftest import REPO

DEMO = REPO / "evaluations" / "demo" / "travel_agent.evalset.json"


def _upload(client: Client, **data: object):  # type: ignore[no-untyped-def]
    return client.post(
        "/api/v1/evalsets/",
        {"file": [SimpleUploadedFile("travel_agent.evalset.json", DEMO.read_bytes())], **data},
    )


@pytest.mark.django_db
def test_an_upload_answers_201_with_the_version_and_format(alice_client: Client) -> None:
    response = _upload(alice_client, project="acme")
    assert response.status_code == 201
    [result] = response.json()["results"]
    assert result["created"] is True
    assert (result["format"], result["variant"], result["case_count"]) == ("native", "agentflow", 8)
    assert result["evalset"]["eval_set_id"] == "demo_travel_agent"
    assert result["evalset"]["project"] == "acme"
    assert result["version"]["number"] == 1
    assert len(result["version"]["content_hash"]) == 64


@pytest.mark.django_db
def test_the_same_upload_again_answers_200_and_names_the_existing_version(alice_client: Client) -> None:
    _upload(alice_client, project="acme")
    response = _upload(alice_client, project="acme")
    assert response.status_code == 200
    [result] = response.json()["results"]
    assert result["created"] is False
    assert result["version"]["number"] == 1


@pytest.mark.django_db
def test_the_project_may_be_left_out_when_you_belong_to_one(alice_client: Client) -> None:
    assert _upload(alice_client).status_code == 201
    assert EvalSet.objects.get().project.slug == "acme"


@pytest.mark.django_db
def test_an_upload_without_a_file_part_is_a_400_in_the_error_shape(alice_client: Client) -> None:
    response = alice_client.post("/api/v1/evalsets/", {"project": "acme"})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid"
    assert body["problems"][0]["path"] == "file"


@pytest.mark.django_db
def test_an_unknown_format_name_is_a_400(alice_client: Client) -> None:
    response = _upload(alice_client, project="acme", format="yaml")
    assert response.status_code == 400
    assert "unknown format 'yaml'" in response.json()["message"]


@pytest.mark.django_db
def test_anonymous_requests_get_403_or_401_and_write_nothing() -> None:
    response = _upload(Client(), project="acme")
    assert response.status_code in (401, 403)
    assert response.json()["code"] == "not_authenticated"
    assert EvalSet.objects.count() == 0


@pytest.mark.django_db
def test_another_projects_user_cannot_upload_into_it(bob_client: Client, acme: Project) -> None:
    response = _upload(bob_client, project="acme")
    assert response.status_code == 404
    assert EvalSet.objects.count() == 0


@pytest.mark.django_db
def test_a_viewer_cannot_upload(alice, alice_client: Client, acme: Project) -> None:  # type: ignore[no-untyped-def]
    Membership.objects.filter(user=alice).update(role=Membership.Role.VIEWER)
    response = _upload(alice_client, project="acme")
    assert response.status_code == 403
    assert EvalSet.objects.count() == 0


@pytest.mark.django_db
def test_lists_show_only_your_projects_eval_sets(alice_client: Client, bob_client: Client) -> None:
    _upload(alice_client, project="acme")
    assert [e["eval_set_id"] for e in alice_client.get("/api/v1/evalsets/").json()["results"]] == ["demo_travel_agent"]
    assert bob_client.get("/api/v1/evalsets/").json()["results"] == []
    pk = EvalSet.objects.get().pk
    assert bob_client.get(f"/api/v1/evalsets/{pk}/").status_code == 404
    assert bob_client.get(f"/api/v1/evalsets/{pk}/versions/").status_code == 404
    assert bob_client.get(f"/api/v1/evalsets/{pk}/versions/1/cases/").status_code == 404


@pytest.mark.django_db
def test_cases_are_listed_paginated_and_filterable(alice_client: Client) -> None:
    _upload(alice_client, project="acme")
    pk = EvalSet.objects.get().pk
    page = alice_client.get(f"/api/v1/evalsets/{pk}/versions/1/cases/?limit=3").json()
    assert page["count"] == 8
    assert [c["eval_id"] for c in page["results"]] == ["weather_tokyo", "weather_paris_followup", "flight_search_lis"]
    tagged = alice_client.get(f"/api/v1/evalsets/{pk}/versions/1/cases/?tag=orders").json()
    assert [c["eval_id"] for c in tagged["results"]] == ["order_status", "order_cancel"]
    searched = alice_client.get(f"/api/v1/evalsets/{pk}/versions/1/cases/?q=umbrella").json()
    assert searched["count"] == 0  # only the first user message is searched
    searched = alice_client.get(f"/api/v1/evalsets/{pk}/versions/1/cases/?q=Lisbon").json()
    assert [c["eval_id"] for c in searched["results"]] == ["flight_search_lis"]
    versions = alice_client.get(f"/api/v1/evalsets/{pk}/versions/").json()["results"]
    assert [v["number"] for v in versions] == [1]
