"""Human grades, the grading queue and judge calibration against the database: the services
and selectors of `evaluations.review.grades` and `evaluations.review.calibration`, on runs a
real (fake-server) LLM judge scored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from evaluations.models import AuditEvent, CaseResult, HumanGrade, Membership, Project, Run, Score
from evaluations.review import calibration, grades
from evaluations.review.agreement import cohen_kappa
from tests.compare_helpers import generated_version
from tests.grading_helpers import judged_run
from tests.llm_server import FakeLLM

pytestmark = pytest.mark.django_db


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def carol(acme: Project) -> Any:
    user = get_user_model().objects.create_user("carol", password="carol-pass-123")
    Membership.objects.create(project=acme, user=user, role=Membership.Role.MEMBER)
    return user


@pytest.fixture
def judged(acme: Project, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> Run:
    version = generated_version(acme, 12)
    return judged_run(acme, version, llm, monkeypatch, count=12, fails={1, 2, 3})


def result(run: Run, index: int) -> CaseResult:
    return CaseResult.objects.select_related("case", "run__project").get(run=run, case__eval_id=f"case_{index:04d}")


def test_judged_scores_record_their_judge(judged: Run) -> None:
    score = Score.objects.get(run=judged, result=result(judged, 1), criterion="llm_judge", applies_to="conversation")
    assert score.passed is False
    judge = score.justification["judge"]
    assert judge["model"] == "judge-a" and len(judge["prompt_version"]) == 10
    # a deterministic criterion is not judged
    assert "judge" not in Score.objects.filter(run=judged, criterion="trajectory_match").first().justification


def test_grade_save_creates_then_changes_one_grade_per_grader(judged: Run, alice: Any, carol: Any) -> None:
    r = result(judged, 0)
    grade, created = grades.grade_save(
        result=r, criterion="llm_judge", grader=alice, passed=False, score=0.2, note="wrong item"
    )
    assert created and grade.project_id == judged.project_id and grade.run_id == judged.pk
    again, created = grades.grade_save(result=r, criterion="llm_judge", grader=alice, passed=True)
    assert not created and again.pk == grade.pk and again.passed and again.score is None
    grades.grade_save(result=r, criterion="llm_judge", grader=carol, passed=True)
    assert HumanGrade.objects.filter(result=r).count() == 2
    verbs = list(AuditEvent.objects.filter(object_type="humangrade").order_by("pk").values_list("verb", flat=True))
    assert verbs == ["grade.added", "grade.changed", "grade.added"]
    rows = grades.result_grades(result=r, user=alice)
    judge_row = next(c for c in rows if c.criterion == "llm_judge")
    assert [g.grader for g in judge_row.grades] == ["alice", "carol"] and judge_row.mine is not None
    assert judge_row.auto_passed is True and not judge_row.disagreement


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"criterion": "no_such_criterion"}, "criterion"),
        ({"score": 1.5}, "score"),
        ({"score": -0.1}, "score"),
        ({"score": float("nan")}, "score"),
        ({"note": "x" * 5001}, "note"),
    ],
)
def test_bad_grades_say_which_field_and_write_nothing(
    judged: Run, alice: Any, kwargs: dict[str, Any], field: str
) -> None:
    values = {"criterion": "llm_judge", "passed": True, **kwargs}
    with pytest.raises(ValidationError) as caught:
        grades.grade_save(result=result(judged, 0), grader=alice, **values)
    assert field in caught.value.message_dict
    assert not HumanGrade.objects.exists() and not AuditEvent.objects.filter(verb__startswith="grade.").exists()


def test_the_queue_puts_disagreements_first_then_a_stable_stratified_sample(
    judged: Run, alice: Any, carol: Any
) -> None:
    scope = grades.QueueScope(project=judged.project)
    keys, disagreements = grades.queue_keys(scope)
    assert disagreements == 0
    # 12 results x 2 criteria; strata: llm_judge pass (9) / fail (3), trajectory_match pass (12, 10 sampled)
    assert len(keys) == 9 + 3 + 10
    assert keys == grades.queue_keys(scope)[0]  # the same data, the same queue
    first_rank = keys[:3]  # rank 1 of each stratum comes first: every stratum is seen at once
    strata = {(c, Score.objects.get(result_id=r, criterion=c, applies_to="conversation").passed) for r, c in first_rank}
    assert strata == {("llm_judge", True), ("llm_judge", False), ("trajectory_match", True)}

    agree = result(judged, 5)  # the judge passed it; alice agrees: no disagreement
    grades.grade_save(result=agree, criterion="llm_judge", grader=alice, passed=True)
    with_judge = result(judged, 1)  # the judge failed it; alice passes it
    grades.grade_save(result=with_judge, criterion="llm_judge", grader=alice, passed=True)
    between = result(judged, 7)  # alice and carol disagree with each other
    grades.grade_save(result=between, criterion="trajectory_match", grader=alice, passed=True)
    grades.grade_save(result=between, criterion="trajectory_match", grader=carol, passed=False)
    keys, disagreements = grades.queue_keys(scope)
    assert disagreements == 2
    assert set(keys[:2]) == {(with_judge.pk, "llm_judge"), (between.pk, "trajectory_match")}
    assert len(keys) == len(set(keys))  # a sampled disagreement is listed once

    page = grades.queue_page(scope, user=alice, per_page=5)
    assert page.total == len(keys) and page.pages == -(-len(keys) // 5)
    assert [i.disagreement for i in page.items] == [True, True, False, False, False]
    assert page.items[0].line.startswith("Item ")

    only = grades.queue_keys(grades.QueueScope(project=judged.project, criterion="trajectory_match"))[0]
    assert {c for _, c in only} == {"trajectory_match"}


def test_calibration_counts_match_a_hand_computed_table(judged: Run, alice: Any, carol: Any) -> None:
    # The judge failed cases 1-3 and passed the rest. People's majority verdicts:
    #   case 0: pass (alice)                     judge pass -> pass_pass
    #   case 1: fail (alice, carol)              judge fail -> fail_fail
    #   case 2: pass (alice)                     judge fail -> fail_pass
    #   case 4: fail (alice fail, carol fail)    judge pass -> pass_fail
    #   case 5: tie  (alice pass, carol fail)    left out
    #   case 6: pass (alice pass, carol pass)    judge pass -> pass_pass
    plan = {
        0: [("alice", True)],
        1: [("alice", False), ("carol", False)],
        2: [("alice", True)],
        4: [("alice", False), ("carol", False)],
        5: [("alice", True), ("carol", False)],
        6: [("alice", True), ("carol", True)],
    }
    users = {"alice": alice, "carol": carol}
    for index, votes in plan.items():
        for name, passed in votes:
            grades.grade_save(result=result(judged, index), criterion="llm_judge", grader=users[name], passed=passed)
    grades.grade_save(result=result(judged, 0), criterion="trajectory_match", grader=alice, passed=False)

    [row] = calibration.calibration_rows(project=judged.project)  # trajectory_match is not judged
    assert (row.criterion, row.judge_model) == ("llm_judge", "judge-a") and len(row.prompt_version) == 10
    c = row.calibration
    m = c.confusion
    assert (m.pass_pass, m.pass_fail, m.fail_pass, m.fail_fail) == (2, 1, 1, 1)
    assert c.ties == 1 and c.items == 6
    assert m.accuracy == pytest.approx(3 / 5)
    # p_o = 3/5; judge pass 3/5, people pass 3/5: p_e = 9/25 + 4/25 = 13/25; kappa = (15/25 - 13/25) / (12/25)
    assert m.kappa == pytest.approx(2 / 12)
    assert cohen_kappa(m) == m.kappa
    # Fleiss over the four items with two grades: (0,2), (0,2), (1,1), (2,0): P_i = 1, 1, 0, 1 -> 3/4;
    # p_pass = 3/8, P_e = 9/64 + 25/64 = 34/64; kappa = (48/64 - 34/64) / (30/64) = 14/30
    assert c.graders.items == 4
    assert c.graders.observed == pytest.approx(0.75)
    assert c.graders.kappa == pytest.approx(14 / 30)
    assert "criterion=llm_judge" in row.queue_url and "judge_model=judge-a" in row.queue_url


def test_calibration_is_per_judge_model_and_prompt_version(
    acme: Project, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch, alice: Any
) -> None:
    version = generated_version(acme, 4)
    first = judged_run(acme, version, llm, monkeypatch, count=4, fails={1})
    reworded = judged_run(acme, version, llm, monkeypatch, count=4, fails={1}, guidelines="Be strict.")
    other_model = judged_run(acme, version, llm, monkeypatch, count=4, fails={1}, model="judge-b")
    for run in (first, reworded, other_model):
        grades.grade_save(result=result(run, 1), criterion="llm_judge", grader=alice, passed=True)
    rows = calibration.calibration_rows(project=acme)
    assert len(rows) == 3
    assert sorted({r.judge_model for r in rows}) == ["judge-a", "judge-b"]
    versions = {r.prompt_version for r in rows if r.judge_model == "judge-a"}
    assert len(versions) == 2  # other guidelines: another prompt version
    assert all(r.calibration.confusion.fail_pass == 1 for r in rows)
    # the queue filtered to one judge shows only its disagreement
    row = next(r for r in rows if r.judge_model == "judge-b")
    scope = grades.QueueScope(
        project=acme, criterion="llm_judge", judge_model="judge-b", prompt_version=row.prompt_version
    )
    assert grades.disagreement_keys(scope) == [(result(other_model, 1).pk, "llm_judge")]


def test_imported_deepeval_scores_count_as_judged_by_their_evaluation_model(judged: Run, alice: Any) -> None:
    r = result(judged, 0)
    Score.objects.filter(result=r, criterion="trajectory_match").update(
        justification={"imported_from": "deepeval", "evaluation_model": "gpt-4.1"}
    )
    grades.grade_save(result=r, criterion="trajectory_match", grader=alice, passed=False)
    rows = {
        (row.criterion, row.judge_model, row.prompt_version)
        for row in calibration.calibration_rows(project=judged.project)
    }
    assert rows == {("trajectory_match", "gpt-4.1", "")}
