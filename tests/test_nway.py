"""Several runs side by side and the leaderboard: the statistics against hand-checked values,
the pages and the CSV through the test client, who may see them, and a matrix page whose
queries do not grow with the number of cases.

The four runs are real (a generated eval set, uploaded outputs, executed in process). With
30 cases: the reference gets cases 1-10 wrong, "perfect" none, "close" 1-8, "worse" 1-12 (a
wrong output looks up item 0, so case 0 is never wrong).
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evaluations.models import Project, Run
from evaluations.review import leaderboard, nway
from evaluations.review.statistics import mcnemar_exact_p
from tests.compare_helpers import generated_outputs, generated_version, make_run

CASES = 30


def nway_url(runs: list[Run], **params: Any) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return reverse("nway_compare") + "?runs=" + ",".join(str(r.pk) for r in runs) + ("&" + query if query else "")


def four_runs(project: Project, count: int = CASES) -> list[Run]:
    version = generated_version(project, count)
    wrong = {"reference": set(range(1, 11)), "perfect": set(), "close": set(range(1, 9)),
             "worse": set(range(1, 13))}
    models = {"reference": "m-1", "perfect": "m-2", "close": "m-3", "worse": "m-4"}
    return [make_run(project, version, generated_outputs(count, wrong=ids), name=name,
                     labels={"model": models[name], "branch": "main"})
            for name, ids in wrong.items()]


@pytest.fixture
def runs(acme: Project) -> list[Run]:
    return four_runs(acme)


# --- Statistics, hand-checked -------------------------------------------------------------


def test_holm_adjusts_the_smallest_p_by_the_number_of_tests() -> None:
    # sorted 0.01, 0.03, 0.04: 0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1 = 0.04, raised to 0.06
    assert nway.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert nway.holm([0.5, 0.9]) == [1.0, 1.0]
    assert nway.holm([]) == []


def test_normal_interval_from_count_mean_and_mean_of_squares() -> None:
    # values 0, 1, 1, 1: mean 0.75, sample sd 0.5, se 0.25, half-width 1.95996 x 0.25
    low, high = nway.normal_mean_ci(4, 0.75, 0.75)  # type: ignore[misc]
    assert low == pytest.approx(0.260009, abs=1e-6)
    assert high == pytest.approx(1.239991, abs=1e-6)
    assert nway.normal_mean_ci(1, 1.0, 1.0) is None


def test_exact_mcnemar_values_used_against_the_reference() -> None:
    assert mcnemar_exact_p(0, 10) == pytest.approx(2 / 1024)  # all ten flips one way
    assert mcnemar_exact_p(0, 2) == pytest.approx(0.5)
    assert mcnemar_exact_p(2, 0) == pytest.approx(0.5)


def test_pareto_front_and_disagreement() -> None:
    points = [(0.9, 1.0), (0.8, 0.5), (0.7, 0.6), (0.9, 2.0)]
    assert nway.pareto_front(points) == [True, True, False, False]
    assert [nway.disagreement(p, 4) for p in (0, 1, 2, 3, 4)] == [0, 1, 2, 1, 0]
    assert nway.config_hash({"a": 1, "b": 2}) == nway.config_hash({"b": 2, "a": 1})


def test_run_ids_are_checked() -> None:
    assert nway.parse_run_ids("4, 1,4,9") == [4, 1, 9]
    for bad in ("1", "", "1,x", ",".join(str(i) for i in range(1, 10))):
        with pytest.raises(nway.NwayError):
            nway.parse_run_ids(bad)


# --- The page -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_best_run_is_marked_only_where_significant(runs: list[Run]) -> None:
    reference = runs[0]
    summary = nway.nway_summary(runs, reference, [r.name for r in runs])
    trajectory = next(line for line in summary.criteria if "trajectory" in line.name)
    ref, perfect, close, worse = trajectory.cells
    assert ref.mean.mean == pytest.approx(20 / 30)  # type: ignore[union-attr]
    # perfect: 10 fail -> pass flips, p = 2/1024, Holm x 3
    assert perfect.p_value == pytest.approx(2 / 1024)
    assert perfect.p_holm == pytest.approx(3 * 2 / 1024)
    assert perfect.significant and perfect.best
    # close: 2 flips one way (p 0.5), worse: 2 the other way; Holm raises both to 1.0
    assert close.p_holm == pytest.approx(1.0) and not close.significant
    assert worse.p_holm == pytest.approx(1.0) and not worse.significant
    assert not any(cell.best for cell in (ref, close, worse))
    # with "close" as the reference, "perfect" (8 flips, p = 2/256, x 3 = 0.0234) is still best
    again = nway.nway_summary(runs, runs[2], [r.name for r in runs])
    line = next(line for line in again.criteria if "trajectory" in line.name)
    assert line.cells[1].p_holm == pytest.approx(3 * 2 / 256)
    assert line.best_index == 1


@pytest.mark.django_db
def test_the_page_shows_means_best_latency_and_matrix(runs: list[Run], alice_client: Client) -> None:
    response = alice_client.get(nway_url(runs))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Compare 4 runs" in page
    assert "Holm-corrected" in page
    # the legend's star and one marked cell: trajectory, where "perfect" is significantly better
    assert page.count("★ best</span>") == 2 and page.count("nway-best-cell") == 1
    assert "p95 latency" in page
    # disagreement first: cases 9 and 10 split the runs 2-2
    first_rows = [line for line in page.splitlines() if "case=case_" in line][:2]
    assert "case_0009" in first_rows[0] and "case_0010" in first_rows[1]
    assert "split 2" in page
    assert "✗ fail" in page and "✓ pass" in page
    assert "Item 11 is in stock." in page  # a one-line output in a passing cell
    assert 'call: lookup {&quot;id&quot;: 0}' in page  # the call of a failing one
    ordered = alice_client.get(nway_url(runs, sort="case")).content.decode()
    first = next(line for line in ordered.splitlines() if "case=case_" in line)
    assert "case_0000" in first


@pytest.mark.django_db
def test_the_case_across_runs_shows_every_runs_calls(runs: list[Run], alice_client: Client) -> None:
    url = reverse("nway_case") + "?runs=" + ",".join(str(r.pk) for r in runs) + "&case=case_0009"
    response = alice_client.get(url)
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count('class="nway-run"') == 4
    assert page.count("&quot;id&quot;: 9}") == 2  # perfect and close looked up item 9
    assert page.count("&quot;id&quot;: 0}") == 2  # reference and worse looked up item 0
    assert "Item 9 is in stock." in page
    missing = alice_client.get(url.replace("case_0009", "nope"))
    assert missing.status_code == 404


@pytest.mark.django_db
def test_csv_of_the_matrix(runs: list[Run], alice_client: Client) -> None:
    response = alice_client.get(reverse("nway_csv") + "?runs=" + ",".join(str(r.pk) for r in runs))
    assert response.status_code == 200
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))  # type: ignore[arg-type]
    assert rows[0][:3] == ["eval_id", "disagreement", f"run {runs[0].pk}:outcome"]
    assert len(rows) == 1 + CASES
    assert rows[1][0] == "case_0009" and rows[1][1] == "2"
    assert rows[1][2] == "fail" and rows[1][5] == "pass"
    assert rows[1][4] == 'call: lookup {"id": 0}' and rows[1][7] == "Item 9 is in stock."


@pytest.mark.django_db
def test_bad_input_is_a_clear_400(runs: list[Run], alice_client: Client, acme: Project) -> None:
    response = alice_client.get(reverse("nway_compare") + f"?runs={runs[0].pk}")
    assert response.status_code == 400
    assert "give 2 to 8 run ids" in response.content.decode()
    other = make_run(acme, generated_version(acme, 3, eval_set_id="other"), generated_outputs(3))
    response = alice_client.get(nway_url([runs[0], other]))
    assert response.status_code == 400
    assert "same eval set" in response.content.decode()
    response = alice_client.get(nway_url(runs[:2], reference=999999))
    assert response.status_code == 400


@pytest.mark.django_db
def test_runs_of_other_projects_are_404(runs: list[Run], bob_client: Client, globex: Project) -> None:
    for url in (nway_url(runs), reverse("nway_case") + f"?runs={runs[0].pk},{runs[1].pk}&case=case_0001",
                reverse("nway_csv") + f"?runs={runs[0].pk},{runs[1].pk}",
                reverse("evalset_leaderboard", args=[runs[0].evalset_version.evalset_id])):
        assert bob_client.get(url).status_code == 404, url
    # one of bob's runs among alice's is still a 404
    theirs = make_run(globex, generated_version(globex, 3), generated_outputs(3))
    assert bob_client.get(nway_url([theirs, runs[0]])).status_code == 404


def _queries(client: Client, url: str) -> int:
    client.get(url)  # the pairwise comparisons are computed and stored on the first view
    cache.clear()
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured.captured_queries)


@pytest.mark.django_db
def test_matrix_queries_do_not_grow_with_cases(acme: Project, alice_client: Client) -> None:
    small = four_runs(acme, 12)
    large = four_runs(acme, 120)  # three pages of 50
    assert _queries(alice_client, nway_url(small)) == _queries(alice_client, nway_url(large))
    assert _queries(alice_client, nway_url(large, page=3)) == _queries(alice_client, nway_url(small))


@pytest.mark.django_db
def test_a_cached_page_reads_only_the_runs(runs: list[Run], alice_client: Client) -> None:
    url = nway_url(runs)
    alice_client.get(url)
    with CaptureQueriesContext(connection) as captured:
        assert alice_client.get(url).status_code == 200
    assert not any("evaluations_caseresult" in q["sql"] for q in captured.captured_queries)


# --- Leaderboard --------------------------------------------------------------------------


@pytest.mark.django_db
def test_leaderboard_ranks_latest_run_per_model_branch_config(runs: list[Run], acme: Project,
                                                              alice_client: Client) -> None:
    version = runs[0].evalset_version
    # a newer run of m-1 on main replaces the old one; the same model on another branch is its own row
    newer = make_run(acme, version, generated_outputs(CASES, wrong=set(range(1, 4))), name="reference-2",
                     labels={"model": "m-1", "branch": "main"})
    feature = make_run(acme, version, generated_outputs(CASES, wrong=set(range(1, 21))), name="feature",
                       labels={"model": "m-1", "branch": "feature"})
    evalset = version.evalset
    name = next(n for n in leaderboard.leaderboard(evalset).criteria if "trajectory" in n)
    assert leaderboard.leaderboard(evalset).criterion == name  # the default: the runs differ most on it
    board = leaderboard.leaderboard(evalset, criterion=name)
    assert board.criterion == name
    shown = [e.run.pk for e in board.entries]
    assert runs[0].pk not in shown and newer.pk in shown and feature.pk in shown
    assert [e.run.name for e in board.entries] == ["perfect", "reference-2", "close", "worse", "feature"]
    top = board.entries[0]
    assert top.mean.mean == pytest.approx(1.0) and top.rank == 1  # type: ignore[union-attr]
    second = board.entries[1].mean
    assert second is not None and second.mean == pytest.approx(27 / 30)
    # 27 ones and 3 zeros: sample sd sqrt(0.9 x 0.1 x 30/29); 0.9 + 0.109 is clipped to 1
    half = nway.Z95 * math.sqrt(0.09 * 30 / 29 / 30)
    assert half == pytest.approx(0.109187, abs=1e-6)
    assert second.low == pytest.approx(0.9 - half) and second.high == 1.0
    # every run answers the same text: one mean for all, one shared rank, an interval kept in [0, 1]
    response = leaderboard.leaderboard(evalset, criterion="response_match")
    assert {e.rank for e in response.entries} == {1}
    assert all(e.mean and e.mean.high is not None and e.mean.high <= 1.0 for e in response.entries)
    only_feature = leaderboard.leaderboard(evalset, branch="feature")
    assert [e.run.pk for e in only_feature.entries] == [feature.pk]
    # latency: every run has the same latencies, so only the best quality is on the front
    latency = leaderboard.leaderboard(evalset, criterion=name, axis="latency")
    assert [e.run.name for e in latency.pareto] == ["perfect"]
    page = alice_client.get(reverse("evalset_leaderboard", args=[evalset.pk]) + f"?axis=latency&criterion={name}")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'data-testid="leaderboard"' in text and "◆ on the front" in text
    assert 'class="plotly-figure"' in text and "<script>" not in text


# --- API ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_api_answers_the_pages_numbers(runs: list[Run], alice_client: Client) -> None:
    response = alice_client.get("/api/v1/compare/runs/", {"runs": ",".join(str(r.pk) for r in runs)})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["reference"] == runs[0].pk
    assert [r["id"] for r in body["runs"]] == [r.pk for r in runs]
    assert "Holm" in body["correction"]
    line = next(c for c in body["criteria"] if "trajectory" in c["name"])
    perfect = line["runs"][1]
    assert perfect["best"] and perfect["p_holm"] == pytest.approx(3 * 2 / 1024)
    assert line["runs"][0]["mean"] == pytest.approx(20 / 30)
    matrix = body["matrix"]
    assert matrix["criterion"] == line["name"]  # the criterion with a significant best, by default
    assert matrix["count"] == CASES and len(matrix["results"]) == CASES
    assert matrix["results"][0]["eval_id"] == "case_0009" and matrix["results"][0]["disagreement"] == 2
    assert [c["outcome"] for c in matrix["results"][0]["cells"]] == ["fail", "pass", "pass", "fail"]
    assert body["page_url"].startswith("http://testserver/compare/runs/?runs=")


@pytest.mark.django_db
def test_api_errors(runs: list[Run], alice_client: Client, bob_client: Client) -> None:
    ids = ",".join(str(r.pk) for r in runs)
    bad = alice_client.get("/api/v1/compare/runs/", {"runs": str(runs[0].pk)})
    assert bad.status_code == 400 and bad.json()["problems"][0]["path"] == "runs"
    wrong_ref = alice_client.get("/api/v1/compare/runs/", {"runs": ids, "reference": 999999})
    assert wrong_ref.status_code == 400
    assert bob_client.get("/api/v1/compare/runs/", {"runs": ids}).status_code == 404


def test_the_api_is_in_the_schema() -> None:
    import yaml

    schema = yaml.safe_load(Client().get("/api/schema/").content)
    operation = schema["paths"]["/api/v1/compare/runs/"]["get"]
    assert operation["operationId"] == "compare_several_runs"
    assert {"runs", "reference", "criterion", "sort", "page"} <= {p["name"] for p in operation["parameters"]}
    assert {"200", "400", "401", "403", "404"} <= set(operation["responses"])


@pytest.mark.django_db
def test_means_from_the_run_summary_agree_with_the_scores(runs: list[Run]) -> None:
    from_summary = nway.criterion_means(runs)
    for run in runs:
        run.summary = None  # what a run without a stored summary gets: one GROUP BY over its scores
    from_scores = nway.criterion_means(runs)
    assert from_summary.keys() == from_scores.keys() and from_summary
    for key, cell in from_summary.items():
        other = from_scores[key]
        assert cell.n == other.n
        assert cell.mean == pytest.approx(other.mean)
        assert (cell.low, cell.high) == pytest.approx((other.low, other.high))


@pytest.mark.django_db
def test_stored_pairwise_criteria_are_read_in_one_query(runs: list[Run]) -> None:
    """Stored comparisons give their criteria extracted by the database (from the summary's
    own row), not decoded whole or computed again."""
    from evaluations.review import comparison

    reference, others = runs[0], runs[1:]
    computed = nway.pairwise_criteria(reference, others)  # computes and stores any missing
    with CaptureQueriesContext(connection) as queries:
        again = nway.pairwise_criteria(reference, others)
    assert len(queries) == 1
    assert again == computed == {
        run.pk: comparison.comparison_get(baseline=reference, candidate=run)["criteria"] for run in others}
