"""Results import (`evaluations/runs/imports.py`): ADK, DeepEval, AgentFlow and UiPath results files
become completed runs keeping the other tool's scores, thresholds, verdicts and reasons; bad
files say where they are wrong and write nothing.

tests/data/results/ holds the files (their provenance: tests/data/results/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evaluations.interop.base import EvalSetImportError, SourceFile
from evaluations.interop.results import read_results
from evaluations.models import CaseResult, Comparison, EvalSet, Project, Run, Score
from evaluations.runs.imports import results_import
from evaluations.runs.services import native_case
from tests.engine_helpers import import_demo

RESULTS = Path(__file__).resolve().parent / "data" / "results"
ADK = RESULTS / "adk" / "travel_demo_travel_agent_1764000130.53.evalset_result.json"


def _file(path: Path) -> SourceFile:
    return SourceFile(path.name, path.read_bytes())


def _scores(run: Run, eval_id: str) -> dict[str, Score]:
    return {s.criterion: s for s in Score.objects.filter(run=run, result__case__eval_id=eval_id, turn_index=-1)}


def _error(project: Project, name: str, doc: Any, **kwargs: Any) -> EvalSetImportError:
    text = doc if isinstance(doc, str) else json.dumps(doc, indent=2)
    with pytest.raises(EvalSetImportError) as info:
        results_import(project=project, file=SourceFile(name, text.encode()), **kwargs)
    return info.value


def _nothing_written() -> None:
    assert Run.objects.count() == 0
    assert Score.objects.count() == 0


# --- Per format ---------------------------------------------------------------------------------


def test_an_adk_eval_history_file_becomes_a_completed_run_of_the_eval_set_it_names(acme: Project) -> None:
    version = import_demo(acme)
    run = results_import(project=acme, file=_file(ADK))
    assert run.status == Run.Status.COMPLETED and run.evalset_version == version
    assert run.tags == ["imported:adk"] and run.target["imported"] == "adk" and run.target["outputs"] is True
    tokyo = _scores(run, "weather_tokyo")
    assert set(tokyo) >= {"tool_trajectory_avg_score", "response_match_score"}
    response = Score.objects.get(run=run, result__case__eval_id="weather_tokyo", result__iteration=0,
                                 criterion="response_match_score", turn_index=-1)
    assert (response.score, response.raw_value, response.passed) == (0.8, 0.8, True)
    assert response.threshold == {"lower_limit": 0.7}
    assert response.evaluator == "imported:adk"
    # Both runs of weather_tokyo (`--num_runs 2`) are iterations 0 and 1; the agent's outputs are kept.
    results = CaseResult.objects.filter(run=run, case__eval_id="weather_tokyo").order_by("iteration")
    assert [r.iteration for r in results] == [0, 1]
    assert results[0].output["turns"][0]["tool_calls"][0]["name"] == "get_weather"
    # The summary is computed as for any run, under ADK's metric names.
    assert "response_match_score" in run.summary["criteria"]
    assert run.cases_missing == CaseResult.objects.filter(run=run, status="missing").count() > 0


def test_a_deepeval_test_run_creates_its_eval_set_and_keeps_every_metric_as_deepeval_computed_it(
        acme: Project) -> None:
    run = results_import(project=acme, file=_file(RESULTS / "deepeval" / "test_run.json"))
    assert run.status == Run.Status.COMPLETED
    evalset = EvalSet.objects.get(project=acme)
    assert evalset.latest_version.case_count == 3
    assert list(evalset.latest_version.cases.order_by("position").values_list("eval_id", flat=True)) == [
        "test_case_0", "test_case_1", "test_case_2"]
    first = _scores(run, "test_case_0")
    relevancy = first["deepeval_answer_relevancy"]  # the criterion evalsite computes it with
    assert relevancy.score == relevancy.raw_value == 0.9285714285714286
    assert relevancy.passed is True and relevancy.threshold == {"lower_limit": 0.7}
    assert relevancy.justification["reason"].startswith("The score is 0.93")
    assert relevancy.justification["evaluation_model"] == "gpt-4o"
    assert relevancy.evaluator == "imported:deepeval"
    assert relevancy.justification["deepeval_name"] == "Answer Relevancy"
    statuses = dict(CaseResult.objects.filter(run=run).values_list("case__eval_id", "status"))
    assert statuses == {"test_case_0": "passed", "test_case_1": "failed", "test_case_2": "passed"}
    assert (run.cases_done, run.cases_failed) == (3, 1)
    assert run.summary["criteria"]["deepeval_tool_correctness"]["pass_rate"] == 0.5
    assert run.criteria_order == ["deepeval_answer_relevancy", "deepeval_tool_correctness"]
    output = CaseResult.objects.get(run=run, case__eval_id="test_case_0").output
    assert output["turns"][0]["final_response"] == "Your parcel P-9 is out for delivery today."
    assert output["turns"][0]["tool_calls"][0]["name"] == "track_parcel"
    # The same file again: the same eval-set version, a second run.
    again = results_import(project=acme, file=_file(RESULTS / "deepeval" / "test_run.json"))
    assert again.evalset_version == run.evalset_version


def test_a_conversational_deepeval_test_run_keeps_judge_errors_as_errors(acme: Project) -> None:
    run = results_import(project=acme, file=_file(RESULTS / "deepeval" / "conversational_test_run.json"))
    refund = CaseResult.objects.get(run=run, case__eval_id="refund_flow")
    assert refund.status == "passed"
    assert [t["final_response"] for t in refund.output["turns"]] == [
        "Sorry about that. What is your order number?", "Your refund for order 4417 has started; it takes 3-5 days."]
    smalltalk = CaseResult.objects.get(run=run, case__eval_id="smalltalk")
    assert smalltalk.status == "failed"  # DeepEval's own verdict
    [score] = Score.objects.filter(result=smalltalk)
    assert (score.score, score.passed, score.error) == (None, False, "The judge returned invalid JSON.")


def test_an_agentflow_report_is_matched_by_eval_id_against_the_eval_set(acme: Project) -> None:
    import_demo(acme)
    run = results_import(project=acme, file=_file(RESULTS / "agentflow" / "demo_travel_agent.report.json"))
    statuses = dict(CaseResult.objects.filter(run=run).values_list("case__eval_id", "status"))
    assert statuses["weather_tokyo"] == "passed"
    assert statuses["order_status"] == "failed"
    assert statuses["smalltalk_no_tools"] == "error"
    assert statuses["flight_search_lis"] == "missing"
    trajectory = _scores(run, "order_status")["trajectory_match"]
    assert (trajectory.score, trajectory.passed, trajectory.threshold) == (0.0, False, {"lower_limit": 0.8})
    assert trajectory.justification["details"]["expected"] == ["get_order"]
    assert CaseResult.objects.get(run=run, case__eval_id="smalltalk_no_tools").error.startswith("TimeoutError")
    assert run.target["outputs"] is False


def test_uipath_results_are_matched_by_case_name_and_keep_uipaths_scale(acme: Project) -> None:
    evalset = import_demo(acme).evalset
    run = results_import(project=acme, file=_file(RESULTS / "uipath" / "results.json"), evalset=evalset)
    exact = _scores(run, "order_status")["ExactMatchEvaluator"]
    assert (exact.raw_value, exact.score, exact.passed, exact.threshold) == (0.0, 0.0, None, None)
    judge = _scores(run, "order_status")["LLMJudgeEvaluator"]
    assert (judge.raw_value, judge.score) == (100.0, 1.0)
    assert judge.justification["details"] == "The answer states the order status correctly."
    assert _scores(run, "weather_tokyo")["JsonSimilarityEvaluator"].raw_value == 1.0
    assert run.status == Run.Status.COMPLETED


# --- Bad input: where it is wrong, and nothing written -----------------------------------------


def test_a_deepeval_metric_with_a_text_score_names_its_case_field_and_line(acme: Project) -> None:
    doc = json.loads((RESULTS / "deepeval" / "test_run.json").read_text())
    doc["testCases"][1]["metricsData"][0]["score"] = "high"
    error = _error(acme, "bad.json", doc)
    [problem] = error.problems
    assert (problem.file, problem.case, problem.path) == ("bad.json", "test_case_1", "testCases[1].metricsData[0].score")
    assert problem.line is not None
    text = json.dumps(doc, indent=2).splitlines()
    assert '"high"' in text[problem.line - 1]
    assert EvalSet.objects.count() == 0
    _nothing_written()


def test_an_agentflow_report_for_eval_ids_the_set_lacks_is_refused_whole(acme: Project) -> None:
    import_demo(acme)
    doc = json.loads((RESULTS / "agentflow" / "demo_travel_agent.report.json").read_text())
    doc["results"][2]["eval_id"] = "no_such_case"
    error = _error(acme, "report.json", doc)
    assert error.code == "unknown_cases"
    assert (error.problems[0].case, error.problems[0].path) == ("no_such_case", "results[2]")
    # Its line: the text the reader let go after reading is decoded again for the error.
    text = json.dumps(doc, indent=2)
    item = text.rindex("{\n", 0, text.index('"eval_id": "no_such_case"'))
    assert error.problems[0].line is not None
    assert error.problems[0].line == text[:item].count("\n") + 1
    _nothing_written()


def test_missing_required_fields_are_all_reported(acme: Project) -> None:
    import_demo(acme)
    doc = {"report_id": "r", "eval_set_id": "demo_travel_agent",
           "results": [{"eval_id": "weather_tokyo", "criterion_results": [{"criterion": "x", "passed": True}]}]}
    error = _error(acme, "report.json", doc)
    assert {p.path for p in error.problems} == {"results[0].passed", "results[0].criterion_results[0].score"}
    _nothing_written()


@pytest.mark.parametrize(("text", "code"), [
    ("", "empty"),
    ("{\"testCases\": [", "invalid_json"),
    ("[1, 2]", "unknown_format"),
    ("{\"report_id\": \"r\", \"eval_set_id\": \"demo_travel_agent\", \"results\": []}", "empty"),
])
def test_files_that_are_not_results_say_so(acme: Project, text: str, code: str) -> None:
    assert _error(acme, "x.json", text).code == code
    _nothing_written()


def test_a_file_without_cases_and_no_eval_set_to_match_asks_for_one(acme: Project) -> None:
    error = _error(acme, "report.json", (RESULTS / "agentflow" / "demo_travel_agent.report.json").read_text())
    assert error.code == "no_evalset"
    assert "demo_travel_agent" in error.problems[0].message
    _nothing_written()


def test_an_eval_set_of_another_project_is_refused(acme: Project, globex: Project) -> None:
    evalset = import_demo(globex).evalset
    error = _error(acme, "results.json", (RESULTS / "uipath" / "results.json").read_text(), evalset=evalset)
    assert error.code == "no_evalset"
    _nothing_written()


def test_read_results_recognises_each_tool() -> None:
    assert [read_results(_file(p)).tool for p in (ADK, RESULTS / "deepeval" / "test_run.json",
                                                 RESULTS / "agentflow" / "demo_travel_agent.report.json",
                                                 RESULTS / "uipath" / "results.json")] == [
        "adk", "deepeval", "agentflow", "uipath"]


def test_deepevals_latest_test_run_file_wraps_the_run_and_paths_say_so(acme: Project) -> None:
    doc = json.loads((RESULTS / "deepeval" / "test_run.json").read_text())
    wrapped = {"testRunData": doc, "testRunLink": None}
    run = results_import(project=acme, file=SourceFile(".latest_test_run.json", json.dumps(wrapped).encode()))
    assert Score.objects.filter(run=run, evaluator="imported:deepeval").count() == 5
    doc["testCases"][0]["metricsData"][0]["threshold"] = "0.7"
    error = _error(acme, ".latest_test_run.json", {"testRunData": doc})
    assert error.problems[0].path == "testRunData.testCases[0].metricsData[0].threshold"


def test_a_test_case_the_goldens_reader_refuses_is_reported_at_its_place_in_the_results_file(acme: Project) -> None:
    doc = json.loads((RESULTS / "deepeval" / "test_run.json").read_text())
    doc["testCases"][2]["expectedOutput"] = {"not": "text"}
    error = _error(acme, "run.json", doc)
    [problem] = error.problems
    assert (problem.file, problem.case, problem.path) == ("run.json", "test_case_2", "testCases[2]")
    assert "expected_output" in problem.message
    assert problem.line is not None
    _nothing_written()


def test_an_adk_file_with_no_eval_set_to_match_creates_one_from_its_expected_invocations(acme: Project) -> None:
    run = results_import(project=acme, file=_file(ADK))
    version = run.evalset_version
    assert version.evalset.eval_set_id == "demo_travel_agent"
    assert list(version.cases.order_by("position").values_list("eval_id", "turn_count")) == [
        ("weather_tokyo", 1), ("weather_paris_followup", 2)]
    assert run.status == Run.Status.COMPLETED
    assert CaseResult.objects.filter(run=run).count() == 4  # two iterations of each case; paris ran once
    assert run.cases_missing == CaseResult.objects.filter(run=run, status="missing").count() == 1
    assert _scores(run, "weather_paris_followup")  # ADK's scores, on the cases it ran
    tokyo = native_case(version.cases.get(eval_id="weather_tokyo"))
    assert "Tokyo" in str(tokyo.conversation[0].user_content.content)
    assert [c.name for c in tokyo.conversation[0].expected_tool_trajectory] == ["get_weather"]


def test_adks_older_double_encoded_result_is_read_and_its_problems_have_no_line(acme: Project) -> None:
    import_demo(acme)
    doc = json.loads(ADK.read_text())
    encoded = json.dumps(json.dumps(doc))
    run = results_import(project=acme, file=SourceFile("old.evalset_result.json", encoded.encode()))
    assert Score.objects.filter(run=run, evaluator="imported:adk").exists()
    doc["eval_case_results"][1]["overall_eval_metric_results"][0]["score"] = "0.5"
    error = _error(acme, "old.evalset_result.json", json.dumps(json.dumps(doc)))
    [problem] = error.problems
    assert problem.path == "eval_case_results[1].overall_eval_metric_results[0].score"
    assert (problem.case, problem.line) == ("weather_paris_followup", None)
    assert Run.objects.count() == 1


def test_a_latest_test_run_holding_only_the_confident_ai_link_says_the_results_are_not_in_it(acme: Project) -> None:
    # Real published `.deepeval/.latest_test_run.json` files hold only this once DeepEval sent the run to
    # Confident AI (it overwrites the file with the link): they are not results to import.
    link = "https://app.confident-ai.com/project/p-1/test-runs/r-1/regression-testing"
    error = _error(acme, ".latest_test_run.json", {"testRunLink": link})
    assert error.code == "link_only"
    [problem] = error.problems
    assert (problem.file, problem.path, problem.line) == (".latest_test_run.json", "testRunLink", 2)
    assert "Confident AI" in problem.message and link in problem.message
    _nothing_written()


def test_deepeval_runs_saved_under_the_same_file_name_become_the_eval_sets_of_their_test_files(
        acme: Project) -> None:
    # `deepeval test run` always saves `.latest_test_run.json`: the eval set is named after the
    # run's test file, so two suites do not become versions of one eval set.
    single = json.loads((RESULTS / "deepeval" / "test_run.json").read_text())
    multi = json.loads((RESULTS / "deepeval" / "conversational_test_run.json").read_text())
    first = results_import(project=acme, file=SourceFile(".latest_test_run.json",
                                                         json.dumps({"testRunData": single}).encode()))
    second = results_import(project=acme, file=SourceFile(".latest_test_run.json",
                                                          json.dumps({"testRunData": multi}).encode()))
    assert first.evalset_version.evalset.eval_set_id == "test_support_bot"
    assert second.evalset_version.evalset.eval_set_id == "test_support_conversations"
    assert {first.evalset_version.number, second.evalset_version.number} == {1}
    del single["testFile"]
    third = results_import(project=acme, file=SourceFile(".latest_test_run.json",
                                                         json.dumps({"testRunData": single}).encode()))
    assert third.evalset_version.evalset.eval_set_id == "latest_test_run"
    single["identifier"] = "nightly/support"
    fourth = results_import(project=acme, file=SourceFile("run.json", json.dumps(single).encode()))
    assert fourth.evalset_version.evalset.eval_set_id == "nightly_support"


ADK_WRITTEN = RESULTS / "adk-written" / "order_query.evalset_result.json"


def test_an_eval_history_written_by_google_adk_2_13_keeps_its_informational_metrics_without_a_verdict(
        acme: Project) -> None:
    """A file google-adk 2.13.0 wrote itself (tests/data/results/adk-written/README.md): its
    efficiency metrics have eval_status 4 (informational), token_usage_v1 a null score, and
    session_details is null. They are kept as values and never pass or fail the case."""
    doc = json.loads(ADK_WRITTEN.read_text())
    [raw] = doc["eval_case_results"]
    run = results_import(project=acme, file=_file(ADK_WRITTEN))
    assert run.status == Run.Status.COMPLETED
    scores = _scores(run, raw["eval_id"])
    for metric in raw["overall_eval_metric_results"]:
        stored = scores[metric["metric_name"]]
        assert stored.raw_value == metric["score"]
        if metric["eval_status"] == 4:
            assert (stored.score, stored.passed) == (None, None)
            assert stored.justification["informational"] is True
        else:
            assert stored.passed is (metric["eval_status"] == 1)
    assert scores["token_usage_v1"].raw_value is None and scores["tool_call_count_v1"].raw_value == 1.5
    result = CaseResult.objects.get(run=run)
    assert result.status == CaseResult.Status.FAILED  # ADK's final_eval_status 2, decided by its two verdicts
    assert run.summary["criteria"]["tool_call_count_v1"]["passed"] == 0


# --- DeepEval test runs read case by case ------------------------------------------------------


def _both_ways(name: str, text: str, walks: bool = True) -> tuple[Any, Any]:
    """(what the case-by-case walk reads, what the whole parse reads) of one DeepEval file: each
    a (tool, eval set id, cases) or the problems of the error raised."""
    from evaluations.interop.deepeval.results import results_format
    from evaluations.interop.results import Reader

    def outcome(read: Any) -> Any:
        try:
            parsed = read()
        except EvalSetImportError as exc:
            return exc.code, [p.as_dict() for p in exc.problems], exc.total
        return parsed.tool, parsed.eval_set_id, [
            (c.key, c.path, c.passed, c.latency, c.golden, [vars(s) for s in c.scores],
             c.output, c.has_output) for c in parsed.cases]

    def whole() -> Any:
        reader = Reader(SourceFile(name, text.encode()), json.loads(text), text)
        parsed = results_format.read(reader)
        reader.fail()
        return parsed

    def walked() -> Any:
        parsed = results_format.read_file(SourceFile(name, text.encode())) if results_format.read_file else None
        assert parsed is not None or not walks  # the walk read it, not the whole parse
        return parsed if parsed is not None else whole()

    return outcome(walked), outcome(whole)


def test_a_deepeval_run_read_case_by_case_is_what_the_whole_parse_reads_and_says() -> None:
    doc = json.loads((RESULTS / "deepeval" / "test_run.json").read_text())
    variants: list[Any] = [doc, {"testRunData": doc, "testRunLink": None}]
    broken = json.loads(json.dumps(doc))
    broken["testCases"][0]["metricsData"][0]["threshold"] = "0.7"
    broken["testCases"][1]["success"] = "yes"
    broken["testCases"].insert(2, [1, 2])
    broken["testCases"].append(None)
    variants += [broken, {**broken, "testCases": broken["testCases"], "identifier": "later"}]
    twice = json.loads(json.dumps(doc))
    twice["testCases"][1]["name"] = twice["testCases"][0]["name"]  # eval ids derived from names
    variants += [twice, {"conversationalTestCases": [], **twice}]
    for variant in variants:
        for text in (json.dumps(variant), json.dumps(variant, indent=2), "\n " + json.dumps(variant) + "\r\n"):
            walked, whole = _both_ways("run.json", text)
            assert walked == whole
    for path in [RESULTS / "deepeval" / "conversational_test_run.json",
                 *sorted((RESULTS / "realworld" / "deepeval").rglob("*.json"))]:
        walked, whole = _both_ways(path.name, path.read_text(), walks=False)
        assert walked == whole
    walked, _ = _both_ways("run.json", json.dumps(broken, indent=2))
    code, problems, _total = walked
    assert code == "schema" and all(p["line"] for p in problems)
    assert "testCases[2]" in [p["path"] for p in problems]


def test_a_deepeval_file_the_walk_does_not_take_is_read_whole_with_the_same_error(acme: Project) -> None:
    doc = json.loads((RESULTS / "deepeval" / "test_run.json").read_text())
    text = json.dumps(doc)
    cut = _error(acme, "run.json", text[:-40])  # invalid JSON: json's located error
    assert cut.code == "invalid_json" and cut.problems[0].line == 1
    big = text.replace('"testCases": [', '"n": ' + "9" * 5000 + ', "testCases": [', 1)
    assert _error(acme, "run.json", big).code == "invalid_json"
    _nothing_written()


# --- What a DeepEval import stores, case by case (issue 38: the import's memory) -------------------


def _test_run(cases: int) -> dict[str, Any]:
    test_cases = []
    for n in range(cases):
        metrics = [{"name": "Answer Relevancy", "threshold": 0.7, "success": n % 3 != 1, "score": 0.5 + n / 100,
                    "reason": f"reason {n}", "strictMode": False, "evaluationModel": "gpt-4o", "error": None},
                   {"name": "My Rubric", "threshold": 0.5, "success": n % 4 != 2, "score": n / 10,
                    "error": "judge timed out" if n == 5 else None}]
        test_cases.append({"name": f"case_{n}", "input": f"question {n}", "actualOutput": f"answer {n}",
                           "expectedOutput": f"expected {n}", "success": all(m["success"] for m in metrics),
                           "metricsData": metrics, "runDuration": n / 4,
                           "toolsCalled": [{"name": "lookup", "inputParameters": {"n": n}, "output": str(n)}]})
    return {"identifier": "memory", "testCases": test_cases}


def _stored(run: Run) -> list[tuple[Any, ...]]:
    """Every result and score row of `run`, with what each holds, in case order."""
    results = [(eval_id, status, error, latency, output) for eval_id, status, error, latency, output in
               CaseResult.objects.filter(run=run).order_by("case__position", "iteration").values_list(
                   "case__eval_id", "status", "error", "latency_seconds", "output")]
    scores = list(Score.objects.filter(run=run).order_by("result__case__position", "criterion").values_list(
        "result__case__eval_id", "criterion", "evaluator", "applies_to", "score", "raw_value", "passed",
        "threshold", "justification", "error"))
    return results + scores


def test_a_deepeval_import_stores_every_case_and_score_of_the_file_and_again_the_same(acme: Project) -> None:
    doc = _test_run(12)
    first = results_import(project=acme, file=SourceFile("latest_test_run.json", json.dumps(doc).encode()))
    rows = _stored(first)
    assert len(rows) == 12 + 24
    results = {r[0]: r for r in rows[:12]}
    assert [r[0] for r in rows[:12]] == [f"case_{n}" for n in range(12)]
    for n, case in enumerate(doc["testCases"]):
        _, status, error, latency, output = results[f"case_{n}"]
        assert status == ("passed" if case["success"] else "failed")  # DeepEval's verdict, a metric's error aside
        assert error == ("judge timed out" if n == 5 else "")
        assert latency == n / 4
        assert output["turns"][0]["final_response"] == f"answer {n}"
        assert output["turns"][0]["tool_calls"][0]["args"] == {"n": n}
    relevancy = [r for r in rows[12:] if r[0] == "case_3" and r[1] == "deepeval_answer_relevancy"]
    assert [r[4:8] for r in relevancy] == [(0.53, 0.53, True, {"lower_limit": 0.7})]
    assert relevancy[0][8]["reason"] == "reason 3" and relevancy[0][8]["deepeval_name"] == "Answer Relevancy"
    assert [r[9] for r in rows[12:] if r[0] == "case_5" and r[1] == "My Rubric"] == ["judge timed out"]
    # The same file again: compared with the first run as it completes, and the same rows stored.
    again = results_import(project=acme, file=SourceFile("latest_test_run.json", json.dumps(doc).encode()))
    assert again.status == Run.Status.COMPLETED and again.pk != first.pk
    assert _stored(again) == rows
    assert Comparison.objects.filter(baseline=first, candidate=again).exists()


def test_a_deepeval_file_wrong_in_its_last_case_writes_nothing(acme: Project) -> None:
    doc = _test_run(12)
    doc["testCases"][-1]["metricsData"][1]["score"] = "high"
    error = _error(acme, "latest_test_run.json", doc)
    assert error.code == "schema"
    assert [(p.case, p.path) for p in error.problems] == [("case_11", "testCases[11].metricsData[1].score")]
    _nothing_written()
    assert not EvalSet.objects.filter(project=acme).exists()
