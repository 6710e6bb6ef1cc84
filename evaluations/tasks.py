"""django-q2 entry points: thin, id-in, safe to run twice. The work is in the domain packages
(`runs`, `ingest`, `monitors`, `notify`, `review`) and `api.idempotency`'s sweep."""

from __future__ import annotations

import os
import socket

from evaluations.ingest import runs as traces_runs
from evaluations.runs import services as runs


def run_batch(run_id: int, first_pk: int, last_pk: int, batch_id: int | None = None,
              claim: str | None = None) -> dict[str, int | str]:
    """The batch's outcome as django-q2 stores it with the task: how many results it
    settled, and which worker (host:pid) did it, so an operator can see where work went.
    (Tasks queued before batches had leases come without `batch_id`, and before claims
    without `claim`.)"""
    settled = runs.run_batch(run_id, first_pk, last_pk, batch_id, claim)
    return {"settled": settled, "worker": f"{socket.gethostname()}:{os.getpid()}"}


def resume_stalled_runs() -> list[int]:
    """Every minute: batches the broker refused or lost, runs whose work stopped, and runs of
    received traces past a deadline whose schedule was lost; and the Idempotency-Key answers
    older than a day are forgotten."""
    from evaluations.api.idempotency import idempotency_sweep

    idempotency_sweep()
    return sorted(set(runs.lost_work_resume()) | set(runs.resume_stalled_runs())) + traces_runs.traces_runs_overdue()


def traces_run_deadline(run_id: int) -> int:
    """Scheduled at a traces run's deadline: its cases without a trace become missing."""
    return traces_runs.traces_run_deadline(run_id)


def nway_comparisons(reference_id: int, run_ids: list[int]) -> int:
    """The comparisons with a reference the several-runs page found missing."""
    from evaluations.review import nway  # not at start-up: numpy and the statistics in every worker

    return nway.comparisons_compute(reference_id, run_ids)


def notify_deliver(delivery_ids: list[int]) -> int:
    """Send the notification deliveries still due (evaluations.notify.delivery)."""
    from evaluations.notify import delivery

    return delivery.deliver(delivery_ids)


def notify_sweep() -> dict[str, int]:
    """Every minute: digests due, cooldowns ended, deliveries lost or due again."""
    from evaluations.notify import events

    return events.sweep()


def notify_events(event_ids: list[int]) -> int:
    """Match the rules of the outbox's events (evaluations.notify.events)."""
    from evaluations.notify import events

    return events.process(event_ids)
def monitor_traces(trace_pks: list[int]) -> int:
    """Issue 31: the monitors of these received traces' projects score those still pending
    (once per version); the sweep below does it if this task is lost."""
    from evaluations.monitors.pending import pending_score

    return pending_score(trace_pks)


def monitor_pending_sweep() -> dict[str, int]:
    """Every minute: the received traces whose scoring task was lost (or is late) are scored."""
    from evaluations.monitors.pending import pending_sweep

    swept = pending_sweep()
    return {"traces": swept.traces, "results": swept.results, "left": swept.left}


def monitor_threads_sweep() -> int:
    """Every minute: threads idle long enough are scored by their thread monitors."""
    from evaluations.monitors.scoring import sweep_threads

    return sweep_threads()


def monitor_backfill(monitor_id: int, since: str, until: str) -> int:
    """A monitor's current version over the traces received in [since, until) (ISO 8601)."""
    from datetime import datetime

    from evaluations.monitors.scoring import backfill

    return backfill(monitor_id, datetime.fromisoformat(since), datetime.fromisoformat(until))


def retention_sweep() -> dict[str, int]:
    """Hourly: each project's received traces and monitor results past its retention, in batches."""
    from evaluations.monitors.retention import retention_sweep as sweep

    return sweep()
