"""The leaderboard through the API: the page's ranking, means, intervals and Pareto front as
JSON (`GET /api/v1/evalsets/<id>/leaderboard/`), from the same selector as the page."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from evaluations.models import Project
from evaluations.review import leaderboard
from tests.compare_helpers import generated_outputs, generated_version, make_run

pytestmark = pytest.mark.django_db
CASES = 20


@pytest.fixture
def board_runs(acme: Project) -> Any:
    version = generated_version(acme, CASES)
    good = make_run(acme, version, generated_outputs(CASES), name="good", labels={"model": "m-1", "branch": "main"})
    worse = make_run(acme, version, generated_outputs(CASES, wrong=set(range(1, 9))), name="worse",
                     labels={"model": "m-2", "branch": "main"})
    other = make_run(acme, version, generated_outputs(CASES, wrong={1}), name="other",
                     labels={"model": "m-1", "branch": "feature"})
    return version.evalset, good, worse, other


def test_the_leaderboard_api_answers_the_pages_ranking(alice_client: Client, board_runs: Any) -> None:
    evalset, good, worse, other = board_runs
    body = alice_client.get(f"/api/v1/evalsets/{evalset.pk}/leaderboard/",
                            {"criterion": "trajectory_match", "axis": "latency"}).json()
    board = leaderboard.leaderboard(evalset, criterion="trajectory_match", axis="latency")
    assert body["criterion"] == "trajectory_match" and body["axis"] == "latency"
    assert body["criteria"] == board.criteria and body["branches"] == ["feature", "main"]
    assert body["models"] == ["m-1", "m-2"]
    assert [e["run"] for e in body["entries"]] == [good.pk, other.pk, worse.pk]
    assert [e["rank"] for e in body["entries"]] == [1, 2, 3]
    top = body["entries"][0]
    assert top["mean"] == pytest.approx(1.0) and top["n"] == CASES and top["model"] == "m-1"
    assert body["entries"][2]["mean"] == pytest.approx(12 / 20)
    assert [e["pareto"] for e in body["entries"]] == [e.pareto for e in board.entries]
    assert top["url"] == f"http://testserver/runs/{good.pk}/"
    assert body["page_url"] == f"http://testserver/evalsets/{evalset.pk}/leaderboard/"
    assert alice_client.get(body["page_url"]).status_code == 200


def test_filters_narrow_it_and_bad_parameters_are_400s(alice_client: Client, bob_client: Client,
                                                       board_runs: Any) -> None:
    evalset, _, worse, other = board_runs
    url = f"/api/v1/evalsets/{evalset.pk}/leaderboard/"
    only = alice_client.get(url, {"branch": "feature"}).json()
    assert [e["run"] for e in only["entries"]] == [other.pk]
    assert [e["run"] for e in alice_client.get(url, {"model": "m-2"}).json()["entries"]] == [worse.pk]
    bad = alice_client.get(url, {"axis": "colour"})
    assert bad.status_code == 400 and bad.json()["problems"][0]["path"] == "axis"
    assert bob_client.get(url).status_code == 404  # another project's eval set does not exist for him
