"""What the pages read about notifications: which rules bring a person their own assignments
and @mentions, project by project (the notifications page says it plainly)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from evaluations.models import NotifyRule, Project

PERSONAL_KINDS = (NotifyRule.Kind.TRIAGE_ASSIGNED, NotifyRule.Kind.MENTION)


@dataclass(frozen=True)
class Route:
    """One kind of personal message (assignments or @mentions) in one project: the rules on
    that send it to the person, and the channels it reaches."""

    kind: str
    label: str
    rules: list[str]
    channels: list[str]  # "name (kind)"; paused channels say so
    own: bool  # one of the rules is the person's own

    @property
    def on(self) -> bool:
        return bool(self.channels)


@dataclass(frozen=True)
class PersonalRules:
    project: Project
    routes: list[Route]
    own_rules: int

    @property
    def missing(self) -> bool:
        return not all(r.on for r in self.routes)


LABELS = {NotifyRule.Kind.TRIAGE_ASSIGNED: "cases assigned to you", NotifyRule.Kind.MENTION: "your @mentions"}


def personal_rules(user: Any, projects: list[Project]) -> list[PersonalRules]:
    """For each project: the enabled rules of each personal kind that speak for `user` (the
    project's, and their own), with their enabled channels. Two queries whatever the number
    of projects and rules."""
    rules = list(NotifyRule.objects.filter(Q(owner=None) | Q(owner_id=user.pk), project__in=projects,
                                           kind__in=PERSONAL_KINDS, enabled=True)
                 .prefetch_related("channels").order_by("name", "pk"))
    out = []
    for project in projects:
        routes = []
        mine = [r for r in rules if r.project_id == project.pk]
        for kind in PERSONAL_KINDS:
            of_kind = [r for r in mine if r.kind == kind]
            channels: dict[int, str] = {}
            for rule in of_kind:
                for c in rule.channels.all():
                    if c.enabled:
                        how = "" if c.name.lower() == c.get_kind_display().lower() else c.get_kind_display()
                        said = ", ".join(w for w in (how, "paused" if c.paused_at else "") if w)
                        channels.setdefault(c.pk, f"{c.name} ({said})" if said else c.name)
            routes.append(Route(kind=kind, label=LABELS[kind], rules=[r.name for r in of_kind],
                                channels=list(channels.values()), own=any(r.owner_id for r in of_kind)))
        out.append(PersonalRules(project=project, routes=routes,
                                 own_rules=sum(1 for r in mine if r.owner_id == user.pk)))
    return out
