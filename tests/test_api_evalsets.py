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


# --- Versions, downloads, one case, the trend ------------------------------------------------


@pytest.mark.django_db
def test_a_version_its_downloads_and_one_case(alice_client: Client, bob_client: Client) -> None:
    import json

    evalset = _upload(alice_client, project="acme").json()["results"][0]["evalset"]["id"]
    version = alice_client.get(f"/api/v1/evalsets/{evalset}/versions/1/").json()
    assert (version["number"], version["case_count"], version["source_format"]) == (1, 8, "native")
    original = alice_client.get(f"/api/v1/evalsets/{evalset}/versions/1/original/")
    assert original.status_code == 200 and original.content == DEMO.read_bytes()
    native = json.loads(b"".join(alice_client.get(f"/api/v1/evalsets/{evalset}/versions/1/native/").streaming_content))
    assert native["eval_set_id"] == "demo_travel_agent" and len(native["eval_cases"]) == 8
    case = alice_client.get(f"/api/v1/evalsets/{evalset}/versions/1/cases/?q=tokyo").json()["results"][0]
    detail = alice_client.get(f"/api/v1/cases/{case['id']}/").json()
    assert (detail["eval_id"], detail["project"], detail["evalset"], detail["version"]) == (
        "weather_tokyo", "acme", evalset, 1)
    assert detail["conversation"][0]["expected_tool_trajectory"][0]["name"] == "get_weather"
    for url in (f"/api/v1/evalsets/{evalset}/versions/1/", f"/api/v1/evalsets/{evalset}/versions/1/original/",
                f"/api/v1/evalsets/{evalset}/versions/1/native/", f"/api/v1/cases/{case['id']}/"):
        assert bob_client.get(url).status_code == 404
    assert alice_client.get(f"/api/v1/evalsets/{evalset}/versions/2/").status_code == 404


@pytest.mark.django_db
def test_the_trend_gives_pass_rates_and_where_each_case_started_failing(alice_client: Client,
                                                                        acme: Project) -> None:
    from tests.api_helpers import demo_runs, finished_run
    from tests.engine_helpers import regressed_outputs

    base, run = demo_runs(acme)
    third = finished_run(acme, regressed_outputs())
    evalset = base.evalset_version.evalset_id
    body = alice_client.get(f"/api/v1/evalsets/{evalset}/trend/").json()
    assert [r["id"] for r in body["runs"]] == [base.pk, run.pk, third.pk]
    assert [r["pass_rate"] for r in body["runs"]] == [1.0, 0.75, 0.75]
    assert body["runs"][0]["latency_p95"] == pytest.approx(base.summary["latency"]["p95"])
    cases = {c["eval_id"]: c for c in body["cases"]}
    assert body["count"] == 8 and len(cases) == 8 and body["more_runs"] is False
    assert cases["weather_tokyo"]["outcomes"] == ["pass", "fail", "fail"]
    assert (cases["weather_tokyo"]["failing_since"], cases["weather_tokyo"]["runs_failing"]) == (run.pk, 2)
    assert cases["weather_paris_followup"]["failing_since"] is None
    failing = alice_client.get(f"/api/v1/evalsets/{evalset}/trend/?failing=true&limit=1").json()
    assert failing["count"] == 2 and len(failing["cases"]) == 1 and failing["next"]
    assert alice_client.get(f"/api/v1/evalsets/{evalset}/trend/?limit=0").status_code == 400


@pytest.mark.django_db
def test_eval_set_lists_cost_the_same_queries_for_more_rows(alice_client: Client, acme: Project,
                                                            django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    from evaluations.evalsets.services import evalset_import
    from evaluations.interop import SourceFile

    for n in range(4):
        doc = {"eval_set_id": f"set_{n}", "eval_cases": [{"eval_id": f"c{i}", "conversation": []} for i in range(3)]}
        import json

        evalset_import(project=acme, files=[SourceFile(f"set_{n}.evalset.json", json.dumps(doc).encode())])
    with django_assert_max_num_queries(6):
        assert alice_client.get("/api/v1/evalsets/").json()["count"] == 4
    evalset = EvalSet.objects.get(eval_set_id="set_0")
    with django_assert_max_num_queries(7):
        assert alice_client.get(f"/api/v1/evalsets/{evalset.pk}/versions/1/cases/").json()["count"] == 3
    with django_assert_max_num_queries(7):
        alice_client.get(f"/api/v1/evalsets/{evalset.pk}/versions/")
