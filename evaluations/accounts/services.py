"""Projects' members: adding, changing and removing them (admins do it), each atomic and
recorded in the activity feed. A project always keeps at least one admin."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q

from evaluations.audit import audit_record
from evaluations.models import AuditEvent, Membership, Project


class MembershipError(Exception):
    """A membership change that would break a rule (the message says which)."""


def _other_admins(project: Project, user: Any) -> bool:
    # Locks the project's admin rows, so two admins demoting each other at once cannot both win.
    admins = (Membership.objects.select_for_update()
              .filter(project=project, role=Membership.Role.ADMIN).exclude(user=user))
    return bool(list(admins.values_list("pk", flat=True)))


@transaction.atomic
def membership_add(*, project: Project, user: Any, role: str, actor: Any) -> Membership:
    if Membership.objects.filter(project=project, user=user).exists():
        raise MembershipError(f"{user.get_username()} is already a member of {project.name}")
    membership = Membership.objects.create(project=project, user=user, role=role)
    audit_record(project=project, actor=actor, verb=AuditEvent.Verb.MEMBER_ADDED, obj=membership,
                 summary=f"added {user.get_username()} as {membership.get_role_display().lower()}",
                 data={"user": user.get_username(), "role": role})
    return membership


@transaction.atomic
def membership_change(*, membership: Membership, role: str, actor: Any) -> bool:
    """False when the role is already `role`."""
    before = membership.role
    if before == role:
        return False
    if before == Membership.Role.ADMIN and not _other_admins(membership.project, membership.user):
        raise MembershipError("a project needs at least one admin: make someone else admin first")
    membership.role = role
    membership.save(update_fields=["role"])
    audit_record(project=membership.project, actor=actor, verb=AuditEvent.Verb.MEMBER_CHANGED, obj=membership,
                 summary=f"changed {membership.user.get_username()} from {before} to {role}",
                 data={"user": membership.user.get_username(), "from": before, "to": role})
    return True


@transaction.atomic
def membership_remove(*, membership: Membership, actor: Any) -> None:
    if membership.role == Membership.Role.ADMIN and not _other_admins(membership.project, membership.user):
        raise MembershipError("a project needs at least one admin: the last admin cannot be removed")
    username = membership.user.get_username()
    audit_record(project=membership.project, actor=actor, verb=AuditEvent.Verb.MEMBER_REMOVED, obj=membership,
                 summary=f"removed {username} ({membership.role})", data={"user": username, "role": membership.role})
    membership.delete()


def user_find(identifier: str) -> Any:
    users = get_user_model().objects.filter(is_active=True)
    return users.filter(Q(username__iexact=identifier) | Q(email__iexact=identifier)).order_by("pk").first()


# --- Projects -----------------------------------------------------------------------------


def may_create_projects(user: Any) -> bool:
    """Superusers create projects; with `EVALSITE_PROJECT_CREATORS = "everyone"` any signed-in
    user does (and becomes the new project's admin)."""
    from django.conf import settings

    if not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_superuser or getattr(settings, "EVALSITE_PROJECT_CREATORS", "superusers") == "everyone")


class ProjectError(Exception):
    """A project that cannot be created as asked (the message says why)."""


@transaction.atomic
def project_create(*, slug: str, name: str, description: str = "", actor: Any) -> Project:
    """A new project with `actor` as its admin, recorded in its activity feed. The slug must
    be new, archived projects' included (their URLs and API names stay theirs)."""
    if Project.objects.filter(slug=slug).exists():
        raise ProjectError(f"a project with the slug {slug!r} already exists")
    project = Project.objects.create(slug=slug, name=name, description=description)
    Membership.objects.create(project=project, user=actor, role=Membership.Role.ADMIN)
    audit_record(project=project, actor=actor, verb=AuditEvent.Verb.PROJECT_CREATED, obj=project,
                 summary=f"created project {name} ({slug})", data={"slug": slug, "name": name})
    return project


@transaction.atomic
def project_archive(*, project: Project, actor: Any) -> None:
    """Hide a project from everyone (pages, API, the trace receiver) and keep its data; it
    comes back by clearing `archived_at` in Django's admin."""
    from django.utils import timezone

    if project.archived_at is not None:
        return
    project.archived_at = timezone.now()
    project.save(update_fields=["archived_at"])
    audit_record(project=project, actor=actor, verb=AuditEvent.Verb.PROJECT_ARCHIVED, obj=project,
                 summary=f"archived project {project.name} ({project.slug})", data={"slug": project.slug})
