"""The grading queue filters "LLM-judged only" and "deterministic only", and the calibration
page says which criteria it counts (the LLM-judged ones) and links to the queue filtered to
them: a person who grades only deterministic criteria no longer wonders why it stays empty.

Runs are scored by a real LLM judge (the fake chat-completions server on 127.0.0.1)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from evaluations.models import Project
from evaluations.review import grades
from tests.compare_helpers import generated_version
from tests.grading_helpers import judged_run
from tests.llm_server import FakeLLM
from tests.test_pages_grades import html, result

pytestmark = pytest.mark.django_db


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def criteria_listed(page: str) -> set[str]:
    return set(re.findall(r'aria-label="Item \d+: [^,]*, ([a-z_]+)"', page))


def test_the_queue_filters_llm_judged_and_deterministic_criteria(acme: Project, alice_client: Client, llm: FakeLLM,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    judged_run(acme, generated_version(acme, 8), llm, monkeypatch, count=8, fails={1, 2})
    url = reverse("grading_queue")
    assert criteria_listed(html(alice_client.get(url))) == {"llm_judge", "trajectory_match"}
    llm_only = html(alice_client.get(url + "?kind=llm"))
    assert criteria_listed(llm_only) == {"llm_judge"}
    assert 'aria-current="page">LLM-judged only</a>' in llm_only
    assert criteria_listed(html(alice_client.get(url + "?kind=deterministic"))) == {"trajectory_match"}
    # an unknown kind is no filter, not an error
    assert criteria_listed(html(alice_client.get(url + "?kind=nonsense"))) == {"llm_judge", "trajectory_match"}


def test_grades_on_the_filtered_queue_keep_the_filter(acme: Project, alice: Any, alice_client: Client, llm: FakeLLM,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    run = judged_run(acme, generated_version(acme, 8), llm, monkeypatch, count=8, fails={1, 2})
    response = alice_client.post(reverse("grade_save"), {
        "result": result(run, 0).pk, "criterion": "trajectory_match", "verdict": "fail", "view": "queue",
        "position": 1, "kind": "deterministic"})
    assert response.status_code == 302 and "kind=deterministic" in response["Location"]
    # the disagreement it made is listed under deterministic, not under LLM-judged
    assert "1 disagreement first" in html(alice_client.get(reverse("grading_queue") + "?kind=deterministic"))
    assert "disagreement first" not in html(alice_client.get(reverse("grading_queue") + "?kind=llm"))


def test_the_calibration_page_names_what_it_counts_and_links_to_those_items(acme: Project, alice: Any,
                                                                           alice_client: Client, llm: FakeLLM,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    run = judged_run(acme, generated_version(acme, 8), llm, monkeypatch, count=8, fails={1, 2})
    empty = html(alice_client.get(reverse("judge_calibration")))
    counts = empty.split('data-testid="calibration-counts">', 1)[1].split("</p>", 1)[0]
    assert "LLM-judged criteria only" in counts and "Deterministic criteria" in counts
    assert f'href="{reverse("grading_queue")}?kind=llm"' in counts
    grades.grade_save(result=result(run, 0), criterion="llm_judge", grader=alice, passed=False)
    page = html(alice_client.get(reverse("judge_calibration")))
    counts = page.split('data-testid="calibration-counts">', 1)[1].split("</p>", 1)[0]
    assert '<span class="mono">llm_judge</span>' in counts


@pytest.mark.parametrize("count", [5, 60])
def test_the_filtered_queue_costs_the_same_queries_at_any_size(count: int, acme: Project, alice: Any,
                                                               alice_client: Client, llm: FakeLLM,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               django_assert_num_queries: Any) -> None:
    run = judged_run(acme, generated_version(acme, count), llm, monkeypatch, count=count, fails={1, 2})
    for index in range(4):
        grades.grade_save(result=result(run, index), criterion="trajectory_match", grader=alice,
                          passed=index % 2 == 0)
    cache.clear()
    # session, user, projects, role, disagreements, the sample's runs, the sample, the page's scores,
    # grades and results
    with django_assert_num_queries(10):
        page = html(alice_client.get(reverse("grading_queue") + "?kind=deterministic"))
    assert criteria_listed(page) == {"trajectory_match"}
