"""Notifications: channels, rules, alerts, messages, deliveries with their attempts,
the in-app list and the events that fire rules.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from evaluations.models.accounts import Project
from evaluations.models.evalsets import EvalSet
from evaluations.models.review import AuditEvent


class NotifyChannel(models.Model):
    """Where a project's messages go: a signed webhook, a Slack-compatible incoming webhook,
    e-mail, or the in-app list of each person. A channel that failed `EVALSITE_NOTIFY_PAUSE_AFTER`
    times in a row is paused (`paused_at`) until someone resumes it."""

    class Kind(models.TextChoices):
        WEBHOOK = "webhook"
        SLACK = "slack"
        EMAIL = "email", "E-mail"
        INAPP = "inapp", "In-app"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="notify_channels")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    url = models.URLField(max_length=1000, blank=True)  # webhook and slack
    secret = models.CharField(max_length=100, blank=True)  # webhook: the HMAC key
    emails = models.TextField(blank=True)  # email: addresses for project-wide messages, one a line
    enabled = models.BooleanField(default=True)
    paused_at = models.DateTimeField(null=True, blank=True)
    pause_reason = models.CharField(max_length=300, blank=True)
    failures_in_row = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["name", "pk"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="notify_channel_unique_name")]

    def __str__(self) -> str:
        return self.name


class NotifyRule(models.Model):
    """When to tell whom: what fires the rule (a run finished, a monitor's criterion below a
    threshold, a triage assigned, an @mention, a digest), its filters, its cooldown, and the
    channels its messages go to."""

    class Kind(models.TextChoices):
        RUN_FINISHED = "run_finished", "run finished"
        MONITOR = "monitor", "monitor below threshold"
        TRIAGE_ASSIGNED = "triage_assigned", "triage assigned"
        MENTION = "mention", "@mention in a comment"
        DIGEST = "digest", "digest"

    class RunCondition(models.TextChoices):
        ANY = "any", "any"
        REGRESSIONS = "regressions", "with regressions vs its default baseline"
        NEW_CAUSES = "new_causes", "with new failure causes"
        PASS_RATE_BELOW = "pass_rate_below", "pass rate below"

    class Period(models.TextChoices):
        DAILY = "daily"
        WEEKLY = "weekly"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="notify_rules")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    enabled = models.BooleanField(default=True)
    channels = models.ManyToManyField(NotifyChannel, related_name="rules", blank=True)
    # run_finished
    condition = models.CharField(max_length=20, choices=RunCondition.choices, default=RunCondition.ANY)
    pass_rate_below = models.FloatField(null=True, blank=True)  # 0..1
    evalset = models.ForeignKey(EvalSet, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    branch = models.CharField(max_length=255, blank=True)
    model = models.CharField(max_length=200, blank=True)
    # monitor (issue 31's monitors; a plain id, so this model does not depend on theirs)
    monitor_id = models.BigIntegerField(null=True, blank=True)
    criterion = models.CharField(max_length=100, blank=True)
    threshold = models.FloatField(null=True, blank=True)  # 0..1, the pass rate below which it fires
    window_minutes = models.PositiveIntegerField(default=60)
    min_count = models.PositiveIntegerField(default=20)
    # digest
    period = models.CharField(max_length=8, choices=Period.choices, default=Period.DAILY)
    cooldown_minutes = models.PositiveIntegerField(default=0)
    # triage assigned and @mention: a person's own rule ("notify me of my assignments and
    # mentions") fires for what is addressed to them only; none: for everyone in the project
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="+")
    last_fired_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["name", "pk"]
        indexes = [models.Index(fields=["project", "kind", "enabled"], name="notify_rule_kind"),
                   models.Index(fields=["monitor_id"], name="notify_rule_monitor")]

    def __str__(self) -> str:
        return self.name


class NotifyAlert(models.Model):
    """One thing that fired a rule, waiting to be sent: alerts of a rule (and recipient) that
    are pending together, or that arrive during its cooldown, go out as one message."""

    rule = models.ForeignKey(NotifyRule, on_delete=models.CASCADE, related_name="alerts")
    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                                  related_name="+")
    key = models.CharField(max_length=200)  # what fired it, and for whom ("run:12|"), so an event fires a rule once
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)
    message = models.ForeignKey("NotifyMessage", null=True, blank=True, on_delete=models.CASCADE,
                                related_name="alerts")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["rule", "key"], name="notify_alert_once")]
        indexes = [models.Index(fields=["rule", "message"], name="notify_alert_pending")]

    def __str__(self) -> str:
        return self.key


class NotifyMessage(models.Model):
    """What a rule says once: the subject, a plain-text body, and the JSON payload every channel
    renders from (the webhook's body; Slack's and the e-mail's text are made from it)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="notify_messages")
    rule = models.ForeignKey(NotifyRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="messages")
    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                                  related_name="+")
    event = models.CharField(max_length=20)
    subject = models.CharField(max_length=300)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return self.subject


class NotifyDelivery(models.Model):
    """A message to one channel. `idempotency_id` is fixed at creation and sent with every
    attempt, so a receiver drops duplicates. The row is the state: a worker claims it with a
    lease (`leased_until`); one killed mid-send leaves the lease to expire, and the sweep
    queues it again."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        SENT = "sent"
        FAILED = "failed"  # out of attempts

    message = models.ForeignKey(NotifyMessage, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.ForeignKey(NotifyChannel, on_delete=models.CASCADE, related_name="deliveries")
    idempotency_id = models.UUIDField(unique=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    leased_until = models.DateTimeField(null=True, blank=True)
    owner = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="notify_delivery_due")]

    def __str__(self) -> str:
        return f"{self.idempotency_id}: {self.status}"


class NotifyAttempt(models.Model):
    """The delivery log: one row per attempt, per channel."""

    delivery = models.ForeignKey(NotifyDelivery, on_delete=models.CASCADE, related_name="log")
    channel = models.ForeignKey(NotifyChannel, on_delete=models.CASCADE, related_name="log")
    at = models.DateTimeField(default=timezone.now)
    ok = models.BooleanField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.FloatField()
    excerpt = models.CharField(max_length=500, blank=True)  # the response's start, or the error

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["channel", "-at"], name="notify_attempt_channel")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.status_code or ''} {'ok' if self.ok else 'failed'}"


class Notification(models.Model):
    """A message in a person's in-app list (the navigation shows how many are unread)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    message = models.ForeignKey(NotifyMessage, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["user", "message"], name="notification_once")]
        indexes = [models.Index(fields=["user", "read_at"], name="notification_unread")]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.message_id}"


class NotifyEvent(models.Model):
    """The outbox: an activity event some rule is about, written with it and handled by a
    worker (`done_at` once handled); the sweep queues again what a lost task left undone."""

    audit = models.OneToOneField(AuditEvent, on_delete=models.CASCADE, related_name="+")
    # the events recorded by one transaction (a bulk action, a triage with its comment) share
    # it and are handled together: one message per person for the whole action
    action = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["done_at", "created_at"], name="notify_event_todo")]

    def __str__(self) -> str:
        return f"event {self.audit_id}: {'done' if self.done_at else 'to do'}"


# --- Online evaluation: monitors, their scores, retention (issue 31) -------------------------
