"""The audit log: who did what when, per project and per object.

`audit_record` is called by the service or view that made the change, right after it
succeeded, inside the same transaction when there is one. Summaries are plain text
(templates escape them); before/after values go into `data`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.db import models

from .models import AuditEvent, EvalSet, Experiment, Project, Run

if TYPE_CHECKING:
    from evaluations.evalsets.services import ImportOutcome

ACTIVITY_PAGE_SIZE = 50


def object_type_of(obj: models.Model) -> str:
    """"run", "evalset", "triage", "comment", "membership", "apitoken", ..."""
    return obj._meta.model_name or ""


def audit_record(
    *,
    project: Project | None,
    actor: Any,
    verb: str,
    obj: models.Model | None = None,
    summary: str,
    data: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one event. `actor` is a user, or None for the CLI and background work."""
    if actor is not None and not getattr(actor, "is_authenticated", False):
        actor = None
    return AuditEvent.objects.create(
        project=project,
        actor=actor,
        verb=verb,
        object_type=object_type_of(obj) if obj is not None else "",
        object_id=str(obj.pk) if obj is not None else "",
        summary=summary[:500],
        data=data or {},
    )


def record_uploads(*, project: Project, actor: Any, outcomes: Sequence[ImportOutcome], via: str) -> None:
    """One event per version the upload created; re-uploading identical content records nothing."""
    for o in outcomes:
        if not o.created:
            continue
        audit_record(project=project, actor=actor, verb=AuditEvent.Verb.EVALSET_UPLOADED, obj=o.evalset,
                     summary=f"uploaded {o.evalset.display_name} v{o.version.number} "
                             f"({o.case_count} cases, {o.format}) through {via}",
                     data={"version": o.version.number, "version_id": o.version.pk, "format": o.format,
                           "cases": o.case_count})


def record_rename(*, evalset: EvalSet, actor: Any, before: str, via: str) -> AuditEvent:
    """An eval set renamed: the old name is kept here, in the set's history."""
    return audit_record(project=evalset.project, actor=actor, verb=AuditEvent.Verb.EVALSET_RENAMED, obj=evalset,
                        summary=f"renamed eval set “{before}” to “{evalset.display_name}” through {via}",
                        data={"from": before, "to": evalset.display_name})


def record_experiment(*, experiment: Experiment, runs: Sequence[Run], actor: Any, via: str) -> None:
    """An experiment started: its own event, and each of its runs' as any run started."""
    audit_record(project=experiment.project, actor=actor, verb=AuditEvent.Verb.EXPERIMENT_STARTED, obj=experiment,
                 summary=f"started experiment #{experiment.pk}{f' {experiment.name}' if experiment.name else ''} "
                         f"({len(runs)} variants) through {via}", data={"runs": [run.pk for run in runs]})
    for run in runs:
        record_run(run=run, actor=actor, verb=AuditEvent.Verb.RUN_STARTED, via=via)


def record_run(*, run: Run, actor: Any, verb: str, via: str, data: dict[str, Any] | None = None) -> AuditEvent:
    """A run started, cancelled or retried."""
    what: str = {str(AuditEvent.Verb.RUN_STARTED): "started", str(AuditEvent.Verb.RUN_CANCELLED): "cancelled",
            str(AuditEvent.Verb.RUN_RETRIED): "retried the failed results of"}.get(verb, verb)
    name = f" ({run.name})" if run.name else ""
    return audit_record(project=run.project, actor=actor, verb=verb, obj=run,
                        summary=f"{what} run #{run.pk}{name} through {via}", data=data)


@dataclass(frozen=True)
class EventRow:
    pk: int
    created_at: datetime
    actor: str  # username, or "" for the system / CLI
    verb: str
    verb_label: str
    object_type: str
    object_id: str
    summary: str
    data: dict[str, Any]

    @property
    def url(self) -> str | None:
        """Where the event leads: a finished run to its comparison, a triage or comment event
        to the case's drill-down in the comparison it was decided in, a grade to the graded
        result's drill-down."""
        from django.urls import reverse

        data = self.data if isinstance(self.data, dict) else {}
        baseline, candidate = data.get("baseline"), data.get("candidate")
        if self.verb == AuditEvent.Verb.RUN_FINISHED and baseline and candidate:
            return reverse("compare") + f"?baseline={baseline}&candidate={candidate}"
        if (self.verb in (AuditEvent.Verb.TRIAGE_CHANGED, AuditEvent.Verb.COMMENT_ADDED) and data.get("eval_id")
                and candidate):
            return (reverse("run_case_by_eval_id", args=[candidate]) + "?"
                    + urlencode({"eval_id": data["eval_id"], **({"baseline": baseline} if baseline else {})}))
        if (self.verb in (AuditEvent.Verb.GRADE_ADDED, AuditEvent.Verb.GRADE_CHANGED)
                and isinstance(data.get("run"), int) and isinstance(data.get("result"), int)):
            return reverse("run_case", args=[data["run"], data["result"]]) + "#grades"
        return None


@dataclass(frozen=True)
class ActivityPage:
    events: list[EventRow]
    number: int
    num_pages: int
    count: int
    has_previous: bool
    has_next: bool
    previous_page_number: int | None
    next_page_number: int | None


def _row(event: AuditEvent) -> EventRow:
    return EventRow(
        pk=event.pk,
        created_at=event.created_at,
        actor=event.actor.get_username() if event.actor is not None else "",
        verb=event.verb,
        verb_label=event.get_verb_display(),
        object_type=event.object_type,
        object_id=event.object_id,
        summary=event.summary,
        data=event.data,
    )


@dataclass(frozen=True)
class ActivityFilters:
    """What narrows the feed (all in the URL, so a filtered feed is a link to share): who
    (a username, or "system" for background work), which case (its eval_id), which branch,
    which kind (an AuditEvent.Verb, or its family: "triage", "run", ...), and a date range."""

    actor: str = ""
    eval_id: str = ""
    branch: str | None = None
    kind: str = ""
    date_from: date | None = None
    date_to: date | None = None

    def query(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        for key in ("actor", "eval_id", "kind"):
            if getattr(self, key):
                params[key] = getattr(self, key)
        if self.branch is not None:
            params["branch"] = self.branch
        if self.date_from:
            params["from"] = self.date_from.isoformat()
        if self.date_to:
            params["to"] = self.date_to.isoformat()
        return params

    def apply(self, events: models.QuerySet[AuditEvent]) -> models.QuerySet[AuditEvent]:
        if self.actor == "system":
            events = events.filter(actor__isnull=True)
        elif self.actor:
            events = events.filter(actor__username=self.actor)
        if self.eval_id:
            events = events.filter(data__eval_id=self.eval_id)
        if self.branch is not None:
            events = events.filter(data__branch=self.branch)
        if self.kind in AuditEvent.Verb.values:
            events = events.filter(verb=self.kind)
        elif self.kind:
            events = events.filter(verb__startswith=self.kind + ".")
        if self.date_from:
            events = events.filter(created_at__date__gte=self.date_from)
        if self.date_to:
            events = events.filter(created_at__date__lte=self.date_to)
        return events


def activity_filters(params: Any) -> ActivityFilters:
    """The feed's filters from URL parameters; a malformed date is ignored."""
    def day(raw: str | None) -> date | None:
        try:
            return date.fromisoformat(raw) if raw else None
        except ValueError:
            return None

    branch = params.get("branch")
    return ActivityFilters(actor=params.get("actor", "")[:150], eval_id=params.get("eval_id", "")[:255],
                           branch=branch[:255] if branch is not None and branch != "*" else None,
                           kind=params.get("kind", "")[:32], date_from=day(params.get("from")),
                           date_to=day(params.get("to")))


def activity_kinds() -> list[tuple[str, str]]:
    return [(v.value, v.label) for v in AuditEvent.Verb]


def project_activity(*, project: Project, page: int | str | None = 1,
                     per_page: int = ACTIVITY_PAGE_SIZE, filters: ActivityFilters = ActivityFilters()) -> ActivityPage:
    """One page of the project's feed, newest first, in a fixed number of queries."""
    events = filters.apply(AuditEvent.objects.filter(project=project)).select_related("actor").order_by(
        "-created_at", "-pk")
    paginator = Paginator(events, per_page)
    current = paginator.get_page(page)
    return ActivityPage(
        events=[_row(e) for e in current.object_list],
        number=current.number,
        num_pages=paginator.num_pages,
        count=paginator.count,
        has_previous=current.has_previous(),
        has_next=current.has_next(),
        previous_page_number=current.previous_page_number() if current.has_previous() else None,
        next_page_number=current.next_page_number() if current.has_next() else None,
    )


def object_history(obj: models.Model, *, limit: int = 50) -> list[EventRow]:
    """The newest events about one object (a run, an eval set, a triage...)."""
    events = (AuditEvent.objects.filter(object_type=object_type_of(obj), object_id=str(obj.pk))
              .select_related("actor").order_by("-created_at", "-pk")[:limit])
    return [_row(e) for e in events]
