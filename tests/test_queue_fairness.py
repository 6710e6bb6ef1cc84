"""Runs share the task queue fairly (evaluations/runs/queue.py): a run has at most
EVALSITE_RUN_WINDOW batches in the broker, each batch that ends hands its place to the run's
next, and a batch that has worked its slice yields to another run's waiting batch. So a
short run started behind a long one is not held up by the whole of it: on a real qcluster
it finishes while the long run still has work pending."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from evaluations.models import CaseResult, Project, Run, RunBatch
from evaluations.runs import services as runs
from evaluations.schemas.outputs import AgentOutput
from tests.engine_helpers import import_demo, perfect_outputs
from tests.queue_helpers import assert_each_result_once, qcluster, wait_for

SLOW_AGENT = {"callable": "evaluations.demo.agent:respond",
              "metadata": {"faults": {"slow_answer_seconds": 0.2, "rate": 1.0}}, "timeout_seconds": 10}


def _uploaded(project: Project, iterations: int = 1, **kwargs: Any) -> Run:
    version = import_demo(project)
    outputs = [AgentOutput.model_validate(o) for i in range(iterations) for o in perfect_outputs(i)]
    return runs.run_create(project=project, version=version, target_kind="uploaded", outputs=outputs, **kwargs)


def _queue_order() -> list[int]:
    """The run of each task waiting in the broker, in the order clusters take them."""
    return [SignedPackage.loads(p)["args"][0] for p in OrmQ.objects.order_by("id").values_list("payload", flat=True)]


@pytest.mark.django_db
def test_a_run_has_at_most_its_window_of_batches_in_the_queue(acme: Project, settings: Any) -> None:
    settings.EVALSITE_BATCH_SIZE = 2
    settings.EVALSITE_RUN_WINDOW = 2
    long = _uploaded(acme, iterations=5, enqueue=False)
    assert runs.run_enqueue(long.pk) == 20  # batches
    short = _uploaded(acme, enqueue=False)
    runs.run_enqueue(short.pk)
    # The short run's batches come right after the long run's window, not after its 20 batches.
    assert _queue_order() == [long.pk, long.pk, short.pk, short.pk]
    assert RunBatch.objects.filter(run=long, queued_at=None).count() == 18


@pytest.mark.django_db
def test_a_batch_that_ends_hands_its_place_to_the_runs_next(acme: Project, settings: Any) -> None:
    settings.EVALSITE_BATCH_SIZE = 2
    settings.EVALSITE_RUN_WINDOW = 1
    run = _uploaded(acme, enqueue=False)
    runs.run_enqueue(run.pk)
    for _ in range(4):  # as a cluster would: take the task at the head of the queue, run it
        task = OrmQ.objects.order_by("id").first()
        assert task is not None and OrmQ.objects.count() == 1
        task.delete()
        runs.run_batch(*SignedPackage.loads(task.payload)["args"])
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and not OrmQ.objects.exists()
    assert not RunBatch.objects.exists()
    assert_each_result_once(run)


@pytest.mark.django_db
def test_a_batch_past_its_slice_yields_to_another_runs_waiting_batch(acme: Project, settings: Any) -> None:
    settings.EVALSITE_BATCH_SIZE = 1000
    settings.EVALSITE_SLICE_SECONDS = 0
    long = _uploaded(acme, iterations=40, enqueue=False)  # 320 results: two chunks of uploaded outputs
    runs.run_enqueue(long.pk)
    [task] = OrmQ.objects.all()
    task.delete()
    args = SignedPackage.loads(task.payload)["args"]
    alone = runs.run_batch(*args)
    assert alone == 320  # nobody waits: the slice does not matter

    again = _uploaded(acme, iterations=40, enqueue=False)
    runs.run_enqueue(again.pk)
    [task] = OrmQ.objects.all()
    task.delete()
    other = _uploaded(acme, iterations=25, enqueue=False)  # 200 results: not much shorter, so it waits a slice
    runs.run_enqueue(other.pk)  # waits in the broker
    assert runs.run_batch(*SignedPackage.loads(task.payload)["args"]) == 250  # one chunk, then its turn is over
    assert _queue_order() == [other.pk, again.pk]  # the rest queues behind the other run
    rest = RunBatch.objects.get(run=again)
    assert rest.queued_at is not None and rest.heartbeat_at is None
    assert CaseResult.objects.filter(run=again, status="pending", pk__gte=rest.first_pk).count() == 70


@pytest.mark.django_db
def test_a_task_taken_while_a_much_shorter_run_waits_puts_its_batch_back_untouched(
        acme: Project, settings: Any) -> None:
    settings.EVALSITE_BATCH_SIZE = 1000
    settings.EVALSITE_SLICE_SECONDS = 100
    long = _uploaded(acme, iterations=20, enqueue=False)  # 160 results
    runs.run_enqueue(long.pk)
    [task] = OrmQ.objects.all()
    task.delete()  # a cluster has taken it (prefetched) ...
    short = _uploaded(acme, enqueue=False)  # ... when 8 results are queued behind it
    runs.run_enqueue(short.pk)
    assert runs.run_batch(*SignedPackage.loads(task.payload)["args"]) == 0  # no slice: the short run first
    assert _queue_order() == [short.pk, long.pk]
    assert CaseResult.objects.filter(run=long, status="pending").count() == 160
    batch = RunBatch.objects.get(run=long)
    assert batch.queued_at is not None and batch.heartbeat_at is None and batch.first_pk == min(
        CaseResult.objects.filter(run=long).values_list("pk", flat=True))


_queued_behind: list[Any] = []


def answer_and_queue_a_short_run(request: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """A Python target (called in the worker's own thread) whose first answer is given while a
    short run is queued behind its batch."""
    from evaluations.demo.agent import respond
    if _queued_behind and not _queued_behind[1:]:
        _queued_behind.append(_uploaded(_queued_behind[0], enqueue=False))
        runs.run_enqueue(_queued_behind[1].pk)
    return respond(request, **kwargs)


@pytest.mark.django_db
def test_a_much_shorter_run_queued_during_a_chunk_stops_the_batch_at_the_chunks_end(
        acme: Project, settings: Any) -> None:
    settings.EVALSITE_BATCH_SIZE = 1000
    settings.EVALSITE_SLICE_SECONDS = 100  # the slice has nothing to do with it
    version = import_demo(acme)
    long = runs.run_create(project=acme, version=version, target_kind="python", iterations=5, enqueue=False,
                           target={"callable": f"{__name__}:answer_and_queue_a_short_run", "timeout_seconds": None})
    runs.run_enqueue(long.pk)
    [task] = OrmQ.objects.all()
    task.delete()
    _queued_behind[:] = [acme]
    try:
        settled = runs.run_batch(*SignedPackage.loads(task.payload)["args"])
    finally:
        short = _queued_behind[1]
        _queued_behind.clear()
    assert settled == 1  # its first chunk is one answer (the target's concurrency); then the short run's turn
    assert _queue_order() == [short.pk, long.pk]
    assert CaseResult.objects.filter(run=long, status="pending").count() == 39


@pytest.mark.django_db
def test_a_task_sent_again_by_the_broker_after_the_watchdog_requeued_its_batch_does_nothing(
        acme: Project, settings: Any) -> None:
    """A dead worker's task handed out again by the ORM broker (its `retry` ran out) after the
    watchdog queued the batch anew: the old task's claim is no longer the batch's, so it asks
    no agent and writes nothing, and the batch stays the new task's (seen in the team test as
    cases asked twice)."""
    settings.EVALSITE_BATCH_SIZE = 1000
    run = _uploaded(acme, iterations=2, enqueue=False)
    runs.run_enqueue(run.pk)
    [first] = OrmQ.objects.all()
    first.delete()
    stale = SignedPackage.loads(first.payload)["args"]
    batch = RunBatch.objects.get(run=run)
    assert len(stale) == 5 and stale[3] == batch.pk and stale[4] == batch.queued_at.isoformat()
    from evaluations.runs import queue

    assert queue.batch_requeue(batch)  # the watchdog: the worker went silent for a lease
    [second] = OrmQ.objects.all()
    second.delete()
    fresh = SignedPackage.loads(second.payload)["args"]
    assert fresh[4] != stale[4]
    assert runs.run_batch(*stale) == 0  # the old claim: nothing asked, nothing written
    assert CaseResult.objects.filter(run=run).exclude(status="pending").count() == 0
    assert RunBatch.objects.filter(pk=batch.pk).exists()  # still the new task's batch
    assert runs.run_batch(*fresh) == 16
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and not RunBatch.objects.exists()
    assert runs.run_batch(*fresh) == 0  # and once it ended, a copy of the new task does nothing either
    assert_each_result_once(run)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_short_run_behind_a_long_one_finishes_while_the_long_one_still_works(
        acme: Project, tmp_path: Path, settings: Any) -> None:
    settings.EVALSITE_BATCH_SIZE = 4
    settings.EVALSITE_RUN_WINDOW = 2
    settings.EVALSITE_SLICE_SECONDS = 0.5
    with qcluster(tmp_path, EVALSITE_BATCH_SIZE="4", EVALSITE_SLICE_SECONDS="0.5"):
        version = import_demo(acme)
        # 80 answers of 0.2 s in 20 batches: about 8 s on two workers
        long = runs.run_create(project=acme, version=version, target_kind="python", iterations=10,
                               target=SLOW_AGENT)
        wait_for(lambda: Run.objects.get(pk=long.pk).cases_done >= 2, 60, "the long run did not start")
        short = _uploaded(acme)
        wait_for(lambda: Run.objects.get(pk=short.pk).status == "completed", 60,
                 lambda: f"the short run did not finish\n{(tmp_path / 'qcluster.log').read_text()[-3000:]}")
        pending_when_short_finished = CaseResult.objects.filter(run=long, status="pending").count()
        wait_for(lambda: Run.objects.get(pk=long.pk).status == "completed", 120, "the long run did not finish")
    assert pending_when_short_finished > 0  # before the fix: behind all 20 of its batches
    for run in (short, long):
        run.refresh_from_db()
        assert_each_result_once(run)
    assert not RunBatch.objects.exists()


@pytest.mark.django_db
def test_while_a_shorter_run_waits_the_longer_one_keeps_one_batch_out(acme: Project, settings: Any) -> None:
    settings.EVALSITE_BATCH_SIZE = 2
    settings.EVALSITE_RUN_WINDOW = 2
    long = _uploaded(acme, iterations=5, enqueue=False)  # 20 batches
    runs.run_enqueue(long.pk)
    short = _uploaded(acme, enqueue=False)  # 4 batches
    runs.run_enqueue(short.pk)
    assert _queue_order() == [long.pk, long.pk, short.pk, short.pk]

    def take_and_run() -> None:  # as a worker does with the task at the head of the queue
        task = OrmQ.objects.order_by("id").first()
        assert task is not None
        task.delete()
        runs.run_batch(*SignedPackage.loads(task.payload)["args"])

    take_and_run()  # the long run's first batch ends: the short run has less left, so no new place
    assert _queue_order() == [long.pk, short.pk, short.pk]
    take_and_run()  # its second: the last it has out, so it keeps its place
    assert _queue_order() == [short.pk, short.pk, long.pk]
    take_and_run()  # the short run's batch ends: its next takes the place
    assert _queue_order() == [short.pk, long.pk, short.pk]


@pytest.mark.django_db
def test_with_a_sync_queue_each_batch_hands_on_without_nesting_into_the_next(
        acme: Project, settings: Any, monkeypatch: Any) -> None:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)  # EVALSITE_Q_SYNC: django-q2 runs each task where it is queued
    settings.EVALSITE_BATCH_SIZE = 1
    settings.EVALSITE_RUN_WINDOW = 1
    run = _uploaded(acme, iterations=15, enqueue=False)
    runs.run_enqueue(run.pk)  # 120 batches, each handing its place to the next as it ends
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert_each_result_once(run)
    assert not RunBatch.objects.exists()
