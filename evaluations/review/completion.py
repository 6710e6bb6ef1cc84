"""What review adds to a run's completion (registered as a completion hook in
evaluations/apps.py, so that runs never import review):

- before the completing transaction, the comparison with the run's default baseline is
  computed in the worker, so the first view of the compare page does not wait for the
  statistics (1-2 s at 10,000 cases);
- inside it, the comparison is stored with the status change: no view ever sees the run
  completed without it (and a crowd of first views would each compute it);
- the run's failures grouped by cause (`review.causes`) likewise: grouped before, kept inside;
- after it, the activity feed hears that the run finished (with its regressions and its new
  causes against that baseline), and cases that passed again end their triage on the run's
  branch.

None of it may fail the run: a failure is logged, and the pages compute the comparison anyway.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from evaluations.audit import audit_record
from evaluations.models import AuditEvent, Run
from evaluations.review.baselines import baseline_choice, baseline_label
from evaluations.review.causes import Cause, causes_store, group, new_causes_line, run_failures
from evaluations.review.comparison import compare, comparison_store, run_data
from evaluations.review.notices import compared_notices, run_notices
from evaluations.review.triage import triage_resolve_passed
from evaluations.runs.engine import Completion

log = logging.getLogger(__name__)


def on_run_completion(run: Run) -> Completion:
    baseline, compared = _with_default_baseline(run)
    causes = _grouped(run)

    def store(candidate: Run) -> None:
        if baseline is not None and compared is not None:
            comparison_store(baseline=baseline, candidate=candidate, summary=compared)
        if causes is not None:
            try:
                with transaction.atomic():  # a savepoint: the run completes even if this fails
                    causes_store(run=candidate, causes=causes)
            except Exception:
                log.exception("run %s: could not keep its causes", candidate.pk)

    def after(candidate: Run) -> None:
        _record_finish(candidate, baseline, compared)

    return Completion(store=store, after=after)


def _with_default_baseline(run: Run) -> tuple[Run | None, dict[str, Any] | None]:
    """(baseline, comparison), or (None, None) when there is no finished baseline or the
    statistics fail."""
    try:
        run = Run.objects.select_related("evalset_version__evalset").get(pk=run.pk)
        choice = baseline_choice(run)
        baseline = choice.run if choice is not None else None
        if baseline is None or not baseline.is_finished:
            return None, None
        return baseline, compare(run_data(baseline), run_data(run))
    except Exception:
        log.exception("run %s: could not precompute the comparison", run.pk)
        return None, None


def _grouped(run: Run) -> list[Cause] | None:
    """The run's failures grouped by cause, or None when that fails (the pages group them on
    their first view)."""
    try:
        return group(run_failures(run))
    except Exception:
        log.exception("run %s: could not group its failures by cause", run.pk)
        return None


def _record_finish(run: Run, baseline: Run | None, compared: dict[str, Any] | None) -> None:
    run = Run.objects.select_related("project", "evalset_version__evalset").get(pk=run.pk)
    regressions = (compared or {}).get("counts", {}).get("regressed") if compared else None
    name = f" ({run.name})" if run.name else ""
    new_causes = None
    label = None
    notices: list[dict[str, Any]] = []
    if baseline is not None and regressions is not None:
        choice = baseline_choice(run)
        reason = choice.reason if choice is not None and choice.run.pk == baseline.pk else "chosen"
        label = baseline_label(baseline_pk=baseline.pk, baseline_branch=baseline.branch, reason=reason,
                               candidate_branch=run.branch)
        said = f"{regressions} regression{'' if regressions == 1 else 's'} {label}"
        try:
            new_causes, causes_said = new_causes_line(baseline=baseline, candidate=run)
            said += f", {causes_said}"
        except Exception:
            log.exception("run %s: could not compare its causes", run.pk)
        try:
            notices = [n.as_dict() for n in compared_notices(baseline=baseline, candidate=run)]
        except Exception:
            log.exception("run %s: could not compare its notices", run.pk)
    else:
        said = "nothing to compare with"
        notices = [n.as_dict() for n in run_notices(run)]
    if notices:  # criteria that could not be scored: the run's set-up, never a cause
        same = sum(1 for n in notices if n.get("on_baseline") == "same")
        said += (f"; {len(notices)} criteri{'on' if len(notices) == 1 else 'a'} not scored"
                 + (f" ({same} the same on #{baseline.pk})" if baseline is not None and same else ""))
    audit_record(project=run.project, actor=None, verb=AuditEvent.Verb.RUN_FINISHED, obj=run,
                 summary=f"run #{run.pk}{name} finished: {said}",
                 data={"regressions": regressions, "baseline": baseline.pk if baseline else None,
                       "candidate": run.pk, "new_causes": new_causes, "baseline_label": label,
                       "notices": notices})
    triage_resolve_passed(run)
