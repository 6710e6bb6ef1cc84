"""Several runs (N-way) answer first (issue 41, 3): one line saying which run is best on what and
whether the differences are real, from the Holm-corrected tests already on the page, and a
warning naming any difference in eval-set version, config, model or iterations between the runs.
The same answer and warning in the API."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.models import Project, Run
from evaluations.review import nway
from evaluations.schemas.evalset import CriterionConfig, EvalConfig
from tests.compare_helpers import generated_outputs, generated_version, make_run

pytestmark = pytest.mark.django_db
CASES = 30


def url(runs: list[Run]) -> str:
    return reverse("nway_compare") + "?runs=" + ",".join(str(r.pk) for r in runs)


def test_the_answer_names_the_best_run_and_where_nothing_differs_before_the_tables(
        acme: Project, alice_client: Client) -> None:
    version = generated_version(acme, CASES)
    reference = make_run(acme, version, generated_outputs(CASES, wrong=set(range(15))), labels={"model": "a"})
    better = make_run(acme, version, generated_outputs(CASES), labels={"model": "a"})
    same = make_run(acme, version, generated_outputs(CASES, wrong=set(range(14))), labels={"model": "a"})
    page = alice_client.get(url([reference, better, same])).content.decode()
    answer = page.split('data-testid="nway-answer">', 1)[1].split("</p>", 1)[0]
    assert f"#{better.pk} is best on trajectory_match" in answer
    assert "Holm-corrected over 2 tests per criterion" in answer
    assert f"against #{reference.pk}" in answer
    # first: above the controls and the criteria table it sums up
    assert page.index('data-testid="nway-answer"') < page.index('data-testid="nway-criteria"')
    assert page.index('data-testid="nway-answer"') < page.index('class="filters nway-controls"')
    assert 'data-testid="nway-differences"' not in page  # one version, model, config, iterations
    body = alice_client.get("/api/v1/compare/runs/", {"runs": f"{reference.pk},{better.pk},{same.pk}"}).json()
    assert body["answer"] == nway.answer(nway.nway_summary([reference, better, same], reference, ["", "", ""]))
    assert f"#{better.pk} is best on trajectory_match" in body["answer"] and body["differences"] == []


def test_runs_that_differ_in_version_model_config_or_iterations_are_named_in_a_warning(
        acme: Project, alice_client: Client) -> None:
    v1 = generated_version(acme, CASES)
    v2 = generated_version(acme, CASES + 1)  # the same eval set, one case more: version 2
    assert v1.evalset_id == v2.evalset_id and (v1.number, v2.number) == (1, 2)
    first = make_run(acme, v1, generated_outputs(CASES), labels={"model": "gpt-4o"})
    second = make_run(acme, v2, generated_outputs(CASES + 1), labels={"model": "claude"}, iterations=2)
    config = EvalConfig(criteria={"trajectory_match": CriterionConfig(threshold=0.5)})
    third = make_run(acme, v1, generated_outputs(CASES), labels={"model": "gpt-4o"}, config=config)
    page = alice_client.get(url([first, second, third])).content.decode()
    warning = page.split('data-testid="nway-differences">', 1)[1].split("</p>", 1)[0]
    assert f"eval-set version v1 (#{first.pk}, #{third.pk}) · v2 (#{second.pk})" in warning
    assert f"model gpt-4o (#{first.pk}, #{third.pk}) · claude (#{second.pk})" in warning
    assert f"iterations 1 (#{first.pk}, #{third.pk}) · 2 (#{second.pk})" in warning
    assert f"evaluation config config A (#{first.pk}, #{second.pk}) · config B (#{third.pk})" in warning
    answer = page.split('data-testid="nway-answer">', 1)[1].split("</p>", 1)[0]
    assert "no run differs from the reference" in answer and "beyond chance" in answer
    body = alice_client.get("/api/v1/compare/runs/", {"runs": f"{first.pk},{second.pk},{third.pk}"}).json()
    assert any(d.startswith("eval-set version v1") for d in body["differences"])


def test_too_few_cases_are_said_and_no_best_is_claimed(acme: Project) -> None:
    version = generated_version(acme, 3)
    runs = [make_run(acme, version, generated_outputs(3, wrong=wrong)) for wrong in ({0, 1, 2}, set())]
    summary = nway.nway_summary(runs, runs[0], ["", ""])
    said = nway.answer(summary)
    assert "best" not in said and "too few cases to call response_match and trajectory_match (6 or more" in said
