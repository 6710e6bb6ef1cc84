"""Run lifecycle: create, execute in batches on the task queue, finish, cancel, retry, resume.

How a run survives failures:
- Work is split into batches of case results (never a task per score). A batch task only
  touches results that are still `pending`, and it marks them done in the same transaction
  that writes their scores, under a row lock: a task that runs twice, or two copies of one
  task, write each result exactly once.
- The run's `heartbeat_at` is renewed as batches progress. A run whose heartbeat is older
  than the lease while results are still pending has lost its work (a worker killed with
  SIGKILL, a Redis broker that dropped the task, a whole cluster restarted): the
  `resume_stalled_runs` schedule re-enqueues its pending results, whatever the broker.
- While a batch works, a thread keeps renewing the heartbeat, so a slow agent or judge
  does not pass for a dead worker (which would queue the same work again). A run whose
  batches are still waiting in the broker, behind other runs, is not stalled either: the
  watchdog leaves it alone instead of piling copies of its tasks onto the queue.
- Counters only ever change with F() expressions, by the number of rows a conditional
  update actually moved.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Avg, Count, F, Max, Min, Q, Sum
from django.utils import timezone

from evaluations.evalsets.formats.base import gc_paused
from evaluations.evaluators import Evaluator, ScoreResult, get_evaluator_class
from evaluations.evaluators.base import Level
from evaluations.evaluators.runnable import NOT_RUNNABLE, is_custom_uipath, not_runnable_reason
from evaluations.models import (
    CaseResult,
    EvalCase,
    EvalSetVersion,
    EvaluationConfig,
    Project,
    Run,
    Score,
    Span,
    ToolUsage,
    Trace,
)
from evaluations.ordering import config_in_order, ordered_dict, ordered_keys
from evaluations.runs.exports import case_native_dict
from evaluations.runs.loading import PendingResult, load_pending
from evaluations.schemas.evalset import CriterionConfig, EvalConfig, StepType
from evaluations.schemas.evalset import EvalCase as NativeCase
from evaluations.schemas.outputs import MAX_ITERATIONS, AgentOutput

log = logging.getLogger(__name__)

# What else a run's completion does. A hook takes the finishing run (before the transaction
# that marks it completed) and returns a Completion: a step stored inside that transaction,
# and one run after it commits. Runs never import the review package: review registers its
# hook here when the app is ready (evaluations/apps.py).
@dataclass(frozen=True)
class Completion:
    store: Callable[[Run], None] | None = None  # inside the completing transaction
    after: Callable[[Run], None] | None = None  # once it has committed; a failure is logged, never the run's


CompletionHook = Callable[[Run], Completion | None]
completion_hooks: list[CompletionHook] = []

# How often a long batch renews the heartbeat and checks for cancellation: at most this many
# results per write. A batch starts with chunks as small as the target's concurrency (one
# result for a Python callable) and grows them until a chunk takes about CHUNK_SECONDS, so
# a slow agent's run shows its counters moving result by result while a fast one keeps
# writing 50 results a transaction. Uploaded outputs take no agent calls: their batch is
# written at once (on SQLite each write transaction queues for the one lock).
CHUNK = 50
CHUNK_SECONDS = 0.5

DEFAULT_CONFIG = EvalConfig(
    criteria={
        "trajectory_match": CriterionConfig(threshold=0.8),
        "response_match": CriterionConfig(threshold=0.5),
    }
)


class RunError(ValueError):
    """A run that cannot be created as asked (unknown eval ids, bad target, ...)."""


# --- Creating -------------------------------------------------------------------------------


def config_for(version: EvalSetVersion, config: EvalConfig | None = None,
               preset: EvaluationConfig | None = None) -> EvalConfig:
    """The config a run uses: an explicit one, else a saved preset, else the eval set's own
    default (ADK test_config.json, UiPath evaluators), else evalsite's default."""
    if config is not None:
        return config
    if preset is not None:
        return EvalConfig.model_validate(config_in_order(preset.config, preset.criteria_order))
    if version.default_config:
        return EvalConfig.model_validate(config_in_order(version.default_config, version.default_criteria_order))
    return DEFAULT_CONFIG


def run_create(
    *,
    project: Project,
    version: EvalSetVersion,
    target_kind: str,
    target: dict[str, Any] | None = None,
    outputs: Sequence[AgentOutput] | None = None,
    config: EvalConfig | None = None,
    preset: EvaluationConfig | None = None,
    iterations: int = 1,
    warmups: int = 0,
    eval_ids: Sequence[str] | None = None,
    input_overrides: dict[str, Any] | None = None,
    labels: dict[str, Any] | None = None,
    name: str = "",
    user: Any = None,
    enqueue: bool = True,
) -> Run:
    """Create a run with one pending result per case and iteration, and queue it (unless
    `enqueue` is False: the caller executes it itself, see `run_execute_here`).

    For uploaded outputs, cases the outputs do not cover are recorded as `missing` (and
    reported), never silently skipped; outputs for eval ids the set does not have are an
    error. Scenario cases with no scripted turns need a user simulator, else they are
    `not_runnable`.
    """
    if target_kind not in Run.TargetKind.values:
        raise RunError(f"unknown target kind {target_kind!r}")
    if target_kind == Run.TargetKind.UPLOADED and outputs is None:
        raise RunError("an uploaded-outputs run needs its outputs")
    if target_kind == Run.TargetKind.HTTP:
        from evaluations.runs.targets.egress import refusal

        why = refusal(str((target or {}).get("url", "")))
        if why is not None:
            raise RunError(f"the target URL is refused: {why}")
    if not 1 <= iterations <= MAX_ITERATIONS:
        raise RunError(f"iterations must be between 1 and {MAX_ITERATIONS}, not {iterations}")
    if version.evalset.project_id != project.pk:
        raise RunError("the eval set version belongs to another project")
    used = config_for(version, config, preset)
    for criterion, criterion_config in used.criteria.items():
        if is_custom_uipath(criterion_config.evaluator or criterion):
            continue  # scored as not runnable, with the reason
        try:
            get_evaluator_class(criterion_config.evaluator or criterion)
        except KeyError as exc:
            raise RunError(f"criterion {criterion!r}: {exc.args[0]}") from None

    cases = list(version.cases.order_by("position").values_list("pk", "eval_id", "turn_count",
                                                                   "conversation_scenario"))
    known = {eval_id for _, eval_id, _, _ in cases}
    if eval_ids:
        unknown = sorted(set(eval_ids) - known)
        if unknown:
            raise RunError(f"no such eval ids in this eval set: {', '.join(unknown[:20])}")
        wanted = set(eval_ids)
        cases = [c for c in cases if c[1] in wanted]

    by_key: dict[tuple[str, int], AgentOutput] = {}
    if outputs is not None:
        strangers = sorted({o.eval_id for o in outputs} - known)
        if strangers:
            raise RunError(f"outputs for eval ids the eval set does not have: {', '.join(strangers[:20])}")
        by_key = {(o.eval_id, o.iteration): o for o in outputs}
        iterations = max([iterations, *(o.iteration + 1 for o in outputs)])

    simulator = used.user_simulator_config is not None
    labels = labels or {}
    with transaction.atomic():
        run = Run.objects.create(
            project=project,
            evalset_version=version,
            name=name,
            config=used.model_dump(mode="json"),
            criteria_order=list(used.criteria),
            config_preset=preset,
            target_kind=target_kind,
            target=target or {},
            iterations=iterations,
            warmups=warmups,
            eval_ids=list(eval_ids or []),
            input_overrides=input_overrides or {},
            model=labels.get("model", ""),
            git_commit=labels.get("git_commit", ""),
            branch=labels.get("branch", ""),
            tags=list(labels.get("tags", [])),
            created_by=user if user is not None and getattr(user, "is_authenticated", False) else None,
        )
        rows: list[tuple[Any, ...]] = []
        missing = not_runnable = 0
        stamp = connection.ops.adapt_datetimefield_value(timezone.now())
        for case_pk, eval_id, turn_count, scenario in cases:
            for iteration in range(iterations):
                status = CaseResult.Status.PENDING
                output = None
                error = ""
                if target_kind == Run.TargetKind.UPLOADED:
                    found = by_key.get((eval_id, iteration))
                    if found is None:
                        status, error = CaseResult.Status.MISSING, "no output was uploaded for this case"
                        missing += 1
                    else:
                        output = found.model_dump_json(exclude_defaults=True)
                elif turn_count == 0 and scenario and not simulator:
                    status, error = CaseResult.Status.NOT_RUNNABLE, "not runnable: needs a user simulator"
                    not_runnable += 1
                rows.append((run.pk, case_pk, iteration, status, output, error, 0, stamp, stamp))
        _executemany(CaseResult, ["run_id", "case_id", "iteration", "status", "output", "error", "attempts",
                                  "created_at", "updated_at"], rows, json_columns={"output"})
        Run.objects.filter(pk=run.pk).update(cases_total=len(rows), cases_missing=missing,
                                             cases_not_runnable=not_runnable)
        if enqueue:
            # robust: with the broker away the run is still created (and answered 201); the
            # watchdog queues it once the lease has passed.
            transaction.on_commit(lambda: run_enqueue(run.pk), robust=True)
    run.refresh_from_db()
    return run


# --- Queueing -------------------------------------------------------------------------------


def _batches(pks: list[int]) -> Iterable[tuple[int, int]]:
    size = settings.EVALSITE_BATCH_SIZE
    for start in range(0, len(pks), size):
        chunk = pks[start:start + size]
        yield chunk[0], chunk[-1]


def run_enqueue(run_id: int) -> int:
    """Queue a task per batch of the run's pending results; returns how many."""
    from django_q.tasks import async_task

    now = timezone.now()
    Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(status=Run.Status.RUNNING, started_at=now)
    Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(heartbeat_at=now)
    pks = list(CaseResult.objects.filter(run_id=run_id, status=CaseResult.Status.PENDING)
               .order_by("pk").values_list("pk", flat=True))
    if not pks:
        run_finish(run_id)
        return 0
    count = 0
    for first, last in _batches(pks):
        async_task("evaluations.tasks.run_batch", run_id, first, last, group=f"run-{run_id}")
        count += 1
    return count


def run_execute_here(run_id: int, *, workers: int = 1, progress: Any = None) -> Run:
    """Execute a run in this process with `workers` threads instead of the task queue (the
    local CLI). Same batches, same idempotent writes; `progress(run)` is called as batches end."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from django.db import connections

    now = timezone.now()
    Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(status=Run.Status.RUNNING, started_at=now,
                                                                      heartbeat_at=now)
    pks = list(CaseResult.objects.filter(run_id=run_id, status=CaseResult.Status.PENDING)
               .order_by("pk").values_list("pk", flat=True))

    def one(first: int, last: int) -> int:
        try:
            return run_batch(run_id, first, last)
        finally:
            connections.close_all()  # each thread has its own connection

    if workers <= 1:  # in this thread, on this connection (and inside the caller's transaction)
        for first, last in _batches(pks):
            run_batch(run_id, first, last)
            if progress:
                progress(Run.objects.get(pk=run_id))
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(one, first, last) for first, last in _batches(pks)]
            for future in as_completed(futures):
                future.result()
                if progress:
                    progress(Run.objects.get(pk=run_id))
    run_finish(run_id)
    return Run.objects.get(pk=run_id)


# --- Executing ------------------------------------------------------------------------------


def run_batch(run_id: int, first_pk: int, last_pk: int) -> int:
    """Execute the pending results of a run with pk in [first_pk, last_pk].

    Safe to run twice, or twice at once: only results still pending under the row lock are
    written, scores and status in one transaction. Returns how many results it settled.
    """
    run = Run.objects.filter(pk=run_id).first()
    if run is None or run.status != Run.Status.RUNNING:
        return 0
    config = EvalConfig.model_validate(run.config)
    evaluators = _build_evaluators(config)
    target = _build_target(run) if run.target_kind != Run.TargetKind.UPLOADED else None
    pending = list(
        CaseResult.objects.filter(run_id=run_id, pk__gte=first_pk, pk__lte=last_pk, status=CaseResult.Status.PENDING)
        .order_by("pk").values_list("pk", flat=True)
    )
    settled = 0
    owner = f"{socket.gethostname()}:{os.getpid()}"  # who holds the lease: for logs and tests
    # Not inside the caller's transaction (the CLI's single-threaded path): a second
    # connection would wait on that transaction's write lock on SQLite.
    keeper = None if connection.in_atomic_block or not pending else _LeaseKeeper(run_id, owner)
    try:
        floor = _chunk_floor(target)
        size = floor if target is not None else max(CHUNK, len(pending))
        start = 0
        while start < len(pending):
            if start == 0:  # take the lease; each chunk's write renews the heartbeat after that
                alive = Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(
                    heartbeat_at=timezone.now(), lease_owner=owner)
            else:  # a read: on SQLite every write waits its turn for the one write lock
                alive = Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).exists()
            if not alive:
                break  # cancelled (or finished by a twin)
            part = pending[start:start + size]
            began = time.monotonic()
            with gc_paused():  # the chunk's cases, outputs and scores: freed by reference counting
                settled += _run_chunk(run, part, evaluators, target)
            start += len(part)
            if target is not None:
                per_result = (time.monotonic() - began) / len(part)
                size = CHUNK if per_result <= 0 else max(floor, min(CHUNK, int(CHUNK_SECONDS / per_result)))
    finally:
        if keeper is not None:
            keeper.stop()
        if target is not None:
            close = getattr(target, "close", None)
            if close:
                close()
    run_finish(run_id)
    return settled


class _LeaseKeeper:
    """Renews a run's heartbeat every third of the lease from a thread of its own, for as
    long as a batch works on the run. A chunk of cases against a slow agent (timeouts times
    retries) can outlast the lease; without this the watchdog would take the worker for
    dead and queue the same cases again, and the agent would be asked twice."""

    def __init__(self, run_id: int, owner: str) -> None:
        self.run_id = run_id
        self.owner = owner
        self.every = max(0.5, settings.EVALSITE_LEASE_SECONDS / 3)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"evalsite-lease-{run_id}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        from django.db import DatabaseError, connections

        try:
            while not self._stopped.wait(self.every):
                try:
                    Run.objects.filter(pk=self.run_id, status=Run.Status.RUNNING).update(
                        heartbeat_at=timezone.now(), lease_owner=self.owner)
                except DatabaseError as exc:  # the database is away; the batch itself will notice
                    log.warning("run %s: could not renew the lease: %s", self.run_id, exc)
                    connection.close()
        finally:
            connections.close_all()  # this thread's own connections

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=30)


def _build_evaluators(config: EvalConfig) -> dict[str, tuple[Evaluator | None, CriterionConfig, str]]:
    built: dict[str, tuple[Evaluator | None, CriterionConfig, str]] = {}
    for criterion, criterion_config in config.criteria.items():
        if not criterion_config.enabled:
            continue
        name = criterion_config.evaluator or criterion
        if is_custom_uipath(name):
            built[criterion] = (None, criterion_config, not_runnable_reason(name, None))
            continue
        try:
            evaluator = get_evaluator_class(name)()
        except Exception as exc:  # an evaluator that cannot even be built is an error per score
            built[criterion] = (None, criterion_config, f"{type(exc).__name__}: {exc}")
            continue
        why = not_runnable_reason(name, evaluator)
        built[criterion] = (None, criterion_config, why) if why else (evaluator, criterion_config, "")
    return built


def _build_target(run: Run) -> Any:
    config = EvalConfig.model_validate(run.config)
    simulate_user = None
    if config.user_simulator_config is not None:  # drives conversation_scenario cases
        from evaluations.runs.simulator import simulate_user as make_simulator

        simulate_user = make_simulator(config.user_simulator_config)
    if run.target_kind == Run.TargetKind.HTTP:
        from evaluations.runs.targets.http import HttpTarget, HttpTargetSpec

        return HttpTarget(HttpTargetSpec.model_validate(run.target), simulate_user=simulate_user)
    from evaluations.runs.targets.python import PythonTarget, PythonTargetSpec

    return PythonTarget(PythonTargetSpec.model_validate({"warmups": run.warmups, **run.target}),
                        simulate_user=simulate_user)


def native_case(row: EvalCase) -> NativeCase:
    return NativeCase.model_validate(case_native_dict(row))


def _chunk_floor(target: Any) -> int:
    """The smallest chunk worth writing: as many results as the target answers at once."""
    concurrency = getattr(getattr(target, "spec", None), "concurrency", 1)
    return max(1, min(CHUNK, concurrency if isinstance(concurrency, int) else 1))


def _run_chunk(run: Run, pks: list[int], evaluators: dict[str, tuple[Evaluator | None, CriterionConfig, str]],
               target: Any) -> int:
    results = load_pending(pks, with_output=target is None)
    if not results:
        return 0
    cases = {r.pk: r.case for r in results}
    outputs: dict[int, AgentOutput] = {}
    if target is not None:
        produced = target.run_many([(cases[r.pk], r.iteration) for r in results],
                                   input_overrides=run.input_overrides or {})
        outputs = dict(zip((r.pk for r in results), produced, strict=True))
    else:
        for r in results:
            outputs[r.pk] = r.stored_output()

    from evaluations.runs.traces import apply_trace

    evaluated: list[tuple[PendingResult, AgentOutput, list[ScoreResult]]] = []
    for r in results:
        output = outputs[r.pk]
        if output.trace:
            try:
                output = apply_trace(output)
            except Exception as exc:  # a malformed trace is the agent's error, not ours
                output = output.model_copy(update={"error": f"could not read the trace: {exc}"})
        evaluated.append((r, output, _score_case(cases[r.pk], output, evaluators)))
    return _write(run, evaluated, store_outputs=target is not None)


def _score_case(case: NativeCase, output: AgentOutput,
                evaluators: dict[str, tuple[Evaluator | None, CriterionConfig, str]]) -> list[ScoreResult]:
    scores: list[ScoreResult] = []
    for criterion, (evaluator, config, build_error) in evaluators.items():
        if evaluator is None:
            scores.append(ScoreResult(criterion=criterion, score=None, passed=None, error=build_error))
            continue
        try:
            scores.extend(evaluator.score(case, output, config, criterion))
        except Exception as exc:  # the evaluator's bug is recorded on its score; the run goes on
            log.exception("evaluator %s failed on %s", criterion, case.eval_id)
            scores.append(ScoreResult(criterion=criterion, score=None, passed=None,
                                      error=f"{type(exc).__name__}: {exc}"))
    return scores


def _status(output: AgentOutput, scores: list[ScoreResult]) -> str:
    runnable = [s for s in scores if not s.error.startswith(NOT_RUNNABLE)]
    if scores and not runnable and not output.error:
        return CaseResult.Status.NOT_RUNNABLE  # every criterion is: the reason is on each score
    scores = runnable  # a criterion that cannot run here does not make the case an error
    if output.error or any(t.error for t in output.turns) or any(s.error for s in scores):
        return CaseResult.Status.ERROR
    top = [s for s in scores if s.applies_to == Level.CONVERSATION]
    if any(s.passed is False for s in top):
        return CaseResult.Status.FAILED
    return CaseResult.Status.PASSED


def _write(run: Run, evaluated: list[tuple[PendingResult, AgentOutput, list[ScoreResult]]], *,
           store_outputs: bool) -> int:
    """Scores, tool usage, result status and counters for results still pending: one
    transaction, rows locked, so a concurrent twin of this task writes nothing twice.

    Everything is serialised before the transaction starts and written with `executemany`:
    on SQLite every worker waits for this lock, so it is held as briefly as possible."""
    now = timezone.now()
    prepared = []
    for result, output, scores in evaluated:
        status = _status(output, scores)
        usage = output.usage()
        result_row = (status, output.error or next((s.error for s in scores if s.error), ""),
                      output.total_latency(), usage.prompt_tokens, usage.completion_tokens, usage.cost_usd,
                      _dumps(output.model_dump(mode="json", exclude_defaults=True)) if store_outputs else None)
        score_rows = [
            (run.pk, result.pk, s.criterion, s.criterion, Level(s.applies_to).value, s.turn_index, s.node_name,
             s.score, s.raw_value, s.passed, _dumps(s.threshold.as_dict()) if s.threshold else None,
             _dumps(s.justification), s.error)
            for s in scores
        ]
        usage_rows = _tool_usage(run.pk, result.pk, output)
        prepared.append((result.pk, result_row, score_rows, usage_rows, _traces(output)))

    with transaction.atomic():
        # Rows in pk order, then the run row (the counters, last): every writer locks in this
        # order, so twins of one batch, and a retry, wait for each other instead of deadlocking.
        still = set(CaseResult.objects.select_for_update()
                    .filter(pk__in=[pk for pk, *_ in prepared], status=CaseResult.Status.PENDING)
                    .order_by("pk").values_list("pk", flat=True))
        if not still:
            return 0
        prepared = [p for p in prepared if p[0] in still]
        # A pending result has no scores, tool usage or traces: `run_retry_failed` removes
        # them when it resets a result, and this transaction writes them with the status.
        _executemany(Score, ["run_id", "result_id", "criterion", "evaluator", "applies_to", "turn_index", "node_name",
                             "score", "raw_value", "passed", "threshold", "justification", "error"],
                     [row for p in prepared for row in p[2]], json_columns={"threshold", "justification"})
        _executemany(ToolUsage, ["run_id", "result_id", "tool_name", "node_name", "calls", "failures",
                                 "latency_seconds"], [row for p in prepared for row in p[3]])
        _update_results(prepared, now, store_outputs=store_outputs)
        _store_traces(run, prepared)
        statuses = [p[1][0] for p in prepared]
        not_runnable = statuses.count(CaseResult.Status.NOT_RUNNABLE)
        Run.objects.filter(pk=run.pk).update(
            cases_done=F("cases_done") + len(prepared) - not_runnable,
            cases_not_runnable=F("cases_not_runnable") + not_runnable,
            cases_failed=F("cases_failed") + statuses.count(CaseResult.Status.FAILED),
            cases_errored=F("cases_errored") + statuses.count(CaseResult.Status.ERROR),
            heartbeat_at=now,
        )
    return len(prepared)


def _traces(output: AgentOutput) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The output's trace as rows to keep (trace -> spans), so pages can draw the span tree.
    A trace that cannot be read was already reported by the outputs reader; none is kept."""
    if not output.trace:
        return []
    from evaluations.runs.traces import TraceError, summarize

    try:
        summaries = summarize(output.trace)
    except TraceError:
        return []
    kept = []
    for summary in summaries:
        spans = [node.span for root in summary.roots for node, _ in root.walk()]
        ends = [s.end_time_unix_nano for s in spans if s.end_time_unix_nano is not None]
        trace = {"trace_id": summary.trace_id[:64], "thread_id": (summary.thread_id or "")[:200],
                 "name": summary.roots[0].span.name[:255] if summary.roots else "",
                 "start_ns": min(s.start_time_unix_nano for s in spans) if spans else None,
                 "end_ns": max(ends) if ends else None}
        kept.append((trace, [{"span_id": s.span_id[:32], "parent_span_id": (s.parent_span_id or "")[:32],
                              "name": s.name[:255], "kind": (s.category or s.kind)[:32],
                              "start_ns": s.start_time_unix_nano, "end_ns": s.end_time_unix_nano,
                              "status": s.status_code[:16], "attributes": s.attributes} for s in spans]))
    return kept


def _store_traces(run: Run, prepared: list[Any]) -> None:
    pending = [(pk, trace, spans) for pk, *_, traces in prepared for trace, spans in traces]
    if not pending:
        return
    traces = Trace.objects.bulk_create([Trace(run=run, result_id=pk, **trace) for pk, trace, _ in pending])
    Span.objects.bulk_create([Span(trace=trace, **span) for trace, (_, _, spans) in zip(traces, pending, strict=True)
                              for span in spans], batch_size=1000)


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _dumps(value: Any) -> str:
    return _JSON.encode(value)


def _executemany(model: Any, columns: list[str], rows: list[tuple[Any, ...]],
                 json_columns: frozenset[str] | set[str] = frozenset()) -> None:
    """INSERT many rows, a few hundred per statement: Django's bulk_create builds a model
    instance and resolves every field for each row, ten times the cost at 100,000 scores,
    and one statement per row would be a round trip each on PostgreSQL."""
    if not rows:
        return
    jsonb = "::jsonb" if connection.vendor == "postgresql" else ""
    one = "(" + ", ".join(f"%s{jsonb}" if c in json_columns else "%s" for c in columns) + ")"
    head = f"INSERT INTO {model._meta.db_table} ({', '.join(connection.ops.quote_name(c) for c in columns)}) VALUES "  # noqa: S608
    per_statement = max(1, 900 // len(columns))  # under SQLite's 999 bound parameters on old builds
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per_statement):
            chunk = rows[start:start + per_statement]
            cursor.execute(head + ", ".join([one] * len(chunk)), [v for row in chunk for v in row])


def _update_results(prepared: list[Any], now: Any, *, store_outputs: bool) -> None:
    table = CaseResult._meta.db_table
    stamp = connection.ops.adapt_datetimefield_value(now)
    sets = "status = %s, error = %s, latency_seconds = %s, prompt_tokens = %s, completion_tokens = %s, " \
           "cost_usd = %s, updated_at = %s"
    rows: list[tuple[Any, ...]] = []
    if store_outputs:
        jsonb = "::jsonb" if connection.vendor == "postgresql" else ""
        sets += f", output = %s{jsonb}, attempts = attempts + 1"
        rows = [(*p[1][:6], stamp, p[1][6], p[0]) for p in prepared]
    else:
        rows = [(*p[1][:6], stamp, p[0]) for p in prepared]
    with connection.cursor() as cursor:
        cursor.executemany(f"UPDATE {table} SET {sets} WHERE id = %s", rows)  # noqa: S608


def _tool_usage(run_id: int, result_id: int, output: AgentOutput) -> list[tuple[Any, ...]]:
    """Per tool (and the node that called it): calls, failures, latency, as ToolUsage rows
    (run_id, result_id, tool_name, node_name, calls, failures, latency_seconds). Node
    executions from the trajectory are rows with an empty tool name, for the per-node aggregates."""
    agg: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0.0, 0])
    for call in output.all_tool_calls():
        entry = agg[(call.name[:200], (call.node or "")[:200])]
        entry[0] += 1
        entry[1] += 1 if call.error else 0
        if call.latency_seconds is not None:
            entry[2] += call.latency_seconds
            entry[3] = 1
    for step in output.trajectory:
        if step.step_type == StepType.NODE:
            agg[("", step.name[:200])][0] += 1
    return [(run_id, result_id, tool, node, int(calls), int(failures), latency if timed else None)
            for (tool, node), (calls, failures, latency, timed) in agg.items()]


# --- Finishing ------------------------------------------------------------------------------


def run_finish(run_id: int) -> bool:
    """Complete the run if nothing is pending: aggregates first, then the status, so a
    completed run always has its summary. Safe to call any number of times."""
    if CaseResult.objects.filter(run_id=run_id, status=CaseResult.Status.PENDING).exists():
        return False
    run = Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).first()
    if run is None:
        return False
    summary = run_summary(run)
    # Prepared outside the transaction (the statistics take 1-2 s at 10,000 cases), stored
    # inside it: no view ever sees the run completed without what the hooks add (its
    # comparison with the default baseline; a crowd of first views would each compute it).
    completions = [c for hook in completion_hooks if (c := _prepared(hook, run)) is not None]
    finished_at = timezone.now()
    with transaction.atomic():
        done = bool(Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(
            status=Run.Status.COMPLETED, summary=summary, finished_at=finished_at))
        if done:
            run.status, run.finished_at = Run.Status.COMPLETED, finished_at
            for completion in completions:
                if completion.store is not None:
                    completion.store(run)
    if done:
        for completion in completions:
            if completion.after is None:
                continue
            try:
                completion.after(run)
            except Exception:
                log.exception("run %s: a completion step failed after it completed", run.pk)
    return done


def _prepared(hook: CompletionHook, run: Run) -> Completion | None:
    """What a hook adds to the completion, or None when it fails: a completion hook must
    never fail the run (the pages compute a comparison anyway)."""
    try:
        return hook(run)
    except Exception:
        log.exception("run %s: completion hook %s failed", run.pk, getattr(hook, "__name__", hook))
        return None


def _percentile(qs: Any, field: str, fraction: float, count: int) -> float | None:
    """A nearest-rank percentile computed in the database (ORDER BY ... OFFSET)."""
    if count == 0:
        return None
    index = min(count - 1, max(0, round(fraction * count + 0.5) - 1))
    return qs.order_by(field).values_list(field, flat=True)[index]


def run_summary(run: Run) -> dict[str, Any]:
    """Per-run aggregates, all computed in the database."""
    scores = Score.objects.filter(run=run, applies_to=Level.CONVERSATION.value)
    criteria: dict[str, Any] = {}
    rows = (scores.values("criterion")
            .annotate(count=Count("pk"), scored=Count("score"), mean=Avg("score"), min=Min("score"),
                      max=Max("score"), mean_sq=Avg(F("score") * F("score")), passes=Count("pk", filter=Q(passed=True)),
                      judged=Count("passed"), errors=Count("pk", filter=~Q(error=""))))
    for row in rows:
        criterion_scores = scores.filter(criterion=row["criterion"], score__isnull=False)
        criteria[row["criterion"]] = {
            "count": row["count"],
            "mean": row["mean"],
            "median": _median(criterion_scores, row["scored"]),
            "min": row["min"],
            "max": row["max"],
            # Population std dev from E[x^2] - E[x]^2: NULL-safe on every database (SQLite's
            # STDDEV aggregate is Python's, which fails on NULLs and on empty input).
            "std_dev": math.sqrt(max(0.0, row["mean_sq"] - row["mean"] ** 2)) if row["mean"] is not None else None,
            "pass_rate": row["passes"] / row["judged"] if row["judged"] else None,
            "passed": row["passes"],
            "errors": row["errors"],
        }
    results = CaseResult.objects.filter(run=run)
    timed = results.filter(latency_seconds__isnull=False)
    timed_count = timed.count()
    totals = results.aggregate(prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"),
                               cost=Sum("cost_usd"), latency_max=Max("latency_seconds"),
                               latency_mean=Avg("latency_seconds"))
    status_counts = dict(results.values_list("status").annotate(n=Count("pk")).values_list("status", "n"))
    judged = status_counts.get("passed", 0) + status_counts.get("failed", 0)
    usage = ToolUsage.objects.filter(run=run)
    tools = [
        {"tool": r["tool_name"], "node": r["node_name"], "calls": r["calls"], "failures": r["failures"],
         "cases": r["cases"], "latency_seconds": r["latency"]}
        for r in usage.exclude(tool_name="").values("tool_name", "node_name")
        .annotate(calls=Sum("calls"), failures=Sum("failures"), cases=Count("result", distinct=True),
                  latency=Sum("latency_seconds")).order_by("-calls", "tool_name")
    ]
    nodes = [
        {"node": r["node_name"], "executions": r["executions"] or 0, "tool_calls": r["tool_calls"] or 0,
         "failures": r["failures"] or 0, "cases": r["cases"], "latency_seconds": r["latency"]}
        for r in usage.exclude(node_name="").values("node_name")
        .annotate(executions=Sum("calls", filter=Q(tool_name="")), tool_calls=Sum("calls", filter=~Q(tool_name="")),
                  failures=Sum("failures"), cases=Count("result", distinct=True), latency=Sum("latency_seconds"))
        .order_by("node_name")
    ]
    return {
        "criteria": ordered_dict(criteria, ordered_keys((run.config or {}).get("criteria") or {}, run.criteria_order)),
        "statuses": status_counts,
        "pass_rate": status_counts.get("passed", 0) / judged if judged else None,
        "latency": {
            "count": timed_count,
            "mean": totals["latency_mean"],
            "p50": _percentile(timed, "latency_seconds", 0.50, timed_count),
            "p95": _percentile(timed, "latency_seconds", 0.95, timed_count),
            "max": totals["latency_max"],
        },
        "tokens": {"prompt": totals["prompt"], "completion": totals["completion"],
                   "total": (totals["prompt"] or 0) + (totals["completion"] or 0)
                   if totals["prompt"] is not None or totals["completion"] is not None else None},
        "cost_usd": totals["cost"],
        "tools": tools,
        "nodes": nodes,
    }


def _median(qs: Any, count: int) -> float | None:
    if count == 0:
        return None
    values = list(qs.order_by("score").values_list("score", flat=True)[(count - 1) // 2:count // 2 + 1])
    return statistics.fmean(values)


# --- Cancelling, retrying, resuming ---------------------------------------------------------


CANCELLED_BEFORE_RUN = "not run: the run was cancelled"


def run_cancel(*, run: Run, user: Any = None) -> bool:
    """Stop further work; results already written stay, and those still pending say why they
    have no outcome (a batch in hand stops at its next chunk). `run_retry_failed` resumes
    the run. False if the run had finished."""
    cancelled = bool(Run.objects.filter(pk=run.pk, status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
                     .update(status=Run.Status.CANCELLED, finished_at=timezone.now()))
    if cancelled:
        # After the run row is released (a batch writing right now holds result rows and
        # waits for the run row, see `_write`), and with the rows locked in pk order first,
        # the order that batch locks them in: either way round would deadlock.
        with transaction.atomic():
            pending = CaseResult.objects.filter(run_id=run.pk, status=CaseResult.Status.PENDING)
            list(pending.select_for_update().order_by("pk").values_list("pk", flat=True))
            pending.update(error=CANCELLED_BEFORE_RUN)
    return cancelled


def run_retry_failed(*, run: Run, user: Any = None) -> int:
    """Re-run only the results that errored or failed, and finish what a cancelled run left
    pending; returns how many results were reset."""
    if (run.target or {}).get("imported"):
        raise RunError("an imported run keeps the other tool's scores: rescore it with evalsite instead")
    with transaction.atomic():
        # The result rows first, in pk order, then the run: the order a batch's write takes
        # them in (a batch of a just-cancelled run may still be writing). Counting under
        # these locks keeps the counters equal to the rows.
        statuses = [CaseResult.Status.ERROR, CaseResult.Status.FAILED]
        locked_rows = list(CaseResult.objects.select_for_update()
                           .filter(run=run, status__in=[*statuses, CaseResult.Status.PENDING])
                           .order_by("pk").values_list("status", flat=True))
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status in {Run.Status.QUEUED, Run.Status.RUNNING}:
            raise RunError("the run is still running")
        retry = CaseResult.objects.filter(run=run, status__in=statuses)
        failed = locked_rows.count(CaseResult.Status.FAILED)
        errored = locked_rows.count(CaseResult.Status.ERROR)
        reset: dict[str, Any] = {"status": CaseResult.Status.PENDING, "error": ""}
        if run.target_kind != Run.TargetKind.UPLOADED:
            reset["output"] = None  # ask the agent again
        # The earlier attempt's scores, tool usage and traces go with the reset, so a pending
        # result never has any (`_write` counts on it) and no page shows them as current.
        for model in (Score, ToolUsage, Trace):
            model.objects.filter(result__in=retry).delete()
        n = retry.update(**reset)
        CaseResult.objects.filter(run=run, status=CaseResult.Status.PENDING).exclude(error="").update(error="")
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.QUEUED, finished_at=None, summary=None,
            cases_done=F("cases_done") - n, cases_failed=F("cases_failed") - failed,
            cases_errored=F("cases_errored") - errored,
        )
        transaction.on_commit(lambda: run_enqueue(run.pk), robust=True)
    return n


def resume_stalled_runs() -> list[int]:
    """Re-enqueue the pending work of runs whose heartbeat went stale (see the module doc),
    unless batches of theirs are still waiting in the broker. Scheduled every minute (and
    run by `up --team`'s watchdog); also safe to call by hand."""
    lease = settings.EVALSITE_LEASE_SECONDS  # no progress for this long, with work pending
    stale = timezone.now() - timedelta(seconds=lease)
    candidates = list(Run.objects.filter(
        Q(status=Run.Status.RUNNING) & (Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True))
        | Q(status=Run.Status.QUEUED, created_at__lt=stale)
    ).values_list("pk", flat=True))
    if not candidates:
        return []
    waiting = queued_run_ids()
    resumed = []
    for run_id in candidates:
        if run_id in waiting:
            continue  # queued behind other work, not lost
        log.warning("run %s: no progress for %ss, re-enqueueing its pending work", run_id, lease)
        run_enqueue(run_id)
        resumed.append(run_id)
    return resumed


def queued_run_ids() -> set[int]:
    """Runs with a batch task waiting in the broker: not yet handed to a cluster. (A task a
    cluster holds is not here: if that cluster died, the task is lost to Redis, and back
    only after `retry` seconds on the ORM broker, so the watchdog must not count on it.)"""
    from django_q.brokers import get_broker
    from django_q.signing import SignedPackage

    broker = get_broker()
    if settings.Q_CLUSTER.get("orm"):
        from django_q.models import OrmQ

        payloads = list(OrmQ.objects.using(settings.Q_CLUSTER["orm"])
                        .filter(key=broker.list_key, lock__lte=timezone.now()).values_list("payload", flat=True))
    else:
        payloads = broker.connection.lrange(broker.list_key, 0, -1)
    ids = set()
    for payload in payloads:
        try:
            task = SignedPackage.loads(payload)
        except Exception:  # signed with another key, or not ours: a cluster will drop it
            log.debug("a queued task that cannot be read", exc_info=True)
            continue
        if task.get("func") == "evaluations.tasks.run_batch" and task.get("args"):
            ids.add(int(task["args"][0]))
    return ids
