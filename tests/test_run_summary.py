"""A run's summary is the same whichever way it is read: its queries side by side on two
connections (a worker completing a run, outside any transaction) or one after another on
one (inside a transaction, where a second connection would not see the rows). The medians
are ranked in the database, and must be `statistics.median` of each criterion's
conversation-level scores: odd and even counts, unscored rows and turn-level rows left out.
Real runs of the demo eval set on the test database."""

from __future__ import annotations

import statistics
import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import Max, Min

from evaluations.alongside import separate_connections_agree, side_by_side
from evaluations.evaluators.base import Level
from evaluations.models import CaseResult, Project, Run, Score
from evaluations.runs import services as runs
from evaluations.runs.summary import _criteria_rows, _medians, _scores_of, reads_apart, run_summary
from evaluations.schemas.evalset import CriterionConfig, EvalConfig
from evaluations.schemas.outputs import AgentOutput
from tests.engine_helpers import import_demo, regressed_outputs

CONFIG = EvalConfig(criteria={"trajectory_match": CriterionConfig(threshold=0.8),
                              "response_match_score": CriterionConfig(threshold=0.5)})


def _run_with_spread(project: Project) -> Run:
    """The demo run, and two criteria of its own whose scores are known: `odd` on five
    results, `even` on four, each with an unscored row and a turn-level row that no median
    may count."""
    run = runs.run_create(project=project, version=import_demo(project), target_kind="uploaded", config=CONFIG,
                          enqueue=False, outputs=[AgentOutput.model_validate(o) for o in regressed_outputs()])
    run = runs.run_execute_here(run.pk)
    results = list(run.results.order_by("pk"))
    assert len(results) >= 6, "the demo eval set has too few cases for this test"
    rows = []
    for criterion, values in (("odd", [0.9, 0.1, 0.5, 0.7, 0.3]), ("even", [0.25, 1.0, 0.0, 0.5]),
                              # ties: both middle places in one value, and the middle between two
                              ("tied", [0.5, 1.0, 0.5, 0.5]), ("split", [1.0, 0.0, 0.0, 1.0]),
                              ("tied_odd", [0.2, 0.7, 0.2])):
        for result, value in zip(results, values, strict=False):
            rows.append(Score(run=run, result=result, criterion=criterion, evaluator=criterion,
                              applies_to=Level.CONVERSATION.value, turn_index=-1, score=value))
            rows.append(Score(run=run, result=result, criterion=criterion, evaluator=criterion,
                              applies_to=Level.INTERACTION.value, turn_index=0, score=100.0))
        rows.append(Score(run=run, result=results[len(values)], criterion=criterion, evaluator=criterion,
                          applies_to=Level.CONVERSATION.value, turn_index=-1, score=None, error="boom"))
    Score.objects.bulk_create(rows)
    return run


def _expected_medians(run: Run) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for criterion, score in Score.objects.filter(run=run, applies_to=Level.CONVERSATION.value,
                                                 score__isnull=False).values_list("criterion", "score"):
        values.setdefault(criterion, []).append(score)
    return {criterion: statistics.median(scores) for criterion, scores in values.items()}


@pytest.mark.django_db(transaction=True)
def test_side_by_side_summary_equals_the_one_read_in_turn(acme: Project, settings: Any) -> None:
    assert not reads_apart(Run(cases_total=settings.EVALSITE_SIDE_BY_SIDE_RESULTS - 1))
    settings.EVALSITE_SIDE_BY_SIDE_RESULTS = 1  # the demo run's few results read apart, as a large run's
    run = _run_with_spread(acme)
    assert reads_apart(run)
    assert separate_connections_agree(), "outside a transaction the summary's reads go side by side"
    apart = run_summary(run)
    with transaction.atomic():
        assert not separate_connections_agree()
        in_turn = run_summary(run)
    assert apart == in_turn
    medians = {name: c["median"] for name, c in apart["criteria"].items()}
    assert medians == _expected_medians(run)
    assert medians["odd"] == 0.5 and medians["even"] == pytest.approx(0.375)
    assert (medians["tied"], medians["split"], medians["tied_odd"]) == (0.5, 0.5, 0.2)
    assert apart["criteria"]["odd"]["count"] == 6 and apart["criteria"]["odd"]["errors"] == 1
    # the completed run's stored summary was read side by side by run_finish, before the extra rows
    stored = Run.objects.get(pk=run.pk).summary
    assert set(stored["criteria"]) == {"trajectory_match", "response_match_score"}
    assert stored["criteria"]["trajectory_match"]["median"] == _expected_medians(run)["trajectory_match"]


@pytest.mark.django_db
def test_medians_inside_a_transaction(acme: Project) -> None:
    run = _run_with_spread(acme)
    summary = run_summary(run)
    assert {name: c["median"] for name, c in summary["criteria"].items()} == _expected_medians(run)


@pytest.mark.django_db(transaction=True)
def test_side_by_side_runs_apart_and_gives_results_in_order(acme: Project) -> None:
    barrier = threading.Barrier(2, timeout=10)  # both calls are running at once, or this times out

    def call(name: str) -> Any:
        barrier.wait()
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM evaluations_project WHERE name = %s", [acme.name])
            (count,) = cursor.fetchone()
        return name, threading.get_ident(), id(connection.connection), count

    (first, first_thread, first_db, n1), (second, second_thread, second_db, n2) = side_by_side(
        lambda: call("first"), lambda: call("second"))
    assert (first, second) == ("first", "second") and n1 == n2 == 1
    assert first_thread == threading.get_ident() and second_thread != first_thread
    assert first_db != second_db


@pytest.mark.django_db
def test_inside_a_transaction_everything_runs_here(acme: Project) -> None:
    seen = side_by_side(lambda: threading.get_ident(), lambda: threading.get_ident())
    assert seen == [threading.get_ident()] * 2


@pytest.mark.django_db(transaction=True)
def test_an_error_is_raised_after_the_other_calls_end(acme: Project) -> None:
    ended = threading.Event()

    def slow() -> int:
        ended.wait(0.2)
        ended.set()
        return 1

    def failing() -> int:
        raise KeyError("no such criterion")

    with pytest.raises(KeyError, match="no such criterion"):
        side_by_side(failing, slow)
    assert ended.is_set(), "the failing call returned before the other ended"


def _by_run_id(run: Run) -> tuple[str, list[Any]]:
    return "run_id = %s AND applies_to = %s", [run.pk, Level.CONVERSATION.value]


@pytest.mark.django_db
def test_the_scores_read_by_result_range_are_the_runs(acme: Project) -> None:
    """On SQLite a run's scores are read through its result ids (`_scores_of`); another run's
    results created after it are outside that range, and a run whose results are spread out
    is read through its own index. Either way the criteria and medians are the run's."""
    first = _run_with_spread(acme)
    second = _run_with_spread(acme)  # its results' ids follow the first run's
    for run in (first, second):
        where, params = _scores_of(run)
        if connection.vendor == "sqlite":
            assert where.startswith("result_id BETWEEN")
            assert params[:2] == [run.results.order_by("pk").first().pk, run.results.order_by("pk").last().pk]
        assert _medians((where, params)) == _medians(_by_run_id(run)) == _expected_medians(run)
        assert _criteria_rows((where, params)) == _criteria_rows(_by_run_id(run))
    for _ in range(2):  # more runs' results after the second's
        runs.run_create(project=acme, version=first.evalset_version, target_kind="uploaded", config=CONFIG,
                        enqueue=False, outputs=[AgentOutput.model_validate(o) for o in regressed_outputs()])
    # The first run gains results after those: its ids are spread across the other runs'.
    late = [CaseResult(run=first, case=r.case, iteration=r.iteration + 1, status=CaseResult.Status.PASSED)
            for r in first.results.order_by("pk")]
    late = CaseResult.objects.bulk_create(late)
    Score.objects.bulk_create([Score(run=first, result=r, criterion="late", evaluator="late",
                                     applies_to=Level.CONVERSATION.value, turn_index=-1, score=float(i))
                               for i, r in enumerate(late)])
    first.cases_total = first.results.count()
    assert first.results.aggregate(n=Max("pk"))["n"] - first.results.aggregate(n=Min("pk"))["n"] \
        >= 2 * first.cases_total, "the results must be spread out for this test"
    assert _scores_of(first) == _by_run_id(first)
    summary = run_summary(first)
    assert summary["criteria"]["late"]["median"] == statistics.median(range(len(late)))
    assert {name: c["median"] for name, c in summary["criteria"].items()} == _expected_medians(first)
    assert "late" not in run_summary(second)["criteria"]
