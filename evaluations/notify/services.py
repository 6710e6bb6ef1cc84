"""Rules and channels made, changed and removed by people (pages, API, CLI): validated (a bad
field is a ValidationError naming it, and nothing is written) and recorded in the activity feed."""

from __future__ import annotations

import secrets
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.utils import timezone

from evaluations.audit import audit_record
from evaluations.converters import parse_id
from evaluations.models import AuditEvent, EvalSet, Membership, Monitor, NotifyChannel, NotifyRule, Project
from evaluations.runs.targets import egress

CHANNEL_FIELDS = ("name", "kind", "url", "emails", "enabled")
RULE_FIELDS = ("name", "kind", "enabled", "condition", "pass_rate_below", "evalset", "branch", "model",
               "monitor_id", "criterion", "threshold", "window_minutes", "min_count", "period", "cooldown_minutes")


def _fail(field: str, message: str) -> ValidationError:
    return ValidationError({field: [message]})


def channel_check(project: Project, values: dict[str, Any], channel: NotifyChannel | None = None) -> dict[str, Any]:
    """The channel's fields, checked: a webhook or Slack URL must pass the egress policy."""
    out = {k: values[k] for k in CHANNEL_FIELDS if k in values}
    name = str(out.get("name", channel.name if channel else "")).strip()
    if not name:
        raise _fail("name", "a channel needs a name")
    out["name"] = name[:100]
    clash = NotifyChannel.objects.filter(project=project, name=out["name"])
    if clash.exclude(pk=channel.pk if channel else 0).exists():
        raise _fail("name", f"the project already has a channel named {out['name']!r}")
    kind = out.get("kind", channel.kind if channel else "")
    if kind not in NotifyChannel.Kind.values:
        raise _fail("kind", f"choose one of {', '.join(NotifyChannel.Kind.values)}")
    if kind in (NotifyChannel.Kind.WEBHOOK, NotifyChannel.Kind.SLACK):
        url = str(out.get("url", channel.url if channel else "")).strip()
        if not url:
            raise _fail("url", "a webhook needs a URL")
        why = egress.refusal(url)
        if why is not None:
            raise _fail("url", why)
        out["url"] = url
    if kind == NotifyChannel.Kind.EMAIL and "emails" in out:
        lines = [line.strip() for line in str(out["emails"]).replace(",", "\n").splitlines() if line.strip()]
        for number, line in enumerate(lines, 1):
            try:
                validate_email(line)
            except ValidationError:
                raise _fail("emails", f"line {number}: {line!r} is not an e-mail address") from None
        out["emails"] = "\n".join(lines)
    return out


def channel_save(*, project: Project, values: dict[str, Any], actor: Any,
                 channel: NotifyChannel | None = None) -> NotifyChannel:
    fields = channel_check(project, values, channel)
    with transaction.atomic():
        if channel is None:
            channel = NotifyChannel.objects.create(project=project, created_by=actor, secret=secrets.token_hex(32),
                                                   **fields)
            said = f"added the {channel.kind} notification channel {channel.name}"
        else:
            for key, value in fields.items():
                setattr(channel, key, value)
            channel.save()
            said = f"changed the notification channel {channel.name}"
        audit_record(project=project, actor=actor, verb=AuditEvent.Verb.NOTIFY_CHANGED, obj=channel, summary=said,
                     data={k: v for k, v in fields.items() if k != "url"})
    return channel


def channel_delete(*, channel: NotifyChannel, actor: Any) -> None:
    with transaction.atomic():
        audit_record(project=channel.project, actor=actor, verb=AuditEvent.Verb.NOTIFY_CHANGED, obj=channel,
                     summary=f"removed the notification channel {channel.name}")
        channel.delete()


def _number(values: dict[str, Any], field: str, *, low: float, high: float | None = None,
            whole: bool = False) -> float | int | None:
    raw = values.get(field)
    if raw is None or raw == "":
        return None
    try:
        number = int(str(raw)) if whole else float(str(raw))
    except (TypeError, ValueError):
        raise _fail(field, f"{raw!r} is not a {'whole ' if whole else ''}number") from None
    if number < low or (high is not None and number > high):
        raise _fail(field, f"must be between {low:g} and {high:g}" if high is not None else f"must be ≥ {low:g}")
    return number


def rule_check(project: Project, values: dict[str, Any], rule: NotifyRule | None = None) -> dict[str, Any]:
    """The rule's fields, checked against its kind (a monitor rule needs its monitor, criterion
    and threshold; a pass-rate rule its rate; ...)."""
    out: dict[str, Any] = {k: values[k] for k in RULE_FIELDS if k in values}
    for field in ("condition", "period"):  # an empty choice: the default
        if out.get(field) == "":
            out.pop(field)
    current = {k: getattr(rule, k if k != "evalset" else "evalset_id") for k in RULE_FIELDS} if rule else {}
    merged = {**current, **out}
    name = str(merged.get("name") or "").strip()
    if not name:
        raise _fail("name", "a rule needs a name")
    out["name"] = name[:100]
    kind = merged.get("kind")
    if kind not in NotifyRule.Kind.values:
        raise _fail("kind", f"choose one of {', '.join(NotifyRule.Kind.values)}")
    if rule is not None and rule.owner_id and kind not in PERSONAL_NAMES:
        raise _fail("kind", "a person's own rule is about their assignments and @mentions only")
    if merged.get("condition", NotifyRule.RunCondition.ANY) not in NotifyRule.RunCondition.values:
        raise _fail("condition", f"choose one of {', '.join(NotifyRule.RunCondition.values)}")
    if merged.get("period", NotifyRule.Period.DAILY) not in NotifyRule.Period.values:
        raise _fail("period", "choose daily or weekly")
    for field in ("pass_rate_below", "threshold"):
        if field in out:
            out[field] = _number(out, field, low=0, high=1)
    for field in ("monitor_id", "window_minutes", "min_count", "cooldown_minutes"):
        if field in out:
            value = _number(out, field, low=1 if field == "window_minutes" else 0, whole=True)
            if value is None and field != "monitor_id":
                out.pop(field)
            else:
                out[field] = value
    merged = {**current, **out}
    if kind == NotifyRule.Kind.RUN_FINISHED and merged.get("condition") == NotifyRule.RunCondition.PASS_RATE_BELOW \
            and merged.get("pass_rate_below") is None:
        raise _fail("pass_rate_below", "a pass-rate rule needs the rate (0 to 1) below which it fires")
    if kind == NotifyRule.Kind.MONITOR:
        for field in ("monitor_id", "criterion", "threshold"):
            if merged.get(field) in (None, ""):
                raise _fail(field, f"a monitor rule needs its {field.replace('_', ' ')}")
        monitor = Monitor.objects.filter(project=project, pk=merged["monitor_id"]).first()
        if monitor is None:
            raise _fail("monitor_id", f"no monitor {merged['monitor_id']} in {project.name}")
        criterion = str(merged["criterion"]).strip()
        if criterion not in monitor.criteria:
            raise _fail("criterion", f"the monitor {monitor.name} has no criterion {criterion!r}: choose one of "
                                     f"{', '.join(sorted(monitor.criteria))}")
    if "evalset" in out:
        evalset = out["evalset"]
        if evalset in (None, ""):
            out["evalset"] = None
        else:
            found = EvalSet.objects.filter(project=project, pk=parse_id(str(evalset)) or 0).first()
            if found is None:
                raise _fail("evalset", f"no eval set {evalset!r} in {project.name}")
            out["evalset"] = found
    for field in ("branch", "model", "criterion"):
        if field in out:
            out[field] = str(out[field] or "").strip()
    return out


def rule_save(*, project: Project, values: dict[str, Any], actor: Any, channels: list[int] | None = None,
              rule: NotifyRule | None = None) -> NotifyRule:
    fields = rule_check(project, values, rule)
    chosen = None
    if channels is not None:
        chosen = list(NotifyChannel.objects.filter(project=project, pk__in=channels))
        if len(chosen) != len(set(channels)):
            raise _fail("channels", "every channel must be one of this project's")
    with transaction.atomic():
        if rule is None:
            rule = NotifyRule.objects.create(project=project, created_by=actor, **fields)
            said = f"added the notification rule {rule.name}"
        else:
            was_digest = rule.kind == NotifyRule.Kind.DIGEST
            for key, value in fields.items():
                setattr(rule, key, value)
            if rule.kind == NotifyRule.Kind.DIGEST and not was_digest:
                rule.last_fired_at = timezone.now()  # its first digest a period from now, as a new rule's
            rule.save()
            said = f"changed the notification rule {rule.name}"
        if chosen is not None:
            rule.channels.set(chosen)
        data = {k: (v.pk if isinstance(v, EvalSet) else v) for k, v in fields.items()}
        audit_record(project=project, actor=actor, verb=AuditEvent.Verb.NOTIFY_CHANGED, obj=rule, summary=said,
                     data={**data, "channels": [c.pk for c in chosen] if chosen is not None else None})
    return rule


def rule_delete(*, rule: NotifyRule, actor: Any) -> None:
    with transaction.atomic():
        audit_record(project=rule.project, actor=actor, verb=AuditEvent.Verb.NOTIFY_CHANGED, obj=rule,
                     summary=f"removed the notification rule {rule.name}")
        rule.delete()


def channel_resumed(*, channel: NotifyChannel, actor: Any) -> None:
    audit_record(project=channel.project, actor=actor, verb=AuditEvent.Verb.NOTIFY_CHANGED, obj=channel,
                 summary=f"resumed the paused notification channel {channel.name}")


PERSONAL_NAMES = {NotifyRule.Kind.TRIAGE_ASSIGNED: "my assignments", NotifyRule.Kind.MENTION: "my @mentions"}


def personal_rules_enable(*, project: Project, user: Any) -> list[NotifyRule]:
    """"Notify me of my assignments and mentions": the person's own rules of both kinds,
    made or turned on, to the project's in-app list (made if the project has none) and its
    e-mail channels when they have an address. Any member may do it for themselves: the
    rules fire only for what is addressed to them. Audited."""
    if not Membership.objects.filter(project=project, user=user).exists():
        raise ValidationError(f"{user.get_username()} is not in {project.name}")
    with transaction.atomic():
        inapp = NotifyChannel.objects.filter(project=project, kind=NotifyChannel.Kind.INAPP, enabled=True).first()
        if inapp is None:
            name = "In-app" if not NotifyChannel.objects.filter(project=project, name="In-app").exists() \
                else f"In-app ({secrets.token_hex(2)})"
            inapp = NotifyChannel.objects.create(project=project, name=name, kind=NotifyChannel.Kind.INAPP,
                                                 created_by=user, secret=secrets.token_hex(32))
            audit_record(project=project, actor=user, verb=AuditEvent.Verb.NOTIFY_CHANGED, obj=inapp,
                         summary=f"added the in-app notification channel {inapp.name}")
        chosen = [inapp]
        if user.email:
            chosen += list(NotifyChannel.objects.filter(project=project, kind=NotifyChannel.Kind.EMAIL, enabled=True))
        made = []
        for kind, label in PERSONAL_NAMES.items():
            rule = NotifyRule.objects.filter(project=project, owner=user, kind=kind).order_by("pk").first()
            if rule is None:
                rule = NotifyRule.objects.create(project=project, owner=user, created_by=user, kind=kind,
                                                 name=f"{user.get_username()}: {label}"[:100])
            elif not rule.enabled:
                rule.enabled = True
                rule.save(update_fields=["enabled"])
            rule.channels.add(*chosen)
            made.append(rule)
        audit_record(project=project, actor=user, verb=AuditEvent.Verb.NOTIFY_CHANGED, obj=made[0],
                     summary=f"{user.get_username()} turned on notifications of their assignments and mentions",
                     data={"rules": [r.pk for r in made], "channels": [c.pk for c in chosen]})
    return made


def personal_rules_disable(*, project: Project, user: Any) -> int:
    """Turn the person's own rules off (the project's rules stay as the admins set them)."""
    with transaction.atomic():
        n = NotifyRule.objects.filter(project=project, owner=user, enabled=True).update(enabled=False)
        if n:
            audit_record(project=project, actor=user, verb=AuditEvent.Verb.NOTIFY_CHANGED, obj=None,
                         summary=f"{user.get_username()} turned off their own notification rules")
    return n
