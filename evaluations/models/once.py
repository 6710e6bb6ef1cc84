"""Keys that may be used once, across every process (evaluations/once.py)."""

from __future__ import annotations

from django.db import models


class UsedOnce(models.Model):
    """A key seen once within its scope (an ID token's `jti`, a TOTP step, a queued
    computation): the unique constraint is the check, so it holds across processes without
    Redis. `key` is a SHA-256 of what was seen, never the value itself (a recovery code)."""

    scope = models.CharField(max_length=40)
    key = models.CharField(max_length=64)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scope", "key"], name="used_once_scope_key")]
        indexes = [models.Index(fields=["expires_at"], name="used_once_expires")]

    def __str__(self) -> str:
        return f"{self.scope}:{self.key[:12]}"
