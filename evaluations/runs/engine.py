"""A run's work on the queue: evaluate a batch of its pending results (the target answers,
the criteria score, one transaction writes each chunk), and finish the run when nothing is
pending. `services` creates, enqueues, cancels, retries and resumes runs; its docstring says
how a run survives killed workers and duplicated tasks."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, FloatField, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from evaluations.bulk import insert_rows
from evaluations.evaluators import Evaluator, ScoreResult, get_evaluator_class
from evaluations.evaluators.base import Level
from evaluations.evaluators.promptfoo_test import TEST_CRITERION, SuiteDefaults, suite_defaults, verdict_scores
from evaluations.evaluators.runnable import NOT_RUNNABLE, is_custom_uipath, not_runnable_reason
from evaluations.interop.base import gc_paused
from evaluations.locks import write_transaction
from evaluations.models import (
    CaseResult,
    EvalCase,
    Run,
    RunBatch,
    Score,
    Span,
    ToolUsage,
    Trace,
)
from evaluations.runs import queue
from evaluations.runs.bins import keep_chart_bins
from evaluations.runs.exports import case_native_dict
from evaluations.runs.loading import PendingResult, load_pending
from evaluations.runs.summary import summary_with
from evaluations.safejson import compact_encoder, dumps_fast
from evaluations.schemas.evalset import CriterionConfig, EvalConfig, StepType
from evaluations.schemas.evalset import EvalCase as NativeCase
from evaluations.schemas.outputs import AgentOutput

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
# results per write. A batch against an agent starts with chunks as small as the target's
# concurrency (one result for a Python callable); every batch sizes its next chunk to take
# about CHUNK_SECONDS, so a slow agent's (or judge's) run shows its counters moving result by
# result while fast evaluation keeps writing 50 results a transaction. A chunk is also how
# long a much shorter run queued behind the batch waits for it to stop (queue.shorter_waiting).
# Uploaded outputs have no agent to wait for: they start at STORED_CHUNK, and only a slow
# judge shrinks them.
CHUNK = 50


# Uploaded outputs (and traces) write up to this many a transaction: scoring stored outputs
# takes well under a millisecond a result, so the counters still move several times a second,
# and the transactions (each a commit, a lock of the results and an update of the run, and a
# turn at SQLite's one write lock) are fewer: a batch of the default size is one write.
STORED_CHUNK = 250


CHUNK_SECONDS = 0.25


# A judged run of stored outputs writes chunks of at least this many cases per judge thread:
# the threads fall idle one by one at a chunk's end and while it is written, so a chunk's
# judge calls should take seconds, not the quarter second of CHUNK_SECONDS (its counters then
# move every few seconds).
JUDGED_CHUNK_PER_THREAD = 16


UPLOADED_CHUNK_FLOOR = 10  # uploaded outputs: the smallest chunk a slow judge shrinks them to


# Targets whose outputs are on the results before the run executes: nothing to call.
STORED_OUTPUTS = frozenset({Run.TargetKind.UPLOADED, Run.TargetKind.TRACES})


# A batch that loses its database connection (a backend terminated, PostgreSQL restarted, a
# network blip) starts again after these pauses, on a new connection: settled results stay
# settled and the rest are still pending, so a retry writes each result once. Past the last
# pause the task fails and the batch's lease (resume_stalled_runs) takes over.
RECONNECT_PAUSES = (0.5, 1.0, 2.0, 4.0, 8.0)


def run_batch(run_id: int, first_pk: int, last_pk: int, batch_id: int | None = None, claim: str | None = None) -> int:
    """Execute the pending results of a run with pk in [first_pk, last_pk].

    Safe to run twice, or twice at once: only results still pending under the row lock are
    written, scores and status in one transaction. Returns how many results it settled.
    A lost database connection is retried here (RECONNECT_PAUSES) instead of failing the task.
    `batch_id`: its RunBatch on the task queue (evaluations/runs/queue.py), whose lease it
    renews and whose place it hands on when it ends; None when run outside the queue.
    `claim`: when the queue sent this task (queue._send). A task whose claim is no longer its
    batch's (the watchdog sent the batch again; a broker handed a dead worker's task out
    again) stops before its next chunk and leaves the batch to the task that holds it.
    """
    for attempt, pause in enumerate((*RECONNECT_PAUSES, None)):
        try:
            # after a retry: what the last attempt settled
            return _run_batch_once(run_id, first_pk, last_pk, batch_id, queue.claim_of(claim))
        except (OperationalError, InterfaceError) as exc:
            # Inside the caller's transaction (the CLI's single-threaded path) there is
            # nothing to retry on: that transaction is lost with its connection.
            if pause is None or connection.in_atomic_block:
                raise
            log.warning("run %s batch %s-%s: lost the database connection (%s); retrying in %.1fs (attempt %s)",
                        run_id, first_pk, last_pk, str(exc).strip()[:200], pause, attempt + 2)
            connection.close()  # the next query opens a new one
            time.sleep(pause)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _run_batch_once(run_id: int, first_pk: int, last_pk: int, batch_id: int | None,
                    claim: datetime | None = None) -> int:
    owner = f"{socket.gethostname()}:{os.getpid()}"  # who holds the lease: for logs and tests
    # The batch's lease and the run's are taken in one commit: on SQLite every write waits
    # its turn for the one write lock, and a batch starts forty times in a 10,000-case run.
    with write_transaction():
        if not queue.batch_heartbeat(batch_id, owner, claim):
            log.info("run %s batch %s: queued again since this task was sent; left to the task that holds it",
                     run_id, batch_id)
            return 0
        alive = Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(
            heartbeat_at=timezone.now(), lease_owner=owner)
    run = Run.objects.filter(pk=run_id).first() if alive else None
    if run is None or run.status != Run.Status.RUNNING:
        queue.batch_done(run_id, batch_id)  # cancelled, or finished by a twin: its place goes to another run
        return 0
    if batch_id is not None and queue.shorter_waiting(run_id):
        # a much shorter run's batch waits behind this one (taken from the broker before it was
        # queued): its turn first, before this task builds its evaluators and target
        queue.batch_yield(run_id, batch_id, first_pk)
        return 0
    config = EvalConfig.model_validate(run.config)
    evaluators = _scoring(run, config)
    # uploaded outputs, and outputs made from received traces, are stored on the results already
    target = _build_target(run) if run.target_kind not in STORED_OUTPUTS else None
    pending = list(
        CaseResult.objects.filter(run_id=run_id, pk__gte=first_pk, pk__lte=last_pk, status=CaseResult.Status.PENDING)
        .order_by("pk").values_list("pk", flat=True)
    )
    settled = 0
    # Not inside the caller's transaction (the CLI's single-threaded path): a second
    # connection would wait on that transaction's write lock on SQLite.
    keeper = None if connection.in_atomic_block or not pending else _LeaseKeeper(run_id, owner, batch_id, claim)
    slice_ends = time.monotonic() + settings.EVALSITE_SLICE_SECONDS
    yielded = handed_on = False
    try:
        floor = _chunk_floor(target)
        if target is None and any(_calls_judge(e) for e, _, _ in evaluators.evaluators.values()):
            # a judge's calls overlap within a chunk only: chunks of a few cases would leave
            # most of the judge threads idle at each chunk's end
            floor = max(floor, JUDGED_CHUNK_PER_THREAD * settings.EVALSITE_JUDGE_CONCURRENCY)
        # uploaded outputs have no agent to wait for: start at full chunks (a slow judge
        # shrinks them after the first); an agent's results start at its concurrency
        ceiling = STORED_CHUNK if target is None else CHUNK
        size, start = (ceiling if target is None else floor), 0
        while start < len(pending):
            # The lease was taken above; each chunk's write renews the heartbeat. Before a later
            # chunk, one read: is the run still running, and the batch still this task's?
            if start and not _still_ours(run_id, batch_id, claim):
                if Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).exists():
                    log.info("run %s batch %s: queued again while this task worked; it stops here",
                             run_id, batch_id)
                    return settled  # the batch is another task's now: neither done nor handed on by this one
                break  # cancelled (or finished by a twin)
            part = pending[start:start + size]
            began = time.monotonic()
            # The batch's last chunk ends the batch (its place handed on) in its own write
            # transaction: one turn at the write lock fewer per batch.
            ends_batch = None
            if batch_id is not None and start + len(part) >= len(pending):
                ends_batch = _BatchEnd(run_id, batch_id)
            with gc_paused():  # the chunk's cases, outputs and scores: freed by reference counting
                settled += _run_chunk(run, part, evaluators, target, ends_batch)
            if ends_batch is not None and ends_batch.done:
                handed_on = True
            start += len(part)
            per_result = (time.monotonic() - began) / len(part)
            size = ceiling if per_result <= 0 else max(floor, min(ceiling, int(CHUNK_SECONDS / per_result)))
            if batch_id is not None and start < len(pending) and (
                    queue.shorter_waiting(run_id)
                    or (time.monotonic() >= slice_ends and queue.others_waiting(run_id))):
                queue.batch_yield(run_id, batch_id, pending[start])  # another run's turn (queue.py)
                yielded = True
                break
    finally:
        if keeper is not None:
            keeper.stop()
        if target is not None:
            close = getattr(target, "close", None)
            if close:
                close()
    if not yielded and not handed_on:
        queue.batch_done(run_id, batch_id)
    run_finish(run_id)
    return settled


@dataclass
class _BatchEnd:
    """`queue.batch_done` for a batch, to be run inside its last chunk's write transaction."""

    run_id: int
    batch_id: int
    done: bool = False

    def __call__(self) -> None:
        queue.batch_done(self.run_id, self.batch_id)  # a savepoint inside the chunk's transaction
        self.done = True


def _still_ours(run_id: int, batch_id: int | None, claim: datetime | None) -> bool:
    """Whether the run is still running and, for a task sent with a claim, its batch is still
    queued under that claim: one query."""
    if claim is None or batch_id is None:
        return Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).exists()
    return RunBatch.objects.filter(pk=batch_id, queued_at=claim, run__status=Run.Status.RUNNING).exists()


class _LeaseKeeper:
    """Renews a run's heartbeat, and its batch's, every third of the lease from a thread of
    its own, for as long as the batch works. A chunk of cases against a slow agent (timeouts times
    retries) can outlast the lease; without this the watchdog would take the worker for
    dead and queue the same cases again, and the agent would be asked twice."""

    def __init__(self, run_id: int, owner: str, batch_id: int | None, claim: datetime | None = None) -> None:
        self.run_id = run_id
        self.owner = owner
        self.batch_id = batch_id
        self.claim = claim
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
                    queue.batch_heartbeat(self.batch_id, self.owner, self.claim)
                except DatabaseError as exc:  # the database is away; the batch itself will notice
                    log.warning("run %s: could not renew the lease: %s", self.run_id, exc)
                    connection.close()
        finally:
            connections.close_all()  # this thread's own connections

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=30)


@dataclass(frozen=True)
class Scoring:
    """What scores a run's cases: its built criteria, every criterion its config names (enabled
    or not), and for a promptfoo suite its `defaultTest` (a test's verdict follows promptfoo's
    rule: evaluators/promptfoo_test.py)."""

    evaluators: dict[str, tuple[Evaluator | None, CriterionConfig, str]]
    named: frozenset[str] = frozenset()
    suite: SuiteDefaults | None = None  # None: no promptfoo criterion in the config


def _scoring(run: Run, config: EvalConfig) -> Scoring:
    named = frozenset(config.criteria)
    suite = None
    if any((c.evaluator or name).startswith("promptfoo_") for name, c in config.criteria.items()):
        suite = suite_defaults(run.evalset_version.metadata)
    return Scoring(_build_evaluators(config), named, suite)


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
    if run.target_kind == Run.TargetKind.MODEL:
        from evaluations.runs.targets.model import ModelTarget
        from evaluations.schemas.model_target import ModelTargetSpec

        return ModelTarget(ModelTargetSpec.model_validate(run.target), simulate_user=simulate_user)
    from evaluations.runs.targets.python import PythonTarget, PythonTargetSpec

    return PythonTarget(PythonTargetSpec.model_validate({"warmups": run.warmups, **run.target}),
                        simulate_user=simulate_user)


def native_case(row: EvalCase) -> NativeCase:
    return NativeCase.model_validate(case_native_dict(row))


def _chunk_floor(target: Any) -> int:
    """The smallest chunk worth writing: as many results as the target answers at once."""
    if target is None:
        return UPLOADED_CHUNK_FLOOR
    concurrency = getattr(getattr(target, "spec", None), "concurrency", 1)
    return max(1, min(CHUNK, concurrency if isinstance(concurrency, int) else 1))


def _run_chunk(run: Run, pks: list[int], evaluators: Scoring, target: Any,
               also: Callable[[], None] | None = None) -> int:
    """Evaluate and write the results among `pks` still pending. `also`: more to do inside the
    write's transaction (ending the batch), done even when nothing was left to write."""
    results = load_pending(pks, with_output=target is None)
    if not results:
        if also is not None:
            with transaction.atomic():
                also()
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

    from evaluations.interop.otel.spans import apply_trace

    ready: list[tuple[PendingResult, AgentOutput]] = []
    for r in results:
        output = outputs[r.pk]
        if output.trace:
            try:
                output = apply_trace(output)
            except Exception as exc:  # a malformed trace is the agent's error, not ours
                output = output.model_copy(update={"error": f"could not read the trace: {exc}"})
        ready.append((r, output))
    scored = _score_all([(cases[r.pk], output) for r, output in ready], evaluators)
    evaluated = [(r, output, scores) for (r, output), scores in zip(ready, scored, strict=True)]
    return _write(run, evaluated, store_outputs=target is not None, also=also)


def _calls_judge(evaluator: Evaluator | None) -> bool:
    return bool(getattr(evaluator, "calls_judge", False))


def _score_all(items: list[tuple[NativeCase, AgentOutput]], scoring: Scoring) -> list[list[ScoreResult]]:
    """Every case's scores, in criterion order. The (case, criterion) pairs whose evaluator
    calls an LLM judge run on threads, EVALSITE_JUDGE_CONCURRENCY judge calls in flight at once;
    the rest are scored here, in turn."""
    evaluators = scoring.evaluators
    judged = {c for c, (evaluator, _, _) in evaluators.items() if _calls_judge(evaluator)}
    concurrency = settings.EVALSITE_JUDGE_CONCURRENCY
    # A few more threads than calls in flight: while some read a reply and write the next
    # prompt, the others keep every slot busy; the shared limiter caps the calls themselves.
    workers = min(2 * concurrency, len(items) * len(judged))
    if workers <= 1 or concurrency <= 1:
        return [_score_case(case, output, scoring) for case, output in items]
    limiter = threading.BoundedSemaphore(concurrency)
    for criterion in judged:
        client = getattr(evaluators[criterion][0], "client", None)
        if client is not None and hasattr(client, "limiter"):
            client.limiter = limiter
    per_pair: dict[tuple[int, str], list[ScoreResult]] = {}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="judge") as pool:
        futures = {(i, c): pool.submit(_criteria_scores, case, output, {c: evaluators[c]})
                   for i, (case, output) in enumerate(items) for c in evaluators if c in judged}
        for i, (case, output) in enumerate(items):
            for c in evaluators:
                if c not in judged:
                    per_pair[(i, c)] = _criteria_scores(case, output, {c: evaluators[c]})
        for key, future in futures.items():
            per_pair[key] = future.result()
    out = []
    for i, (case, output) in enumerate(items):
        scores = [s for c in evaluators for s in per_pair[(i, c)]]
        out.append(scores + _suite_scores(case, output, scores, scoring))
    return out


def _score_case(case: NativeCase, output: AgentOutput, scoring: Scoring) -> list[ScoreResult]:
    scores = _criteria_scores(case, output, scoring.evaluators)
    return scores + _suite_scores(case, output, scores, scoring)


def _criteria_scores(case: NativeCase, output: AgentOutput,
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


def _suite_scores(case: NativeCase, output: AgentOutput, scores: list[ScoreResult],
                  scoring: Scoring) -> list[ScoreResult]:
    """A promptfoo test's verdict over its assertions' scores (none outside a promptfoo suite)."""
    if scoring.suite is None:
        return []
    return verdict_scores(case, output, scores, run_criteria=scoring.named, suite=scoring.suite)


_NO_VERDICT = (CaseResult.Status.NOT_RUNNABLE, CaseResult.Status.NOT_FULLY_SCORED)


def _status(output: AgentOutput, scores: list[ScoreResult]) -> str:
    """A case is passed only when every criterion that applies to it was scored and passed:

    - the agent errored (or a turn did): error;
    - every criterion is not runnable here: not_runnable (the reason is on each score);
    - a promptfoo test: its test-level verdict (`promptfoo_test`, promptfoo's rule with the
      test's threshold and weights), where None is not fully scored;
    - else a conversation-level score failed: failed; a criterion was not scored (not runnable,
      or its evaluator errored: the run's notices say which and why): not fully scored;
      otherwise passed."""
    if output.error or any(t.error for t in output.turns):
        return CaseResult.Status.ERROR
    if scores and all(s.error.startswith(NOT_RUNNABLE) for s in scores):
        return CaseResult.Status.NOT_RUNNABLE
    verdict = next((s for s in scores if s.criterion == TEST_CRITERION and s.turn_index == -1), None)
    if verdict is not None:
        return {True: CaseResult.Status.PASSED, False: CaseResult.Status.FAILED}.get(
            verdict.passed, CaseResult.Status.NOT_FULLY_SCORED)  # type: ignore[arg-type]
    top = [s for s in scores if s.applies_to == Level.CONVERSATION]
    if any(s.passed is False and not s.error for s in top):
        return CaseResult.Status.FAILED
    if any(s.error for s in scores):
        return CaseResult.Status.NOT_FULLY_SCORED
    return CaseResult.Status.PASSED


def _write(run: Run, evaluated: list[tuple[PendingResult, AgentOutput, list[ScoreResult]]], *,
           store_outputs: bool, also: Callable[[], None] | None = None) -> int:
    """Scores, tool usage, result status and counters for results still pending: one
    transaction, rows locked, so a concurrent twin of this task writes nothing twice.

    Everything is serialised before the transaction starts and written with `executemany`:
    on SQLite every worker waits for this lock, so it is held as briefly as possible."""
    now = timezone.now()
    prepared = []
    run_pk = run.pk
    # The few distinct thresholds, each written once: by the object (an evaluator hands the
    # same one to every score of its criterion; all of them stay alive while this runs), then
    # by its limits.
    by_object: dict[int, str] = {}
    by_limits: dict[tuple[float | None, float | None], str] = {}

    def threshold_text(threshold: Any) -> str:
        key = (threshold.lower_limit, threshold.upper_limit)
        text = by_limits.get(key)
        if text is None:
            text = dumps(threshold.as_dict())
            if 0 not in key:  # 0.0 and -0.0 are one key but not one text
                by_limits[key] = text
        by_object[id(threshold)] = text
        return text

    spend = _JudgeSpend()
    for result, output, scores in evaluated:
        spend.add(scores)
        status = _status(output, scores)
        usage = output.usage()
        # the agent's error; else, for a case without a verdict, why (a criterion's error stays
        # on its score too, and the run's notices count them)
        error = output.error or next((t.error for t in output.turns if t.error), "") or (
            next((s.error for s in scores if s.error), "") if status in _NO_VERDICT else "")
        result_row = (status, error,
                      output.total_latency(), usage.prompt_tokens, usage.completion_tokens, usage.cost_usd,
                      dumps(output.model_dump(mode="json", exclude_defaults=True)) if store_outputs else None)
        result_pk = result.pk
        score_rows = [
            (run_pk, result_pk, s.criterion, s.criterion, _LEVELS.get(s.applies_to) or Level(s.applies_to).value,
             s.turn_index, s.node_name, s.score, s.raw_value, s.passed,
             None if s.threshold is None else (by_object.get(id(s.threshold)) or threshold_text(s.threshold)),
             dumps_fast(s.justification), s.error)
            for s in scores
        ]
        usage_rows = _tool_usage(run.pk, result.pk, output)
        prepared.append((result.pk, result_row, score_rows, usage_rows, _traces(output)))

    # On SQLite, in this worker's turn at the write lock, the log checkpointed once the turn
    # is released (locks.write_turn).
    with write_transaction(checkpoint_after=True):
        # Rows in pk order, then the run row (the counters, last): every writer locks in this
        # order, so twins of one batch, and a retry, wait for each other instead of deadlocking.
        still = _lock_pending([pk for pk, *_ in prepared])
        if not still:
            if also is not None:
                also()
            return 0
        prepared = [p for p in prepared if p[0] in still]
        # A pending result has no scores, tool usage or traces: `run_retry_failed` removes
        # them when it resets a result, and this transaction writes them with the status.
        executemany(Score, ["run_id", "result_id", "criterion", "evaluator", "applies_to", "turn_index", "node_name",
                             "score", "raw_value", "passed", "threshold", "justification", "error"],
                     [row for p in prepared for row in p[2]], json_columns={"threshold", "justification"})
        executemany(ToolUsage, ["run_id", "result_id", "tool_name", "node_name", "calls", "failures",
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
            cases_unscored=F("cases_unscored") + statuses.count(CaseResult.Status.NOT_FULLY_SCORED),
            heartbeat_at=now,
            **spend.updates(),
        )
        if also is not None:
            also()
    return len(prepared)


class _JudgeSpend:
    """The judge calls, tokens and cost a chunk's scores record (`justification["usage"]`),
    as the run's counters' increments."""

    def __init__(self) -> None:
        self.calls = self.prompt = self.completion = 0
        self.cost: float | None = None

    def add(self, scores: list[ScoreResult]) -> None:
        for score in scores:
            usage = score.justification.get("usage") if isinstance(score.justification, dict) else None
            if not isinstance(usage, dict):
                continue
            self.calls += _count(usage.get("calls"))
            self.prompt += _count(usage.get("prompt_tokens"))
            self.completion += _count(usage.get("completion_tokens"))
            cost = usage.get("cost_usd")
            if isinstance(cost, int | float) and not isinstance(cost, bool):
                self.cost = (self.cost or 0.0) + float(cost)

    def updates(self) -> dict[str, Any]:
        if not self.calls:
            return {}
        updates: dict[str, Any] = {"judge_calls": F("judge_calls") + self.calls,
                                   "judge_prompt_tokens": F("judge_prompt_tokens") + self.prompt,
                                   "judge_completion_tokens": F("judge_completion_tokens") + self.completion}
        if self.cost is not None:
            updates["judge_cost_usd"] = Coalesce(F("judge_cost_usd"), Value(0.0, output_field=FloatField())) + self.cost
        return updates


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


# A score's level as its column holds it: a Level, or its value as a plain string (equal, and
# of one hash), looked up without Enum's call.
_LEVELS: dict[Any, str] = {level: level.value for level in Level}


def _traces(output: AgentOutput) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The output's trace as rows to keep (trace -> spans), so pages can draw the span tree.
    A trace that cannot be read was already reported by the outputs reader; none is kept."""
    if not output.trace:
        return []
    from evaluations.interop.otel.spans import TraceError, summarize

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
    traces = Trace.objects.bulk_create([Trace(project_id=run.project_id, run=run, result_id=pk, **trace)
                                        for pk, trace, _ in pending])
    Span.objects.bulk_create([Span(trace=trace, **span) for trace, (_, _, spans) in zip(traces, pending, strict=True)
                              for span in spans], batch_size=1000)


dumps = compact_encoder()


def executemany(model: Any, columns: list[str], rows: list[tuple[Any, ...]],
                 json_columns: frozenset[str] | set[str] = frozenset()) -> None:
    """INSERT many rows (see `evaluations.bulk`): Django's bulk_create builds a model
    instance and resolves every field for each row, ten times the cost at 100,000 scores."""
    insert_rows(model, columns, rows, json_columns=json_columns)


def _lock_pending(pks: list[int]) -> set[int]:
    """Which of `pks` are still pending, their rows locked in pk order (on PostgreSQL; SQLite's
    transaction holds the one write lock already). Plain SQL: the ORM's `pk__in` prepares
    every value through the field, a few hundred per chunk."""
    table = connection.ops.quote_name(CaseResult._meta.db_table)
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    sql = (f"SELECT id FROM {table} WHERE id IN ({', '.join(['%s'] * len(pks))}) AND status = %s "  # noqa: S608
           f"ORDER BY id{lock}")
    with connection.cursor() as cursor:
        cursor.execute(sql, [*pks, CaseResult.Status.PENDING])
        return {pk for (pk,) in cursor.fetchall()}


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


def run_finish(run_id: int) -> bool:
    """Complete the run if nothing is pending: aggregates first, then the status, so a
    completed run always has its summary. Safe to call any number of times."""
    if CaseResult.objects.filter(run_id=run_id, status=CaseResult.Status.PENDING).exists():
        return False
    run = Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).first()
    if run is None:
        return False
    # Prepared outside the transaction (the statistics take 1-2 s at 10,000 cases), stored
    # inside it: no view ever sees the run completed without what the hooks add (its
    # comparison with the default baseline; a crowd of first views would each compute it).
    # The summary and the hooks read independently: for a large run, the summary's SQL-heavy
    # parts on connections of their own while this thread counts the rest and runs the hooks
    # (the run's other workers are idle by now; `summary.summary_with`).
    summary, completions = summary_with(
        run, lambda: [c for hook in completion_hooks if (c := _prepared(hook, run)) is not None])
    finished_at = timezone.now()
    with write_transaction():
        done = bool(Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(
            status=Run.Status.COMPLETED, summary=summary, finished_at=finished_at))
        if done:
            RunBatch.objects.filter(run_id=run_id).delete()  # none should be left; none may linger
            run.status, run.finished_at = Run.Status.COMPLETED, finished_at
            for completion in completions:
                if completion.store is not None:
                    completion.store(run)
    if done:
        _keep_chart_bins(run, summary)
        for completion in completions:
            if completion.after is None:
                continue
            try:
                completion.after(run)
            except Exception:
                log.exception("run %s: a completion step failed after it completed", run.pk)
    return done


def _keep_chart_bins(run: Run, summary: dict[str, Any]) -> None:
    """The completed run keeps what its charts count, once it has committed: the run is not
    kept waiting for them (1.4 s at 100,000 cases), and a view in between counts them itself.
    A failure is logged (the first view counts them then): charts never fail a run."""
    try:
        latency = (summary or {}).get("latency") or {}
        slowest = latency.get("max") if isinstance(latency, dict) else None
        if isinstance(slowest, bool) or not isinstance(slowest, int | float):
            slowest = None
        keep_chart_bins(run, None if slowest is None else float(slowest))
    except Exception:
        log.exception("run %s: its chart bins could not be counted", run.pk)


def _prepared(hook: CompletionHook, run: Run) -> Completion | None:
    """What a hook adds to the completion, or None when it fails: a completion hook must
    never fail the run (the pages compute a comparison anyway)."""
    try:
        return hook(run)
    except Exception:
        log.exception("run %s: completion hook %s failed", run.pk, getattr(hook, "__name__", hook))
        return None
