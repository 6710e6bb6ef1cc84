"""A run's notices against its baseline's: which criteria could not be scored in the candidate,
and whether the baseline had the same (same criterion, kind and reason). A notice is the run's
set-up, not the agent's change: it is said once, beside the comparison, never as a cause, a
"new" cause or a regression (the cases it left without a verdict compare as "not fully
scored")."""

from __future__ import annotations

from dataclasses import replace

from evaluations.models import Run
from evaluations.runs.selectors import Notice, notice_views
from evaluations.runs.summary import notices_of

SAME, NEW = "same", "new"


def run_notices(run: Run) -> tuple[Notice, ...]:
    return notice_views(notices_of(run))


def compared_notices(*, baseline: Run, candidate: Run) -> tuple[Notice, ...]:
    """The candidate's notices, each marked "same" (with the baseline's case count) or "new"."""
    return mark(run_notices(candidate), baseline)


def mark(notices: tuple[Notice, ...], baseline: Run) -> tuple[Notice, ...]:
    if not notices:
        return ()
    before = {(n.criterion, n.kind, n.reason): n for n in run_notices(baseline)}
    out = []
    for notice in notices:
        was = before.get((notice.criterion, notice.kind, notice.reason))
        out.append(replace(notice, on_baseline=SAME if was is not None else NEW,
                           baseline_cases=was.cases if was is not None else None))
    return tuple(out)


def new_notices(notices: tuple[Notice, ...]) -> int:
    return sum(1 for n in notices if n.on_baseline == NEW)


def notices_against(run: Run, baseline_pk: int | None) -> tuple[Notice, ...]:
    """The run page's notices: marked against its default baseline (one more query, only when
    the run has any)."""
    notices = run_notices(run)
    if not notices or baseline_pk is None:
        return notices
    baseline = Run.objects.filter(pk=baseline_pk).only("pk", "summary", "cases_total", "iterations").first()
    return mark(notices, baseline) if baseline is not None else notices
