"""A run's batches on the task queue (models.RunBatch), each with a lease of its own.

Sharing the queue: a run has at most EVALSITE_RUN_WINDOW batches handed to the broker at a
time; the rest wait for their turn in the database. A batch that ends hands its place on:
to the next waiting batch of the run with the least work left whose window has room (its
own run's, when it is alone; but a run that still has a batch out takes no new place while a
run with less work left has batches waiting), which joins the back of the queue. A batch that has worked
for EVALSITE_SLICE_SECONDS while another run's batch waits for a worker stops after its
chunk, puts the rest of its results back and hands its place on the same way. A run with
less than half the work left does not wait for the slice: the longer run's batch stops at its
next chunk (a quarter of a second, engine.CHUNK_SECONDS), and a task of the longer run taken
from the broker while such a run waits puts its batch back before it starts. So a short run
queued behind a long one starts within about a chunk and finishes in about its own time;
the long run keeps its place in the queue and goes on when the short one is done. Two runs
of about the same size share the workers slice by slice.

Lost work is found per batch: the worker holding a batch renews the batch's heartbeat (and
its run's, for the pages); a batch whose heartbeat is older than the lease, or that was
handed to the broker a lease ago and is neither there nor taken, is queued again by the
watchdog (services.resume_stalled_runs) while the run's other batches go on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Subquery
from django.utils import timezone

from evaluations.locks import write_transaction
from evaluations.models import Run, RunBatch

TASK = "evaluations.tasks.run_batch"
log = logging.getLogger(__name__)


_local = threading.local()


def _send(run_id: int, first: int, last: int, batch_id: int, claim: datetime) -> None:
    """Hand a batch task to the broker. With Q_CLUSTER `sync` (EVALSITE_Q_SYNC) django-q2 runs
    the task right here, and the batch, as it ends, hands its place on from inside this call:
    those sends are kept and made by the outermost call, one after another, instead of
    nesting a call per batch until Python's recursion limit."""
    from django_q.tasks import async_task

    waiting = getattr(_local, "waiting", None)
    if waiting is not None:
        waiting.append((run_id, first, last, batch_id, claim))
        return
    _local.waiting = waiting = [(run_id, first, last, batch_id, claim)]
    try:
        while waiting:
            run, first_pk, last_pk, pk, at = waiting.pop(0)
            # `claim`: when this send queued the batch. A task whose claim is no longer the
            # batch's (the watchdog queued the batch again, it yielded, or it ended) does nothing:
            # a broker that hands a dead worker's task out again cannot run a batch twice.
            try:
                async_task(TASK, run, first_pk, last_pk, pk, at.isoformat(), group=f"run-{run}")
            except Exception as exc:
                if not _tolerant_send():
                    raise
                _unsent(run, pk, at, exc)
    finally:
        _local.waiting = None


def _tolerant_send() -> bool:
    """A send after the commit to a broker of its own (Redis): a failure there loses no data
    and is put right by the watchdog. (The ORM broker sends inside the claiming transaction,
    and the sync queue runs the task itself: their errors are the caller's.)"""
    return not settings.Q_CLUSTER.get("sync") and "orm" not in settings.Q_CLUSTER


def _unsent(run_id: int, batch_id: int, claim: datetime, exc: Exception) -> None:
    """The broker refused the batch's task (Redis away): the batch waits again, marked, and the
    watchdog sends it once the broker answers (`unsent_dispatch`), instead of a lease later."""
    log.warning("run %s: could not hand batch %s to the broker (%s: %s); the watchdog sends it when it answers",
                run_id, batch_id, type(exc).__name__, exc)
    RunBatch.objects.filter(pk=batch_id, queued_at=claim).update(queued_at=None, unsent=True)


def unsent_dispatch() -> list[int]:
    """Send again the batches whose task the broker refused; the runs sent to."""
    runs = sorted(set(RunBatch.objects.filter(unsent=True, run__status=Run.Status.RUNNING)
                      .values_list("run_id", flat=True)))
    return [run_id for run_id in runs if batches_dispatch(run_id)]


def _send_after_claim(run_id: int, first: int, last: int, batch_id: int, claim: datetime) -> None:
    """Send a batch just claimed in the caller's transaction. With the ORM broker the task's row
    is written in that transaction too (the claim, and the batch ending or yielding that made
    room for it, are one commit); a Redis broker, or the sync queue that runs the task right
    here, gets it once the claim is committed, so no worker can take a task whose claim it
    cannot see yet."""
    if "orm" in settings.Q_CLUSTER and not settings.Q_CLUSTER.get("sync"):
        _send(run_id, first, last, batch_id, claim)
    else:
        transaction.on_commit(lambda: _send(run_id, first, last, batch_id, claim))


def batches_create(run_id: int, ranges: Iterable[tuple[int, int]]) -> None:
    """The run's batches, replacing any it had: all waiting for their turn."""
    with transaction.atomic():
        RunBatch.objects.filter(run_id=run_id).delete()
        RunBatch.objects.bulk_create([RunBatch(run_id=run_id, first_pk=first, last_pk=last) for first, last in ranges])


def batches_dispatch(run_id: int, slots: int | None = None) -> int:
    """Hand up to `slots` of the run's waiting batches to the broker (default: as many as its
    window has room for), first results first; returns how many. Each is claimed with a
    conditional update, so two processes dispatching at once never send one batch twice."""
    if slots is None:
        slots = settings.EVALSITE_RUN_WINDOW - RunBatch.objects.filter(run_id=run_id, queued_at__isnull=False).count()
    if slots <= 0:
        return 0
    sent = 0
    with transaction.atomic():  # one commit for the claims and (ORM broker) the tasks
        waiting = list(RunBatch.objects.filter(run_id=run_id, queued_at=None).order_by("first_pk")
                       .values_list("pk", "first_pk", "last_pk")[:slots])
        for pk, first, last in waiting:
            claim = timezone.now()
            if RunBatch.objects.filter(pk=pk, queued_at=None).update(queued_at=claim, heartbeat_at=None, owner="",
                                                                     unsent=False):
                _send_after_claim(run_id, first, last, pk, claim)
                sent += 1
    return sent


def batch_requeue(batch: RunBatch) -> bool:
    """Queue a lost batch again, unless someone else did (or its worker spoke) since it was read."""
    claim = timezone.now()
    with transaction.atomic():
        moved = RunBatch.objects.filter(pk=batch.pk, queued_at=batch.queued_at, heartbeat_at=batch.heartbeat_at
                                        ).update(queued_at=claim, heartbeat_at=None, owner="", unsent=False)
        if moved:
            _send_after_claim(batch.run_id, batch.first_pk, batch.last_pk, batch.pk, claim)
    return bool(moved)


def batch_heartbeat(batch_id: int | None, owner: str, claim: datetime | None = None) -> bool:
    """The worker holding the batch is alive (its lease starts, or goes on). With the task's
    `claim`, only while the batch is still queued under it: False when the batch was queued
    again since (or ended), so that task must stop."""
    if batch_id is None:
        return True
    held = RunBatch.objects.filter(pk=batch_id)
    if claim is not None:
        held = held.filter(queued_at=claim)
    return bool(held.update(heartbeat_at=timezone.now(), owner=owner)) or claim is None


def claim_of(value: Any) -> datetime | None:
    """A task's claim as `_send` wrote it (ISO 8601); None for tasks queued before claims."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def hand_on(from_run: int) -> int:
    """A batch of `from_run` ended or yielded: queue the next waiting batch of the running
    run with the least work left whose window has room. While a run with less work left has
    batches waiting, `from_run` takes no new place if it still has a batch out: the longer
    run keeps one batch going, and the workers go to the shorter. Returns the run whose
    batch was queued (0: none)."""
    waiting = (Run.objects.filter(status=Run.Status.RUNNING, pk__in=RunBatch.objects.filter(queued_at=None)
                                  .values("run_id"))
               .annotate(left=_left()).order_by("left", "pk").values_list("pk", flat=True))
    for position, run_id in enumerate(waiting[:20]):
        out = RunBatch.objects.filter(run_id=run_id, queued_at__isnull=False).count()
        if run_id == from_run and out and position:
            continue
        if batches_dispatch(run_id, min(1, settings.EVALSITE_RUN_WINDOW - out)):
            return int(run_id)
    return 0


def batch_done(run_id: int, batch_id: int | None) -> None:
    """The batch ended (or found its run finished): its place is handed on."""
    if batch_id is not None:
        with write_transaction():  # the place freed and handed on in one commit
            RunBatch.objects.filter(pk=batch_id).delete()
            hand_on(run_id)


def batch_yield(run_id: int, batch_id: int, next_pk: int) -> None:
    """The batch stops for another run's turn: what it has not settled waits again, and its
    place is handed on."""
    with write_transaction():
        RunBatch.objects.filter(pk=batch_id).update(first_pk=next_pk, queued_at=None, heartbeat_at=None, owner="")
        hand_on(run_id)


def _left() -> Any:
    return F("cases_total") - F("cases_done") - F("cases_missing") - F("cases_not_runnable")


def shorter_waiting(run_id: int) -> bool:
    """Whether a run with less than half `run_id`'s work left has a batch handed to the broker
    that no worker has taken yet (within the lease). Such a run does not wait for a slice:
    the batch of the longer run stops at its next chunk (or, when its task is only starting,
    before it builds anything), so a short run behind a long one starts within about a chunk."""
    mine = Run.objects.filter(pk=run_id).annotate(left=_left()).values("left")
    waiting = _waiting_elsewhere(run_id)
    return (Run.objects.filter(status=Run.Status.RUNNING, pk__in=waiting.values("run_id"))
            .annotate(twice_left=_left() * 2).filter(twice_left__lt=Subquery(mine)).exists())


def others_waiting(run_id: int) -> bool:
    """Whether another run has a batch handed to the broker that no worker has taken yet
    (within the lease: one the broker lost is the watchdog's, not a reason to yield)."""
    return _waiting_elsewhere(run_id).exists()


def _waiting_elsewhere(run_id: int) -> Any:
    """Other runs' batches handed to the broker within the lease and taken by no worker yet."""
    since = timezone.now() - timedelta(seconds=settings.EVALSITE_LEASE_SECONDS)
    return RunBatch.objects.filter(queued_at__gte=since, heartbeat_at=None).exclude(run_id=run_id)
