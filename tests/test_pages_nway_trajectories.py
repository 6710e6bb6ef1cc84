"""One case's tool-call trajectories across N runs (evaluations/review/trajectories.py), in
aligned columns with where they diverge marked: the table, the page and its API twin."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from evaluations.models import Project, Run
from evaluations.review.trajectories import trajectories_across
from evaluations.runs import services as runs
from evaluations.schemas.outputs import AgentOutput
from tests.engine_helpers import import_demo, perfect_outputs

pytestmark = pytest.mark.django_db


def completed(project: Project, version: Any, outputs: list[dict[str, Any]], name: str) -> Run:
    run = runs.run_create(project=project, version=version, target_kind=Run.TargetKind.UPLOADED, name=name,
                          outputs=[AgentOutput.model_validate(o) for o in outputs], enqueue=False)
    return runs.run_execute_here(run.pk)


def three_runs(acme: Project) -> list[Run]:
    version = import_demo(acme)
    perfect = perfect_outputs()
    wrong = copy.deepcopy(perfect)
    extra = copy.deepcopy(perfect)
    by_id = {o["eval_id"]: o for o in wrong}
    by_id["weather_two_cities"]["turns"][0]["tool_calls"][1]["args"]["city"] = "Bergen"
    by_id = {o["eval_id"]: o for o in extra}
    calls = by_id["weather_two_cities"]["turns"][0]["tool_calls"]
    calls.insert(1, {"name": "get_forecast", "args": {"city": "Rome", "days": 1}, "result": {"sky": "sun"},
                     "simulated": "mock"})
    calls.pop()  # and no call for Oslo
    return [completed(acme, version, perfect, "perfect"), completed(acme, version, wrong, "wrong city"),
            completed(acme, version, extra, "extra call")]


def test_the_runs_calls_line_up_on_the_expected_ones_and_the_first_divergence_is_marked(acme: Project) -> None:
    trio = three_runs(acme)
    table = trajectories_across(trio, ["A", "B", "C"], "weather_two_cities")
    assert table is not None and table.pivot_label == "expected"
    rows = [(r.step, r.pivot.name if r.pivot else None, [(c.kind, c.name) for c in r.cells], r.diverges)
            for r in table.rows]
    assert rows == [
        (1, "get_weather", [("matched", "get_weather")] * 3, False),
        (2, None, [("missing", ""), ("missing", ""), ("unexpected", "get_forecast")], True),
        (3, "get_weather", [("matched", "get_weather"), ("args_differ", "get_weather"), ("missing", "")], True),
    ]
    assert table.first_divergence is not None and table.first_divergence.step == 2
    assert table.rows[1].cells[2].simulated == "mock"
    assert '"Bergen"' in table.rows[2].cells[1].args
    [end] = table.ends
    assert end.turn == 1 and not end.diverges


def test_a_case_without_expected_calls_aligns_on_the_first_run(acme: Project) -> None:
    trio = three_runs(acme)
    table = trajectories_across(trio, ["A", "B", "C"], "smalltalk_no_tools")
    assert table is not None and table.pivot_label == "A" and table.rows == []
    assert trajectories_across(trio, ["A", "B", "C"], "no_such_case") is None


def test_the_page_shows_the_aligned_columns_and_its_api_twin_the_same_rows(alice_client: Client,
                                                                           acme: Project) -> None:
    trio = three_runs(acme)
    ids = ",".join(str(r.pk) for r in trio)
    page = alice_client.get(f"/compare/runs/trajectories/?runs={ids}&case=weather_two_cities")
    assert page.status_code == 200
    text = page.content.decode()
    assert "The runs first diverge at" in text and 'href="#step-2"' in text
    assert text.count('data-diverges="1"') == 2
    assert "simulated · mock" in text
    case_page = alice_client.get(f"/compare/runs/case/?runs={ids}&case=weather_two_cities").content.decode()
    assert "/compare/runs/trajectories/?runs=" in case_page
    api = alice_client.get(f"/api/v1/compare/runs/trajectories/?runs={ids}&case=weather_two_cities").json()
    assert [row["diverges"] for row in api["rows"]] == [False, True, True]
    assert api["rows"][1]["cells"][2] == {"kind": "unexpected", "name": "get_forecast",
                                          "args": {"city": "Rome", "days": 1}, "result": '{"sky": "sun"}',
                                          "error": None, "simulated": "mock"}
    assert alice_client.get(f"/compare/runs/trajectories/?runs={ids}&case=nope").status_code == 404
    assert alice_client.get("/compare/runs/trajectories/?runs=1&case=x").status_code == 400
    assert alice_client.get(f"/api/v1/compare/runs/trajectories/?runs={ids}&case=nope").status_code == 404


def test_another_projects_runs_are_a_404(bob_client: Client, acme: Project) -> None:
    trio = three_runs(acme)
    ids = ",".join(str(r.pk) for r in trio)
    assert bob_client.get(f"/compare/runs/trajectories/?runs={ids}&case=weather_tokyo").status_code == 404
    assert bob_client.get(f"/api/v1/compare/runs/trajectories/?runs={ids}&case=weather_tokyo").status_code == 404


def test_the_pages_queries_do_not_grow_with_the_calls(alice_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    short, long = perfect_outputs(), copy.deepcopy(perfect_outputs())
    for output in long:
        for turn in output["turns"]:
            turn["tool_calls"] = turn["tool_calls"] * 20
    a, b = completed(acme, version, short, "a"), completed(acme, version, long, "b")

    def count(case: str) -> int:
        url = f"/compare/runs/trajectories/?runs={a.pk},{b.pk}&case={case}"
        alice_client.get(url)
        with CaptureQueriesContext(connection) as queries:
            assert alice_client.get(url).status_code == 200
        return len(queries)

    assert count("weather_tokyo") == count("weather_paris_followup")
