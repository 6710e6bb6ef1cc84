"""Triage through the API: set a regression's status and assignee, comment on it, list
triaged cases and the review queue; the drill-down panel's rules (viewers read, members and
admins change; another project's runs are 404)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from evaluations.models import AuditEvent, Comment, Project, Run, Triage
from evaluations.review import comparison
from tests.api_helpers import assert_error, demo_runs, member, token_client


@pytest.fixture
def pair(acme: Project) -> tuple[Any, Any]:
    base, run = demo_runs(acme)
    Run.objects.filter(pk__in=[base.pk, run.pk]).update(branch="main")
    base.refresh_from_db()
    run.refresh_from_db()
    comparison.comparison_get(baseline=base, candidate=run)  # what the compare page stores
    return base, run


def _post(client: Client, url: str, data: dict[str, Any]) -> Any:
    return client.post(url, data=json.dumps(data), content_type="application/json")


def _patch(client: Client, url: str, data: dict[str, Any]) -> Any:
    return client.patch(url, data=json.dumps(data), content_type="application/json")


@pytest.mark.django_db
def test_a_member_triages_a_regression_assigns_it_and_comments(alice: Any, alice_client: Client,
                                                               pair: tuple[Any, Any]) -> None:
    base, run = pair
    response = _post(alice_client, "/api/v1/triage/", {"candidate": run.pk, "baseline": base.pk,
                                                       "eval_id": "weather_tokyo", "status": "confirmed",
                                                       "assignee": "alice", "comment": "Kyoto is **not** Tokyo"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["assignee"], body["eval_id"], body["comment_count"]) == (
        "confirmed", "alice", "weather_tokyo", 1)
    triage = Triage.objects.get(pk=body["id"])
    assert triage.updated_by == alice
    comments = alice_client.get(f"/api/v1/triage/{triage.pk}/comments/").json()["results"]
    assert comments[0]["body"] == "Kyoto is **not** Tokyo"
    assert "<strong>not</strong>" in comments[0]["html"]
    reply = _post(alice_client, f"/api/v1/triage/{triage.pk}/comments/", {"body": "fixed in #12",
                                                                         "parent": comments[0]["id"]})
    assert reply.status_code == 201 and reply.json()["parent"] == comments[0]["id"]
    changed = _patch(alice_client, f"/api/v1/triage/{triage.pk}/", {"status": "fixed", "assignee": None}).json()
    assert (changed["status"], changed["assignee"]) == ("fixed", None)
    assert AuditEvent.objects.filter(verb=AuditEvent.Verb.TRIAGE_CHANGED).count() == 2
    assert AuditEvent.objects.filter(verb=AuditEvent.Verb.COMMENT_ADDED).count() == 2


@pytest.mark.django_db
def test_triage_lists_filter_and_the_review_queue_shows_assigned_and_untriaged(alice_client: Client,
                                                                                pair: tuple[Any, Any]) -> None:
    base, run = pair
    _post(alice_client, "/api/v1/triage/", {"candidate": run.pk, "baseline": base.pk, "eval_id": "weather_tokyo",
                                            "assignee": "alice"})
    _post(alice_client, "/api/v1/triage/", {"candidate": run.pk, "baseline": base.pk, "eval_id": "order_status",
                                            "status": "expected"})
    listed = alice_client.get(f"/api/v1/triage/?candidate={run.pk}").json()
    assert listed["count"] == 2
    assert [t["eval_id"] for t in alice_client.get("/api/v1/triage/?assignee=me").json()["results"]] == [
        "weather_tokyo"]
    assert [t["eval_id"] for t in alice_client.get("/api/v1/triage/?status=expected").json()["results"]] == [
        "order_status"]
    assert alice_client.get("/api/v1/triage/?assignee=none").json()["count"] == 1
    assigned = alice_client.get("/api/v1/review/?tab=assigned").json()
    assert [r["eval_id"] for r in assigned["results"]] == ["weather_tokyo"]
    untriaged = alice_client.get("/api/v1/review/?tab=untriaged&project=acme").json()
    # weather_tokyo is still open (only assigned); order_status is triaged as expected.
    assert [r["eval_id"] for r in untriaged["results"]] == ["weather_tokyo"]
    assert untriaged["results"][0]["url"].startswith(f"/runs/{run.pk}/cases/")
    # A decision belongs to the eval set, branch and case: the queue and the list say all three.
    evalset = run.evalset_version.evalset_id
    for row in (assigned["results"][0], untriaged["results"][0]):
        assert (row["evalset_id"], row["branch"], row["eval_id"]) == (evalset, run.branch, "weather_tokyo")
    assert {t["branch"] for t in listed["results"]} == {run.branch}


@pytest.mark.django_db
def test_a_viewer_reads_triage_but_cannot_change_it(acme: Project, alice_client: Client,
                                                    pair: tuple[Any, Any]) -> None:
    base, run = pair
    triage_id = _post(alice_client, "/api/v1/triage/", {"candidate": run.pk, "baseline": base.pk,
                                                        "eval_id": "weather_tokyo", "comment": "hm"}).json()["id"]
    viewer = token_client(member("carol", acme, "viewer"))
    assert viewer.get(f"/api/v1/triage/{triage_id}/").json()["eval_id"] == "weather_tokyo"
    assert viewer.get(f"/api/v1/triage/{triage_id}/comments/").json()["count"] == 1
    assert_error(_post(viewer, "/api/v1/triage/", {"candidate": run.pk, "baseline": base.pk,
                                                   "eval_id": "order_status", "status": "flaky"}), 403,
                 "permission_denied")
    assert_error(_patch(viewer, f"/api/v1/triage/{triage_id}/", {"status": "flaky"}), 403)
    assert_error(_post(viewer, f"/api/v1/triage/{triage_id}/comments/", {"body": "me too"}), 403)
    assert Triage.objects.count() == 1 and Comment.objects.count() == 1
    assert Triage.objects.get().status == "open"


@pytest.mark.django_db
def test_another_projects_triage_and_runs_are_404(bob_client: Client, alice_client: Client,
                                                  pair: tuple[Any, Any]) -> None:
    base, run = pair
    triage_id = _post(alice_client, "/api/v1/triage/", {"candidate": run.pk, "baseline": base.pk,
                                                        "eval_id": "weather_tokyo"}).json()["id"]
    for url in (f"/api/v1/triage/{triage_id}/", f"/api/v1/triage/{triage_id}/comments/"):
        assert_error(bob_client.get(url), 404, "not_found")
    assert_error(_patch(bob_client, f"/api/v1/triage/{triage_id}/", {"status": "fixed"}), 404)
    assert_error(_post(bob_client, "/api/v1/triage/", {"candidate": run.pk, "baseline": base.pk,
                                                       "eval_id": "weather_tokyo"}), 404)
    assert bob_client.get("/api/v1/triage/").json()["count"] == 0
    assert bob_client.get("/api/v1/review/?tab=untriaged").json()["count"] == 0
    assert_error(bob_client.get("/api/v1/review/?project=acme"), 404)


@pytest.mark.django_db
def test_bad_triage_requests_are_400_and_change_nothing(alice_client: Client, bob: Any,
                                                        pair: tuple[Any, Any]) -> None:
    base, run = pair
    key = {"candidate": run.pk, "baseline": base.pk, "eval_id": "weather_tokyo"}
    cases = [
        ({**key, "status": "wontfix"}, 400, "status"),
        ({**key, "assignee": "bob"}, 400, "not a member"),  # bob is in another project
        ({**key, "assignee": "nobody"}, 400, "nobody"),
        ({**key, "baseline": run.pk}, 400, "itself"),
        ({**key, "eval_id": "no_such_case"}, 404, "no_such_case"),
        ({**key, "comment": "x" * 10_001}, 400, "comment"),
        ({"candidate": "seven", "baseline": base.pk, "eval_id": "weather_tokyo"}, 400, "candidate"),
        ({"baseline": base.pk, "eval_id": "weather_tokyo"}, 400, "candidate"),
    ]
    for payload, status, fragment in cases:
        body = assert_error(_post(alice_client, "/api/v1/triage/", payload), status)
        assert fragment in json.dumps(body), (payload, body)
    assert Triage.objects.count() == 0 and AuditEvent.objects.filter(verb="triage.changed").count() == 0


@pytest.mark.django_db
def test_triage_lists_cost_the_same_queries_for_more_rows(alice_client: Client, pair: tuple[Any, Any],
                                                          django_assert_max_num_queries: Any) -> None:
    base, run = pair
    for eval_id in ("weather_tokyo", "order_status", "smalltalk_no_tools"):
        triage_id = _post(alice_client, "/api/v1/triage/", {"candidate": run.pk, "baseline": base.pk,
                                                            "eval_id": eval_id, "assignee": "alice",
                                                            "comment": "look"}).json()["id"]
    with django_assert_max_num_queries(6):
        assert alice_client.get("/api/v1/triage/").json()["count"] == 3
    with django_assert_max_num_queries(7):
        assert alice_client.get(f"/api/v1/triage/{triage_id}/comments/").json()["count"] == 1
