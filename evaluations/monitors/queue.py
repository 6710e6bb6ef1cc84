"""Putting monitor work on the django-q2 queue: cheaply from ingest, and the schedules.

`traces_arrived` is what `POST /v1/traces` calls after storing a batch: one cached look-up
of whether the project has trace monitors (kept `CACHE_SECONDS`, dropped when a monitor is
saved) and, when it has, one task for the batch's traces, committed with them."""

from __future__ import annotations

from datetime import datetime

from django.core.cache import cache
from django.db import transaction

from evaluations.models import Monitor

CACHE_SECONDS = 30
SCORE_TASK = "evaluations.tasks.monitor_traces"
SWEEP_TASK = "evaluations.tasks.monitor_threads_sweep"
BACKFILL_TASK = "evaluations.tasks.monitor_backfill"
RETENTION_TASK = "evaluations.tasks.retention_sweep"
SWEEP_SCHEDULE = "evalsite: monitor threads"
RETENTION_SCHEDULE = "evalsite: retention"


def _key(project_id: int) -> str:
    return f"monitors:trace:{project_id}"


def has_trace_monitors(project_id: int) -> bool:
    cached = cache.get(_key(project_id))
    if cached is None:
        cached = Monitor.objects.filter(project_id=project_id, enabled=True, level=Monitor.Level.TRACE).exists()
        cache.set(_key(project_id), cached, CACHE_SECONDS)
    return bool(cached)


def monitors_changed(project_id: int) -> None:
    cache.delete(_key(project_id))


def traces_arrived(project_id: int, trace_pks: list[int]) -> bool:
    """Queue the scoring of these traces when the project has trace monitors; True if queued."""
    if not trace_pks or not has_trace_monitors(project_id):
        return False
    from django_q.tasks import async_task

    pks = sorted(trace_pks)
    transaction.on_commit(lambda: async_task(SCORE_TASK, pks, group=f"monitors-{project_id}"))
    return True


def backfill_queue(monitor_id: int, since: datetime, until: datetime) -> None:
    from django_q.tasks import async_task

    transaction.on_commit(lambda: async_task(BACKFILL_TASK, monitor_id, since.isoformat(), until.isoformat(),
                                             group=f"monitor-{monitor_id}"))


def schedules_ensure() -> None:
    """The thread sweep (every minute) and the retention sweep (hourly), created once."""
    from django_q.models import Schedule

    Schedule.objects.get_or_create(name=SWEEP_SCHEDULE, defaults={
        "func": SWEEP_TASK, "schedule_type": Schedule.MINUTES, "minutes": 1, "repeats": -1})
    Schedule.objects.get_or_create(name=RETENTION_SCHEDULE, defaults={
        "func": RETENTION_TASK, "schedule_type": Schedule.HOURLY, "repeats": -1})
