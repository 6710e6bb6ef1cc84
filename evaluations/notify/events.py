"""Where rules hear about things: the activity feed (a run finished, a triage assigned, a
comment added: connected to AuditEvent's post_save in evaluations/apps.py, kept in an outbox
and handled by a worker once the recording transaction commits, the events of one transaction
together), a monitor's scoring
(`on_monitor_scored`), and the sweep (every minute: digests due, cooldowns ended, events and
deliveries to queue again).

Nothing here may fail what was recorded: an error is logged.
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q
from django.urls import reverse
from django.utils import timezone

from evaluations.models import AuditEvent, Comment, Membership, NotifyAlert, NotifyEvent, NotifyRule, Run, Triage
from evaluations.monitors.stats import criterion_window
from evaluations.notify import delivery, payloads, rules
from evaluations.review.causes import compared_causes
from evaluations.review.triage import mentioned

log = logging.getLogger(__name__)
HANDLED = {AuditEvent.Verb.RUN_FINISHED, AuditEvent.Verb.TRIAGE_CHANGED, AuditEvent.Verb.COMMENT_ADDED}


KINDS = {AuditEvent.Verb.RUN_FINISHED: [NotifyRule.Kind.RUN_FINISHED],
         AuditEvent.Verb.TRIAGE_CHANGED: [NotifyRule.Kind.TRIAGE_ASSIGNED],
         AuditEvent.Verb.COMMENT_ADDED: [NotifyRule.Kind.MENTION]}
TASK = "evaluations.tasks.notify_events"


class _Action:
    """The outbox rows one transaction writes (a bulk action on many cases, a triage with its
    comment): they share a key and go to the task queue as one task once it commits, so
    their rules make one message per person for the whole action."""

    def __init__(self, block: Any) -> None:
        self.block = block
        self.key = uuid.uuid4().hex
        self.ids: list[int] = []

    def __call__(self) -> None:
        enqueue(self.ids)


_local = threading.local()


def _action() -> _Action | None:
    """The action of the outermost transaction open (None when there is none): the one made
    for that atomic block while its commit callback is still pending, else a new one (a
    rolled-back block's callbacks are gone with its rows). A test case's own wrapping
    transaction is not an action, as Django's durable check ignores it too."""
    connection = transaction.get_connection()
    blocks = [b for b in connection.atomic_blocks if not getattr(b, "_from_testcase", False)]
    if not blocks:
        return None
    current = getattr(_local, "action", None)
    if (current is not None and current.block is blocks[0]
            and any(entry[1] is current for entry in connection.run_on_commit)):
        return current
    current = _local.action = _Action(blocks[0])
    transaction.on_commit(current)
    return current


def on_audit_event(sender: Any, instance: AuditEvent, created: bool = False, **kwargs: Any) -> None:
    """post_save of AuditEvent: an event some enabled rule of the project is about goes into the
    outbox (`NotifyEvent`, in the recording transaction when there is one) and to the task
    queue after the commit, with the other events of that transaction. So what records the
    event (a run's completion, a triage, a comment) pays an indexed query and, with rules, an
    insert and an enqueue: the rules are matched in a worker."""
    if not created or instance.verb not in HANDLED or instance.project_id is None:
        return
    try:
        if not NotifyRule.objects.filter(project_id=instance.project_id, enabled=True,
                                         kind__in=KINDS[AuditEvent.Verb(instance.verb)]).exists():
            return
        action = _action()
        outbox = NotifyEvent.objects.create(audit=instance, action=action.key if action else "")
    except Exception:
        log.exception("notifications for event %s (%s)", instance.pk, instance.verb)
        return
    if action is None:
        transaction.on_commit(lambda: enqueue([outbox.pk]))  # at once, when no transaction is open
    else:
        action.ids.append(outbox.pk)


def enqueue(event_ids: list[int]) -> None:
    from django_q.tasks import async_task

    try:
        async_task(TASK, event_ids, group="notify")
    except Exception:
        log.exception("could not queue notification events %s; the sweep will", event_ids)


def process(event_ids: list[int]) -> int:
    """The task: the outbox events still to do, an action at a time (the events one
    transaction recorded): each handled (safe twice: an event fires a rule once), then the
    rules they fired flushed together, so one action makes one message per person, and the
    events marked done, in one transaction. Returns how many were done."""
    actions: dict[str, list[NotifyEvent]] = {}
    for outbox in (NotifyEvent.objects.filter(pk__in=event_ids, done_at=None)
                   .select_related("audit", "audit__actor").order_by("pk")):
        actions.setdefault(outbox.action or f"event:{outbox.pk}", []).append(outbox)
    done = 0
    for outboxes in actions.values():
        with transaction.atomic():
            fired: list[int] = []
            for outbox in outboxes:
                fired += handle(outbox.audit)
            rules.flush(fired)
            done += NotifyEvent.objects.filter(pk__in=[o.pk for o in outboxes], done_at=None).update(
                done_at=timezone.now())
    return done


def handle(event: AuditEvent) -> list[int]:
    """The rules the event fired (their alerts added, not yet sent: `rules.flush`)."""
    try:
        with transaction.atomic():  # a failure undoes this event's alerts only
            if event.verb == AuditEvent.Verb.RUN_FINISHED:
                return run_finished(event)
            if event.verb == AuditEvent.Verb.TRIAGE_CHANGED:
                return triage_assigned(event)
            if event.verb == AuditEvent.Verb.COMMENT_ADDED:
                return comment_added(event)
    except Exception:
        log.exception("notifications for event %s (%s)", event.pk, event.verb)
    return []


def personal_rules(project_id: int, kind: str, user_id: int) -> list[NotifyRule]:
    """The project's enabled rules of a personal kind that speak for the person: the
    project-wide ones and their own."""
    return list(NotifyRule.objects.filter(Q(owner=None) | Q(owner_id=user_id), project_id=project_id, enabled=True,
                                          kind=kind))


def run_finished(event: AuditEvent) -> list[int]:
    run = (Run.objects.select_related("evalset_version__evalset").filter(pk=int(event.object_id)).first()
           if event.object_id.isdigit() else None)
    if run is None:
        return []
    data = event.data or {}
    matched = [r for r in rules.run_rules(run) if rules.run_condition_holds(r, run, data)]
    if not matched:
        return []
    baseline = (Run.objects.select_related("evalset_version").filter(pk=data["baseline"]).first()
                if isinstance(data.get("baseline"), int) else None)
    item = payloads.run_item(run, data, _top_causes(run, data.get("baseline")), baseline)
    return rules.fire_many(matched, f"run:{run.pk}", item)


def _top_causes(run: Run, baseline_id: int | None) -> list[dict[str, Any]]:
    if not baseline_id:
        return []
    baseline = Run.objects.filter(pk=baseline_id).first()
    compared = compared_causes(baseline=baseline, candidate=run, limit=payloads.CAUSES_SHOWN) if baseline else None
    if compared is None:
        return []
    return [{"signature": c.signature[:300], "cases": c.cases, "change": c.state,
             "url": payloads.compare_url(baseline_id, run.pk, c.pk if c.state != "gone" else None)}
            for c in compared.rows if c.state != "gone"][:payloads.CAUSES_SHOWN]


def triage_assigned(event: AuditEvent) -> list[int]:
    data, project_id = event.data or {}, int(event.project_id or 0)
    assignee = (data.get("after") or {}).get("assignee")
    if not assignee or assignee == (data.get("before") or {}).get("assignee"):
        return []
    user = get_user_model().objects.filter(username=assignee).first()
    if user is None or user.pk == event.actor_id:
        return []
    by = event.actor.get_username() if event.actor else "someone"
    triage = Triage.objects.filter(pk=int(data.get("triage") or 0)).first()
    url = payloads.absolute(reverse("review_queue") + f"?assignee={assignee}")
    if triage is not None:
        url = payloads.compare_url(triage.baseline_id, triage.candidate_id) + f"&q={triage.eval_id}"
    item = {"type": "triage_assigned", "verdict": f"{by} assigned {data.get('eval_id', '')} to {assignee}",
            "eval_id": data.get("eval_id"), "assignee": assignee, "by": by, "url": url,
            "status": (data.get("after") or {}).get("status")}
    assigned = personal_rules(project_id, NotifyRule.Kind.TRIAGE_ASSIGNED, user.pk)
    return rules.fire_many(assigned, f"triage:{event.pk}", item, user.pk)


def comment_added(event: AuditEvent) -> list[int]:
    comment = (Comment.objects.select_related("triage", "author").filter(pk=int(event.object_id)).first()
               if event.object_id.isdigit() else None)
    if comment is None:
        return []
    project_id, names = int(event.project_id or 0), mentioned(comment.body)
    if not names:
        return []
    members = dict(Membership.objects.filter(project_id=project_id, user__username__in=names)
                   .exclude(user_id=comment.author_id or 0).values_list("user__username", "user_id"))
    if not members:
        return []
    triage = comment.triage
    author = comment.author.get_username() if comment.author else "someone"
    url = payloads.absolute(reverse("run_case_by_eval_id", args=[triage.candidate_id])
                            + f"?eval_id={triage.eval_id}&baseline={triage.baseline_id}")
    fired: set[int] = set()
    for name, user_id in members.items():
        excerpt = re.sub(r"\s+", " ", comment.body)[:200]
        item = {"type": "mention", "verdict": f"{author} mentioned @{name} on {triage.eval_id}",
                "eval_id": triage.eval_id, "author": author, "mentioned": name, "excerpt": excerpt, "url": url}
        fired |= set(rules.fire_many(personal_rules(project_id, NotifyRule.Kind.MENTION, user_id),
                                     f"comment:{comment.pk}", item, user_id))
    return sorted(fired)


# --- Monitors (issue 31) ----------------------------------------------------------------------


def on_monitor_scored(monitor_id: int, **kwargs: Any) -> None:
    """Receiver of `evaluations.monitors.signals.monitor_scored` (sent after each scoring batch
    commits; connected in evaluations/apps.py): checks the monitor's rules over their windows
    with `evaluations.monitors.stats.criterion_window`. A failure is logged, never raised into
    the scoring worker."""
    try:
        rules.monitor_scored(monitor_id, criterion_window)
    except Exception:
        log.exception("notifications for monitor %s", monitor_id)


# --- Digests and the sweep ------------------------------------------------------------------


PERIODS = {NotifyRule.Period.DAILY: timedelta(days=1), NotifyRule.Period.WEEKLY: timedelta(days=7)}


def digest_item(project_id: int, since: datetime, until: datetime, period: str) -> dict[str, Any]:
    """The project's runs finished, regressions, new causes and triage status over the period
    (aggregated from the activity feed: runs, not cases, are read)."""
    finished = AuditEvent.objects.filter(project_id=project_id, verb=AuditEvent.Verb.RUN_FINISHED,
                                         created_at__gte=since, created_at__lt=until)
    rows = list(finished.order_by("-created_at").values_list("object_id", "data")[:1000])
    regressions = sum(int((d or {}).get("regressions") or 0) for _, d in rows)
    new_causes = sum(int((d or {}).get("new_causes") or 0) for _, d in rows)
    regressed = sorted(((int((d or {}).get("regressions") or 0), o) for o, d in rows
                        if (d or {}).get("regressions")), reverse=True)[:5]
    names = dict(Run.objects.filter(pk__in=[int(o) for _, o in regressed if o.isdigit()]).values_list("pk", "name"))
    triage = dict(Triage.objects.filter(project_id=project_id).values_list("status").annotate(n=Count("pk"))
                  .values_list("status", "n"))
    count = finished.count()
    return {"type": "digest", "period": period, "since": since.isoformat(), "until": until.isoformat(),
            "runs": count, "regressions": regressions, "new_causes": new_causes, "triage": triage,
            "regressed_runs": [{"id": int(o), "name": names.get(int(o), ""), "regressions": n,
                                "url": payloads.absolute(reverse("run_detail", args=[int(o)]))}
                               for n, o in regressed if o.isdigit()],
            "verdict": f"{period} digest: {count} run{'' if count == 1 else 's'} finished, "
                       f"{regressions} regression{'' if regressions == 1 else 's'}, "
                       f"{new_causes} new cause{'' if new_causes == 1 else 's'}"}


def digest_due(rule: NotifyRule) -> datetime:
    """When the rule's next digest goes out: a period after it last went, or after the rule
    was made (a new rule waits for its first period: a digest of the minutes since it was
    saved says nothing)."""
    length = PERIODS.get(NotifyRule.Period(rule.period), PERIODS[NotifyRule.Period.DAILY])
    return (rule.last_fired_at or rule.created_at) + length


def digests(now: datetime | None = None) -> list[int]:
    """The digest rules whose period has passed since they last fired (or were made)."""
    now = now or timezone.now()
    fired = []
    for rule in NotifyRule.objects.filter(kind=NotifyRule.Kind.DIGEST, enabled=True):
        length = PERIODS.get(NotifyRule.Period(rule.period), PERIODS[NotifyRule.Period.DAILY])
        if now < digest_due(rule):
            continue
        since = max(rule.last_fired_at or rule.created_at, now - length)
        if rules.fire(rule, f"digest:{now.isoformat()}", digest_item(rule.project_id, since, now, rule.period)):
            fired.append(rule.pk)
    return rules.flush(fired, now)


RECONCILE = timedelta(hours=1)


def unrecorded(*, since: datetime, until: datetime) -> int:
    """Write the outbox rows of events a rule is about that reached the activity feed without
    one: recorded outside a transaction, the event and its outbox row are two writes, and a
    process that died between them left the second unwritten. Looks back over [since, until)
    in the projects with enabled rules, at events no older than the oldest rule that wants
    them, along the feed's (project, time) index; the outbox's unique event makes this safe
    to run any number of times. Returns how many it wrote."""
    verbs_of = {kind: verb for verb, kinds in KINDS.items() for kind in kinds}
    wanted: dict[int, dict[str, datetime]] = {}
    for project_id, kind, created_at in NotifyRule.objects.filter(enabled=True, kind__in=list(verbs_of)).values_list(
            "project_id", "kind", "created_at"):
        verb = str(verbs_of[NotifyRule.Kind(kind)])
        seen = wanted.setdefault(project_id, {})
        seen[verb] = min(seen.get(verb, created_at), created_at)
    missing: list[int] = []
    for project_id, verbs in wanted.items():
        for verb, first_rule in verbs.items():
            missing += AuditEvent.objects.filter(
                project_id=project_id, verb=verb, created_at__gte=max(since, first_rule), created_at__lt=until,
            ).filter(~Exists(NotifyEvent.objects.filter(audit_id=OuterRef("pk")))).values_list("pk", flat=True)[:1000]
    if missing:
        NotifyEvent.objects.bulk_create([NotifyEvent(audit_id=pk) for pk in missing], ignore_conflicts=True)
        log.warning("notifications: %d events had no outbox row; written", len(missing))
    return len(missing)


def sweep() -> dict[str, int]:
    """Every minute: digests due, alerts whose rule's cooldown has ended, deliveries to queue again."""
    now = timezone.now()
    made = digests(now)
    waiting = NotifyAlert.objects.filter(message=None).values_list("rule_id", flat=True).distinct()
    made += rules.flush(list(waiting), now)
    grace = now - timedelta(seconds=settings.EVALSITE_NOTIFY_SWEEP_GRACE_SECONDS)
    unrecorded(since=now - RECONCILE, until=grace)
    lost = list(NotifyEvent.objects.filter(done_at=None, created_at__lte=grace).values_list("pk", flat=True)[:1000])
    if lost:
        enqueue(lost)
    return {"digests_and_grouped": len(made), "events_requeued": len(lost), "requeued": delivery.sweep(now)}
