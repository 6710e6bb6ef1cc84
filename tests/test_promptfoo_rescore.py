"""promptfoo results imported, then rescored by evalsite (issue 41): the rescored run gives each
test promptfoo's own verdict and test-level score (its threshold and weights), so it does not
"regress" against its own import; a test whose only failing assertion is one evalsite does not
compute is not fully scored, never passed, and the comparison calls it that, not a regression.

The results are tests/data/results/promptfoo/results.json, written by promptfoo 0.123.1 itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.interop.base import SourceFile
from evaluations.models import CaseResult, Project, Run, Score
from evaluations.review import comparison
from evaluations.runs import services as runs
from evaluations.runs.imports import results_import, run_rescore

RESULTS = Path(__file__).parent / "data" / "results" / "promptfoo" / "results.json"
pytestmark = pytest.mark.django_db


def _rescored(acme: Project, text: bytes) -> tuple[Run, Run]:
    imported = results_import(project=acme, file=SourceFile("results.json", text))
    rescored = run_rescore(run=imported)
    rescored = runs.run_execute_here(rescored.pk)
    return imported, rescored


def _by_case(run: Run) -> dict[str, tuple[str, float | None]]:
    statuses = dict(CaseResult.objects.filter(run=run).values_list("case__eval_id", "status"))
    scores = dict(Score.objects.filter(run=run, criterion="promptfoo_test").values_list("result__case__eval_id",
                                                                                       "score"))
    return {eval_id: (status, scores.get(eval_id)) for eval_id, status in statuses.items()}


def test_a_rescored_promptfoo_run_agrees_with_its_import_case_by_case(acme: Project) -> None:
    imported, rescored = _rescored(acme, RESULTS.read_bytes())
    before, after = _by_case(imported), _by_case(rescored)
    assert set(before) == set(after)
    for eval_id, (status, score) in before.items():
        assert after[eval_id][0] == status, eval_id
        assert after[eval_id][1] == pytest.approx(score), eval_id
    # the Oslo test fails on its threshold (0.42 < 0.5) in both, with promptfoo's reason
    oslo = Score.objects.get(run=rescored, criterion="promptfoo_test", result__case__eval_id="test-3")
    assert oslo.passed is False and oslo.justification["reason"] == "Aggregate score 0.42 < 0.5 threshold"
    summary = comparison.comparison_get(baseline=imported, candidate=rescored)
    assert summary["counts"][comparison.REGRESSED] == 0 and summary["counts"][comparison.IMPROVED] == 0


def test_a_test_passing_on_its_threshold_with_a_failing_assertion_passes_when_rescored(acme: Project) -> None:
    doc = json.loads(RESULTS.read_text(encoding="utf-8"))
    tokyo = next(r for r in doc["results"]["results"] if r["testIdx"] == 1)
    # promptfoo's verdict with a threshold: 5/6 = 0.83 >= 0.8 passes despite the failing starts-with
    tokyo["testCase"]["threshold"] = 0.8
    tokyo["success"] = True
    tokyo["gradingResult"]["pass"] = True
    tokyo["gradingResult"]["reason"] = "Aggregate score 0.83 ≥ 0.8 threshold"
    imported, rescored = _rescored(acme, json.dumps(doc).encode())
    result = CaseResult.objects.get(run=rescored, case__eval_id="Tokyo as JSON")
    assert result.status == CaseResult.Status.PASSED
    starts = Score.objects.get(result=result, criterion="promptfoo_starts_with")
    assert starts.passed is False  # the assertion still failed: the test passed on its weighted score
    test = Score.objects.get(result=result, criterion="promptfoo_test")
    assert test.passed is True and test.score == pytest.approx(5 / 6)
    assert CaseResult.objects.get(run=imported, case__eval_id="Tokyo as JSON").status == CaseResult.Status.PASSED


def test_a_test_whose_only_failure_evalsite_cannot_compute_is_not_fully_scored_not_passed(
        acme: Project, alice_client: Client) -> None:
    doc = json.loads(RESULTS.read_text(encoding="utf-8"))
    paris = next(r for r in doc["results"]["results"] if r["testIdx"] == 0)
    # promptfoo failed the test on its javascript assertion (given a weight here, so it counts)
    javascript = next(a for a in paris["testCase"]["assert"] if a["type"] == "javascript")
    javascript["weight"] = 1
    component = next(c for c in paris["gradingResult"]["componentResults"] if c["assertion"]["type"] == "javascript")
    component.update({"pass": False, "score": 0, "reason": "Custom function returned false"})
    component["assertion"]["weight"] = 1
    paris.update(success=False, score=0.8)
    paris["gradingResult"].update({"pass": False, "score": 0.8, "reason": "Custom function returned false"})
    imported, rescored = _rescored(acme, json.dumps(doc).encode())
    result = CaseResult.objects.get(run=rescored, case__eval_id="Paris is sunny")
    assert result.status == CaseResult.Status.NOT_FULLY_SCORED
    test = Score.objects.get(result=result, criterion="promptfoo_test")
    assert test.passed is None and test.justification["not_scored"] == ["promptfoo_javascript"]
    rescored.refresh_from_db()
    assert rescored.cases_unscored == 1
    [notice] = rescored.summary["notices"]
    assert notice["criterion"] == "promptfoo_javascript" and notice["kind"] == "not_runnable"
    summary = comparison.comparison_get(baseline=imported, candidate=rescored)
    paris_case = next(c for c in summary["cases"] if c["id"] == "Paris is sunny")
    assert paris_case["s"] == comparison.UNSCORED  # the import failed it: compared as not fully scored
    assert summary["counts"][comparison.IMPROVED] == 0 and summary["counts"][comparison.REGRESSED] == 0
    page = alice_client.get(reverse("run_detail", args=[rescored.pk]) + "?status=not_fully_scored").content.decode()
    assert "Paris is sunny" in page and "not fully scored" in page
