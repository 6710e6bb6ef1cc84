"""The identity provider's groups as project roles (`EVALSITE_OIDC_ROLE_MAP`), applied at
every SSO sign-in.

A project named in the map is managed by the provider for everyone who signs in with SSO:
their role there is the highest role any of their groups maps to, and with no such group
their membership is removed, even a last admin's (the provider decides who has access; a
superuser can always add an admin back). Projects the map does not name are never touched,
so memberships an admin adds there by hand stay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from evaluations.audit import audit_record
from evaluations.models import AuditEvent, Membership, Project

RANK = {Membership.Role.VIEWER: 1, Membership.Role.MEMBER: 2, Membership.Role.ADMIN: 3}


class RoleMapError(ValueError):
    """A role map that cannot be read (the message names the entry)."""


@dataclass(frozen=True)
class RoleRule:
    group: str
    project: str
    role: str


def role_map_parse(text: str) -> list[RoleRule]:
    """`group=project:role` entries separated by commas (or new lines); a group may appear
    several times to give roles in several projects."""
    rules: list[RoleRule] = []
    for raw in text.replace("\n", ",").split(","):
        entry = raw.strip()
        if not entry:
            continue
        group, sep, target = entry.rpartition("=")
        project, colon, role = target.partition(":")
        if not sep or not colon or not group.strip() or not project.strip():
            raise RoleMapError(f"role map entry {entry!r}: write it as group=project:role")
        if role.strip() not in Membership.Role.values:
            raise RoleMapError(f"role map entry {entry!r}: the role must be one of "
                               f"{', '.join(Membership.Role.values)}")
        rules.append(RoleRule(group.strip(), project.strip(), role.strip()))
    return rules


def role_map_check(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """A system check (`manage.py check`, `migrate`, so `manage.py up`): the role map reads."""
    from django.conf import settings
    from django.core.checks import Error

    try:
        role_map_parse(settings.EVALSITE_OIDC_ROLE_MAP)
    except RoleMapError as e:
        return [Error(f"EVALSITE_OIDC_ROLE_MAP: {e}", id="evalsite.E034")]
    return []


def groups_of(claims: dict[str, Any], claim: str) -> list[str]:
    """The groups claim as a list of strings (a single string is one group)."""
    value = claims.get(claim)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value if isinstance(v, str | int)]
    return []


def wanted_roles(rules: list[RoleRule], groups: list[str]) -> dict[str, str | None]:
    """Each project the map names, with the role these groups give there (None: no role)."""
    member_of = set(groups)
    wanted: dict[str, str | None] = {r.project: None for r in rules}
    for rule in rules:
        if rule.group in member_of:
            current = wanted[rule.project]
            if current is None or RANK[Membership.Role(rule.role)] > RANK[Membership.Role(current)]:
                wanted[rule.project] = rule.role
    return wanted


@transaction.atomic
def roles_apply(*, user: Any, groups: list[str], rules: list[RoleRule], provider: str) -> list[str]:
    """Add, change or remove the user's memberships of the projects the map names; each
    change recorded in that project's activity feed. Returns the changes, in words."""
    wanted = wanted_roles(rules, groups)
    projects = {p.slug: p for p in Project.objects.filter(slug__in=list(wanted))}
    current = {m.project_id: m for m in Membership.objects.select_for_update()
               .filter(user=user, project__in=list(projects.values()))}
    name = user.get_username()
    changes: list[str] = []
    for slug, role in wanted.items():
        project = projects.get(slug)
        if project is None:
            continue
        membership = current.get(project.pk)
        data = {"user": name, "via": "sso", "provider": provider, "groups": sorted(groups)[:50]}
        if membership is None and role is not None:
            membership = Membership.objects.create(project=project, user=user, role=role)
            summary = f"added {name} as {role} from {provider}'s groups"
            audit_record(project=project, actor=None, verb=AuditEvent.Verb.MEMBER_ADDED, obj=membership,
                         summary=summary, data={**data, "role": role})
        elif membership is not None and role is None:
            summary = f"removed {name} ({membership.role}): no group of {provider} gives a role here"
            audit_record(project=project, actor=None, verb=AuditEvent.Verb.MEMBER_REMOVED, obj=membership,
                         summary=summary, data={**data, "role": membership.role})
            membership.delete()
        elif membership is not None and role is not None and membership.role != role:
            summary = f"changed {name} from {membership.role} to {role} from {provider}'s groups"
            audit_record(project=project, actor=None, verb=AuditEvent.Verb.MEMBER_CHANGED, obj=membership,
                         summary=summary, data={**data, "from": membership.role, "to": role})
            membership.role = role
            membership.save(update_fields=["role"])
        else:
            continue
        changes.append(f"{slug}: {summary}")
    return changes
