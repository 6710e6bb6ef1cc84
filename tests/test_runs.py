"""The run lifecycle, executed in-process: results, scores, counters, aggregates, idempotency,
errors, cancel and retry."""

from __future__ import annotations

import pytest

from evaluations.evaluators import Evaluator, ScoreResult, register
from evaluations.models import CaseResult, Project, Run, Score, ToolUsage
from evaluations.runs import services as runs
from evaluations.schemas.evalset import CriterionConfig, EvalConfig
from evaluations.schemas.outputs import AgentOutput
from tests.engine_helpers import import_demo, perfect_outputs, regressed_outputs


class Exploding(Evaluator):
    """Raises on one case: the run must record it and go on."""

    name = "test_exploding"
    group = "test"

    def score(self, case, output, config, criterion):  # type: ignore[no-untyped-def]
        if case.eval_id == "order_status":
            raise RuntimeError("boom on purpose")
        return [ScoreResult(criterion=criterion, score=1.0, passed=True)]


register(Exploding)


def _outputs(raw: list[dict]) -> list[AgentOutput]:
    return [AgentOutput.model_validate(o) for o in raw]


def _run(project: Project, raw: list[dict], **kwargs) -> Run:  # type: ignore[no-untyped-def]
    version = import_demo(project)
    run = runs.run_create(project=project, version=version, target_kind="uploaded", outputs=_outputs(raw),
                          enqueue=False, **kwargs)
    return runs.run_execute_here(run.pk, workers=1)


@pytest.mark.django_db
def test_perfect_outputs_pass_every_case_with_full_scores(acme: Project) -> None:
    run = _run(acme, perfect_outputs())
    assert run.status == Run.Status.COMPLETED
    assert (run.cases_total, run.cases_done, run.cases_failed, run.cases_errored) == (8, 8, 0, 0)
    criteria = run.summary["criteria"]
    assert set(criteria) == {"trajectory_match", "response_match"}
    assert criteria["trajectory_match"]["mean"] == pytest.approx(1.0)
    assert criteria["trajectory_match"]["pass_rate"] == 1.0
    assert criteria["response_match"]["min"] == pytest.approx(1.0)
    assert run.summary["pass_rate"] == 1.0


@pytest.mark.django_db
def test_regressions_fail_their_cases_and_show_in_the_aggregates(acme: Project) -> None:
    run = _run(acme, regressed_outputs())
    assert run.cases_failed == 2
    failed = set(CaseResult.objects.filter(run=run, status="failed").values_list("case__eval_id", flat=True))
    assert failed == {"weather_tokyo", "order_status"}
    stats = run.summary["criteria"]["trajectory_match"]
    assert stats["count"] == 8
    assert stats["pass_rate"] == pytest.approx(6 / 8)
    assert stats["min"] < 0.8
    assert stats["std_dev"] > 0
    assert run.summary["statuses"] == {"passed": 6, "failed": 2}


@pytest.mark.django_db
def test_latency_tokens_cost_and_tool_aggregates_are_computed(acme: Project) -> None:
    run = _run(acme, perfect_outputs())
    summary = run.summary
    assert summary["latency"]["count"] == 8
    assert summary["latency"]["p50"] <= summary["latency"]["p95"] <= summary["latency"]["max"]
    assert summary["tokens"]["prompt"] == 100 * 12  # one usage per turn, 12 turns
    assert summary["cost_usd"] == pytest.approx(0.012)
    tools = {t["tool"]: t for t in summary["tools"]}
    assert tools["get_weather"]["calls"] == 4  # Tokyo, Paris, Rome, Oslo
    assert tools["get_weather"]["cases"] == 3
    assert ToolUsage.objects.filter(run=run).count() == 10  # distinct tools per case, summed over cases


@pytest.mark.django_db
def test_cases_without_an_output_are_reported_as_missing(acme: Project) -> None:
    outputs = [o for o in perfect_outputs() if o["eval_id"] != "order_cancel"]
    run = _run(acme, outputs)
    assert run.cases_missing == 1
    missing = CaseResult.objects.get(run=run, status="missing")
    assert missing.case.eval_id == "order_cancel"
    assert "no output" in missing.error
    assert run.status == Run.Status.COMPLETED


@pytest.mark.django_db
@pytest.mark.parametrize("iterations", [0, 101])
def test_iterations_out_of_range_are_refused_by_every_entry_point(acme: Project, iterations: int) -> None:
    version = import_demo(acme)
    with pytest.raises(runs.RunError, match=f"iterations must be between 1 and 100, not {iterations}"):
        runs.run_create(project=acme, version=version, target_kind="uploaded", outputs=_outputs(perfect_outputs()),
                        iterations=iterations, enqueue=False)
    assert Run.objects.count() == 0 and CaseResult.objects.count() == 0


@pytest.mark.django_db
def test_outputs_for_unknown_eval_ids_are_refused(acme: Project) -> None:
    version = import_demo(acme)
    with pytest.raises(runs.RunError, match="no_such_case"):
        runs.run_create(project=acme, version=version, target_kind="uploaded",
                        outputs=_outputs([{"eval_id": "no_such_case", "turns": []}]), enqueue=False)
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_running_a_batch_twice_writes_each_result_and_score_once(acme: Project) -> None:
    run = _run(acme, regressed_outputs())
    scores_before = Score.objects.filter(run=run).count()
    first, last = CaseResult.objects.filter(run=run).order_by("pk").values_list("pk", flat=True)[::7][:2]
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    assert runs.run_batch(run.pk, first, last) == 0
    run.refresh_from_db()
    assert Score.objects.filter(run=run).count() == scores_before
    assert (run.cases_done, run.cases_failed) == (8, 2)


@pytest.mark.django_db
def test_an_evaluator_that_raises_records_an_error_and_the_run_goes_on(acme: Project) -> None:
    config = EvalConfig(criteria={"boom": CriterionConfig(evaluator="test_exploding", threshold=0.5)})
    run = _run(acme, perfect_outputs(), config=config)
    assert run.status == Run.Status.COMPLETED
    # the evaluator's failure is not the agent's: the case has no verdict, and the run a notice
    assert (run.cases_errored, run.cases_unscored) == (0, 1)
    score = Score.objects.get(run=run, result__case__eval_id="order_status")
    assert score.score is None and "boom on purpose" in score.error
    assert run.summary["criteria"]["boom"]["errors"] == 1
    assert CaseResult.objects.filter(run=run, status="passed").count() == 7
    assert CaseResult.objects.get(run=run, case__eval_id="order_status").status == "not_fully_scored"
    [notice] = run.summary["notices"]
    assert (notice["criterion"], notice["kind"], notice["cases"]) == ("boom", "evaluator_error", 1)
    assert notice["reason"] == "RuntimeError: boom on purpose"
    assert run.summary["not_fully_scored"] == 1 and run.summary["judged"] == 7


@pytest.mark.django_db
def test_an_unknown_evaluator_is_refused_when_the_run_is_created(acme: Project) -> None:
    version = import_demo(acme)
    config = EvalConfig(criteria={"x": CriterionConfig(evaluator="does_not_exist")})
    with pytest.raises(runs.RunError, match="does_not_exist"):
        runs.run_create(project=acme, version=version, target_kind="uploaded", outputs=[], config=config,
                        enqueue=False)


@pytest.mark.django_db
def test_an_agent_error_in_the_output_marks_the_case_errored(acme: Project) -> None:
    outputs = perfect_outputs()
    outputs[0]["error"] = "agent timed out after 30 s"
    run = _run(acme, outputs)
    errored = CaseResult.objects.get(run=run, status="error")
    assert errored.error == "agent timed out after 30 s"
    assert run.cases_errored == 1


@pytest.mark.django_db
def test_a_cancelled_run_does_no_more_work(acme: Project) -> None:
    version = import_demo(acme)
    run = runs.run_create(project=acme, version=version, target_kind="uploaded",
                          outputs=_outputs(perfect_outputs()), enqueue=False)
    assert runs.run_cancel(run=run)
    Run.objects.filter(pk=run.pk)  # still cancelled
    first, last = CaseResult.objects.filter(run=run).order_by("pk").values_list("pk", flat=True)[::7][:2]
    assert runs.run_batch(run.pk, first, last) == 0
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.cases_done == 0
    assert not runs.run_cancel(run=run)  # already finished


@pytest.mark.django_db
def test_retry_failed_re_runs_only_the_failed_cases(acme: Project) -> None:
    run = _run(acme, regressed_outputs())
    passed_before = set(CaseResult.objects.filter(run=run, status="passed").values_list("pk", "updated_at"))
    reset = runs.run_retry_failed(run=run)
    assert reset == 2
    # the earlier attempt's scores and tool usage go with the reset: a pending result has none
    pending = CaseResult.objects.filter(run=run, status="pending")
    assert pending.count() == 2
    assert not Score.objects.filter(result__in=pending).exists()
    assert not ToolUsage.objects.filter(result__in=pending).exists()
    assert Score.objects.filter(run=run, applies_to="conversation").count() == 12
    run = runs.run_execute_here(run.pk)
    assert run.status == Run.Status.COMPLETED
    assert (run.cases_done, run.cases_failed) == (8, 2)  # the same outputs fail again, counted once
    assert set(CaseResult.objects.filter(run=run, status="passed").values_list("pk", "updated_at")) == passed_before
    assert Score.objects.filter(run=run, applies_to="conversation").count() == 16


@pytest.mark.django_db
def test_iterations_make_one_result_per_case_and_iteration(acme: Project) -> None:
    run = _run(acme, perfect_outputs(0) + perfect_outputs(1))
    assert run.iterations == 2
    assert run.cases_total == 16
    assert CaseResult.objects.filter(run=run, iteration=1, status="passed").count() == 8


@pytest.mark.django_db
def test_a_subset_of_eval_ids_runs_only_those(acme: Project) -> None:
    run = _run(acme, perfect_outputs(), eval_ids=["weather_tokyo", "order_status"])
    assert run.cases_total == 2
    assert set(CaseResult.objects.filter(run=run).values_list("case__eval_id", flat=True)) == {
        "weather_tokyo", "order_status"}


@pytest.mark.django_db
def test_a_completed_run_is_found_by_the_resume_watchdog_only_when_stalled(acme: Project, settings) -> None:  # type: ignore[no-untyped-def]
    settings.EVALSITE_LEASE_SECONDS = 0
    run = _run(acme, perfect_outputs())
    assert runs.resume_stalled_runs() == []  # completed runs are left alone
    version = run.evalset_version
    stalled = runs.run_create(project=acme, version=version, target_kind="uploaded",
                              outputs=_outputs(perfect_outputs()), enqueue=False)
    Run.objects.filter(pk=stalled.pk).update(status=Run.Status.RUNNING)
    from django_q.models import OrmQ

    queued_before = OrmQ.objects.count()
    assert runs.resume_stalled_runs() == [stalled.pk]
    assert OrmQ.objects.count() > queued_before  # its pending batches are queued again


@pytest.mark.django_db
def test_a_trace_in_an_output_is_kept_as_spans_and_supplies_the_tool_calls(acme: Project) -> None:
    import json

    from evaluations.models import Span, Trace
    from tests.conftest import DATA

    trace = json.loads((DATA / "traces" / "genai_cancel_order.json").read_text())
    outputs = [o for o in perfect_outputs() if o["eval_id"] == "order_status"]
    outputs[0]["turns"] = [{"final_response": "Order 1042 shipped on 2026-11-18 and arrives on 2026-11-22."}]
    outputs[0]["trace"] = trace
    run = _run(acme, outputs, eval_ids=["order_status"])
    stored = Trace.objects.get(run=run)
    assert stored.name == "invoke_agent orders_assistant"
    spans = Span.objects.filter(trace=stored)
    assert spans.count() == 6
    assert spans.filter(kind="TOOL").count() == 3
    assert spans.filter(parent_span_id="").count() == 1
    # The tool calls came from the trace: get_order with other args, then two cancels.
    tools = {t["tool"]: t["calls"] for t in run.summary["tools"]}
    assert tools == {"get_order": 1, "cancel_order": 2}
    assert CaseResult.objects.get(run=run).status == "failed"  # the unexpected cancels fail the trajectory


@pytest.mark.django_db
def test_nodes_named_by_trajectories_get_aggregates_and_node_level_scores(acme: Project) -> None:
    outputs = [o for o in perfect_outputs() if o["eval_id"] in {"weather_tokyo", "order_cancel"}]
    for output in outputs:
        output["trajectory"] = [{"step_type": "NODE", "name": "planner", "metadata": {"duration_seconds": 0.2}},
                                {"step_type": "NODE", "name": "executor"}]
        for turn in output["turns"]:
            for call in turn["tool_calls"]:
                call.update({"node": "executor", "latency_seconds": 0.5})
    config = EvalConfig(criteria={"node_time": CriterionConfig(evaluator="node_latency_seconds", threshold=0.9)})
    run = _run(acme, outputs, config=config, eval_ids=["weather_tokyo", "order_cancel"])
    nodes = {n["node"]: n for n in run.summary["nodes"]}
    assert nodes["planner"]["executions"] == 2 and nodes["planner"]["tool_calls"] == 0
    assert nodes["executor"]["executions"] == 2 and nodes["executor"]["tool_calls"] == 3  # 1 + 2 calls
    node_scores = Score.objects.filter(run=run, applies_to="node")
    assert set(node_scores.values_list("node_name", flat=True)) == {"planner", "executor"}
    slow = node_scores.get(result__case__eval_id="order_cancel", node_name="executor")
    assert slow.raw_value == pytest.approx(1.0) and slow.passed is False  # two calls of 0.5 s > 0.9 s
    assert CaseResult.objects.get(run=run, case__eval_id="weather_tokyo").status == "passed"
    assert CaseResult.objects.get(run=run, case__eval_id="order_cancel").status == "failed"


@pytest.mark.django_db
def test_a_scenario_case_is_not_runnable_without_a_simulator_and_driven_by_one_when_configured(
        acme: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    from evaluations.evalsets.services import evalset_import
    from evaluations.interop import SourceFile
    from tests.conftest import REALWORLD
    from tests.llm_server import FakeLLM, reply

    path = REALWORLD / "google-adk" / "live_non_blocking_tool_agent" / "live_non_blocking_tool_agent.evalset.json"
    [outcome] = evalset_import(project=acme, files=[SourceFile(path.name, path.read_bytes())])
    target = {"callable": "evaluations.demo.agent:respond"}
    config = EvalConfig(criteria={"latency_seconds": CriterionConfig(threshold=30.0)})
    plain = runs.run_create(project=acme, version=outcome.version, target_kind="python", target=target,
                            config=config, enqueue=False)
    assert plain.cases_not_runnable == 1
    plain = runs.run_execute_here(plain.pk)
    scenario = CaseResult.objects.get(run=plain, case__eval_id="background_task_scenario")
    assert (scenario.status, scenario.error) == ("not_runnable", "not runnable: needs a user simulator")

    with FakeLLM() as llm:
        llm.script(reply("And what is two plus two?"), reply("</finished>"))
        monkeypatch.setenv("EVALSITE_LLM_BASE_URL", llm.url)
        simulated = EvalConfig(criteria=config.criteria, user_simulator_config={"max_turns": 5})
        run = runs.run_create(project=acme, version=outcome.version, target_kind="python", target=target,
                              config=simulated, enqueue=False)
        assert run.cases_not_runnable == 0
        run = runs.run_execute_here(run.pk)
    driven = CaseResult.objects.get(run=run, case__eval_id="background_task_scenario")
    assert driven.status == "passed", driven.error
    turns = driven.output["turns"]
    assert len(turns) == 2  # the starting prompt, then one simulated message, then the stop signal
    assert len(llm.requests) == 2


@pytest.mark.django_db
def test_a_runs_result_ids_run_in_case_position_then_iteration_order(acme: Project) -> None:
    """The run page lists a run's results by id (the (run, id) index gives a page without
    sorting the run): that is the eval set's order only because run_create writes them so."""
    from evaluations.runs.page import ResultFilters, results_table, run_criteria

    version = import_demo(acme)
    wanted = list(version.cases.order_by("-position").values_list("eval_id", flat=True))[:5]
    run = runs.run_create(project=acme, version=version, target_kind="uploaded", outputs=_outputs(perfect_outputs()),
                          iterations=3, eval_ids=wanted, enqueue=False)
    by_id = list(CaseResult.objects.filter(run=run).order_by("pk").values_list("case__position", "iteration"))
    assert len(by_id) == 15 and by_id == sorted(by_id)
    table = results_table(run, run_criteria(run), ResultFilters())
    assert [(r.eval_id, r.iteration) for r in table.rows] == list(
        CaseResult.objects.filter(run=run).order_by("case__position", "iteration")
        .values_list("case__eval_id", "iteration"))
