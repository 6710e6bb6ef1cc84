"""Deliveries: at least once, with the same idempotency id, whatever happens to a worker.

The database holds the state. A delivery is claimed with a conditional update (pending and
due, or sending with an expired lease) that sets a lease (`EVALSITE_NOTIFY_LEASE_SECONDS`,
longer than a send's timeout) and counts the attempt. Then it is sent, the attempt logged
(time, status code, latency, response excerpt), and the row marked sent, or pending again
after an exponential backoff (`EVALSITE_NOTIFY_BACKOFF_SECONDS` * 2^(attempt-1)), or failed
after `EVALSITE_NOTIFY_MAX_ATTEMPTS`. Short backoffs are waited out in the worker; longer ones,
and the work of a worker killed mid-send (its lease expires), are queued again by the sweep
(every minute, `sweep`). A channel that fails `EVALSITE_NOTIFY_PAUSE_AFTER` attempts in a row
is paused: its deliveries wait, unspent, until someone resumes it. A message that can never
be sent (`Outcome.alone`: a header no server takes, a receiver's 400/413/422) is failed at its
first try with the reason, and neither counts toward the pause nor holds the others back.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from evaluations.models import NotifyAttempt, NotifyChannel, NotifyDelivery, NotifyMessage
from evaluations.notify import channels, payloads

log = logging.getLogger(__name__)
TASK = "evaluations.tasks.notify_deliver"
CHUNK = 25


def owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def enqueue(delivery_ids: Iterable[int]) -> None:
    """Hand the deliveries to the task queue, CHUNK a task (a failure to enqueue is left to the sweep)."""
    from django_q.tasks import async_task

    ids = list(delivery_ids)
    for start in range(0, len(ids), CHUNK):
        try:
            async_task(TASK, ids[start:start + CHUNK], group="notify")
        except Exception:
            log.exception("could not queue deliveries %s; the sweep will", ids[start:start + CHUNK])


def backoff(attempts: int) -> float:
    return float(settings.EVALSITE_NOTIFY_BACKOFF_SECONDS * 2 ** max(attempts - 1, 0))


def _claimable(now: datetime) -> Q:
    return (Q(status=NotifyDelivery.Status.PENDING, next_attempt_at__lte=now)
            | Q(status=NotifyDelivery.Status.SENDING, leased_until__lt=now))


def claim(pk: int) -> bool:
    return bool(claim_many([pk]))


def claim_many(pks: list[int]) -> list[int]:
    """Take the deliveries of `pks` that are due and free (one UPDATE): ours until the lease ends."""
    now = timezone.now()
    me, until = owner(), now + timedelta(seconds=settings.EVALSITE_NOTIFY_LEASE_SECONDS)
    if not NotifyDelivery.objects.filter(_claimable(now), pk__in=pks, channel__paused_at=None,
                                         channel__enabled=True).update(
            status=NotifyDelivery.Status.SENDING, owner=me, attempts=F("attempts") + 1, leased_until=until):
        return []
    return list(NotifyDelivery.objects.filter(pk__in=pks, status=NotifyDelivery.Status.SENDING, owner=me,
                                              leased_until=until).values_list("pk", flat=True))


@dataclass
class _Tried:
    delivery: NotifyDelivery
    outcome: channels.Outcome
    latency_ms: float
    at: datetime


def deliver(delivery_ids: Iterable[int]) -> int:
    """Send the deliveries still due (the task): returns how many were sent. Retries whose
    backoff is short are waited out here; the others wait for the sweep."""
    ids, sent = list(delivery_ids), 0
    while ids:
        done, retry_at = _deliver_once(ids)
        sent += done
        if not retry_at:
            break
        wait = max(0.0, (min(retry_at.values()) - timezone.now()).total_seconds())
        if wait > settings.EVALSITE_NOTIFY_INLINE_BACKOFF_SECONDS:
            break
        time.sleep(wait)
        ids = [pk for pk, at in retry_at.items() if at <= timezone.now()]
    return sent


def _deliver_once(ids: list[int]) -> tuple[int, dict[int, datetime]]:
    """One try of each claimable delivery, written back a batch at a time (and at least every
    second, which renews the lease of those still to send). Returns (sent, {pk: next try})."""
    claimed = claim_many(ids)
    if not claimed:
        return 0, {}
    rows = list(NotifyDelivery.objects.filter(pk__in=claimed).select_related("channel", "message", "message__project")
                .order_by("pk"))
    tried: list[_Tried] = []
    paused: set[int] = set()
    sent, retry_at, written = 0, {}, time.monotonic()
    for index, delivery in enumerate(rows):
        if delivery.channel_id in paused:
            _release([delivery.pk])
            continue
        started = time.perf_counter()
        try:
            outcome = channels.send(delivery, delivery.channel, delivery.message)
        except Exception as exc:
            log.exception("delivery %s", delivery.pk)
            outcome = channels.Outcome(False, None, f"{type(exc).__name__}: {exc}"[:channels.EXCERPT])
        if outcome.alone:
            outcome = replace(outcome, excerpt=f"this message cannot be sent (not retried): {outcome.excerpt}")
        tried.append(_Tried(delivery, outcome, (time.perf_counter() - started) * 1000, timezone.now()))
        if not outcome.ok and not outcome.alone and _failed(delivery.channel, outcome.excerpt, tried[-1].at):
            paused.add(delivery.channel_id)
        if time.monotonic() - written > 1.0 or index == len(rows) - 1:
            done, later = _record(tried)
            sent, tried, written = sent + done, [], time.monotonic()
            retry_at.update(later)
            rest = [d.pk for d in rows[index + 1:]]
            if rest:
                NotifyDelivery.objects.filter(pk__in=rest, owner=owner()).update(
                    leased_until=timezone.now() + timedelta(seconds=settings.EVALSITE_NOTIFY_LEASE_SECONDS))
    sent_now, later = _record(tried)
    retry_at.update(later)
    return sent + sent_now, retry_at


def _release(pks: list[int]) -> None:
    """Give back claimed deliveries untried (their channel paused meanwhile): the try is not spent."""
    NotifyDelivery.objects.filter(pk__in=pks, status=NotifyDelivery.Status.SENDING, owner=owner()).update(
        status=NotifyDelivery.Status.PENDING, attempts=F("attempts") - 1, leased_until=None)


def _record(tried: list[_Tried]) -> tuple[int, dict[int, datetime]]:
    """The log rows, and each delivery marked sent, failed, or pending until its next try."""
    if not tried:
        return 0, {}
    NotifyAttempt.objects.bulk_create([
        NotifyAttempt(delivery=t.delivery, channel=t.delivery.channel, at=t.at, ok=t.outcome.ok,
                      status_code=t.outcome.status_code, latency_ms=t.latency_ms, excerpt=t.outcome.excerpt)
        for t in tried])
    mine = NotifyDelivery.objects.filter(status=NotifyDelivery.Status.SENDING, owner=owner())
    ok = [t for t in tried if t.outcome.ok]
    if ok:
        mine.filter(pk__in=[t.delivery.pk for t in ok]).update(
            status=NotifyDelivery.Status.SENT, sent_at=ok[-1].at, leased_until=None, last_error="")
        recovered = {t.delivery.channel_id for t in ok if t.delivery.channel.failures_in_row}
        if recovered:
            NotifyChannel.objects.filter(pk__in=recovered).update(failures_in_row=0)
    retry_at: dict[int, datetime] = {}
    for t in tried:
        if t.outcome.ok:
            continue
        error = t.outcome.excerpt[:500]
        if not t.outcome.retry or t.delivery.attempts >= settings.EVALSITE_NOTIFY_MAX_ATTEMPTS:
            mine.filter(pk=t.delivery.pk).update(status=NotifyDelivery.Status.FAILED, leased_until=None,
                                                 last_error=error)
            continue
        at = t.at + timedelta(seconds=backoff(t.delivery.attempts))
        if mine.filter(pk=t.delivery.pk).update(status=NotifyDelivery.Status.PENDING, leased_until=None,
                                                last_error=error, next_attempt_at=at):
            retry_at[t.delivery.pk] = at
    return len(ok), retry_at


def _failed(channel: NotifyChannel, why: str, now: datetime) -> bool:
    """Count a failed try against the channel; True when that pauses it."""
    NotifyChannel.objects.filter(pk=channel.pk).update(failures_in_row=F("failures_in_row") + 1)
    channel.failures_in_row += 1
    limit = settings.EVALSITE_NOTIFY_PAUSE_AFTER
    if limit and NotifyChannel.objects.filter(pk=channel.pk, paused_at=None, failures_in_row__gte=limit).update(
            paused_at=now, pause_reason=f"paused after {limit} failures in a row; the last: {why}"[:300]):
        log.warning("notification channel %s paused after %s failures in a row", channel.pk, limit)
        return True
    return False


def sweep(now: datetime | None = None) -> int:
    """Queue again what is due and has no task at work on it: pending deliveries past their
    backoff (or queued a while ago and never taken: a lost task), and deliveries whose
    worker's lease expired (a killed worker). Returns how many."""
    now = now or timezone.now()
    grace = now - timedelta(seconds=settings.EVALSITE_NOTIFY_SWEEP_GRACE_SECONDS)
    due = NotifyDelivery.objects.filter(
        Q(status=NotifyDelivery.Status.PENDING, next_attempt_at__lte=grace)
        | Q(status=NotifyDelivery.Status.PENDING, attempts__gt=0, next_attempt_at__lte=now)
        | Q(status=NotifyDelivery.Status.SENDING, leased_until__lt=now),
        channel__paused_at=None, channel__enabled=True)
    ids = list(due.order_by("next_attempt_at").values_list("pk", flat=True)[:5000])
    enqueue(ids)
    return len(ids)


def resume(channel: NotifyChannel) -> int:
    """Unpause the channel and queue what waited for it."""
    NotifyChannel.objects.filter(pk=channel.pk).update(paused_at=None, pause_reason="", failures_in_row=0)
    ids = list(NotifyDelivery.objects.filter(channel=channel, status=NotifyDelivery.Status.PENDING)
               .values_list("pk", flat=True))
    enqueue(ids)
    return len(ids)


def send_test(channel: NotifyChannel) -> NotifyDelivery:
    """A test message to the channel, through the queue like any other (the "send a test" button)."""
    now = timezone.now()
    item = {"type": "test", "verdict": f"test message to {channel.name} from evalsite",
            "url": payloads.absolute("/")}
    payload = payloads.message_payload(project=channel.project, rule=None, event="test", items=[item], recipient=None)
    message = NotifyMessage.objects.create(project=channel.project, event="test", subject=payload["subject"],
                                           payload=payload, created_at=now)
    delivery = NotifyDelivery.objects.create(message=message, channel=channel, idempotency_id=uuid.uuid4(),
                                             next_attempt_at=now, created_at=now)
    enqueue([delivery.pk])
    return delivery
