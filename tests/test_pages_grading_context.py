"""Grading in context: each item of the grading queue shows what it is graded against — the
user's message of every turn, the expected and actual answers, for a tool-call criterion the
step-aligned calls (matched ones folded, the others open), and the automatic score's
justification — at a cost in queries that does not grow with the items or the turns; the
API's queue gives the same context and the same "LLM-judged / deterministic" filter."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from evaluations.models import CaseResult, Project, Run
from evaluations.review import grades
from evaluations.web.views.grading_context import grading_context
from tests.api_helpers import assert_error
from tests.grading_context_helpers import answer, context_run, user_text

pytestmark = pytest.mark.django_db


def html(response: Any) -> str:
    assert response.status_code == 200
    return str(response.content.decode())


def items(page: str) -> list[str]:
    """Each queue item's HTML, in order."""
    return re.findall(r'<li class="grade-item.*?</li>', page, flags=re.S)


def item_for(page: str, eval_id: str, criterion: str) -> str:
    [found] = [i for i in items(page) if f"{eval_id}, {criterion}\"" in i]
    return found


def test_an_item_shows_every_turn_the_answers_the_aligned_calls_and_the_justification(
        acme: Project, alice_client: Client) -> None:
    context_run(acme, 4, turns=2, wrong=frozenset({1}))
    page = html(alice_client.get(reverse("grading_queue") + "?criterion=trajectory_match"))
    wrong = item_for(page, "case_0001", "trajectory_match")
    for turn in (1, 2):
        assert user_text(1, turn) in wrong and answer(1, turn) in wrong
    assert wrong.count('data-testid="grade-turn"') == 2
    assert wrong.count('data-testid="grade-expected"') == 2 and wrong.count('data-testid="grade-actual"') == 2
    # turn 1: search matched (folded), lookup's id differs (open, both values shown)
    assert wrong.count('data-testid="matched-call"') == 1
    assert '<details class="call-folded" data-testid="matched-call"><summary><span class="tool-name mono">search' in wrong
    assert 'class="call call-args_differ"' in wrong and "999" in wrong
    # turn 2: the lookup that was expected is missing, drawn open with its gap
    assert 'class="call call-missing"' in wrong and "nothing on this side" in wrong
    justification = wrong.split('data-testid="grade-justification"', 1)[1]
    assert "counts" in justification and "missing" in justification
    right = item_for(page, "case_0000", "trajectory_match")
    assert right.count('data-testid="matched-call"') == 3 and "call-missing" not in right


def test_an_answer_criterion_shows_the_answers_without_the_calls(acme: Project, alice_client: Client) -> None:
    context_run(acme, 3, turns=2, responses={2: "Something else entirely."})
    page = html(alice_client.get(reverse("grading_queue") + "?criterion=exact_match"))
    item = item_for(page, "case_0002", "exact_match")
    assert "Something else entirely." in item and answer(2, 1) in item and user_text(2, 2) in item
    assert 'data-testid="calldiff"' not in item and 'data-testid="grade-calls"' not in item
    assert 'data-testid="grade-justification"' in item


def test_hostile_output_stays_text(acme: Project, alice_client: Client) -> None:
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>"\'&'
    context_run(acme, 2, turns=1, responses={0: hostile})
    page = html(alice_client.get(reverse("grading_queue")))
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in page


def test_a_long_answer_is_clipped_with_a_way_to_see_all_of_it(acme: Project, alice_client: Client) -> None:
    long = "\n".join(f"line {n} of a long answer" for n in range(200))
    context_run(acme, 2, turns=1, responses={0: long})
    item = item_for(html(alice_client.get(reverse("grading_queue") + "?criterion=exact_match")), "case_0000",
                    "exact_match")
    actual = item.split('data-testid="grade-actual"', 1)[1].split('data-testid="grade-justification"', 1)[0]
    assert "show all" in actual and "line 199 of a long answer" in actual  # folded behind <details>
    assert "<details" in actual


def test_the_graded_row_keeps_its_context(acme: Project, alice_client: Client) -> None:
    run = context_run(acme, 3, turns=2, wrong=frozenset({1}))
    result = CaseResult.objects.get(run=run, case__eval_id="case_0001")
    row = alice_client.post(reverse("grade_save"), {
        "result": result.pk, "criterion": "trajectory_match", "verdict": "fail", "view": "queue", "position": 1},
        HTTP_HX_REQUEST="true")
    text = html(row)
    assert "you: fail" in text and user_text(1, 2) in text and 'class="call call-missing"' in text


def grade_some(run: Run, alice: Any) -> None:
    for result in CaseResult.objects.filter(run=run).order_by("pk")[:4]:
        grades.grade_save(result=result, criterion="trajectory_match", grader=alice, passed=False)


@pytest.mark.parametrize(("count", "turns"), [(5, 1), (50, 4)])
def test_the_queue_costs_the_same_queries_whatever_the_items_and_turns(
        count: int, turns: int, acme: Project, alice: Any, alice_client: Client,
        django_assert_max_num_queries: Any) -> None:
    run = context_run(acme, count, turns=turns, wrong=frozenset(range(0, count, 3)))
    grade_some(run, alice)
    cache.clear()
    # session, user, projects, role, disagreements, the sample's runs, the sample, the page's scores,
    # grades and results
    with django_assert_max_num_queries(10):
        page = html(alice_client.get(reverse("grading_queue")))
    shown = page.count('data-testid="queue-item"')
    assert shown == (10 if count == 5 else 25)  # two criteria of five cases; a full page of 25
    assert page.count('data-testid="grade-turn"') == shown * turns
    # the selector and the context with every item on one page (over 25 at 50 cases: the
    # disagreements, then up to 10 per criterion and automatic verdict): one query for the results
    scope = grades.QueueScope(project=acme)
    with django_assert_max_num_queries(6):
        queue = grades.queue_page(scope, user=alice, per_page=50)
        contexts = [grading_context(item.source) for item in queue.items]
    assert len(contexts) == queue.total and (queue.total == 10 if count == 5 else queue.total > 25) and all(c is not None and len(c.turns) == turns for c in contexts)


def test_the_api_queue_filters_by_kind_and_gives_the_context(acme: Project, alice: Any,
                                                           alice_client: Client) -> None:
    context_run(acme, 3, turns=2, wrong=frozenset({1}))
    url = reverse("api_grading_queue")
    body = alice_client.get(url + "?kind=deterministic").json()
    assert {item["criterion"] for item in body["results"]} == {"trajectory_match", "exact_match"}
    assert alice_client.get(url + "?kind=llm").json()["count"] == 0
    wrong = next(i for i in body["results"] if i["eval_id"] == "case_0001" and i["criterion"] == "trajectory_match")
    assert [t["user"] for t in wrong["turns"]] == [user_text(1, 1), user_text(1, 2)]
    assert wrong["turns"][0]["expected_response"] == answer(1, 1)
    assert wrong["turns"][0]["tool_calls"] == {"matched": 1, "args_differ": 1, "missing": 0, "unexpected": 0}
    assert wrong["turns"][1]["tool_calls"]["missing"] == 1
    assert wrong["justification"]["counts"]["missing"] == 1 and wrong["score_error"] == ""
    error = assert_error(alice_client.get(url + "?kind=nonsense"), 400)
    assert any(p["path"].startswith("kind") for p in error["problems"])
