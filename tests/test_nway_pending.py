"""The several-runs page does not wait for comparisons with the reference that are not stored
yet when the runs are large (over EVALSITE_NWAY_INLINE_CASES cases): it shows the means and
the matrix at once, the tests as pending, queues their computation once, and refreshes itself;
the task (its entry point, then a real django-q2 cluster) stores them and the page is whole."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from django_q.models import OrmQ

from evaluations import tasks
from evaluations.models import Comparison, Project, Run
from tests.queue_helpers import wait_for
from tests.test_nway import four_runs, nway_url
from tests.test_queue_e2e import cluster  # noqa: F401 - the qcluster fixture

PENDING = 'data-testid="nway-pending"'


def missing_pairs(runs: list[Run]) -> list[int]:
    stored = set(Comparison.objects.filter(baseline=runs[0]).values_list("candidate_id", flat=True))
    return [run.pk for run in runs[1:] if run.pk not in stored]


@pytest.mark.django_db
def test_large_runs_show_pending_tests_queue_them_once_then_the_whole_page(
    acme: Project, alice_client: Client, settings: Any
) -> None:
    cache.clear()
    runs = four_runs(acme, count=30)
    missing = missing_pairs(runs)
    assert missing  # the completion hook compared each run with its own default baseline only
    settings.EVALSITE_NWAY_INLINE_CASES = 10  # these 30-case runs count as large
    page = alice_client.get(nway_url(runs)).content.decode()
    assert PENDING in page and "Comparing 2 runs with the reference" in page
    assert 'hx-trigger="every 2s"' in page and 'hx-select="#nway-body"' in page
    assert "nway-best-cell" not in page  # no best run until every test is in
    assert "case_0009" in page  # the matrix is there at once
    assert missing_pairs(runs) == missing  # nothing computed during the request
    assert OrmQ.objects.count() == 1
    again = alice_client.get(nway_url(runs)).content.decode()
    assert PENDING in again and OrmQ.objects.count() == 1  # queued once, and the pending page is not cached

    assert tasks.nway_comparisons(runs[0].pk, missing) == len(missing)  # what the worker runs
    assert missing_pairs(runs) == []
    done = alice_client.get(nway_url(runs)).content.decode()
    assert PENDING not in done and done.count("nway-best-cell") == 1


@pytest.mark.django_db
def test_small_runs_are_compared_while_the_page_waits(acme: Project, alice_client: Client) -> None:
    cache.clear()
    runs = four_runs(acme, count=30)
    page = alice_client.get(nway_url(runs)).content.decode()
    assert PENDING not in page and page.count("nway-best-cell") == 1
    assert missing_pairs(runs) == [] and OrmQ.objects.count() == 0


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("cluster")
def test_a_real_cluster_computes_the_pending_comparisons(acme: Project, alice_client: Client, settings: Any) -> None:
    cache.clear()
    runs = four_runs(acme, count=30)
    settings.EVALSITE_NWAY_INLINE_CASES = 10
    assert PENDING in alice_client.get(nway_url(runs)).content.decode()
    wait_for(lambda: missing_pairs(runs) == [], 60, "the cluster did not compute the comparisons")
    done = alice_client.get(nway_url(runs)).content.decode()
    assert PENDING not in done and done.count("nway-best-cell") == 1
