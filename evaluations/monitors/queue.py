"""Putting monitor work on the django-q2 queue: cheaply from ingest, and the schedules.

`traces_arrived` is what `POST /v1/traces` calls in the transaction storing a batch: when the
project has an enabled trace monitor, a pending row per trace (the ledger,
`monitors/pending.py`) and, after the commit, one task for the batch's traces (the courier:
if it is lost, the sweep scores the rows)."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from evaluations.monitors.pending import pending_record

log = logging.getLogger(__name__)

SCORE_TASK = "evaluations.tasks.monitor_traces"
SWEEP_TASK = "evaluations.tasks.monitor_threads_sweep"
BACKFILL_TASK = "evaluations.tasks.monitor_backfill"
RETENTION_TASK = "evaluations.tasks.retention_sweep"
PENDING_TASK = "evaluations.tasks.monitor_pending_sweep"
SWEEP_SCHEDULE = "evalsite: monitor threads"
PENDING_SCHEDULE = "evalsite: monitor pending"
RETENTION_SCHEDULE = "evalsite: retention"


def traces_arrived(project_id: int, trace_pks: list[int]) -> bool:
    """In the storing transaction: record these traces as pending when the project has an
    enabled trace monitor, and queue their scoring after the commit; True if they are pending.
    A broker that refuses the task loses nothing: the sweep scores the rows."""
    if not pending_record(project_id, trace_pks):
        return False
    pks = sorted(trace_pks)

    def send() -> None:
        from django_q.tasks import async_task

        try:
            async_task(SCORE_TASK, pks, group=f"monitors-{project_id}")
        except Exception as exc:  # the broker is away: the stored traces wait for the sweep
            log.warning("monitors: could not queue the scoring of %s traces (%s: %s); the sweep will score them",
                        len(pks), type(exc).__name__, exc)

    transaction.on_commit(send)
    return True


def backfill_queue(monitor_id: int, since: datetime, until: datetime) -> None:
    from django_q.tasks import async_task

    transaction.on_commit(lambda: async_task(BACKFILL_TASK, monitor_id, since.isoformat(), until.isoformat(),
                                             group=f"monitor-{monitor_id}"))


def schedules_ensure() -> None:
    """The thread and pending sweeps (every minute) and the retention sweep (hourly), created once."""
    from django_q.models import Schedule

    Schedule.objects.get_or_create(name=SWEEP_SCHEDULE, defaults={
        "func": SWEEP_TASK, "schedule_type": Schedule.MINUTES, "minutes": 1, "repeats": -1})
    Schedule.objects.get_or_create(name=PENDING_SCHEDULE, defaults={
        "func": PENDING_TASK, "schedule_type": Schedule.MINUTES, "minutes": 1, "repeats": -1})
    Schedule.objects.get_or_create(name=RETENTION_SCHEDULE, defaults={
        "func": RETENTION_TASK, "schedule_type": Schedule.HOURLY, "repeats": -1})
