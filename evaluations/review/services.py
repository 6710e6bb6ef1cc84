"""Review decisions other than triage: which run is an eval set's default baseline."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from evaluations.audit import audit_record
from evaluations.models import AuditEvent, EvalSet, Run


@transaction.atomic
def evalset_pin_baseline(*, evalset: EvalSet, run: Run, actor: Any) -> bool:
    """Make `run` the eval set's default baseline. False when it already is."""
    locked = EvalSet.objects.select_for_update().get(pk=evalset.pk)
    before = locked.baseline_run_id
    if before == run.pk:
        return False
    locked.baseline_run = run
    locked.save(update_fields=["baseline_run"])
    was = f"run #{before}" if before else "none"
    audit_record(project=locked.project, actor=actor, verb=AuditEvent.Verb.BASELINE_PINNED, obj=locked,
                 summary=f"pinned run #{run.pk} ({run.name or 'unnamed'}) as the baseline of "
                         f"{locked.display_name} (was {was})",
                 data={"from": before, "to": run.pk})
    return True
