"""The grading pages through the test client: the drill-down's grades panel (grade, change,
several graders, who graded), the grading queue and the calibration page; permissions (viewers
read, members grade; another project is a 404), bad input (400 naming the field, nothing
written), escaping, and query counts that do not grow with the cases."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from evaluations.models import CaseResult, HumanGrade, Membership, Project, Run
from evaluations.review import grades
from tests.compare_helpers import generated_version
from tests.grading_helpers import judged_run
from tests.llm_server import FakeLLM

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
XSS = "<script>window.__xss=1</script>"


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def judged(acme: Project, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> Run:
    return judged_run(acme, generated_version(acme, 8), llm, monkeypatch, count=8, fails={1, 2})


@pytest.fixture
def viewer_client(acme: Project) -> Client:
    user = get_user_model().objects.create_user("victor", password="victor-pass-123")
    Membership.objects.create(project=acme, user=user, role=Membership.Role.VIEWER)
    client = Client()
    client.force_login(user)
    return client


def html(response: Any) -> str:
    return response.content.decode()


def result(run: Run, index: int) -> CaseResult:
    return CaseResult.objects.select_related("case", "run__project").get(run=run, case__eval_id=f"case_{index:04d}")


def post(client: Client, r: CaseResult, **fields: Any) -> Any:
    data = {"result": r.pk, "criterion": "llm_judge", "verdict": "fail", **fields}
    return client.post(reverse("grade_save"), data, **HTMX)


def test_a_member_grades_on_the_drilldown_and_sees_who_graded(judged: Run, alice: Any, alice_client: Client) -> None:
    r = result(judged, 0)
    drill = reverse("run_case", args=[judged.pk, r.pk])
    page = html(alice_client.get(drill))
    assert 'data-testid="grades-panel"' in page and "nobody graded it yet" in page
    response = post(alice_client, r, score="0.25", note=XSS)
    assert response.status_code == 200
    panel = html(response)
    assert "✗ fail" in panel and "by alice" in panel and "0.25" in panel and "disagreement" in panel
    assert XSS not in panel and "&lt;script&gt;" in panel
    # a second grader, and alice changes hers (one grade per grader)
    carol = get_user_model().objects.create_user("carol", password="x-pass-123456")
    Membership.objects.create(project=judged.project, user=carol, role=Membership.Role.ADMIN)
    carol_client = Client()
    carol_client.force_login(carol)
    assert post(carol_client, r, verdict="pass").status_code == 200
    assert post(alice_client, r, verdict="pass", score="", note="").status_code == 200
    assert HumanGrade.objects.filter(result=r).count() == 2
    page = html(alice_client.get(drill))
    assert "by alice" in page and "by carol" in page and XSS not in page
    # the activity feed has the grades, linked to the drill-down
    activity = html(alice_client.get(reverse("project_activity", args=["acme"])))
    assert "graded llm_judge of case_0000" in activity and f"/runs/{judged.pk}/cases/{r.pk}/#grades" in activity
    # a plain POST (no JavaScript) is redirected back to the drill-down
    plain = alice_client.post(reverse("grade_save"), {"result": r.pk, "criterion": "llm_judge", "verdict": "fail"})
    assert plain.status_code == 302 and plain["Location"].endswith(f"/cases/{r.pk}/#grades")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"verdict": "maybe"}, "verdict: say pass or fail"),
        ({"score": "1.5"}, "score: a score is between 0 and 1"),
        ({"score": "abc"}, "score: a score is a number"),
        ({"score": "inf"}, "score: a score is a number"),
        ({"criterion": "nope"}, "criterion: this result has no score for"),
        ({"note": "n" * 5001}, "note: a note has at most 5000 characters"),
    ],
)
def test_bad_grades_are_refused_with_the_field(
    judged: Run, alice_client: Client, fields: dict[str, str], message: str
) -> None:
    r = result(judged, 0)
    response = post(alice_client, r, **fields)
    assert message in html(response)
    plain = alice_client.post(
        reverse("grade_save"), {"result": r.pk, "criterion": "llm_judge", "verdict": "fail", **fields}
    )
    assert plain.status_code == 400 and message in html(plain)
    assert not HumanGrade.objects.exists()


def test_viewers_read_grades_but_cannot_grade(judged: Run, alice: Any, viewer_client: Client) -> None:
    r = result(judged, 0)
    grades.grade_save(result=r, criterion="llm_judge", grader=alice, passed=True)
    page = html(viewer_client.get(reverse("run_case", args=[judged.pk, r.pk])))
    assert "by alice" in page and 'name="verdict"' not in page
    assert post(viewer_client, r).status_code == 403
    queue = html(viewer_client.get(reverse("grading_queue")))
    assert 'data-testid="grade-queue"' in queue and 'name="verdict"' not in queue
    assert HumanGrade.objects.count() == 1


def test_another_projects_results_are_not_found(judged: Run, bob_client: Client) -> None:
    r = result(judged, 0)
    assert post(bob_client, r).status_code == 404
    assert bob_client.post(reverse("grade_save"), {"result": "x", "criterion": "llm_judge"}).status_code == 404
    assert not HumanGrade.objects.exists()
    # bob's own queue and calibration are empty: nothing of acme shows
    assert "case_0000" not in html(bob_client.get(reverse("grading_queue")))
    assert "llm_judge" not in html(bob_client.get(reverse("judge_calibration")))


def test_the_queue_grades_in_place_and_the_calibration_page_counts(
    judged: Run, alice: Any, alice_client: Client
) -> None:
    page = html(alice_client.get(reverse("grading_queue")))
    assert "p</kbd>" in page and "grade pass" in page  # the shortcuts are on the page
    assert page.count('data-testid="queue-item"') == 8 + 8  # both criteria, 8 cases each (< 10 per stratum)
    r = result(judged, 1)  # the judge failed it
    row = alice_client.post(
        reverse("grade_save"),
        {
            "view": "queue",
            "result": r.pk,
            "criterion": "llm_judge",
            "verdict": "pass",
            "position": "3",
            "disagreement": "0",
        },
        **HTMX,
    )
    assert row.status_code == 200
    text = html(row)
    assert text.startswith("<li") and 'data-position="3"' in text and "you: pass" in text
    calibration = html(alice_client.get(reverse("judge_calibration")))
    assert 'data-testid="calibration-row"' in calibration and "judge-a" in calibration
    assert "1 disagreement with the judge" in calibration
    queue = html(alice_client.get(reverse("grading_queue")))
    assert "1 disagreement first" in queue
    filtered = html(alice_client.get(reverse("grading_queue") + "?criterion=llm_judge&judge_model=judge-a"))
    assert filtered.count('data-testid="queue-item"') == 8
    assert alice_client.get(reverse("grading_queue") + "?run=abc").status_code == 404


@pytest.mark.parametrize("count", [5, 60])
def test_queue_and_calibration_queries_do_not_grow_with_the_cases(
    count: int,
    acme: Project,
    alice: Any,
    alice_client: Client,
    llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
    django_assert_num_queries: Any,
) -> None:
    run = judged_run(acme, generated_version(acme, count), llm, monkeypatch, count=count, fails={1, 2})
    for index in range(4):
        grades.grade_save(result=result(run, index), criterion="llm_judge", grader=alice, passed=index % 2 == 0)
    cache.clear()
    # session, user, projects, role, disagreements, the sample's runs, the sample, the page's scores,
    # grades and results (their outputs and cases, for the context)
    with django_assert_num_queries(10):
        page = html(alice_client.get(reverse("grading_queue")))
    assert "disagreement" in page
    with django_assert_num_queries(9):  # the sample from the cache
        again = html(alice_client.get(reverse("grading_queue")))
    assert again.count('data-testid="queue-item"') == page.count('data-testid="queue-item"')
    # session, user, projects, the GROUP BY
    with django_assert_num_queries(4):
        page = html(alice_client.get(reverse("judge_calibration")))
    assert 'data-testid="cal-kappa"' in page
