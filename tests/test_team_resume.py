"""The watchdog and cancel/resume rules the team server relies on, in-process on the ORM
broker (tests/team/ proves them again on PostgreSQL and Redis with real clusters)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django_q.models import OrmQ

from evaluations.models import CaseResult, Project, Run
from evaluations.runs import services as runs
from evaluations.schemas.outputs import AgentOutput
from tests.engine_helpers import import_demo, perfect_outputs


def _queued_run(project: Project) -> Run:
    version = import_demo(project)
    run = runs.run_create(project=project, version=version, target_kind="uploaded",
                          outputs=[AgentOutput.model_validate(o) for o in perfect_outputs()], enqueue=False)
    runs.run_enqueue(run.pk)  # its batches wait in the broker: no cluster runs in this test
    return run


@pytest.mark.django_db
def test_a_run_whose_batches_wait_in_the_queue_is_not_queued_again(acme: Project, settings: Any) -> None:
    settings.EVALSITE_LEASE_SECONDS = 0  # every running run's heartbeat is stale
    settings.EVALSITE_BATCH_SIZE = 3
    run = _queued_run(acme)
    waiting = OrmQ.objects.count()
    assert waiting == 3
    assert runs.queued_run_ids() == {run.pk}
    assert runs.resume_stalled_runs() == []  # behind other work, not lost
    assert OrmQ.objects.count() == waiting


@pytest.mark.django_db
def test_batches_a_dead_cluster_had_taken_are_queued_again(acme: Project, settings: Any) -> None:
    settings.EVALSITE_LEASE_SECONDS = 0
    settings.EVALSITE_BATCH_SIZE = 3
    run = _queued_run(acme)
    # A cluster took them (the ORM broker locks a task for `retry` seconds) and was killed.
    OrmQ.objects.update(lock=timezone.now() + timedelta(seconds=3000))
    assert runs.queued_run_ids() == set()
    assert runs.resume_stalled_runs() == [run.pk]
    assert OrmQ.objects.filter(lock__lte=timezone.now()).count() == 3


@pytest.mark.django_db
def test_a_cancelled_run_says_why_its_results_are_pending_and_retry_finishes_it(acme: Project) -> None:
    run = _queued_run(acme)
    first = CaseResult.objects.filter(run=run).order_by("pk").values_list("pk", flat=True)[:3]
    assert runs.run_batch(run.pk, first[0], first[2]) == 3  # some work done before the cancel
    assert runs.run_cancel(run=run)
    pending = CaseResult.objects.filter(run=run, status="pending")
    assert pending.count() == 5
    assert set(pending.values_list("error", flat=True)) == {runs.CANCELLED_BEFORE_RUN}

    assert runs.run_retry_failed(run=run) == 0  # nothing failed: it only resumes
    assert not CaseResult.objects.filter(run=run).exclude(error="").exists()
    run = runs.run_execute_here(run.pk)
    assert run.status == Run.Status.COMPLETED
    assert (run.cases_done, run.cases_failed, run.cases_errored) == (8, 0, 0)
    assert CaseResult.objects.filter(run=run, status="passed").count() == 8
