"""Runs through the API: start with uploaded outputs, follow, read results and exports."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.test import Client

from evaluations.models import Membership, Project, Run
from evaluations.runs import services as runs
from evaluations.schemas.report import EvalReport
from tests.engine_helpers import import_demo, perfect_outputs, regressed_outputs


def _start(client: Client, evalset: int, outputs: list[dict], **extra: object):  # type: ignore[no-untyped-def]
    return client.post("/api/v1/runs/", data=json.dumps({"evalset": evalset, "outputs": outputs, **extra}),
                       content_type="application/json")


def _execute(run_id: int) -> None:
    runs.run_execute_here(run_id)


@pytest.mark.django_db
def test_a_run_with_uploaded_outputs_is_created_queued_and_then_completes(alice_client: Client, acme: Project,
                                                                          django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    version = import_demo(acme)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = _start(alice_client, version.evalset_id, regressed_outputs(), model="gpt-x", branch="main",
                          tags=["nightly"])
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "queued"
    assert (body["cases_total"], body["model"], body["branch"], body["tags"]) == (8, "gpt-x", "main", ["nightly"])
    assert len(callbacks) == 1  # the enqueue waits for the commit
    _execute(body["id"])
    detail = alice_client.get(f"/api/v1/runs/{body['id']}/").json()
    assert detail["status"] == "completed"
    assert (detail["cases_done"], detail["cases_failed"]) == (8, 2)
    assert detail["summary"]["criteria"]["trajectory_match"]["pass_rate"] == pytest.approx(0.75)


@pytest.mark.django_db
def test_results_come_paginated_with_scores_and_filterable_by_status_and_level(alice_client: Client,
                                                                               acme: Project) -> None:
    version = import_demo(acme)
    run_id = _start(alice_client, version.evalset_id, regressed_outputs()).json()["id"]
    _execute(run_id)
    failed = alice_client.get(f"/api/v1/runs/{run_id}/results/?status=failed").json()
    assert failed["count"] == 2
    tokyo = next(r for r in failed["results"] if r["eval_id"] == "weather_tokyo")
    trajectory = [s for s in tokyo["scores"] if s["criterion"] == "trajectory_match"]
    assert any(s["applies_to"] == "conversation" and s["passed"] is False for s in trajectory)
    only_conversation = alice_client.get(f"/api/v1/runs/{run_id}/results/?applies_to=conversation&limit=3").json()
    assert len(only_conversation["results"]) == 3
    assert all(s["applies_to"] == "conversation" for r in only_conversation["results"] for s in r["scores"])


@pytest.mark.django_db
def test_the_report_csv_and_metric_exports_describe_the_same_run(alice_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    run_id = _start(alice_client, version.evalset_id, regressed_outputs()).json()["id"]
    _execute(run_id)
    report = EvalReport.model_validate_json(b"".join(alice_client.get(f"/api/v1/runs/{run_id}/report/").streaming_content))
    assert report.summary.total_cases == 8 and report.summary.passed_cases == 6
    assert {r.eval_id for r in report.results if not r.passed} == {"weather_tokyo", "order_status"}
    rows = list(csv.reader(io.StringIO(b"".join(alice_client.get(f"/api/v1/runs/{run_id}/results.csv")
                                                 .streaming_content).decode())))
    assert rows[0][:3] == ["eval_id", "iteration", "status"]
    assert "trajectory_match" in rows[0] and "response_match.passed" in rows[0]
    assert len(rows) == 9
    records = alice_client.get(f"/api/v1/runs/{run_id}/metrics/").json()["results"]
    assert {r["applies_to"] for r in records} >= {"conversation"}
    assert {r["group"] for r in records if r["name"] == "trajectory_match"} == {"trajectory"}
    aggregated = alice_client.get(f"/api/v1/runs/{run_id}/metrics/?aggregated=1&records=0").json()["results"]
    top = next(a for a in aggregated if a["name"] == "trajectory_match" and a["applies_to"] == "conversation")
    assert top["count"] == 8 and "individual_results" not in top


@pytest.mark.django_db
def test_cancel_and_retry_through_the_api(alice_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    run_id = _start(alice_client, version.evalset_id, regressed_outputs()).json()["id"]
    assert alice_client.post(f"/api/v1/runs/{run_id}/cancel/").json()["status"] == "cancelled"
    retry = alice_client.post(f"/api/v1/runs/{run_id}/retry/").json()
    assert retry["reset"] == 0  # nothing had failed yet
    second = _start(alice_client, version.evalset_id, regressed_outputs()).json()["id"]
    _execute(second)
    assert alice_client.post(f"/api/v1/runs/{second}/retry/").json()["reset"] == 2


@pytest.mark.django_db
def test_bad_run_requests_are_400_in_the_error_shape_and_write_nothing(alice_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    cases = [
        ({"evalset": version.evalset_id}, "outputs"),
        ({"evalset": version.evalset_id, "outputs": [{"eval_id": "nope", "turns": []}]}, "nope"),
        ({"evalset": version.evalset_id, "outputs": [{"eval_id": "weather_tokyo", "turns": "x"}]}, "turns"),
        ({"evalset": version.evalset_id, "outputs": [], "config": {"criteria": {"x": {"evaluator": "nope"}}}}, "nope"),
        ({"evalset": version.evalset_id, "outputs": [], "iterations": 0}, "iterations"),
        ({"evalset": "seven", "outputs": []}, "evalset"),
    ]
    for payload, fragment in cases:
        response = alice_client.post("/api/v1/runs/", data=json.dumps(payload), content_type="application/json")
        assert response.status_code == 400, (payload, response.content)
        body = response.json()
        assert set(body) >= {"code", "message", "problems"}
        assert fragment in json.dumps(body), (fragment, body)
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_other_projects_runs_are_404_and_viewers_cannot_start_runs(alice, alice_client: Client,  # type: ignore[no-untyped-def]
                                                                   bob_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    run_id = _start(alice_client, version.evalset_id, perfect_outputs()).json()["id"]
    for url in (f"/api/v1/runs/{run_id}/", f"/api/v1/runs/{run_id}/results/", f"/api/v1/runs/{run_id}/metrics/"):
        assert bob_client.get(url).status_code == 404
    assert bob_client.post(f"/api/v1/runs/{run_id}/cancel/").status_code == 404
    assert _start(bob_client, version.evalset_id, perfect_outputs()).status_code == 404
    assert bob_client.get("/api/v1/runs/").json()["results"] == []
    Membership.objects.filter(user=alice).update(role=Membership.Role.VIEWER)
    assert _start(alice_client, version.evalset_id, perfect_outputs()).status_code == 403


@pytest.mark.django_db
def test_saved_configs_are_kept_per_project_and_validated(alice_client: Client, acme: Project) -> None:
    good = {"project": "acme", "name": "strict", "config": {"criteria": {"trajectory_match": {"threshold": 1.0}}}}
    response = alice_client.post("/api/v1/configs/", data=json.dumps(good), content_type="application/json")
    assert response.status_code == 201, response.content
    bad = {**good, "name": "broken", "config": {"criteria": {"x": {"threshold": "high"}}}}
    assert alice_client.post("/api/v1/configs/", data=json.dumps(bad), content_type="application/json").status_code == 400
    assert [c["name"] for c in alice_client.get("/api/v1/configs/").json()["results"]] == ["strict"]
    version = import_demo(acme)
    preset = response.json()["id"]
    run = _start(alice_client, version.evalset_id, perfect_outputs(), preset=preset).json()
    assert run["config"]["criteria"]["trajectory_match"]["threshold"] == 1.0


@pytest.mark.django_db
def test_the_upsonic_export_gives_reliability_and_performance_over_iterations(alice_client: Client,
                                                                              acme: Project) -> None:
    version = import_demo(acme)
    payload = {"evalset": version.evalset_id, "target_kind": "python", "iterations": 3, "warmups": 1,
               "target": {"callable": "evaluations.demo.agent:respond"},
               "config": {"criteria": {"reliability": {"threshold": 1.0},
                                       "latency_seconds": {"threshold": 5.0}}}}
    response = alice_client.post("/api/v1/runs/", data=json.dumps(payload), content_type="application/json")
    assert response.status_code == 201, response.content
    _execute(response.json()["id"])
    body = json.loads(b"".join(alice_client.get(f"/api/v1/runs/{response.json()['id']}/upsonic/").streaming_content))
    cases = {c["eval_id"]: c for c in body["cases"]}
    tokyo = cases["weather_tokyo"]
    assert [r["passed"] for r in tokyo["reliability"]] == [True, True, True]
    assert tokyo["reliability"][0]["expected_tool_calls"] == ["get_weather"]
    perf = tokyo["performance"]
    assert perf["num_iterations"] == 3 and perf["warmup_runs"] == 1
    assert len(perf["all_runs"]) == 3
    assert all(r["memory_peak_bytes"] >= 0 for r in perf["all_runs"])
    assert perf["latency_stats"]["min"] <= perf["latency_stats"]["median"] <= perf["latency_stats"]["max"]
    assert cases["smalltalk_no_tools"]["reliability"] == []  # no expected tools: an error, as in Upsonic


@pytest.mark.django_db
def test_runs_filter_by_eval_set_status_branch_tag_and_commit(alice_client: Client, acme: Project) -> None:
    from tests.api_helpers import assert_error, finished_run

    version = import_demo(acme)
    main = finished_run(acme, perfect_outputs(), branch="main", git_commit="abc1234def", tags=["nightly"],
                        model="gpt-x")
    feature = finished_run(acme, regressed_outputs(), branch="feature/x", git_commit="fff0000", tags=["pr"])
    queued = _start(alice_client, version.evalset_id, perfect_outputs(), branch="main").json()["id"]

    def ids(query: str) -> list[int]:
        return [r["id"] for r in alice_client.get(f"/api/v1/runs/?{query}").json()["results"]]

    assert ids("") == [queued, feature.pk, main.pk]
    assert ids("branch=main") == [queued, main.pk]
    assert ids("status=completed&branch=main") == [main.pk]
    assert ids("tag=nightly") == [main.pk]
    assert ids("git_commit=abc1") == [main.pk]
    assert ids("model=gpt-x") == [main.pk]
    assert ids(f"evalset={version.evalset_id}&project=acme&limit=1") == [queued]
    assert ids("created_after=2000-01-01&created_before=2999-12-31") == [queued, feature.pk, main.pk]
    assert ids("project=globex") == []
    for query, param in (("status=done", "status"), ("evalset=seven", "evalset"),
                         ("evalset=99999999999999999999", "evalset"), ("created_after=yesterday", "created_after")):
        body = assert_error(alice_client.get(f"/api/v1/runs/?{query}"), 400, "invalid")
        assert body["problems"][0]["path"] == param


@pytest.mark.django_db
def test_the_runs_list_costs_the_same_queries_for_more_runs(alice_client: Client, acme: Project,
                                                           django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    from tests.api_helpers import finished_run

    import_demo(acme)
    for _ in range(4):
        finished_run(acme, perfect_outputs())
    with django_assert_max_num_queries(6):
        assert alice_client.get("/api/v1/runs/").json()["count"] == 4
    with django_assert_max_num_queries(6):
        alice_client.get("/api/v1/configs/")


@pytest.mark.django_db
def test_a_config_name_is_unique_per_project(alice_client: Client, acme: Project) -> None:
    from evaluations.models import EvaluationConfig
    from tests.api_helpers import assert_error

    good = {"project": "acme", "name": "strict", "config": {"criteria": {"trajectory_match": {"threshold": 1.0}}}}
    assert alice_client.post("/api/v1/configs/", data=json.dumps(good), content_type="application/json").status_code == 201
    body = assert_error(alice_client.post("/api/v1/configs/", data=json.dumps(good), content_type="application/json"),
                        400, "invalid")
    assert "already has a config named 'strict'" in body["message"]
    assert_error(alice_client.post("/api/v1/configs/", data=json.dumps({**good, "project": "globex", "name": "x"}),
                                   content_type="application/json"), 404)
    assert EvaluationConfig.objects.count() == 1


def _field_by_field(run: Run) -> dict:  # type: ignore[type-arg]
    """What DRF's ModelSerializer makes of the run's declared fields, one field object at a time."""
    from rest_framework import serializers

    from evaluations.api.serializers import RunSerializer

    return dict(serializers.ModelSerializer.to_representation(RunSerializer(), run))


@pytest.mark.django_db
@pytest.mark.parametrize("time_zone", ["UTC", "Asia/Kolkata"])
def test_the_runs_list_and_detail_say_what_the_field_by_field_serializer_says(
        alice_client: Client, acme: Project, settings, time_zone: str) -> None:  # type: ignore[no-untyped-def]
    """RunSerializer writes its fields out directly (the runs list and detail are polled by
    every CI job): the same JSON as DRF's field objects, for runs in every state, with and
    without a user, in UTC and in another TIME_ZONE."""
    from tests.api_helpers import finished_run

    settings.TIME_ZONE = time_zone
    version = import_demo(acme)
    finished = finished_run(acme, regressed_outputs(), branch="main", git_commit="abc1234", tags=["nightly", "<b>"],
                            model="gpt-x")
    queued = _start(alice_client, version.evalset_id, perfect_outputs(), name="<script>x</script>",
                    eval_ids=["weather_tokyo"]).json()["id"]
    running = Run.objects.get(pk=_start(alice_client, version.evalset_id, perfect_outputs()).json()["id"])
    running.status, running.cases_done = Run.Status.RUNNING, 3
    running.save()
    listed = {r["id"]: r for r in alice_client.get("/api/v1/runs/").json()["results"]}
    assert set(listed) == {finished.pk, queued, running.pk}
    for run in Run.objects.select_related("project", "evalset_version", "created_by"):
        expected = _field_by_field(run)
        assert listed[run.pk] == expected
        assert alice_client.get(f"/api/v1/runs/{run.pk}/").json() == expected
    # Exact filters are read by the same statement; the others by the ORM: the same runs either way.
    completed = alice_client.get("/api/v1/runs/?status=completed&project=acme").json()
    assert completed["count"] == 1 and completed["results"] == [listed[finished.pk]]
    assert alice_client.get("/api/v1/runs/?branch=main").json()["results"] == [listed[finished.pk]]
    page = alice_client.get("/api/v1/runs/?limit=2&offset=1").json()
    assert page["count"] == 3 and [r["id"] for r in page["results"]] == [queued, finished.pk]
    assert "offset=3" not in (page["next"] or "") and page["previous"] is not None
    assert listed[finished.pk]["created_by"] is None and listed[queued]["created_by"] == "alice"
    assert listed[finished.pk]["finished_at"] is not None and listed[queued]["finished_at"] is None
    offset = "Z" if time_zone == "UTC" else "+05:30"
    assert listed[finished.pk]["finished_at"].endswith(offset)
    assert listed[finished.pk]["summary"]["criteria"]["trajectory_match"]["passed"] == 6


@pytest.mark.django_db
def test_the_runs_list_and_detail_show_a_superuser_every_project_and_others_only_theirs(
        alice_client: Client, bob_client: Client, acme: Project, globex: Project) -> None:
    from django.contrib.auth import get_user_model

    from tests.api_helpers import finished_run

    import_demo(acme)
    import_demo(globex)
    ours, theirs = finished_run(acme, perfect_outputs()), finished_run(globex, perfect_outputs())
    root = Client()
    root.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-123"))
    everything = root.get("/api/v1/runs/").json()
    assert everything["count"] == 2 and {r["project"] for r in everything["results"]} == {"acme", "globex"}
    assert root.get(f"/api/v1/runs/{theirs.pk}/").json()["project"] == "globex"
    assert [r["id"] for r in alice_client.get("/api/v1/runs/").json()["results"]] == [ours.pk]
    assert alice_client.get(f"/api/v1/runs/{theirs.pk}/").status_code == 404
    assert alice_client.get("/api/v1/runs/?project=globex").json()["count"] == 0
    assert [r["id"] for r in bob_client.get("/api/v1/runs/").json()["results"]] == [theirs.pk]
    assert Client().get(f"/api/v1/runs/{ours.pk}/").status_code == 401
