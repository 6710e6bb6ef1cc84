"""The watchdog and cancel/resume rules the team server relies on, in-process on the ORM
broker (tests/team/ proves them again on PostgreSQL and Redis with real clusters)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django_q.models import OrmQ

from evaluations.models import CaseResult, Project, Run, RunBatch
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
    settings.EVALSITE_RUN_WINDOW = 3
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
    settings.EVALSITE_RUN_WINDOW = 3
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


@pytest.mark.django_db
def test_a_batch_whose_worker_died_is_queued_again_while_the_runs_other_batches_go_on(
        acme: Project, settings: Any) -> None:
    settings.EVALSITE_LEASE_SECONDS = 60
    settings.EVALSITE_BATCH_SIZE = 3
    settings.EVALSITE_RUN_WINDOW = 3
    run = _queued_run(acme)
    OrmQ.objects.update(lock=timezone.now() + timedelta(seconds=3000))  # a cluster took all three
    dead, alive, _ = RunBatch.objects.filter(run=run).order_by("first_pk")
    long_ago = timezone.now() - timedelta(seconds=120)
    # The worker holding `dead` was killed two leases ago; the one holding `alive` works on,
    # renewing its batch and its run.
    RunBatch.objects.filter(pk=dead.pk).update(queued_at=long_ago, heartbeat_at=long_ago, owner="host:1")
    RunBatch.objects.filter(pk=alive.pk).update(queued_at=long_ago, heartbeat_at=timezone.now(), owner="host:2")
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())

    assert runs.resume_stalled_runs() == [run.pk]
    assert runs.queued_work() == ({run.pk}, {dead.pk})  # that batch alone is in the broker again
    assert runs.resume_stalled_runs() == []  # and now waits there: not queued twice
    assert OrmQ.objects.filter(lock__lte=timezone.now()).count() == 1


@pytest.mark.django_db
def test_a_run_whose_batches_all_wait_for_a_turn_nothing_will_give_is_dispatched(
        acme: Project, settings: Any) -> None:
    settings.EVALSITE_LEASE_SECONDS = 0
    settings.EVALSITE_BATCH_SIZE = 3
    settings.EVALSITE_RUN_WINDOW = 1
    run = _queued_run(acme)
    # The batch that was to hand on its place lost its connection for good as it ended.
    OrmQ.objects.all().delete()
    RunBatch.objects.filter(run=run, queued_at__isnull=False).delete()
    assert RunBatch.objects.filter(run=run, queued_at=None).count() == 2
    assert runs.resume_stalled_runs() == [run.pk]
    assert OrmQ.objects.count() == 1 and runs.queued_run_ids() == {run.pk}
