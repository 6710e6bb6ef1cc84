"""Criteria a run cannot compute here (a UiPath custom evaluator, an LLM judge with no judge
model configured) are "not runnable" with the reason on each score, at once, and the run goes
on (evaluations/evaluators/runnable.py)."""

from __future__ import annotations

import time

import pytest

from evaluations.evaluators.judge import LLMJudgeEvaluator
from evaluations.evaluators.llm import ChatClient
from evaluations.evaluators.runnable import not_runnable_reason
from evaluations.models import CaseResult, Project, Run, Score
from evaluations.runs import services as runs
from evaluations.schemas.evalset import CriterionConfig, EvalConfig
from evaluations.schemas.outputs import AgentOutput
from tests.engine_helpers import import_demo, perfect_outputs

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("EVALSITE_LLM_BASE_URL", "EVALSITE_LLM_API_KEY", "EVALSITE_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)


def run_with(project: Project, criteria: dict[str, CriterionConfig]) -> Run:
    run = runs.run_create(project=project, version=import_demo(project), target_kind="uploaded",
                          config=EvalConfig(criteria=criteria), enqueue=False,
                          outputs=[AgentOutput.model_validate(o) for o in perfect_outputs()])
    return runs.run_execute_here(run.pk)


def test_a_uipath_custom_evaluator_is_not_runnable_and_the_rest_is_scored(acme: Project, no_judge: None) -> None:
    run = run_with(acme, {"trajectory_match": CriterionConfig(threshold=0.8),
                          "correct-operator": CriterionConfig(evaluator="file://types/correct-operator.json")})
    assert run.status == Run.Status.COMPLETED
    custom = Score.objects.filter(result__run=run, criterion="correct-operator")
    assert custom.count() == run.cases_total
    assert {s.error for s in custom} == {
        "not runnable: a UiPath custom evaluator (file://types/correct-operator.json): its scoring is the "
        "project's own Python class, which evalsite does not run"}
    # a case passes only when every enabled criterion was scored: these were not (issue 41)
    assert set(CaseResult.objects.filter(run=run).values_list("status", flat=True)) == {"not_fully_scored"}
    assert run.cases_errored == 0 and run.cases_unscored == run.cases_total
    [notice] = run.summary["notices"]
    assert (notice["criterion"], notice["kind"], notice["cases"]) == ("correct-operator", "not_runnable",
                                                                      run.cases_total)
    assert notice["reason"].startswith("a UiPath custom evaluator (file://types/correct-operator.json)")


def test_an_llm_judge_without_a_judge_model_is_not_runnable_at_once(acme: Project, no_judge: None) -> None:
    started = time.monotonic()
    run = run_with(acme, {"llm_judge": CriterionConfig(threshold=0.7)})
    assert time.monotonic() - started < 30  # no network attempts, no timeouts
    assert run.status == Run.Status.COMPLETED
    assert run.cases_not_runnable == run.cases_total and run.cases_done == 0 and run.cases_errored == 0
    assert set(CaseResult.objects.filter(run=run).values_list("status", flat=True)) == {"not_runnable"}
    [error] = set(Score.objects.filter(result__run=run).values_list("error", flat=True))
    assert error.startswith("not runnable: an LLM judge, and no judge model is configured: set EVALSITE_LLM_BASE_URL")


def test_a_judge_is_runnable_once_an_endpoint_or_a_key_is_set(no_judge: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not_runnable_reason("llm_judge", LLMJudgeEvaluator()).startswith("not runnable: ")
    assert not_runnable_reason("llm_judge", LLMJudgeEvaluator(ChatClient(base_url="http://127.0.0.1:9/v1"))) == ""
    monkeypatch.setenv("EVALSITE_LLM_API_KEY", "sk-test")
    assert not_runnable_reason("llm_judge", LLMJudgeEvaluator()) == ""
    monkeypatch.delenv("EVALSITE_LLM_API_KEY")
    monkeypatch.setenv("EVALSITE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert not_runnable_reason("llm_judge", LLMJudgeEvaluator()) == ""
    assert not_runnable_reason("trajectory_match", None) == ""
