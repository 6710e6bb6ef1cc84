"""DeepEval's judged metrics in evalsite's workflows, against a scripted judge on 127.0.0.1:
a run scores them with its judge calls in flight together, sums their calls, tokens and cost
(estimated before it starts), and shows a metric's steps on the drill-down; an imported
DeepEval test run is rescored metric by metric; a metric collection comes and goes as a saved
config; monitors take the ones that need no golden; calibration sees their judge."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.accounts.tokens import token_create
from evaluations.interop import SourceFile
from evaluations.models import CaseResult, EvaluationConfig, MonitorScore, Project, Run, Score, Trace
from evaluations.monitors import scoring
from evaluations.monitors.services import monitor_create
from evaluations.monitors.spec import MonitorSpec
from evaluations.review import calibration, grades
from evaluations.runs import services as runs
from evaluations.runs.imports import results_import, run_rescore
from evaluations.schemas.evalset import EvalConfig
from evaluations.schemas.outputs import AgentOutput
from tests.compare_helpers import generated_outputs, generated_version, make_run
from tests.llm_server import Behaviour, FakeLLM
from tests.monitor_helpers import agent_trace
from tests.otlp_helpers import post

RESULTS = Path(__file__).resolve().parent / "data" / "results"


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        monkeypatch.setenv("EVALSITE_LLM_BASE_URL", server.url)
        monkeypatch.setenv("EVALSITE_LLM_API_KEY", "test-key")
        monkeypatch.setenv("EVALSITE_LLM_MODEL", "gpt-4o-mini")
        yield server


def relevancy_judge(llm: FakeLLM, *, delay: float = 0.0, off_topic: str = "") -> None:
    """Answer relevancy's three questions; a statement is off-topic when it holds `off_topic`."""

    def respond(body: dict[str, Any]) -> Behaviour:
        name = body["response_format"]["json_schema"]["name"]
        prompt = body["messages"][0]["content"]
        if name == "Statements":
            value: Any = {"statements": ["The item is in stock.", "<b>Call us</b> on Monday."]}
        elif name == "Verdicts":
            value = {"verdicts": [{"verdict": "yes"}, {"verdict": "no" if off_topic and off_topic in prompt
                                                       else "yes", "reason": "<script>x</script> off topic"}]}
        else:
            value = {"reason": "The <em>answer</em> stays on topic."}
        return Behaviour(content=json.dumps(value), delay=delay,
                         usage={"prompt_tokens": 400, "completion_tokens": 50, "total_tokens": 450})

    llm.responder = respond


def test_a_run_scores_judged_metrics_concurrently_and_sums_the_judges_spend(
        acme: Project, llm: FakeLLM, settings: Any) -> None:
    settings.EVALSITE_JUDGE_CONCURRENCY = 4
    relevancy_judge(llm, delay=0.05, off_topic="Call us")
    version = generated_version(acme, 6)
    config = EvalConfig.model_validate({"criteria": {"deepeval_answer_relevancy": {}}})  # no threshold given
    run = runs.run_create(project=acme, version=version, target_kind="uploaded", config=config, enqueue=False,
                          outputs=[AgentOutput.model_validate(o) for o in generated_outputs(6)])
    estimate = run.judge_estimate
    assert estimate is not None and estimate["calls"] == 18  # 6 cases x (statements, verdicts, reason)
    assert estimate["cost_usd"] > 0  # gpt-4o-mini's price
    run = runs.run_execute_here(run.pk)
    assert run.status == Run.Status.COMPLETED
    assert 1 < llm.max_in_flight <= 4  # several cases' calls at once, never more than asked
    assert (run.judge_calls, run.judge_prompt_tokens, run.judge_completion_tokens) == (18, 18 * 400, 18 * 50)
    assert run.judge_cost_usd == pytest.approx(18 * (400 * 0.15 + 50 * 0.60) / 1_000_000)
    scores = Score.objects.filter(run=run, criterion="deepeval_answer_relevancy")
    assert scores.count() == 6
    assert {s.score for s in scores} == {0.5}
    assert {json.dumps(s.threshold) for s in scores} == {'{"lower_limit": 0.5}'}  # DeepEval's default threshold
    assert all(s.justification["usage"]["calls"] == 3 for s in scores)


def test_the_run_page_shows_the_judges_spend_and_the_drill_down_the_metrics_steps_escaped(
        acme: Project, llm: FakeLLM, alice_client: Client) -> None:
    relevancy_judge(llm, off_topic="Call us")
    version = generated_version(acme, 2)
    run = make_run(acme, version, generated_outputs(2),
                   config=EvalConfig.model_validate({"criteria": {"deepeval_answer_relevancy": {"threshold": 0.7}}}))
    page = alice_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "LLM judge spend" in page and "Estimated before it started" in page
    assert "6 calls" in page and "2,400 in" in page
    result = CaseResult.objects.filter(run=run).order_by("pk").first()
    assert result is not None
    drill = alice_client.get(reverse("run_case", args=[run.pk, result.pk])).content.decode()
    assert 'data-testid="judged-steps"' in drill
    assert "The &lt;em&gt;answer&lt;/em&gt; stays on topic." in drill  # the judge's reason, escaped
    assert "&lt;b&gt;Call us&lt;/b&gt; on Monday." in drill and "<script>x</script>" not in drill
    assert "2 statements, 2 verdicts" in drill


def test_an_imported_deepeval_run_rescored_with_the_judge_compares_metric_by_metric(
        acme: Project, llm: FakeLLM) -> None:
    relevancy_judge(llm)
    imported = results_import(project=acme, file=SourceFile("test_run.json",
                                                            (RESULTS / "deepeval" / "test_run.json").read_bytes()))
    assert set(imported.criteria_order) == {"deepeval_answer_relevancy", "deepeval_tool_correctness"}
    rescored = run_rescore(run=imported, judge=True)
    assert rescored.config["criteria"]["deepeval_answer_relevancy"]["threshold"] == 0.7  # DeepEval's, kept
    rescored = runs.run_execute_here(rescored.pk)
    mine = Score.objects.filter(run=rescored, criterion="deepeval_answer_relevancy", turn_index=-1)
    assert mine.count() == 3 and {s.evaluator for s in mine} == {"deepeval_answer_relevancy"}
    assert all(s.score == 1.0 for s in mine)
    theirs = Score.objects.filter(run=imported, criterion="deepeval_answer_relevancy")
    assert theirs.count() == 3 and {s.evaluator for s in theirs} == {"imported:deepeval"}


def test_a_deepeval_metric_collection_is_saved_as_a_config_and_exported_back(
        acme: Project, alice_client: Client) -> None:
    collection = {"name": "rag checks", "metrics": [
        {"metric": "AnswerRelevancyMetric", "threshold": 0.7, "include_reason": False},
        {"metric": "GEval", "name": "Correctness", "criteria": "Is it right?",
         "evaluation_params": ["input", "actual_output"], "strict_mode": True}]}
    response = alice_client.post("/api/v1/configs/", {"project": acme.slug, "name": "rag checks",
                                                      "config": collection}, content_type="application/json")
    assert response.status_code == 201, response.content
    preset = EvaluationConfig.objects.get(project=acme, name="rag checks")
    assert preset.criteria_order == ["deepeval_answer_relevancy", "g_eval_correctness"]
    EvalConfig.model_validate(preset.config)
    exported = alice_client.get(f"/api/v1/configs/{preset.pk}/deepeval/").json()
    assert exported["metrics"] == [
        {"metric": "AnswerRelevancyMetric", "threshold": 0.7, "include_reason": False},
        {"metric": "GEval", "name": "Correctness", "criteria": "Is it right?",
         "evaluation_params": ["input", "actual_output"], "strict_mode": True}]
    assert exported["skipped"] == []
    bad = alice_client.post("/api/v1/configs/", {"project": acme.slug, "name": "bad", "config": {"metrics": [
        {"metric": "GEval", "name": "x", "evaluation_params": ["input"]}]}}, content_type="application/json")
    assert bad.status_code == 400
    assert "metrics[0] (g_eval_x)" in json.dumps(bad.json()) and "criteria or evaluation_steps" in json.dumps(
        bad.json())
    assert not EvaluationConfig.objects.filter(name="bad").exists()


def test_monitors_take_the_judged_metrics_that_need_no_golden(db: None) -> None:
    spec = MonitorSpec.model_validate({"name": "quality", "criteria": {
        "deepeval_answer_relevancy": {"threshold": 0.5}, "deepeval_toxicity": {},
        "deepeval_g_eval": {"options": {"criteria": "Polite?", "evaluation_params": ["input", "actual_output"]}}}})
    assert set(spec.criteria) == {"deepeval_answer_relevancy", "deepeval_toxicity", "deepeval_g_eval"}
    with pytest.raises(ValueError, match="needs an expected answer"):
        MonitorSpec.model_validate({"name": "x", "criteria": {"deepeval_contextual_precision": {}}})
    with pytest.raises(ValueError, match="reads expected_output"):
        MonitorSpec.model_validate({"name": "x", "criteria": {"deepeval_g_eval": {"options": {
            "criteria": "Right?", "evaluation_params": ["actual_output", "expected_output"]}}}})


def test_a_monitor_scores_judged_metrics_with_its_calls_in_flight_together(
        acme: Project, alice: Any, llm: FakeLLM, settings: Any) -> None:
    settings.EVALSITE_JUDGE_CONCURRENCY = 4
    relevancy_judge(llm, delay=0.05, off_topic="Call us")
    monitor = monitor_create(project=acme, user=alice, spec=MonitorSpec.model_validate({
        "name": "relevant", "criteria": {"deepeval_answer_relevancy": {"threshold": 0.5},
                                         "short": {"evaluator": "contains", "options": {"substrings": ["Paris"]}}}}))
    token = token_create(user=alice, name="agent").secret
    for n in range(6):
        assert post(Client(), agent_trace(f"Paris, answer {n}", question="Is it in stock?"), token).status_code == 200
    assert scoring.score_traces(list(Trace.objects.values_list("pk", flat=True))) == 6
    assert 1 < llm.max_in_flight <= 4  # several traces' judge calls at once, never more than asked
    assert len(llm.requests) == 18  # 6 traces x (statements, verdicts, reason)
    scores = MonitorScore.objects.filter(result__monitor=monitor)
    assert sorted(scores.values_list("criterion", flat=True)) == ["deepeval_answer_relevancy"] * 6 + ["short"] * 6
    assert {s.score for s in scores.filter(criterion="deepeval_answer_relevancy")} == {0.5}
    assert {s.passed for s in scores.filter(criterion="short")} == {True}


def test_calibration_sets_a_judged_metric_against_peoples_grades(acme: Project, llm: FakeLLM, alice: Any) -> None:
    relevancy_judge(llm, off_topic="Call us")
    version = generated_version(acme, 3)
    run = make_run(acme, version, generated_outputs(3),
                   config=EvalConfig.model_validate({"criteria": {"deepeval_answer_relevancy": {"threshold": 0.4}}}))
    for index, passed in enumerate([True, False, True]):
        result = CaseResult.objects.get(run=run, case__eval_id=f"case_{index:04d}")
        grades.grade_save(result=result, criterion="deepeval_answer_relevancy", grader=alice, passed=passed)
    [row] = calibration.calibration_rows(project=acme)
    assert (row.criterion, row.judge_model) == ("deepeval_answer_relevancy", "gpt-4o-mini")
    assert row.calibration.confusion.pass_pass == 2 and row.calibration.confusion.pass_fail == 1
