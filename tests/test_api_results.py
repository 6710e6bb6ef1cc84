"""Reading a run through the API: its summary (the run page's numbers), one case result in
full, filtered results, and the watsonx-style metric results (aggregated per metric, level
and node, with or without the individual results; the individual results; the wide table)."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.test import Client

from evaluations.models import CaseResult, Project, Score
from evaluations.runs import selectors as selectors_runs
from tests.api_helpers import assert_error, demo_runs, finished_run, with_nodes
from tests.engine_helpers import import_demo, perfect_outputs, regressed_outputs


@pytest.fixture
def run(acme: Project) -> Any:
    return demo_runs(acme)[1]


# --- Summary ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_summary_has_the_run_pages_numbers(alice_client: Client, run: Any) -> None:
    body = alice_client.get(f"/api/v1/runs/{run.pk}/summary/").json()
    page = selectors_runs.run_summary_view(run.summary)
    assert page is not None
    assert body["final"] is True and body["status"] == "completed"
    assert (body["passed"], body["judged"], body["pass_rate"]) == (6, 8, pytest.approx(0.75))
    assert body["statuses"] == {"passed": 6, "failed": 2}
    assert body["progress"] == {"total": 8, "settled": 8, "done": 8, "passed": 6, "failed": 2, "errored": 0,
                                "not_fully_scored": 0, "missing": 0, "not_runnable": 0, "percent": 100}
    assert body["latency"]["p50"] == pytest.approx(page.latency_p50)
    assert body["latency"]["p95"] == pytest.approx(page.latency_p95)
    assert body["latency"]["count"] == 8
    criteria = {c["name"]: c for c in body["criteria"]}
    assert criteria["trajectory_match"]["pass_rate"] == pytest.approx(0.75)
    assert criteria["trajectory_match"]["passed"] == 6 and criteria["trajectory_match"]["count"] == 8
    assert {n["node"] for n in body["nodes"]} == {"planner", "executor"}
    assert body["tokens"]["prompt"] == sum(100 * len(o["turns"]) for o in perfect_outputs())
    assert {t["tool"] for t in body["tools"]} >= {"get_weather", "get_order"}


@pytest.mark.django_db
def test_an_unfinished_runs_summary_is_the_figures_so_far(alice_client: Client, acme: Project) -> None:
    from evaluations.runs import services as runs
    from evaluations.schemas.outputs import AgentOutput

    version = import_demo(acme)
    queued = runs.run_create(project=acme, version=version, target_kind="uploaded", enqueue=False,
                             outputs=[AgentOutput.model_validate(o) for o in perfect_outputs()])
    body = alice_client.get(f"/api/v1/runs/{queued.pk}/summary/").json()
    assert body["final"] is False and body["status"] == "queued"
    assert body["progress"]["settled"] == 0 and body["statuses"] == {"pending": 8}
    assert body["pass_rate"] is None and body["criteria"] == []


# --- One result ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_one_result_comes_with_its_case_aligned_calls_scores_and_justifications(alice_client: Client,
                                                                                run: Any) -> None:
    tokyo = CaseResult.objects.get(run=run, case__eval_id="weather_tokyo")
    body = alice_client.get(f"/api/v1/runs/{run.pk}/results/{tokyo.pk}/").json()
    assert (body["eval_id"], body["status"], body["run"]) == ("weather_tokyo", "failed", run.pk)
    assert body["expected"]["conversation"][0]["expected_tool_trajectory"][0]["args"] == {"city": "Tokyo"}
    assert body["output"]["turns"][0]["tool_calls"][0]["args"]["city"] == "Kyoto"
    [turn] = body["turns"]
    [row] = turn["tool_calls"]
    assert row["kind"] == "args_differ"
    assert row["arg_diffs"] == [{"path": "city", "kind": "changed", "expected": "Tokyo", "actual": "Kyoto"}]
    assert turn["expected_response"] == "It is 22°C and clear in Tokyo."
    trajectory = [s for s in body["scores"] if s["criterion"] == "trajectory_match" and s["applies_to"] == "conversation"]
    assert trajectory[0]["passed"] is False and trajectory[0]["justification"]
    assert {s["node_name"] for s in body["scores"] if s["applies_to"] == "node"} == {"planner", "executor"}
    assert {(u["tool_name"], u["node_name"]) for u in body["tool_usage"]} >= {("get_weather", "executor")}
    assert body["traces"] == []


@pytest.mark.django_db
def test_a_result_of_another_run_or_project_is_404(alice_client: Client, bob_client: Client, acme: Project) -> None:
    base, run = demo_runs(acme)
    other = CaseResult.objects.filter(run=base).first()
    assert other is not None
    assert_error(alice_client.get(f"/api/v1/runs/{run.pk}/results/{other.pk}/"), 404, "not_found")
    mine = CaseResult.objects.filter(run=run).first()
    assert mine is not None
    assert_error(bob_client.get(f"/api/v1/runs/{run.pk}/results/{mine.pk}/"), 404)


# --- Filtered results ----------------------------------------------------------------------


@pytest.mark.django_db
def test_results_filter_by_criterion_and_verdict(alice_client: Client, run: Any) -> None:
    def ids(query: str) -> set[str]:
        body = alice_client.get(f"/api/v1/runs/{run.pk}/results/?{query}").json()
        return {r["eval_id"] for r in body["results"]}

    assert ids("criterion=trajectory_match&passed=false") == {"weather_tokyo", "order_status"}
    assert ids("passed=false") >= {"weather_tokyo", "order_status"}
    assert "weather_tokyo" not in ids("passed=true")
    assert ids("status=failed&tag=weather") == {"weather_tokyo"}
    assert ids("eval_id=order_status") == {"order_status"}
    only = alice_client.get(f"/api/v1/runs/{run.pk}/results/?criterion=response_match&applies_to=conversation").json()
    assert {s["criterion"] for r in only["results"] for s in r["scores"]} == {"response_match"}
    nodes = alice_client.get(f"/api/v1/runs/{run.pk}/results/?applies_to=node&node=planner&limit=2").json()
    assert len(nodes["results"]) == 2 and nodes["next"]
    assert {(s["applies_to"], s["node_name"]) for r in nodes["results"] for s in r["scores"]} == {("node", "planner")}


@pytest.mark.django_db
def test_unknown_filter_values_are_400_naming_the_parameter(alice_client: Client, run: Any) -> None:
    for query, param in (("status=bogus", "status"), ("applies_to=galaxy", "applies_to"), ("passed=perhaps", "passed")):
        body = assert_error(alice_client.get(f"/api/v1/runs/{run.pk}/results/?{query}"), 400, "invalid")
        assert body["problems"][0]["path"] == param


@pytest.mark.django_db
def test_a_page_of_results_costs_the_same_queries_for_more_cases(alice_client: Client, acme: Project,
                                                                django_assert_max_num_queries: Any) -> None:
    import_demo(acme)
    small = finished_run(acme, with_nodes(perfect_outputs())[:2])
    large = finished_run(acme)
    counts = []
    for run in (small, large):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as captured:
            assert alice_client.get(f"/api/v1/runs/{run.pk}/results/").status_code == 200
        counts.append(len(captured))
    assert counts[0] == counts[1]
    with django_assert_max_num_queries(8):
        alice_client.get(f"/api/v1/runs/{large.pk}/results/?criterion=trajectory_match&passed=false")


# --- watsonx-style metrics ---------------------------------------------------------------------


@pytest.mark.django_db
def test_metrics_are_aggregated_per_metric_level_and_node(alice_client: Client, run: Any) -> None:
    body = alice_client.get(f"/api/v1/runs/{run.pk}/metrics/").json()
    rows = {(r["name"], r["applies_to"], r["node_name"]): r for r in body["results"]}
    assert body["count"] == len(rows)
    top = rows[("trajectory_match", "conversation", None)]
    assert (top["count"], top["passed"], top["judged"], top["pass_rate"]) == (8, 6, 8, pytest.approx(0.75))
    assert top["value"] == top["mean"] == pytest.approx(0.75 + 0.25 * _partial_credit(run))
    assert top["group"] == "trajectory"
    assert "individual_results" not in top
    executor = rows[("node_time", "node", "executor")]
    assert executor["mean"] is None and executor["raw_max"] == pytest.approx(1.0)  # two 0.5 s calls
    assert executor["passed"] == executor["count"] == 6  # the cases that call tools
    assert ("trajectory_match", "interaction", None) in rows


def _partial_credit(run: Any) -> float:
    """The mean conversation trajectory score of the two failing cases (they keep some credit)."""
    failing = Score.objects.filter(run=run, criterion="trajectory_match", applies_to="conversation", passed=False)
    values = [s.score for s in failing]
    return sum(values) / len(values)


@pytest.mark.django_db
def test_metrics_filter_by_level_and_node_with_individual_results(alice_client: Client, run: Any) -> None:
    body = alice_client.get(f"/api/v1/runs/{run.pk}/metrics/?level=node&node=executor&include_individual=true").json()
    [row] = body["results"]
    assert (row["name"], row["applies_to"], row["node_name"]) == ("node_time", "node", "executor")
    assert len(row["individual_results"]) == row["count"] == 6
    record = row["individual_results"][0]
    assert record["applies_to"] == "node" and record["node_name"] == "executor"
    assert record["conversation_id"] == f"{record['eval_id']}#0"
    assert record["thresholds"] == [{"type": "upper_limit", "value": 5.0}]
    assert record["value"] is None and record["raw_value"] in {0.5, 1.0}
    both = alice_client.get(f"/api/v1/runs/{run.pk}/metrics/?level=conversation,interaction&name=response_match"
                            "&include_individual=true&individual_limit=3").json()
    assert {r["applies_to"] for r in both["results"]} == {"conversation", "interaction"}
    assert all(len(r["individual_results"]) == 3 < r["count"] for r in both["results"])
    assert alice_client.get(f"/api/v1/runs/{run.pk}/metrics/?level=node&level=conversation").json()["count"] == 5


@pytest.mark.django_db
def test_individual_metric_results_are_paged_and_filtered(alice_client: Client, run: Any) -> None:
    body = alice_client.get(f"/api/v1/runs/{run.pk}/metrics/results/?name=trajectory_match&level=conversation"
                            "&passed=false").json()
    assert body["count"] == 2
    assert {r["eval_id"] for r in body["results"]} == {"weather_tokyo", "order_status"}
    assert all(r["interaction_id"] is None and r["passed"] is False for r in body["results"])
    turns = alice_client.get(f"/api/v1/runs/{run.pk}/metrics/results/?level=interaction&limit=5").json()
    assert len(turns["results"]) == 5 and turns["count"] > 5
    assert all(r["interaction_id"].startswith(r["conversation_id"] + "/turn") for r in turns["results"])


@pytest.mark.django_db
def test_the_wide_table_has_one_row_per_case_and_a_column_per_metric_like_the_csv(alice_client: Client,
                                                                                  run: Any) -> None:
    body = alice_client.get(f"/api/v1/runs/{run.pk}/wide/?limit=5").json()
    rows = list(csv.reader(io.StringIO(b"".join(alice_client.get(f"/api/v1/runs/{run.pk}/results.csv")
                                                 .streaming_content).decode())))
    assert body["columns"] == rows[0]
    # In the run config's order (PostgreSQL's jsonb keeps its keys in its own order).
    assert sorted(body["metrics"]) == ["node_time", "response_match", "trajectory_match"]
    assert body["count"] == 8 and len(body["results"]) == 5 and body["next"]
    by_csv = {r[0]: dict(zip(rows[0], r, strict=True)) for r in rows[1:]}
    for row in body["results"]:
        line = by_csv[row["eval_id"]]
        assert line["status"] == row["status"]
        assert float(line["trajectory_match"]) == pytest.approx(row["metrics"]["trajectory_match"])
        assert line["trajectory_match.passed"] == str(row["passed"]["trajectory_match"]).lower()
    failed = alice_client.get(f"/api/v1/runs/{run.pk}/wide/?criterion=trajectory_match&passed=false").json()
    assert {r["eval_id"] for r in failed["results"]} == {"weather_tokyo", "order_status"}


@pytest.mark.django_db
def test_metric_pages_cost_the_same_queries_for_more_cases(alice_client: Client, acme: Project) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    import_demo(acme)
    small = finished_run(acme, with_nodes(regressed_outputs())[:3])
    large = finished_run(acme)
    for query in ("metrics/?include_individual=true", "metrics/results/", "wide/", "summary/"):
        counts = []
        for run in (small, large):
            with CaptureQueriesContext(connection) as captured:
                assert alice_client.get(f"/api/v1/runs/{run.pk}/{query}").status_code == 200
            counts.append(len(captured))
        assert counts[0] == counts[1], (query, counts)
        assert counts[1] <= 10, (query, counts)


@pytest.mark.django_db
def test_a_viewer_reads_results_and_another_project_gets_404(acme: Project, run: Any, bob_client: Client) -> None:
    from tests.api_helpers import member, token_client

    viewer = token_client(member("carol", acme, "viewer"))
    for path in ("summary/", "metrics/", "metrics/results/", "wide/", "results/"):
        assert viewer.get(f"/api/v1/runs/{run.pk}/{path}").status_code == 200
        assert_error(bob_client.get(f"/api/v1/runs/{run.pk}/{path}"), 404, "not_found")
