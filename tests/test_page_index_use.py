"""Pages that must cost the same at 100,000 cases as at 1,000 read one page of rows through an
index, never every result or score of a run to keep a few. The run page's score cells are
found by result (not by run, which made the planner read all the run's scores), and the
drill-down finds the baseline's result by the case's row, not by scanning the baseline."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evaluations.models import CaseResult, Project
from tests.compare_helpers import generated_outputs, generated_version, make_run

pytestmark = pytest.mark.django_db


def _queries(client: Client, url: str) -> list[str]:
    client.get(url)  # warm: the session learns the project
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return [q["sql"] for q in captured.captured_queries]


def _plan(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql)
        return " | ".join(str(row[-1]) for row in cursor.fetchall())


def _pair(acme: Project) -> Any:
    version = generated_version(acme, 60)
    baseline = make_run(acme, version, generated_outputs(60))
    candidate = make_run(acme, version, generated_outputs(60, wrong={3, 7}))
    return baseline, candidate


def test_the_run_page_reads_its_score_cells_by_result(acme: Project, alice_client: Client) -> None:
    _, candidate = _pair(acme)
    queries = _queries(alice_client, reverse("run_detail", args=[candidate.pk]))
    cells = [q for q in queries if 'FROM "evaluations_score"' in q and '"result_id" IN (' in q]
    assert len(cells) == 1
    assert '"run_id"' not in cells[0]  # the run's index would read every score of the run
    if connection.vendor == "sqlite":
        assert "(result_id=?" in _plan(cells[0]), _plan(cells[0])


def test_the_drill_down_finds_the_baseline_result_through_the_case_row(acme: Project, alice_client: Client) -> None:
    baseline, candidate = _pair(acme)
    result = CaseResult.objects.get(run=candidate, case__eval_id="case_0003")
    queries = _queries(alice_client, reverse("run_case", args=[candidate.pk, result.pk]) + f"?baseline={baseline.pk}")
    lookup = [q for q in queries if f'"evaluations_caseresult"."run_id" = {baseline.pk}' in q]
    assert len(lookup) == 1
    # not a join of every baseline result to its case, filtered on the eval id
    assert '"evaluations_evalcase"."eval_id" = ' not in lookup[0]
    assert '"evaluations_caseresult"."case_id" IN (SELECT' in lookup[0]
    assert 'U0."eval_id" = ' in lookup[0] and 'U0."evalset_id" = ' in lookup[0]
    if connection.vendor == "sqlite":
        plan = _plan(lookup[0])
        assert "case_id=?" in plan and "eval_id=?" in plan, plan


def test_the_trend_page_reads_a_page_of_cases_in_eval_id_order_without_sorting_the_version(
        acme: Project, alice_client: Client) -> None:
    baseline, _ = _pair(acme)
    queries = _queries(alice_client, reverse("evalset_trend", args=[baseline.evalset_version.evalset_id]))
    listed = [q for q in queries if q.startswith('SELECT "evaluations_evalcase"."eval_id" AS "eval_id" FROM '
                                                 '"evaluations_evalcase"') and "ORDER BY 1 ASC LIMIT" in q]
    assert len(listed) == 1, queries
    if connection.vendor == "sqlite":
        plan = _plan(listed[0])
        # along the (eval set, eval id) index: no temporary b-tree sorting the version's every case
        assert "TEMP B-TREE" not in plan and "evalset_id=?" in plan, plan


def test_the_trend_page_finds_its_page_of_cases_rows_by_eval_id_without_ordering_them(
        acme: Project, alice_client: Client) -> None:
    """The shown cases' rows, a dict by pk, found by eval id: with the model's default ordering
    (joining the version and the eval set), or with the range index, SQLite read every case of
    the versions shown (30 ms at 100k cases, against 0.3 ms)."""
    baseline, _ = _pair(acme)
    queries = _queries(alice_client, reverse("evalset_trend", args=[baseline.evalset_version.evalset_id]))
    rows = [q for q in queries if q.startswith('SELECT "evaluations_evalcase"."id" AS "pk", '
                                               '"evaluations_evalcase"."eval_id" AS "eval_id"')
            and '"evaluations_evalcase"."eval_id" IN (' in q]
    assert len(rows) == 1, queries
    assert "ORDER BY" not in rows[0] and "JOIN" not in rows[0], rows[0]
    if connection.vendor == "sqlite":
        plan = _plan(rows[0])
        assert "eval_id=?" in plan and "TEMP B-TREE" not in plan, plan


def test_a_runs_notices_read_its_errored_scores_through_their_partial_index(acme: Project) -> None:
    """Counted as a run completes: SQLite read every score of the run to find the few, or none,
    that errored."""
    from evaluations.runs.summary import criterion_notices

    baseline, _ = _pair(acme)
    with CaptureQueriesContext(connection) as captured:
        assert criterion_notices(baseline) == []
    [query] = [q["sql"] for q in captured.captured_queries if 'FROM "evaluations_score"' in q["sql"]]
    if connection.vendor == "sqlite":
        assert "score_run_errored" in _plan(query), _plan(query)
