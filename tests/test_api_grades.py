"""Grades, the grading queue and judge calibration through the API: create and change a grade
(one per grader), list and filter, the queue's pages, the calibration numbers; viewers get
403, another project's results 404, bad input 400 naming the field (and nothing written)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from evaluations.models import AuditEvent, CaseResult, HumanGrade, Membership, Project, Run
from tests.api_helpers import assert_error, member, token_client
from tests.compare_helpers import generated_version
from tests.grading_helpers import judged_run
from tests.llm_server import FakeLLM

pytestmark = pytest.mark.django_db


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def judged(acme: Project, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> Run:
    return judged_run(acme, generated_version(acme, 6), llm, monkeypatch, count=6, fails={1, 2})


def result(run: Run, index: int) -> CaseResult:
    return CaseResult.objects.get(run=run, case__eval_id=f"case_{index:04d}")


def post(client: Client, data: dict[str, Any]) -> Any:
    return client.post("/api/v1/grades/", data=json.dumps(data), content_type="application/json")


def test_a_member_grades_changes_the_grade_and_lists_grades(judged: Run, alice: Any) -> None:
    client = token_client(alice)
    r = result(judged, 1)
    created = post(
        client, {"result": r.pk, "criterion": "llm_judge", "verdict": "pass", "score": 0.9, "note": "right item"}
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["grader"], body["verdict"], body["passed"], body["score"], body["project"], body["run"]) == (
        "alice",
        "pass",
        True,
        0.9,
        "acme",
        judged.pk,
    )
    changed = post(client, {"result": r.pk, "criterion": "llm_judge", "verdict": "fail"})
    assert changed.status_code == 200 and changed.json()["id"] == body["id"] and changed.json()["score"] is None
    patched = client.patch(
        f"/api/v1/grades/{body['id']}/",
        data=json.dumps({"verdict": "pass", "score": 1}),
        content_type="application/json",
    )
    assert patched.status_code == 200 and patched.json()["passed"] is True
    assert HumanGrade.objects.count() == 1
    assert AuditEvent.objects.filter(verb__in=["grade.added", "grade.changed"]).count() == 3
    listed = client.get(f"/api/v1/grades/?run={judged.pk}&criterion=llm_judge&grader=me").json()
    assert [g["id"] for g in listed["results"]] == [body["id"]]
    assert client.get("/api/v1/grades/?grader=nobody").json()["results"] == []
    assert client.get(f"/api/v1/grades/{body['id']}/").json()["note"] == ""


def test_the_queue_and_calibration_through_the_api(judged: Run, alice: Any, acme: Project) -> None:
    client = token_client(alice)
    carol = member("carol", acme, Membership.Role.MEMBER)
    for index, verdict in ((0, "pass"), (1, "pass"), (2, "fail"), (3, "fail")):
        assert (
            post(client, {"result": result(judged, index).pk, "criterion": "llm_judge", "verdict": verdict}).status_code
            == 201
        )
    assert (
        post(
            token_client(carol), {"result": result(judged, 1).pk, "criterion": "llm_judge", "verdict": "pass"}
        ).status_code
        == 201
    )
    queue = client.get("/api/v1/grading-queue/?project=acme").json()
    # the judge failed 1 and 2: alice passes 1 (and carol too), 3 is failed by alice but passed by the judge
    assert queue["disagreements"] == 2 and queue["count"] == 2 + (6 + 6 - 2)
    first = queue["results"][0]
    assert first["disagreement"] is True and first["criterion"] == "llm_judge" and first["url"].startswith("/runs/")
    assert {g["grader"] for g in first["grades"]} == {"alice", "carol"}
    page2 = client.get("/api/v1/grading-queue/?project=acme&page=2").json()
    assert page2["page"] == 1 and page2["num_pages"] == 1  # 12 items fit one page of 25

    [row] = client.get("/api/v1/calibration/?project=acme").json()
    assert (row["criterion"], row["judge_model"], row["items"], row["compared"]) == ("llm_judge", "judge-a", 4, 4)
    assert row["confusion"] == {
        "judge_pass_people_pass": 1,
        "judge_pass_people_fail": 1,
        "judge_fail_people_pass": 1,
        "judge_fail_people_fail": 1,
    }
    assert row["accuracy"] == pytest.approx(0.5) and row["cohen_kappa"] == pytest.approx(0.0)
    assert row["graders_items"] == 1 and row["graders_fleiss_kappa"] is None  # 1 item, both passed
    assert row["disagreements_url"].startswith("/grading/?criterion=llm_judge")
    assert client.get("/api/v1/calibration/?project=acme&criterion=trajectory_match").json() == []


def test_viewers_may_read_but_not_grade(judged: Run, alice: Any, acme: Project) -> None:
    viewer = token_client(member("victor", acme, Membership.Role.VIEWER))
    r = result(judged, 0)
    assert_error(post(viewer, {"result": r.pk, "criterion": "llm_judge", "verdict": "pass"}), 403)
    grade = post(token_client(alice), {"result": r.pk, "criterion": "llm_judge", "verdict": "pass"}).json()
    assert viewer.get("/api/v1/grades/").json()["count"] == 1
    assert_error(
        viewer.patch(
            f"/api/v1/grades/{grade['id']}/", data=json.dumps({"verdict": "fail"}), content_type="application/json"
        ),
        403,
    )
    assert viewer.get("/api/v1/grading-queue/").status_code == 200
    assert viewer.get("/api/v1/calibration/").status_code == 200
    # a member may not change someone else's grade either
    other = token_client(member("carol", acme, Membership.Role.MEMBER))
    assert_error(
        other.patch(
            f"/api/v1/grades/{grade['id']}/", data=json.dumps({"verdict": "fail"}), content_type="application/json"
        ),
        403,
    )
    assert HumanGrade.objects.get().passed is True


def test_another_projects_results_and_grades_are_not_found(judged: Run, alice: Any, bob: Any) -> None:
    grade = post(
        token_client(alice), {"result": result(judged, 0).pk, "criterion": "llm_judge", "verdict": "pass"}
    ).json()
    client = token_client(bob)
    assert_error(post(client, {"result": result(judged, 0).pk, "criterion": "llm_judge", "verdict": "fail"}), 404)
    assert_error(client.get(f"/api/v1/grades/{grade['id']}/"), 404)
    assert_error(
        client.patch(
            f"/api/v1/grades/{grade['id']}/", data=json.dumps({"verdict": "fail"}), content_type="application/json"
        ),
        404,
    )
    assert client.get("/api/v1/grades/").json()["count"] == 0
    assert_error(client.get("/api/v1/grading-queue/?project=acme"), 404)
    assert_error(client.get("/api/v1/calibration/?project=acme"), 404)
    assert HumanGrade.objects.get().passed is True


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"verdict": "maybe"}, "verdict"),
        ({"verdict": None}, "verdict"),
        ({"score": 2}, "score"),
        ({"score": "high"}, "score"),
        ({"note": "x" * 5001}, "note"),
        ({"criterion": "no_such_criterion"}, "criterion"),
        ({"result": "one"}, "result"),
        ({"result": 10**30}, "result"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(judged: Run, alice: Any, data: dict[str, Any], field: str) -> None:
    body = {"result": result(judged, 0).pk, "criterion": "llm_judge", "verdict": "pass", **data}
    error = assert_error(post(token_client(alice), body), 400)
    assert any(p["path"] == field or p["path"].startswith(field) for p in error["problems"]), error
    assert not HumanGrade.objects.exists()


def test_bad_queue_parameters_are_a_400(judged: Run, alice: Any) -> None:
    client = token_client(alice)
    error = assert_error(client.get("/api/v1/grading-queue/?page=0"), 400)
    assert any(p["path"].startswith("page") for p in error["problems"])
    assert_error(client.get("/api/v1/grading-queue/?run=abc"), 400)
