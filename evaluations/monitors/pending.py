"""What the trace monitors have yet to score, kept in the database (`MonitorPending`).

Ingest writes a row per stored trace in the transaction that stores it, when the project has
an enabled trace monitor, and queues a task for the request's traces after the commit. The
task scores the rows it names and deletes them; the sweep (every minute on the clusters'
schedule, and every watchdog tick of `manage.py up --team` / `manage.py watchdog`) scores the
rows older than `EVALSITE_MONITOR_SWEEP_GRACE_SECONDS`: those whose task was lost (Redis
restarted, a worker killed, the broker away when it was queued). Results are unique per
(monitor, version, trace), so a trace scored by both writes one result.

Whether the project has a trace monitor is read in the storing transaction, after a key-share
lock on the project's row; saving a monitor takes the row's update lock first
(`monitor_saving`). So a monitor saved (created, enabled, edited) takes effect for every trace
whose transaction commits after the save, in every process, whatever the cache: an ingest
that read "no monitor" holds the lock until it commits, and the save waits for it.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from evaluations.models import Monitor, MonitorPending, Project

log = logging.getLogger(__name__)

CHUNK = 500


def _has_trace_monitors_locked(project_id: int) -> bool:
    monitor, project = Monitor._meta.db_table, Project._meta.db_table
    exists = (f"SELECT EXISTS (SELECT 1 FROM {monitor} m WHERE m.project_id = p.id AND m.enabled "  # noqa: S608
              f"AND m.level = %s) FROM {project} p WHERE p.id = %s")
    if connection.vendor == "postgresql":
        exists += " FOR KEY SHARE OF p"  # SQLite: the storing transaction already holds the write lock
    with connection.cursor() as cursor:
        cursor.execute(exists, [Monitor.Level.TRACE, project_id])
        row = cursor.fetchone()
    return bool(row and row[0])


def pending_record(project_id: int, trace_pks: list[int]) -> bool:
    """In the transaction storing these traces: a pending row for each, when the project has
    an enabled trace monitor (True then). A trace already waiting is touched instead."""
    if not trace_pks or not _has_trace_monitors_locked(project_id):
        return False
    table = MonitorPending._meta.db_table
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    per = 200
    with connection.cursor() as cursor:
        for start in range(0, len(trace_pks), per):
            chunk = trace_pks[start:start + per]
            cursor.execute(
                f"INSERT INTO {table} (trace_id, project_id, created_at, touches) VALUES "  # noqa: S608
                + ", ".join(["(%s, %s, %s, 0)"] * len(chunk))
                + f" ON CONFLICT (trace_id) DO UPDATE SET touches = {table}.touches + 1",
                [v for pk in chunk for v in (pk, project_id, now)])
    return True


def monitor_saving(project_id: int) -> None:
    """In the transaction saving a monitor of the project: wait for the ingests in flight
    (they read the monitors before this save) and make later ones read after it."""
    list(Project.objects.select_for_update().filter(pk=project_id).values_list("pk", flat=True))


def pending_score(trace_pks: list[int]) -> int:
    """Score the pending traces among `trace_pks` with every enabled trace monitor, and clear
    their rows (unless a request touched them since they were read); how many results were new."""
    from evaluations.monitors.scoring import score_traces

    rows = list(MonitorPending.objects.filter(trace_id__in=trace_pks).values_list("trace_id", "touches"))
    if not rows:
        return 0
    written = score_traces([pk for pk, _ in rows])
    by_touches: dict[int, list[int]] = defaultdict(list)
    for pk, touches in rows:
        by_touches[touches].append(pk)
    for touches, pks in by_touches.items():
        MonitorPending.objects.filter(trace_id__in=pks, touches=touches).delete()
    return written


@dataclass(frozen=True)
class Swept:
    traces: int  # pending traces looked at
    results: int  # results written
    left: int  # still pending past the grace when the time budget ran out (0: all done)


def pending_sweep(now: datetime | None = None, budget_seconds: float = 40.0) -> Swept:
    """Score the traces pending for longer than the grace (their task was lost, or is very
    late), oldest first, in chunks, for at most `budget_seconds`. Reads the pending rows by
    their time index only: its cost follows what waits, not what is stored."""
    grace = timedelta(seconds=settings.EVALSITE_MONITOR_SWEEP_GRACE_SECONDS)
    before = (now or timezone.now()) - grace
    started = time.monotonic()
    traces = results = 0
    due = MonitorPending.objects.filter(created_at__lt=before).order_by("created_at", "trace_id")
    after: tuple[datetime, int] | None = None  # a row touched while it was scored stays: go past it
    while True:
        chunk = due if after is None else due.filter(
            Q(created_at__gt=after[0]) | Q(created_at=after[0], trace_id__gt=after[1]))
        rows = list(chunk.values_list("created_at", "trace_id")[:CHUNK])
        if not rows:
            left = 0
            break
        pks = [pk for _, pk in rows]
        results += pending_score(pks)
        traces += len(pks)
        after = rows[-1]
        if time.monotonic() - started > budget_seconds:
            left = MonitorPending.objects.filter(created_at__lt=before).count()
            break
    if traces:
        log.warning("monitors: the sweep scored %s traces whose task was lost or late (%s new results)",
                    traces, results)
    return Swept(traces, results, left)


@dataclass(frozen=True)
class Waiting:
    count: int
    oldest: datetime | None

    @property
    def age(self) -> str:
        """How long the oldest has waited, for the page: "12 s", "3 min", "2 h"."""
        if self.oldest is None:
            return ""
        seconds = max(0, int((timezone.now() - self.oldest).total_seconds()))
        if seconds < 120:
            return f"{seconds} s"
        return f"{seconds // 60} min" if seconds < 7200 else f"{seconds // 3600} h"


def pending_waiting(project_id: int) -> Waiting:
    """The project's traces waiting for its trace monitors, and since when the oldest waits."""
    rows = MonitorPending.objects.filter(project_id=project_id)
    oldest = rows.order_by("created_at").values_list("created_at", flat=True).first()
    return Waiting(rows.count() if oldest is not None else 0, oldest)
