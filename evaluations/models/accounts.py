"""Projects, their members and API tokens.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone


class ProjectQuerySet(models.QuerySet["Project"]):
    def visible_to(self, user: Any) -> ProjectQuerySet:
        """The projects `user` works in: an archived project is nobody's (its data is kept;
        Django's admin brings it back by clearing `archived_at`)."""
        if not user.is_authenticated:
            return self.none()
        live = self.filter(archived_at__isnull=True)
        if user.is_superuser:
            return live
        return live.filter(memberships__user=user)


class Project(models.Model):
    """A team's workspace: every eval set, run and comment belongs to exactly one."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    archived_at = models.DateTimeField(null=True, blank=True)  # set: hidden everywhere, data kept

    objects = ProjectQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def role_of(self, user: Any) -> str | None:
        """The user's role here ("admin" for superusers), or None for outsiders."""
        if not user.is_authenticated:
            return None
        if user.is_superuser:
            return Membership.Role.ADMIN
        return self.memberships.filter(user=user).values_list("role", flat=True).first()

    def can_write(self, user: Any) -> bool:
        return self.role_of(user) in {Membership.Role.MEMBER, Membership.Role.ADMIN}


class Membership(models.Model):
    class Role(models.TextChoices):
        VIEWER = "viewer", "Viewer"
        MEMBER = "member", "Member"
        ADMIN = "admin", "Admin"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


class ApiToken(models.Model):
    """A user's API token. Only its SHA-256 digest is stored; the token is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12)  # the token's first characters, to tell tokens apart
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class IdempotentRequest(models.Model):
    """The first answer to a creating request sent with an `Idempotency-Key` header
    (evaluations/api/idempotency.py): the same user sending the same key again, within
    `EVALSITE_IDEMPOTENCY_SECONDS`, gets this answer instead of a second run or upload. Written
    in the transaction of the work it answers for, so a request cut off before its commit
    leaves no record and its retry does the work."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=255)
    status = models.PositiveSmallIntegerField(default=0)
    body = models.TextField(blank=True)  # the answer's JSON
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotent_request_unique")]
        indexes = [models.Index(fields=["created_at"], name="idempotent_request_at")]

    def __str__(self) -> str:
        return f"{self.method} {self.path} ({self.key})"
