"""django-q2 entry points: thin, id-in, safe to run twice. The work is in `runs`."""

from __future__ import annotations

import os
import socket

from evaluations.ingest import runs as traces_runs
from evaluations.runs import services as runs


def run_batch(run_id: int, first_pk: int, last_pk: int) -> dict[str, int | str]:
    """The batch's outcome as django-q2 stores it with the task: how many results it
    settled, and which worker (host:pid) did it, so an operator can see where work went."""
    settled = runs.run_batch(run_id, first_pk, last_pk)
    return {"settled": settled, "worker": f"{socket.gethostname()}:{os.getpid()}"}


def resume_stalled_runs() -> list[int]:
    """Every minute: runs whose work stopped, and runs of received traces past a deadline
    whose schedule was lost."""
    return runs.resume_stalled_runs() + traces_runs.traces_runs_overdue()


def traces_run_deadline(run_id: int) -> int:
    """Scheduled at a traces run's deadline: its cases without a trace become missing."""
    return traces_runs.traces_run_deadline(run_id)


def nway_comparisons(reference_id: int, run_ids: list[int]) -> int:
    """The comparisons with a reference the several-runs page found missing."""
    from evaluations.review import nway  # not at start-up: numpy and the statistics in every worker

    return nway.comparisons_compute(reference_id, run_ids)
