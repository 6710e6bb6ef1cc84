"""Helpers every page shares: which project the header shows, and who may write to it."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from evaluations.models import Membership, Project

SESSION_PROJECT_KEY = "evalsite_project_id"


def current_project(request: HttpRequest) -> Project | None:
    """The project the user is looking at: the one chosen in the switcher, else their first.

    Also leaves `request.visible_projects` (the switcher's choices) and
    `request.current_project` (read by the context processor) for the header, so the
    layout never runs its own query.
    """
    projects = list(Project.objects.visible_to(request.user).only("pk", "slug", "name"))
    chosen = request.session.get(SESSION_PROJECT_KEY)
    project = next((p for p in projects if p.pk == chosen), projects[0] if projects else None)
    request.visible_projects = projects  # type: ignore[attr-defined]
    request.current_project = project  # type: ignore[attr-defined]
    return project


def enter_project(request: HttpRequest, project: Project) -> None:
    """Make `project` current, for pages reached through an object of that project.

    Opening an eval set of another project (from a link, say) switches the header to that
    project, so the header never names a project other than the one on screen.
    """
    current_project(request)
    if request.session.get(SESSION_PROJECT_KEY) != project.pk:  # don't rewrite the session on every view
        request.session[SESSION_PROJECT_KEY] = project.pk
    request.current_project = project  # type: ignore[attr-defined]


def can_upload(user: Any, project: Project) -> bool:
    if user.is_superuser:
        return True
    return Membership.objects.filter(
        project=project, user=user, role__in=[Membership.Role.MEMBER, Membership.Role.ADMIN]
    ).exists()
