"""Runs whose target is "traces": evalsite creates the run, the agent runs wherever it runs and
sends its traces to `POST /v1/traces`, and each trace naming a case becomes that case's output.

A trace names its case with attributes, on its resource or on its root span:

- `evalsite.run_id` (int, or a string of digits): the run, which must be in the project the
  request is for (another project's run is refused with a 403 and nothing is stored);
- `evalsite.eval_id` (string): the case's eval id in the run's eval set;
- `evalsite.iteration` (int, optional, default 0): which repeat, for runs of several.

A trace becomes the case's output once its root span (no parent) has arrived: spans are
exported as they end, so the root comes last. The output is what the spans show
(`interop.otel.spans.apply_spans`: tool calls, trajectory, usage, latency, the root's answer);
a failed root span makes it an errored case. A case takes the first complete trace only:
the update that stores it is conditional on the result still having no output, so a
second trace, a retried export, or one racing the deadline never replaces it or counts
twice; it stays in the project's trace list.

The run stays `queued` while it waits. When every case has an output it is queued for
scoring, once (a conditional update of its status), and scored by the normal engine as
uploaded outputs are. At its deadline (a django-q2 schedule, and the once-a-minute
watchdog for a schedule that was lost), the cases still without one become `missing` and
the run is queued with the others.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from evaluations.converters import whole_number
from evaluations.interop.otel.spans import Span as SpanModel
from evaluations.interop.otel.spans import apply_spans
from evaluations.models import CaseResult, EvalCase, EvalSetVersion, EvaluationConfig, Project, Run, Span, Trace
from evaluations.runs import services as runs
from evaluations.schemas.evalset import EvalConfig
from evaluations.schemas.outputs import AgentOutput, TurnOutput

NO_TRACE = "no trace arrived for this case before the run's deadline"
DEADLINE_TASK = "evaluations.tasks.traces_run_deadline"


class RunRefused(PermissionError):
    """A trace names a run of another project (or none): the request is refused."""


# --- Creating ---------------------------------------------------------------------------------


def traces_run_create(
    *,
    project: Project,
    version: EvalSetVersion,
    deadline_seconds: int | None = None,
    config: EvalConfig | None = None,
    preset: EvaluationConfig | None = None,
    iterations: int = 1,
    eval_ids: Sequence[str] | None = None,
    labels: dict[str, Any] | None = None,
    name: str = "",
    user: Any = None,
) -> Run:
    """A run waiting for its cases' traces until `deadline_seconds` from now (default
    EVALSITE_TRACES_DEADLINE_SECONDS), with its deadline scheduled on the task queue."""
    seconds = settings.EVALSITE_TRACES_DEADLINE_SECONDS if deadline_seconds is None else deadline_seconds
    if not 0 <= seconds <= 30 * 86400:
        raise runs.RunError(f"deadline_seconds must be between 0 and {30 * 86400}, not {seconds}")
    deadline = timezone.now() + timedelta(seconds=seconds)
    with transaction.atomic():
        run = runs.run_create(
            project=project,
            version=version,
            target_kind=Run.TargetKind.TRACES,
            target={"deadline": deadline.isoformat(), "deadline_seconds": seconds},
            config=config,
            preset=preset,
            iterations=iterations,
            eval_ids=eval_ids,
            labels=labels,
            name=name,
            user=user,
            enqueue=False,
        )
        _queue_if_complete(run.pk)  # an eval set with nothing to wait for
        run_id = run.pk
        transaction.on_commit(lambda: _schedule_deadline(run_id, deadline), robust=True)
    run.refresh_from_db()
    return run


def _schedule_deadline(run_id: int, deadline: datetime) -> None:
    from django_q.models import Schedule

    Schedule.objects.update_or_create(
        name=f"evalsite: traces deadline of run {run_id}",
        defaults={
            "func": DEADLINE_TASK,
            "args": f"({run_id},)",
            "schedule_type": Schedule.ONCE,
            "repeats": -1,
            "next_run": deadline,
        },
    )


def deadline_of(run: Run) -> datetime | None:
    text = (run.target or {}).get("deadline")
    if not isinstance(text, str):
        return None
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(text)
    return None


# --- The deadline -------------------------------------------------------------------------------


def traces_run_deadline(run_id: int) -> int:
    """At (or after) the deadline: the cases with no trace become `missing`, and the run is
    queued for scoring. Returns how many became missing; safe to call any number of times."""
    with transaction.atomic():
        run = (
            Run.objects.select_for_update()
            .filter(pk=run_id, target_kind=Run.TargetKind.TRACES, status=Run.Status.QUEUED)
            .first()
        )
        if run is None:
            return 0
        deadline = deadline_of(run)
        if deadline is not None and timezone.now() < deadline:
            return 0  # too early (a schedule moved by hand): the watchdog comes back
        missing = CaseResult.objects.filter(
            run_id=run_id, status=CaseResult.Status.PENDING, output__isnull=True
        ).update(status=CaseResult.Status.MISSING, error=NO_TRACE, updated_at=timezone.now())
        if missing:
            Run.objects.filter(pk=run_id).update(cases_missing=F("cases_missing") + missing)
        _queue_if_complete(run_id)
    return missing


def traces_runs_overdue() -> list[int]:
    """Runs past their deadline that still wait (their schedule lost): settle them now.
    Called by the watchdog every minute."""
    settled = []
    now = timezone.now()
    for run in Run.objects.filter(target_kind=Run.TargetKind.TRACES, status=Run.Status.QUEUED).only("pk", "target"):
        deadline = deadline_of(run)
        if deadline is None or deadline <= now:
            traces_run_deadline(run.pk)
            settled.append(run.pk)
        elif _queue_if_complete_atomic(run.pk):
            settled.append(run.pk)
    return settled


def _queue_if_complete_atomic(run_id: int) -> bool:
    with transaction.atomic():
        return _queue_if_complete(run_id)


def _queue_if_complete(run_id: int) -> bool:
    """Queue the run for scoring when no case waits for a trace: once, whoever gets here
    first (a conditional update of its status)."""
    if CaseResult.objects.filter(run_id=run_id, status=CaseResult.Status.PENDING, output__isnull=True).exists():
        return False
    now = timezone.now()
    queued = Run.objects.filter(pk=run_id, target_kind=Run.TargetKind.TRACES, status=Run.Status.QUEUED).update(
        status=Run.Status.RUNNING, started_at=now, heartbeat_at=now
    )
    if queued:
        transaction.on_commit(lambda: runs.run_enqueue(run_id), robust=True)
    return bool(queued)


# --- Traces naming runs -------------------------------------------------------------------------


@dataclass
class RunRefs:
    """The runs and cases a request's traces name, checked before anything is stored."""

    rejected: dict[str, str] = field(default_factory=dict)  # trace id -> why its spans were not taken
    named: dict[str, tuple[int, str, int]] = field(default_factory=dict)  # trace id -> (run, eval id, iteration)
    turns: dict[tuple[int, str], int] = field(default_factory=dict)  # (run, eval id) -> the case's turn count


def check_run_refs(*, project: Project, batch: Any) -> RunRefs:
    """What the batch's traces name. A run of another project, or no run, refuses the whole
    request (RunRefused); a case the run does not have rejects that trace's spans only."""
    refs = RunRefs()
    wanted: dict[str, tuple[int, str, int]] = {}
    for trace_id, t in batch.traces.items():
        if t.run_ref is None:
            continue
        run_id = _int(t.run_ref)
        iteration = 0 if t.iteration is None else _int(t.iteration)
        if run_id is None:
            refs.rejected[trace_id] = f"trace {trace_id}: evalsite.run_id {str(t.run_ref)[:40]!r} is not a run id"
        elif not t.eval_id:
            refs.rejected[trace_id] = f"trace {trace_id}: names run {run_id} but no evalsite.eval_id"
        elif iteration is None or iteration < 0:
            refs.rejected[trace_id] = f"trace {trace_id}: evalsite.iteration {str(t.iteration)[:40]!r} is not a repeat"
        else:
            wanted[trace_id] = (run_id, t.eval_id, iteration)
    if not wanted:
        return refs
    found = {
        pk: (project_id, kind, version_id)
        for pk, project_id, kind, version_id in Run.objects.filter(
            pk__in={r for r, _, _ in wanted.values()}
        ).values_list("pk", "project_id", "target_kind", "evalset_version_id")
    }
    for run_id, _, _ in wanted.values():
        if run_id not in found or found[run_id][0] != project.pk:
            raise RunRefused(
                f"evalsite.run_id {run_id} is not a run of project {project.slug!r}: spans naming "
                "another project's run are refused"
            )
    # The cases of each run's version (versions share unchanged case rows, so a row's own
    # version need not be the run's), found by eval id through the (eval set, eval id) index.
    eval_ids = sorted({e for _, e, _ in wanted.values()})
    cases: dict[tuple[int, str], int] = {}
    for version in EvalSetVersion.objects.filter(pk__in={found[r][2] for r, _, _ in wanted.values()}):
        for eval_id, turns in EvalCase.objects.in_version_by_eval_id(version, eval_ids).values_list(
            "eval_id", "turn_count"
        ):
            cases[(version.pk, eval_id)] = turns
    for trace_id, (run_id, eval_id, iteration) in wanted.items():
        _, kind, version_id = found[run_id]
        if kind != Run.TargetKind.TRACES:
            refs.rejected[trace_id] = f"trace {trace_id}: run {run_id} does not take traces (its target is {kind})"
        elif (version_id, eval_id) not in cases:
            refs.rejected[trace_id] = f"trace {trace_id}: run {run_id}'s eval set has no case {eval_id!r}"
        else:
            refs.named[trace_id] = (run_id, eval_id, iteration)
            refs.turns[(run_id, eval_id)] = cases[(version_id, eval_id)]
    return refs


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return whole_number(value)
    return None


def traces_attach(
    *, project: Project, batch: Any, trace_pks: dict[str, int], refs: RunRefs, earlier: Sequence[str] = ()
) -> list[str]:
    """Inside the storing transaction: tie the traces that name a case to its run, and make
    each complete one its case's output (see the module doc). `earlier` are trace ids some
    spans of which came before (their reference may have come then). Returns messages for
    the exporter about traces that were kept but not used."""
    by_run: dict[int, list[int]] = {}
    for trace_id, (run_id, _, _) in refs.named.items():
        by_run.setdefault(run_id, []).append(trace_pks[trace_id])
    for run_id, pks in by_run.items():
        Trace.objects.filter(pk__in=pks).update(run_id=run_id)
    candidates = [trace_pks[t] for t in refs.named] + [trace_pks[t] for t in earlier if t not in refs.named]
    if not candidates:
        return []
    ready = list(
        Trace.objects.filter(pk__in=candidates, run__isnull=False, result__isnull=True, complete=True).values_list(
            "pk", "trace_id", "run_id", "eval_id"
        )
    )
    messages: list[str] = []
    touched: set[int] = set()
    for pk, trace_id, run_id, eval_id in sorted(ready, key=lambda r: (r[2], r[0])):  # runs locked in one order
        iteration = refs.named[trace_id][2] if trace_id in refs.named else 0
        status = Run.objects.select_for_update().filter(pk=run_id).values_list("status", flat=True).first()
        if status != Run.Status.QUEUED:
            messages.append(
                f"trace {trace_id}: run {run_id} is no longer waiting for traces ({status}); "
                "the trace is kept in the project's trace list"
            )
            continue
        result = (
            CaseResult.objects.filter(run_id=run_id, case__eval_id=eval_id, iteration=iteration)
            .values_list("pk", flat=True)
            .first()
        )
        if result is None:
            messages.append(f"trace {trace_id}: run {run_id} has no result for case {eval_id!r} repeat {iteration}")
            continue
        output = output_of(pk, trace_id, eval_id, iteration, refs.turns.get((run_id, eval_id), 1))
        taken = CaseResult.objects.filter(pk=result, status=CaseResult.Status.PENDING, output__isnull=True).update(
            output=output.model_dump(mode="json", exclude_defaults=True), updated_at=timezone.now()
        )
        if taken:
            Trace.objects.filter(pk=pk).update(result_id=result)
            touched.add(run_id)
        else:
            messages.append(
                f"trace {trace_id}: case {eval_id!r} of run {run_id} already has its output (or its "
                "deadline passed); the trace is kept in the project's trace list"
            )
    for run_id in sorted(touched):
        _queue_if_complete(run_id)
    return messages


def output_of(trace_pk: int, trace_id: str, eval_id: str, iteration: int, turn_count: int) -> AgentOutput:
    """The case's output from a stored trace's spans."""
    spans = []
    for span_id, parent, name, start, end, status, attributes in Span.objects.filter(trace_id=trace_pk).values_list(
        "span_id", "parent_span_id", "name", "start_ns", "end_ns", "status", "attributes"
    ):
        attributes = dict(attributes or {})
        message = str(attributes.pop("otel.status_message", "") or "")
        spans.append(
            SpanModel(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=parent or None,
                name=name,
                start_time_unix_nano=start or 0,
                end_time_unix_nano=end,
                attributes=attributes,
                status_code=status or "UNSET",
                status_message=message,
            )
        )
    turns = [TurnOutput() for _ in range(turn_count)] if turn_count > 1 else []
    output = apply_spans(AgentOutput(eval_id=eval_id, iteration=iteration, turns=turns), spans)
    roots = [s for s in spans if not s.parent_span_id]
    failed = next((s.error() for s in roots if s.error()), None)
    if failed:
        output.error = f"the agent's root span failed: {failed}"
    output.metadata["trace_id"] = trace_id
    return output


@dataclass(frozen=True)
class Waiting:
    """A traces run that waits: how many cases have their trace, and until when."""

    received: int
    total: int
    deadline: datetime | None


def traces_waiting(run: Run) -> Waiting | None:
    """For the run page while a traces run waits (one query), else None."""
    if run.target_kind != Run.TargetKind.TRACES or run.status != Run.Status.QUEUED:
        return None
    waiting = CaseResult.objects.filter(run=run, status=CaseResult.Status.PENDING, output__isnull=True).count()
    settled = run.cases_missing + run.cases_not_runnable
    return Waiting(received=run.cases_total - settled - waiting, total=run.cases_total - settled,
                   deadline=deadline_of(run))
