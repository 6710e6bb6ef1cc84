"""A run in progress as its page shows it: elapsed time, an ETA from the pace so far, and the
results that settled last (the rows fill in as they finish). Two small queries; polled by
the run page's progress panel every two seconds."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from evaluations.models import CaseResult, Run

RECENT = 8


def duration_text(seconds: float) -> str:
    """`8 s`, `1 min 05 s`, `2 h 03 min`."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@dataclass(frozen=True)
class RecentResult:
    pk: int
    eval_id: str
    iteration: int
    status: str
    latency_seconds: float | None


@dataclass(frozen=True)
class Live:
    elapsed: str | None  # since the run started; None while queued
    eta: str | None  # None until a result settled
    recent: list[RecentResult]


def live_status(run: Run, now: datetime | None = None) -> Live:
    now = now or timezone.now()
    started = run.started_at
    elapsed = (now - started).total_seconds() if started else None
    evaluated = run.cases_done
    remaining = run.cases_total - run.cases_done - run.cases_missing - run.cases_not_runnable
    eta = None
    if elapsed and evaluated and remaining > 0:
        eta = duration_text(remaining * elapsed / evaluated)
    elif elapsed is not None and remaining <= 0:
        eta = duration_text(0)
    recent = [RecentResult(*row) for row in CaseResult.objects.filter(run=run).exclude(
        status=CaseResult.Status.PENDING).order_by("-updated_at", "-pk")
        .values_list("pk", "case__eval_id", "iteration", "status", "latency_seconds")[:RECENT]]
    return Live(elapsed=duration_text(elapsed) if elapsed is not None else None, eta=eta, recent=recent)
