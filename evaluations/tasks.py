"""django-q2 entry points: thin, id-in, safe to run twice. The work is in `runs`."""

from __future__ import annotations

from evaluations import runs


def run_batch(run_id: int, first_pk: int, last_pk: int) -> int:
    return runs.run_batch(run_id, first_pk, last_pk)


def resume_stalled_runs() -> list[int]:
    return runs.resume_stalled_runs()
