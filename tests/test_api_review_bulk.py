"""Issue 41, item 12: the review queue's bulk action and the review report have API twins.
`POST /api/v1/review/bulk/` follows the page's rules and writes all or nothing (a triage bot
can do what a lead does on the queue); `GET /api/v1/projects/<slug>/report/` is the report
page's data as JSON, the same numbers the page shows."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from evaluations.accounts.tokens import token_create
from evaluations.models import Comment, NotifyMessage, Project, Triage
from evaluations.notify import services as notify_services
from tests.team_helpers import REGRESSED, day_run, eval_id, team_version, user_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def week(acme: Project, alice: Any) -> dict[str, Any]:
    version = team_version(acme)
    base = day_run(acme, version)
    run = day_run(acme, version, wrong=REGRESSED)
    return {"bob": user_in(acme, "bob", "member"), "vera": user_in(acme, "vera", "viewer"), "base": base,
            "run": run, "version": version}


def api(user: Any) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {token_create(user=user, name='bot').secret}")


def post(client: Client, body: dict[str, Any]) -> Any:
    return client.post("/api/v1/review/bulk/", json.dumps(body), content_type="application/json")


def cases(week: dict[str, Any], numbers: list[int]) -> list[dict[str, Any]]:
    return [{"candidate": week["run"].pk, "baseline": week["base"].pk, "eval_id": eval_id(i)} for i in numbers]


def test_a_bot_confirms_assigns_and_comments_on_the_cases_it_names(acme: Project, alice: Any,
                                                                  week: dict[str, Any]) -> None:
    response = post(api(alice), {"cases": cases(week, [1, 2, 3]), "status": "confirmed", "assignee": "bob",
                                 "comment": "bisected to the lookup change"})
    assert response.status_code == 200, response.content
    assert response.json() == {"cases": 3, "commented": 3}
    decided = Triage.objects.filter(branch="main")
    assert sorted(t.eval_id for t in decided) == [eval_id(i) for i in (1, 2, 3)]
    assert {(t.status, t.assignee.username) for t in decided} == {("confirmed", "bob")}
    assert Comment.objects.filter(body="bisected to the lookup change").count() == 3


def test_the_filters_take_every_case_the_queue_keeps_as_the_pages_all_n_cases(acme: Project, alice: Any,
                                                                            week: dict[str, Any]) -> None:
    queue = api(alice).get("/api/v1/review/?tab=untriaged&branch=main").json()
    assert queue["count"] == len(REGRESSED)
    response = post(api(alice), {"filters": {"tab": "untriaged", "branch": "main"}, "status": "flaky"})
    assert response.json() == {"cases": len(REGRESSED), "commented": 0}
    assert api(alice).get("/api/v1/review/?tab=untriaged&branch=main").json()["count"] == 0


def test_one_refused_case_writes_nothing_and_says_which(acme: Project, alice: Any, week: dict[str, Any]) -> None:
    named = [*cases(week, [1, 2]), {"candidate": week["run"].pk, "baseline": week["base"].pk, "eval_id": "nope"}]
    response = post(api(alice), {"cases": named, "status": "confirmed", "comment": "x"})
    assert response.status_code == 400
    assert "no case 'nope' in run" in json.dumps(response.json())
    assert not Triage.objects.exists() and not Comment.objects.exists()
    refused = post(api(alice), {"cases": cases(week, [1]), "assignee": "vera"})
    assert refused.status_code == 400 and "is a viewer" in json.dumps(refused.json())
    assert not Triage.objects.exists()


@pytest.mark.parametrize(("body", "message"), [
    ({}, "one of `cases` and `filters`"),
    ({"cases": [], "status": "flaky"}, "select the cases first"),
    ({"cases": "__three__"}, "choose a status, an assignee or a comment"),
])
def test_an_empty_or_ambiguous_action_is_refused_with_what_to_do(acme: Project, alice: Any, week: dict[str, Any],
                                                                 body: dict[str, Any], message: str) -> None:
    if body.get("cases") == "__three__":
        body = {"cases": cases(week, [1, 2, 3])}
    response = post(api(alice), body)
    assert response.status_code == 400 and message in json.dumps(response.json())


def test_viewers_may_not_and_another_projects_runs_do_not_exist(acme: Project, alice: Any, week: dict[str, Any],
                                                               globex: Project) -> None:
    from evaluations.models import Membership

    assert post(api(week["vera"]), {"cases": cases(week, [1]), "status": "flaky"}).status_code == 403
    gus = user_in(globex, "gus", "member")
    outsider = post(api(gus), {"project": "acme", "cases": cases(week, [1]), "status": "flaky"})
    assert outsider.status_code == 404
    Membership.objects.create(project=acme, user=gus, role="member")  # gus of globex is in acme too now
    other = post(api(gus), {"project": "globex", "cases": cases(week, [1]), "status": "flaky"})
    assert other.status_code == 400 and "no case" in json.dumps(other.json())  # acme's run is not globex's
    assert not Triage.objects.exists()


def test_a_bulk_action_through_the_api_tells_each_person_once(acme: Project, alice: Any, week: dict[str, Any],
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              django_capture_on_commit_callbacks: Any) -> None:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)
    inbox = notify_services.channel_save(project=acme, actor=None, values={"name": "inbox", "kind": "inapp"})
    for kind in ("triage_assigned", "mention"):
        notify_services.rule_save(project=acme, actor=None, values={"name": kind, "kind": kind}, channels=[inbox.pk])
    with django_capture_on_commit_callbacks(execute=True):
        post(api(alice), {"cases": cases(week, [1, 2, 3]), "assignee": "bob", "comment": "@bob yours"})
    [message] = NotifyMessage.objects.all()
    assert message.recipient == week["bob"] and len(message.payload["items"]) == 6


# --- The report ---------------------------------------------------------------------------------


def test_the_report_as_json_says_what_the_page_says(acme: Project, alice: Any, week: dict[str, Any]) -> None:
    post(api(alice), {"cases": cases(week, [1, 2]), "status": "confirmed", "assignee": "bob", "comment": "mine"})
    post(api(alice), {"cases": cases(week, [3]), "status": "flaky"})
    today = timezone.localdate()
    report = api(alice).get(f"/api/v1/projects/acme/report/?date_from={today - timedelta(days=2)}"
                            f"&date_to={today}")
    assert report.status_code == 200, report.content
    body = report.json()
    assert body["project"] == "acme" and body["date_to"] == today.isoformat() and body["run_count"] == 2
    [branch] = body["runs"]
    assert (branch["evalset"], branch["branch"], branch["runs"], branch["completed"]) == ("support", "main", 2, 2)
    assert branch["latest"]["id"] == week["run"].pk and branch["latest"]["failed"] > 0
    assert body["status_counts"]["confirmed"] == 2 and body["status_counts"]["flaky"] == 1
    assert body["decision_count"] == 3 and body["untriaged"] == len(REGRESSED) - 3
    rows = {d["eval_id"]: d for d in body["decisions"]}
    assert rows[eval_id(1)]["assignee"] == "bob" and rows[eval_id(1)]["decided_by"] == "alice"
    assert rows[eval_id(1)]["last_comment"] == "alice: mine" and rows[eval_id(3)]["status"] == "flaky"
    page = Client()
    page.force_login(alice)
    html = page.get(reverse("project_report", args=["acme"]) + f"?from={today - timedelta(days=2)}&to={today}")
    text = html.content.decode()
    for d in body["decisions"]:
        assert d["eval_id"] in text


def test_the_report_refuses_a_reversed_period_and_hides_other_projects(acme: Project, alice: Any, globex: Project,
                                                                      week: dict[str, Any]) -> None:
    bad = api(alice).get("/api/v1/projects/acme/report/?date_from=2026-05-02&date_to=2026-05-01")
    assert bad.status_code == 400 and "is after to" in json.dumps(bad.json())
    assert api(user_in(globex, "gus", "member")).get("/api/v1/projects/acme/report/").status_code == 404
    assert api(week["vera"]).get("/api/v1/projects/acme/report/").status_code == 200  # any member reads it
