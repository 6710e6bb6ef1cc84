"""Deleting a run, or an eval set with its runs, without locking the site.

A 100,000-case run holds half a million score rows: one `DELETE` cascading through them would
hold its locks (on SQLite, the whole database's write lock) for as long as that takes, and
every run writing its results, every upload and every comparison would wait. So the rows go
in batches of at most `BATCH` per transaction, leaves first (spans, grades, comparison rows,
scores, tool usage, results), and the run or eval set row last, when nothing heavy is left
to cascade. Between batches others write as usual.

A deletion interrupted half-way (a worker killed) leaves the run or eval set in place with
fewer rows; deleting it again finishes the work. The audit event is written first, in its
own transaction, so the activity feed says who deleted what even then.

`evalset_deletion_counts` is what the confirmation page names: versions, runs, results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connections, models, transaction

from evaluations.audit import audit_record
from evaluations.models import (
    AuditEvent,
    CaseResult,
    CauseSet,
    Comparison,
    ComparisonCase,
    ComparisonScatter,
    ComparisonSummary,
    EvalCase,
    EvalSet,
    EvalSetSource,
    EvalSetVersion,
    HumanGrade,
    ResultCause,
    Run,
    RunBatch,
    RunCause,
    Score,
    Span,
    ToolUsage,
    Trace,
    Triage,
)

BATCH = 5_000  # rows per transaction


def _in_batches(rows: models.QuerySet[Any], batch: int) -> int:
    """Delete `rows` a batch per transaction, each one statement (`DELETE ... WHERE pk IN
    (SELECT pk ... LIMIT batch)`), until none is left; returns how many went. The rows'
    children must be gone already: nothing cascades from here (the ORM's delete would load
    and list every batch's ids in Python, which cost eight times the database's work)."""
    model = rows.model
    inner, params = rows.order_by().values("pk")[:batch].query.sql_with_params()
    quote = connections[rows.db].ops.quote_name
    statement = (f"DELETE FROM {quote(model._meta.db_table)} "  # noqa: S608 - names from the model, values bound
                 f"WHERE {quote(model._meta.pk.column)} IN ({inner})")
    deleted = 0
    while True:
        with transaction.atomic(using=rows.db), connections[rows.db].cursor() as cursor:
            cursor.execute(statement, params)
            count = cursor.rowcount
        if count <= 0:
            return deleted
        deleted += count


def _run_rows(run_pk: int, batch: int) -> int:
    """Everything of one run but its row, leaves first."""
    deleted = _in_batches(Span.objects.filter(trace__run_id=run_pk), batch)
    deleted += _in_batches(Trace.objects.filter(run_id=run_pk), batch)
    deleted += _in_batches(HumanGrade.objects.filter(run_id=run_pk), batch)
    pairs = Comparison.objects.filter(models.Q(baseline_id=run_pk) | models.Q(candidate_id=run_pk))
    deleted += _in_batches(ComparisonCase.objects.filter(comparison__in=pairs), batch)
    deleted += _in_batches(ComparisonScatter.objects.filter(comparison__in=pairs), batch)
    deleted += _in_batches(ComparisonSummary.objects.filter(comparison__in=pairs), batch)
    with transaction.atomic():  # few rows each: comments go with their triage
        deleted += pairs.delete()[0]
        deleted += Triage.objects.filter(models.Q(baseline_id=run_pk) | models.Q(candidate_id=run_pk)).delete()[0]
    deleted += _in_batches(ResultCause.objects.filter(cause__cause_set__run_id=run_pk), batch)
    deleted += _in_batches(RunCause.objects.filter(cause_set__run_id=run_pk), batch)
    deleted += _in_batches(CauseSet.objects.filter(run_id=run_pk), batch)
    deleted += _in_batches(RunBatch.objects.filter(run_id=run_pk), batch)
    deleted += _in_batches(Score.objects.filter(run_id=run_pk), batch)
    deleted += _in_batches(ToolUsage.objects.filter(run_id=run_pk), batch)
    deleted += _in_batches(CaseResult.objects.filter(run_id=run_pk), batch)
    return deleted


def _run_label(run: Run) -> str:
    return f"run #{run.pk}" + (f" ({run.name})" if run.name else "")


def run_delete(*, run: Run, actor: Any, via: str, batch: int = BATCH) -> int:
    """Delete a finished run and everything of it (results, scores, comparisons and the triage
    decided in them, grades, received traces), recorded in the activity feed. A run still
    going is refused (cancel it first). Returns the number of rows deleted."""
    if not run.is_finished:
        raise ValueError(f"run #{run.pk} is still {run.status}: cancel it before deleting it")
    audit_record(project=run.project, actor=actor, verb=AuditEvent.Verb.RUN_DELETED, obj=run,
                 summary=f"deleted {_run_label(run)} ({run.cases_total:,} results) through {via}",
                 data={"run": run.pk, "evalset": run.evalset_version.evalset_id,
                       "version": run.evalset_version.number, "results": run.cases_total})
    deleted = _run_rows(run.pk, batch)
    with transaction.atomic():
        deleted += Run.objects.filter(pk=run.pk).delete()[0]
    return deleted


@dataclass(frozen=True)
class DeletionCounts:
    """What deleting an eval set takes with it."""

    versions: int
    cases: int
    runs: int
    results: int
    running: int  # runs still queued or running: the eval set cannot be deleted yet


def evalset_deletion_counts(evalset: EvalSet) -> DeletionCounts:
    """Three queries whatever the size: the versions and their cases, the runs and their
    results (from the runs' counters, not by counting result rows)."""
    versions = EvalSetVersion.objects.filter(evalset=evalset).aggregate(
        n=models.Count("pk"), cases=models.Sum("case_count"))
    runs = Run.objects.filter(evalset_version__evalset=evalset).aggregate(
        n=models.Count("pk"), results=models.Sum("cases_total"),
        running=models.Count("pk", filter=models.Q(status__in=[Run.Status.QUEUED, Run.Status.RUNNING])))
    return DeletionCounts(versions=versions["n"], cases=versions["cases"] or 0, runs=runs["n"],
                          results=runs["results"] or 0, running=runs["running"])


def evalset_delete(*, evalset: EvalSet, actor: Any, via: str, batch: int = BATCH) -> int:
    """Delete an eval set with its versions, cases and runs (each run as `run_delete` does),
    recorded in the activity feed. Refused while one of its runs is still going. Returns the
    number of rows deleted."""
    counts = evalset_deletion_counts(evalset)
    if counts.running:
        raise ValueError(f"{counts.running} run{'' if counts.running == 1 else 's'} of {evalset.display_name} "
                         "still going: cancel them before deleting the eval set")
    audit_record(project=evalset.project, actor=actor, verb=AuditEvent.Verb.EVALSET_DELETED, obj=evalset,
                 summary=f"deleted eval set {evalset.display_name} ({counts.versions} versions, {counts.runs} runs, "
                         f"{counts.results:,} results) through {via}",
                 data={"evalset": evalset.pk, "eval_set_id": evalset.eval_set_id, "versions": counts.versions,
                       "runs": counts.runs, "results": counts.results})
    EvalSet.objects.filter(pk=evalset.pk).update(baseline_run=None, latest_version=None)
    deleted = 0
    for run_pk in list(Run.objects.filter(evalset_version__evalset=evalset).values_list("pk", flat=True)):
        deleted += _run_rows(run_pk, batch)
        with transaction.atomic():
            deleted += Run.objects.filter(pk=run_pk).delete()[0]
    with transaction.atomic():  # a row per triaged case; their comments go with them
        deleted += Triage.objects.filter(evalset=evalset).delete()[0]
    deleted += _in_batches(EvalCase.objects.filter(evalset=evalset), batch)
    deleted += _in_batches(EvalSetSource.objects.filter(version__evalset=evalset), batch)
    with transaction.atomic():
        deleted += EvalSetVersion.objects.filter(evalset=evalset).delete()[0]
        deleted += EvalSet.objects.filter(pk=evalset.pk).delete()[0]
    return deleted
