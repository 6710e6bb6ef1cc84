"""Creating and editing monitors: each save validates the spec, makes a new version when
what scores changes (filters, sample rate, criteria, level, idle time), and is audited."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from evaluations.audit import audit_record
from evaluations.models import AuditEvent, Monitor, MonitorVersion, Project
from evaluations.monitors.pending import monitor_saving
from evaluations.monitors.queue import backfill_queue, schedules_ensure
from evaluations.monitors.spec import MonitorSpec

_SCORING = ("level", "filters", "sample_rate", "criteria", "idle_seconds")


class MonitorError(ValueError):
    """A spec that cannot be saved: the messages say which field and why."""

    def __init__(self, messages: list[str]):
        self.messages = messages
        super().__init__("; ".join(messages))


def spec_of(monitor: Monitor) -> dict[str, Any]:
    return {"name": monitor.name, "level": monitor.level, "filters": monitor.filters,
            "sample_rate": monitor.sample_rate, "idle_seconds": monitor.idle_seconds, "enabled": monitor.enabled,
            "criteria": monitor.criteria}


def _apply(monitor: Monitor, spec: MonitorSpec) -> None:
    stored = spec.stored()
    monitor.name = spec.name
    monitor.enabled = spec.enabled
    for name in _SCORING:
        setattr(monitor, name, stored[name])


def monitor_create(*, project: Project, spec: MonitorSpec, user: Any) -> Monitor:
    monitor = Monitor(project=project, created_by=user if getattr(user, "is_authenticated", False) else None)
    _apply(monitor, spec)
    try:
        with transaction.atomic():
            monitor_saving(project.pk)
            monitor.save()
            MonitorVersion.objects.create(monitor=monitor, number=1, spec=spec_of(monitor),
                                          created_by=monitor.created_by)
            audit_record(project=project, actor=user, verb=AuditEvent.Verb.MONITOR_CREATED, obj=monitor,
                         summary=f"created monitor {monitor.name}", data={"spec": spec_of(monitor)})
    except IntegrityError:
        raise MonitorError([f"name: a monitor named {spec.name!r} exists in this project"]) from None
    _changed(project.pk)
    return monitor


def monitor_update(*, monitor: Monitor, spec: MonitorSpec, user: Any) -> Monitor:
    """Saves the spec; a change to what scores makes version N+1 (earlier scores keep theirs)."""
    before = spec_of(monitor)
    _apply(monitor, spec)
    after = spec_of(monitor)
    if after == before:
        return monitor
    new_version = any(before[k] != after[k] for k in _SCORING)
    try:
        with transaction.atomic():
            monitor_saving(monitor.project_id)
            if new_version:
                monitor.version += 1
                monitor.threads_swept_to = None
                MonitorVersion.objects.create(monitor=monitor, number=monitor.version, spec=after,
                                              created_by=user if getattr(user, "is_authenticated", False) else None)
            monitor.updated_at = timezone.now()
            monitor.save()
            audit_record(project=monitor.project, actor=user, verb=AuditEvent.Verb.MONITOR_EDITED, obj=monitor,
                         summary=f"edited monitor {monitor.name}"
                         + (f" (version {monitor.version})" if new_version else ""),
                         data={"before": before, "after": after})
    except IntegrityError:
        raise MonitorError([f"name: a monitor named {spec.name!r} exists in this project"]) from None
    _changed(monitor.project_id)
    return monitor


def monitor_backfill(*, monitor: Monitor, since: datetime, until: datetime, user: Any) -> None:
    if until <= since:
        raise MonitorError(["until: must be after since"])
    audit_record(project=monitor.project, actor=user, verb=AuditEvent.Verb.MONITOR_BACKFILLED, obj=monitor,
                 summary=f"backfilled monitor {monitor.name} from {since:%Y-%m-%d %H:%M} to {until:%Y-%m-%d %H:%M}",
                 data={"since": since.isoformat(), "until": until.isoformat(), "version": monitor.version})
    backfill_queue(monitor.pk, since, until)


def _changed(project_id: int) -> None:
    schedules_ensure()
