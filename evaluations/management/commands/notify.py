"""python manage.py notify ...: notification rules and channels from a script.

    notify channels --project SLUG                      the channels, as JSON lines
    notify channel-add --project SLUG --name N --kind webhook|slack|email|inapp [--url URL] [--emails A,B]
        prints the channel as JSON (a webhook's signing secret included, this once)
    notify channel-remove --project SLUG ID
    notify rules --project SLUG                         the rules, as JSON lines
    notify rule-add --project SLUG --name N --kind KIND [--channel ID ...] [--condition C]
                    [--pass-rate-below X] [--evalset ID] [--branch B] [--model M] [--monitor-id ID]
                    [--criterion C] [--threshold X] [--window-minutes N] [--min-count N]
                    [--period daily|weekly] [--cooldown-minutes N]
    notify rule-remove --project SLUG ID
    notify test --project SLUG CHANNEL_ID              queue a test message to the channel
    notify sweep                                        what the minute schedule does, once

Writes are recorded as made by nobody (the CLI). A bad field is printed with its name and
nothing is written (exit status 1)."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluations.models import NotifyChannel, NotifyRule, Project
from evaluations.notify import delivery, events, services

RULE_OPTIONS = ("condition", "pass_rate_below", "evalset", "branch", "model", "monitor_id", "criterion", "threshold",
                "window_minutes", "min_count", "period", "cooldown_minutes")


class Command(BaseCommand):
    help = "Notification rules and channels: list, add, remove, send a test."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        for name in ("channels", "rules"):
            sub.add_parser(name).add_argument("--project", required=True)
        for name in ("channel-remove", "rule-remove", "test"):
            removal = sub.add_parser(name)
            removal.add_argument("--project", required=True)
            removal.add_argument("id", type=int)
        channel = sub.add_parser("channel-add")
        channel.add_argument("--project", required=True)
        channel.add_argument("--name", required=True)
        channel.add_argument("--kind", required=True, choices=NotifyChannel.Kind.values)
        channel.add_argument("--url", default="")
        channel.add_argument("--emails", default="", help="comma-separated")
        rule = sub.add_parser("rule-add")
        rule.add_argument("--project", required=True)
        rule.add_argument("--name", required=True)
        rule.add_argument("--kind", required=True, choices=NotifyRule.Kind.values)
        rule.add_argument("--channel", type=int, action="append", default=[], dest="channels")
        for option in RULE_OPTIONS:
            rule.add_argument("--" + option.replace("_", "-"), dest=option, default=None)
        sub.add_parser("sweep")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, "_" + options["action"].replace("-", "_"))(options)
        except ValidationError as exc:
            self.stderr.write("error: nothing was saved")
            for field, errors in getattr(exc, "message_dict", {"": exc.messages}).items():
                for error in errors:
                    self.stderr.write(f"  {field}: {error}" if field else f"  {error}")
            sys.exit(1)

    def _project(self, options: dict[str, Any]) -> Project:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        return project

    def _print(self, value: dict[str, Any]) -> None:
        self.stdout.write(json.dumps(value, default=str, ensure_ascii=False))

    def _channel_dict(self, channel: NotifyChannel) -> dict[str, Any]:
        return {"id": channel.pk, "name": channel.name, "kind": channel.kind, "url": channel.url,
                "emails": channel.emails.splitlines(), "enabled": channel.enabled, "paused_at": channel.paused_at,
                "pause_reason": channel.pause_reason}

    def _rule_dict(self, rule: NotifyRule) -> dict[str, Any]:
        return {"id": rule.pk, "name": rule.name, "kind": rule.kind, "enabled": rule.enabled,
                "channels": sorted(c.pk for c in rule.channels.all()), "evalset": rule.evalset_id,
                **{k: getattr(rule, k) for k in RULE_OPTIONS if k != "evalset"}}

    def _channels(self, options: dict[str, Any]) -> None:
        for channel in NotifyChannel.objects.filter(project=self._project(options)):
            self._print(self._channel_dict(channel))

    def _rules(self, options: dict[str, Any]) -> None:
        for rule in NotifyRule.objects.filter(project=self._project(options)).prefetch_related("channels"):
            self._print(self._rule_dict(rule))

    def _channel_add(self, options: dict[str, Any]) -> None:
        values = {k: options[k] for k in ("name", "kind", "url", "emails")}
        channel = services.channel_save(project=self._project(options), values=values, actor=None)
        self._print({**self._channel_dict(channel), "secret": channel.secret})

    def _rule_add(self, options: dict[str, Any]) -> None:
        values = {"name": options["name"], "kind": options["kind"],
                  **{k: options[k] for k in RULE_OPTIONS if options[k] is not None}}
        rule = services.rule_save(project=self._project(options), values=values, actor=None,
                                  channels=options["channels"])
        self._print(self._rule_dict(rule))

    def _channel_remove(self, options: dict[str, Any]) -> None:
        channel = NotifyChannel.objects.filter(project=self._project(options), pk=options["id"]).first()
        if channel is None:
            raise CommandError(f"no channel {options['id']} in that project")
        services.channel_delete(channel=channel, actor=None)
        self.stdout.write(f"removed channel {options['id']}")

    def _rule_remove(self, options: dict[str, Any]) -> None:
        rule = NotifyRule.objects.filter(project=self._project(options), pk=options["id"]).first()
        if rule is None:
            raise CommandError(f"no rule {options['id']} in that project")
        services.rule_delete(rule=rule, actor=None)
        self.stdout.write(f"removed rule {options['id']}")

    def _test(self, options: dict[str, Any]) -> None:
        channel = NotifyChannel.objects.filter(project=self._project(options), pk=options["id"]).first()
        if channel is None:
            raise CommandError(f"no channel {options['id']} in that project")
        sent = delivery.send_test(channel)
        self._print({"delivery_id": sent.idempotency_id, "status": "queued"})

    def _sweep(self, options: dict[str, Any]) -> None:
        self._print(events.sweep())
