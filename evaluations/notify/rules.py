"""What fires a rule, and how what fired becomes messages.

An event that matches a rule adds a `NotifyAlert` (once per rule, event key and recipient).
`flush` then turns each rule's pending alerts into one message (a project-wide rule), or the
pending alerts of every rule about people (triage assigned, @mention) into one message per
person, unless the rule fired less than its cooldown ago: then its alerts wait, and the sweep
sends them together once the cooldown has passed. So what fires together (the events of one
action are flushed together: `events.process`), or during a cooldown, is one message.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from evaluations.models import NotifyAlert, NotifyChannel, NotifyDelivery, NotifyMessage, NotifyRule, Run
from evaluations.notify import payloads

WindowStats = Callable[[int, str, datetime, datetime], tuple[int, int]]
PERSONAL = {NotifyRule.Kind.TRIAGE_ASSIGNED, NotifyRule.Kind.MENTION}


def fire(rule: NotifyRule, key: str, item: dict[str, Any], recipient_id: int | None = None) -> bool:
    """Add what fired the rule, unless this event already fired it (for this recipient)."""
    return bool(fire_many([rule], key, item, recipient_id))


def fire_many(rules: list[NotifyRule], key: str, item: dict[str, Any], recipient_id: int | None = None) -> list[int]:
    """`fire` for several rules at once (a few queries whatever their number): the ids of the
    rules this event had not fired yet."""
    if not rules:
        return []
    full = f"{key[:180]}|{recipient_id or ''}"
    seen = set(NotifyAlert.objects.filter(rule__in=rules, key=full).values_list("rule_id", flat=True))
    new = [r for r in rules if r.pk not in seen]
    NotifyAlert.objects.bulk_create([NotifyAlert(rule=r, key=full, data=item, recipient_id=recipient_id) for r in new],
                                    ignore_conflicts=True)  # a concurrent handler of the same event: one wins
    return [r.pk for r in new]


def cooling(rule: NotifyRule, now: datetime) -> bool:
    return (rule.cooldown_minutes > 0 and rule.last_fired_at is not None
            and now - rule.last_fired_at < timedelta(minutes=rule.cooldown_minutes))


def flush(rule_ids: Iterable[int], now: datetime | None = None) -> list[int]:
    """Each rule's pending alerts as messages with their deliveries (rules in cooldown wait),
    in one transaction and a fixed number of queries whatever the number of rules. Returns the
    new deliveries' ids; they are queued once the transaction commits."""
    now = now or timezone.now()
    ids = sorted(set(rule_ids))
    if not ids:
        return []
    with transaction.atomic():
        rules = [r for r in NotifyRule.objects.select_for_update().select_related("project").filter(pk__in=ids)
                 .order_by("pk") if not cooling(r, now)]
        if not rules:
            return []
        by_rule: dict[int, list[NotifyAlert]] = {}
        for alert in (NotifyAlert.objects.filter(rule__in=rules, message=None).select_related("recipient")
                      .order_by("created_at", "pk")):
            by_rule.setdefault(alert.rule_id, []).append(alert)
        through = NotifyRule.channels.through
        channels: dict[int, list[NotifyChannel]] = {}
        for link in through.objects.filter(notifyrule__in=list(by_rule), notifychannel__enabled=True).select_related(
                "notifychannel").order_by("notifychannel__name", "notifychannel_id"):
            channels.setdefault(link.notifyrule_id, []).append(link.notifychannel)
        planned: list[tuple[list[NotifyAlert], NotifyMessage, list[NotifyChannel]]] = []
        personal: dict[int | None, list[tuple[NotifyRule, NotifyAlert]]] = {}
        for rule in rules:
            if rule.kind in PERSONAL:
                for alert in by_rule.get(rule.pk, []):
                    personal.setdefault(alert.recipient_id, []).append((rule, alert))
            elif by_rule.get(rule.pk):
                planned.append((by_rule[rule.pk], _message(rule, by_rule[rule.pk], now), channels.get(rule.pk, [])))
        for pairs in personal.values():
            planned.append(_personal(pairs, channels, now))
        if not planned:
            return []
        messages = NotifyMessage.objects.bulk_create([m for _, m, _ in planned])
        if any(m.pk is None for m in messages):  # a backend that returns no ids
            raise RuntimeError("notifications need a database that returns inserted ids (SQLite >= 3.35, PostgreSQL)")
        for alerts, message, _ in planned:
            for alert in alerts:
                alert.message = message
        NotifyAlert.objects.bulk_update([a for alerts, _, _ in planned for a in alerts], ["message"])
        rows = NotifyDelivery.objects.bulk_create([
            NotifyDelivery(message=message, channel=c, idempotency_id=uuid.uuid4(), next_attempt_at=now,
                           created_at=now)
            for _, message, chosen in planned for c in chosen])
        NotifyRule.objects.filter(pk__in=[r.pk for r in rules if r.pk in by_rule]).update(last_fired_at=now)
        created = [int(r.pk) for r in rows]
    if created:
        from evaluations.notify import delivery

        transaction.on_commit(lambda: delivery.enqueue(created))
    return created


def _message(rule: NotifyRule, alerts: list[NotifyAlert], now: datetime) -> NotifyMessage:
    payload = payloads.message_payload(project=rule.project, rule=rule, event=rule.kind,
                                       items=[a.data for a in alerts], recipient=None)
    return NotifyMessage(project=rule.project, rule=rule, recipient=None, event=rule.kind,
                         subject=payload["subject"], payload=payload, created_at=now)


def _personal(pairs: list[tuple[NotifyRule, NotifyAlert]], channels: dict[int, list[NotifyChannel]],
              now: datetime) -> tuple[list[NotifyAlert], NotifyMessage, list[NotifyChannel]]:
    """One person's pending alerts of every personal rule (their assignments and mentions,
    through the project's rules and their own): one message listing each thing once, to every
    channel of those rules once."""
    pairs = sorted(pairs, key=lambda pair: (pair[1].created_at, pair[1].pk))
    rule, recipient = pairs[0][0], pairs[0][1].recipient
    items: dict[str, dict[str, Any]] = {}
    chosen: dict[int, NotifyChannel] = {}
    for each, alert in pairs:
        items.setdefault(alert.key, alert.data)  # the same event through two rules: one item
        for c in channels.get(each.pk, []):
            chosen.setdefault(c.pk, c)
    listed = list(items.values())
    event = (NotifyRule.Kind.TRIAGE_ASSIGNED if any(i.get("type") == "triage_assigned" for i in listed)
             else NotifyRule.Kind.MENTION)
    payload = payloads.message_payload(project=rule.project, rule=rule, event=event, items=listed,
                                       recipient=recipient.get_username() if recipient else None)
    message = NotifyMessage(project=rule.project, rule=rule, recipient=recipient, event=event,
                            subject=payload["subject"], payload=payload, created_at=now)
    return [a for _, a in pairs], message, sorted(chosen.values(), key=lambda c: (c.name, c.pk))


# --- A run finished ---------------------------------------------------------------------------


def run_rules(run: Run) -> list[NotifyRule]:
    """The project's enabled run rules whose filters (eval set, branch, model) admit the run."""
    return list(NotifyRule.objects.filter(
        Q(evalset=None) | Q(evalset_id=run.evalset_version.evalset_id),
        Q(branch="") | Q(branch=run.branch), Q(model="") | Q(model=run.model),
        project_id=run.project_id, kind=NotifyRule.Kind.RUN_FINISHED, enabled=True))


def run_condition_holds(rule: NotifyRule, run: Run, data: dict[str, Any]) -> bool:
    """Whether the finished run meets the rule's condition. `data` is what the completion
    recorded: regressions and new causes against the default baseline (None: no baseline)."""
    condition = rule.condition
    if condition == NotifyRule.RunCondition.ANY:
        return True
    if condition == NotifyRule.RunCondition.REGRESSIONS:
        return bool(data.get("regressions"))
    if condition == NotifyRule.RunCondition.NEW_CAUSES:
        return bool(data.get("new_causes"))
    if condition == NotifyRule.RunCondition.PASS_RATE_BELOW:
        rate = (run.summary or {}).get("pass_rate")
        return rate is not None and rule.pass_rate_below is not None and rate < rule.pass_rate_below
    return False


# --- A monitor's criterion over a window -----------------------------------------------------


@dataclass(frozen=True)
class MonitorCheck:
    fires: bool
    passed: int
    total: int
    reason: str


def monitor_check(rule: NotifyRule, window_stats: WindowStats, now: datetime) -> MonitorCheck:
    """Whether the monitor's criterion passed less than the threshold over the rule's window,
    counting only when the window holds at least `min_count` scores (a handful of scores says
    nothing). `window_stats(monitor_id, criterion, since, until) -> (passed, total)`."""
    assert rule.monitor_id is not None and rule.threshold is not None
    passed, total = window_stats(rule.monitor_id, rule.criterion, now - timedelta(minutes=rule.window_minutes), now)
    if total < rule.min_count:
        return MonitorCheck(False, passed, total, f"{total} scores, fewer than the minimum {rule.min_count}")
    rate = passed / total
    if rate >= rule.threshold:
        return MonitorCheck(False, passed, total, f"pass rate {rate:.1%} is not below {rule.threshold:.1%}")
    return MonitorCheck(True, passed, total, f"pass rate {rate:.1%} is below {rule.threshold:.1%}")


def monitor_scored(monitor_id: int, window_stats: WindowStats, now: datetime | None = None) -> list[int]:
    """Check the monitor's rules after a scoring batch; fire those below their threshold (at
    most once per window: the alert's key is the window it fell in; the cooldown spaces the
    messages). Returns the deliveries created."""
    now = now or timezone.now()
    fired = []
    for rule in NotifyRule.objects.filter(monitor_id=monitor_id, kind=NotifyRule.Kind.MONITOR, enabled=True):
        check = monitor_check(rule, window_stats, now)
        if not check.fires:
            continue
        window = max(rule.window_minutes, 1) * 60
        bucket = int(now.timestamp()) // window
        since = now - timedelta(minutes=rule.window_minutes)
        item = payloads.monitor_item(rule, check.passed, check.total, since.isoformat(), now.isoformat())
        if fire(rule, f"monitor:{monitor_id}:{rule.criterion}:{bucket}", item):
            fired.append(rule.pk)
    return flush(fired, now) if fired else []
