"""Retention: per project, received traces and monitor results older than `Retention.days`
are deleted by the hourly schedule, in small batches, each its own short transaction, so
ingest (which writes the newest traces) is never held up behind one long delete."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from evaluations.audit import audit_record
from evaluations.models import (
    AuditEvent,
    MonitorBucket,
    MonitorLatencyBucket,
    MonitorResult,
    Project,
    Retention,
    RetentionSweep,
    Span,
    Trace,
    TraceThread,
)

BATCH = 500
MAX_BATCHES = 2000  # per project and sweep: the next sweep goes on


def retention_set(*, project: Project, days: int | None, user: Any) -> Retention:
    from evaluations.monitors.queue import schedules_ensure

    retention, _ = Retention.objects.get_or_create(project=project)
    before = retention.days
    if before != days:
        retention.days = days
        retention.updated_at = timezone.now()
        retention.save()
        audit_record(project=project, actor=user, verb=AuditEvent.Verb.RETENTION_CHANGED, obj=retention,
                     summary=f"retention set to {f'{days} days' if days else 'keep everything'}",
                     data={"before": before, "after": days})
        schedules_ensure()
    return retention


def project_sweep(project_id: int, days: int, *, batch: int = BATCH) -> RetentionSweep:
    """Deletes one project's received traces (not those a run's case took) and monitor
    results older than `days` days; records what went."""
    cutoff = timezone.now() - timedelta(days=days)
    traces = results = 0
    old = Trace.objects.filter(project_id=project_id, received=True, run__isnull=True, received_at__lt=cutoff)
    for _ in range(MAX_BATCHES):
        pks = list(old.order_by("pk").values_list("pk", flat=True)[:batch])
        if not pks:
            break
        with transaction.atomic():
            results += MonitorResult.objects.filter(trace_id__in=pks).delete()[1].get(MonitorResult._meta.label, 0)
            Span.objects.filter(trace_id__in=pks).delete()
            traces += Trace.objects.filter(pk__in=pks).delete()[1].get(Trace._meta.label, 0)
    stale = MonitorResult.objects.filter(project_id=project_id, at__lt=cutoff)
    for _ in range(MAX_BATCHES):
        pks = list(stale.order_by("pk").values_list("pk", flat=True)[:batch])
        if not pks:
            break
        with transaction.atomic():
            results += MonitorResult.objects.filter(pk__in=pks).delete()[1].get(MonitorResult._meta.label, 0)
    TraceThread.objects.filter(project_id=project_id, last_at__lt=cutoff).delete()
    hour = cutoff.replace(minute=0, second=0, microsecond=0)
    MonitorBucket.objects.filter(monitor__project_id=project_id, hour__lt=hour).delete()
    MonitorLatencyBucket.objects.filter(monitor__project_id=project_id, hour__lt=hour).delete()
    return RetentionSweep.objects.create(project_id=project_id, cutoff=cutoff, traces=traces, results=results)


def retention_sweep() -> dict[str, int]:
    """Every project with a retention: what each sweep deleted, by project slug."""
    out: dict[str, int] = {}
    for retention in Retention.objects.filter(days__isnull=False).select_related("project"):
        assert retention.days is not None
        sweep = project_sweep(retention.project_id, retention.days)
        out[retention.project.slug] = sweep.traces
    return out
