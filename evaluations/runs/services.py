"""Run lifecycle: create, execute in batches on the task queue, finish, cancel, retry, resume.

How a run survives failures:
- Work is split into batches of case results (never a task per score). A batch task only
  touches results that are still `pending`, and it marks them done in the same transaction
  that writes their scores, under a row lock: a task that runs twice, or two copies of one
  task, write each result exactly once.
- A batch that loses its database connection starts again on a new one after a short
  pause (engine.RECONNECT_PAUSES), so a database restart costs seconds, not a lease.
- Each batch on the queue has a lease of its own (models.RunBatch, runs/queue.py), renewed
  as it works. A batch whose heartbeat is older than the lease has lost its worker (killed
  with SIGKILL, a cluster restarted) and one handed to the broker a lease ago that is
  neither there nor taken was dropped (a Redis broker's task lost with its cluster): the
  `resume_stalled_runs` schedule queues that batch again, whatever the broker, while the
  run's other batches go on.
- While a batch works, a thread keeps renewing its heartbeat, so a slow agent or judge
  does not pass for a dead worker (which would queue the same work again). A batch still
  waiting in the broker, behind other runs, is not lost either: the watchdog leaves it
  alone instead of piling copies of its task onto the queue.
- Runs share the queue fairly: a run has at most EVALSITE_RUN_WINDOW batches in the broker,
  a batch that has worked EVALSITE_SLICE_SECONDS yields to another run's waiting batch, and
  one of a run with more than twice the work left of a waiting run yields at its next chunk
  (runs/queue.py).
- Counters only ever change with F() expressions, by the number of rows a conditional
  update actually moved.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from evaluations.evaluators import get_evaluator_class
from evaluations.evaluators.runnable import is_custom_uipath
from evaluations.interop.base import gc_paused
from evaluations.interop.outputs import OutputRow
from evaluations.jsonschemas import criteria_schema_problems
from evaluations.models import (
    CaseResult,
    EvalCase,
    EvalSetVersion,
    EvaluationConfig,
    Project,
    Run,
    RunBatch,
    Score,
    ToolUsage,
    Trace,
)
from evaluations.ordering import config_in_order
from evaluations.runs import queue
from evaluations.runs.engine import STORED_OUTPUTS, executemany
from evaluations.runs.engine import native_case as native_case  # re-exported: the runs API
from evaluations.runs.engine import run_batch as run_batch
from evaluations.runs.engine import run_finish as run_finish
from evaluations.runs.judge_spend import judge_estimate, with_default_thresholds
from evaluations.runs.summary import run_summary as run_summary
from evaluations.schemas.evalset import CriterionConfig, EvalConfig
from evaluations.schemas.outputs import MAX_ITERATIONS, AgentOutput

log = logging.getLogger(__name__)





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


# The whole of it with the collector off: the caller's outputs (10,000 validated models, not
# yet collected) are alive, and the first automatic collection would walk them all (0.5 s
# of the 10,000-case engine benchmark went to the lookup table below).
@gc_paused()
def run_create(
    *,
    project: Project,
    version: EvalSetVersion,
    target_kind: str,
    target: dict[str, Any] | None = None,
    outputs: Sequence[AgentOutput | OutputRow] | None = None,
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
    if target_kind == Run.TargetKind.MODEL:
        target = model_target_prepare(project=project, version=version, target=target or {})
        labels = {**(labels or {}), "model": (labels or {}).get("model") or target["model"]}
    if not 1 <= iterations <= MAX_ITERATIONS:
        raise RunError(f"iterations must be between 1 and {MAX_ITERATIONS}, not {iterations}")
    if version.evalset.project_id != project.pk:
        raise RunError("the eval set version belongs to another project")
    used = with_default_thresholds(config_for(version, config, preset))
    for criterion, criterion_config in used.criteria.items():
        if is_custom_uipath(criterion_config.evaluator or criterion):
            continue  # scored as not runnable, with the reason
        try:
            get_evaluator_class(criterion_config.evaluator or criterion)
        except KeyError as exc:
            raise RunError(f"criterion {criterion!r}: {exc.args[0]}") from None
    # A JSON Schema referring outside itself (a URL, a file) or too big to run is refused here,
    # whichever way it came (this config, a preset, the eval set's own).
    schema_problems = criteria_schema_problems(used.criteria)
    if schema_problems:
        raise RunError("; ".join(schema_problems))

    in_order = EvalCase.objects.in_version(version).order_by("position")
    if target_kind == Run.TargetKind.UPLOADED:
        # the scenario only matters to a target that runs the cases: not read (nor its JSON
        # decoded) for each of the uploaded outputs' cases
        cases = [(*row, None) for row in in_order.values_list("pk", "eval_id", "turn_count")]
    else:
        cases = list(in_order.values_list("pk", "eval_id", "turn_count", "conversation_scenario"))
    known = {eval_id for _, eval_id, _, _ in cases}
    if eval_ids:
        unknown = sorted(set(eval_ids) - known)
        if unknown:
            raise RunError(f"no such eval ids in this eval set: {', '.join(unknown[:20])}")
        wanted = set(eval_ids)
        cases = [c for c in cases if c[1] in wanted]

    by_key: dict[tuple[str, int], AgentOutput | OutputRow] = {}
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
            judge_estimate=judge_estimate(used, [pk for pk, *_ in cases], iterations),
        )
        rows: list[tuple[Any, ...]] = []
        missing = not_runnable = 0
        run_pk = run.pk  # read once: a model's pk is a property
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
                        output = found.json if isinstance(found, OutputRow) else found.model_dump_json(
                            exclude_defaults=True)
                elif turn_count == 0 and scenario and not simulator:
                    status, error = CaseResult.Status.NOT_RUNNABLE, "not runnable: needs a user simulator"
                    not_runnable += 1
                rows.append((run_pk, case_pk, iteration, status, output, error, 0, stamp, stamp))
        # In (case position, iteration) order, in one go: the run page lists a run's results
        # by id, trusting their ids to run in this order (runs.page.results_table).
        executemany(CaseResult, ["run_id", "case_id", "iteration", "status", "output", "error", "attempts",
                                  "created_at", "updated_at"], rows, json_columns={"output"})
        Run.objects.filter(pk=run.pk).update(cases_total=len(rows), cases_missing=missing,
                                             cases_not_runnable=not_runnable)
        if enqueue:
            # robust: with the broker away the run is still created (and answered 201); the
            # watchdog queues it once the lease has passed.
            transaction.on_commit(lambda: run_enqueue(run.pk), robust=True)
    run.refresh_from_db()
    return run


def model_target_prepare(*, project: Project, version: EvalSetVersion, target: dict[str, Any]) -> dict[str, Any]:
    """A model target as the run keeps it: validated, its URLs through the egress policy, the
    prompt's text taken from the stored prompt version it names (`prompt: {"prompt_id", "version"}`,
    the latest when no version), and, without `tools`, the eval set's tools inferred from its
    cases (the same list for every case). RunError says what is wrong and where."""
    from pydantic import ValidationError

    from evaluations.runs.targets.egress import refusal
    from evaluations.runs.targets.model import inferred_tools
    from evaluations.schemas.model_target import ModelTargetSpec

    raw = dict(target)
    prompt = raw.get("prompt")
    if isinstance(prompt, dict) and prompt.get("prompt_id") is not None:
        raw["prompt"] = _stored_prompt(project, prompt)
    try:
        spec = ModelTargetSpec.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"target.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                             for e in exc.errors(include_url=False)[:5])
        raise RunError(problems) from None
    urls = [("base_url", spec.base_url)]
    if spec.tool_model is not None:
        urls.append(("tool_model.base_url", spec.tool_model.base_url))
    for field, url in urls:
        if url:
            why = refusal(f"{url}/chat/completions")
            if why is not None:
                raise RunError(f"target.{field} is refused: {why}")
    if spec.tools is None:
        cases = (native_case(row) for row in EvalCase.objects.in_version(version).order_by("position").iterator(500))
        spec = spec.model_copy(update={"tools": inferred_tools(cases), "tools_inferred": True})
    return spec.model_dump(mode="json", exclude_none=True)


def _stored_prompt(project: Project, ref: dict[str, Any]) -> dict[str, Any]:
    """The text of the stored prompt version `ref` names. Text given beside the reference must
    be that version's (as a run keeps it), else the two disagree and nothing is created."""
    from evaluations.prompts.selectors import prompt_version_get

    try:
        number = int(ref["version"]) if ref.get("version") is not None else None
        found = prompt_version_get(project=project, prompt_id=int(ref["prompt_id"]), number=number)
    except (TypeError, ValueError):
        raise RunError("target.prompt.prompt_id and version must be whole numbers") from None
    if found is None:
        which = f" version {ref['version']}" if ref.get("version") is not None else ""
        raise RunError(f"target.prompt: no prompt {ref['prompt_id']}{which} in this project")
    if ("system" in ref and ref["system"] != found.system) or ("user" in ref and ref["user"] != found.user):
        raise RunError(f"target.prompt: the text given is not prompt {found.prompt_id} version {found.number}'s; "
                       "give either the text or the stored prompt")
    return {"system": found.system, "user": found.user, "prompt_id": found.prompt_id, "version": found.number}


# --- Queueing -------------------------------------------------------------------------------


def _batches(pks: list[int]) -> Iterable[tuple[int, int]]:
    size = settings.EVALSITE_BATCH_SIZE
    for start in range(0, len(pks), size):
        chunk = pks[start:start + size]
        yield chunk[0], chunk[-1]


def run_enqueue(run_id: int) -> int:
    """Split the run's pending results into batches and queue as many as its window takes
    (the rest follow as those end, runs/queue.py); returns how many batches there are."""
    now = timezone.now()
    Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(status=Run.Status.RUNNING, started_at=now)
    Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(heartbeat_at=now)
    pks = list(CaseResult.objects.filter(run_id=run_id, status=CaseResult.Status.PENDING)
               .order_by("pk").values_list("pk", flat=True))
    if not pks:
        run_finish(run_id)
        return 0
    ranges = list(_batches(pks))
    queue.batches_create(run_id, ranges)
    queue.batches_dispatch(run_id)
    return len(ranges)


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




































# --- Finishing ------------------------------------------------------------------------------












# --- Cancelling, retrying, resuming ---------------------------------------------------------


CANCELLED_BEFORE_RUN = "not run: the run was cancelled"


def run_cancel(*, run: Run, user: Any = None) -> bool:
    """Stop further work; results already written stay, and those still pending say why they
    have no outcome (a batch in hand stops at its next chunk). `run_retry_failed` resumes
    the run. False if the run had finished."""
    cancelled = bool(Run.objects.filter(pk=run.pk, status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
                     .update(status=Run.Status.CANCELLED, finished_at=timezone.now()))
    if cancelled:
        RunBatch.objects.filter(run=run).delete()  # a batch in hand stops at its next chunk
        # After the run row is released (a batch writing right now holds result rows and
        # waits for the run row, see `_write`), and with the rows locked in pk order first,
        # the order that batch locks them in: either way round would deadlock.
        with transaction.atomic():
            pending = CaseResult.objects.filter(run_id=run.pk, status=CaseResult.Status.PENDING)
            list(pending.select_for_update().order_by("pk").values_list("pk", flat=True))
            pending.update(error=CANCELLED_BEFORE_RUN)
    return cancelled


def run_retry_failed(*, run: Run, user: Any = None) -> int:
    """Re-run only the results that errored, failed or were not fully scored (a judge
    configured since scores them), and finish what a cancelled run left pending; returns how
    many results were reset."""
    if (run.target or {}).get("imported"):
        raise RunError("an imported run keeps the other tool's scores: rescore it with evalsite instead")
    with transaction.atomic():
        # The result rows first, in pk order, then the run: the order a batch's write takes
        # them in (a batch of a just-cancelled run may still be writing). Counting under
        # these locks keeps the counters equal to the rows.
        statuses = [CaseResult.Status.ERROR, CaseResult.Status.FAILED, CaseResult.Status.NOT_FULLY_SCORED]
        locked_rows = list(CaseResult.objects.select_for_update()
                           .filter(run=run, status__in=[*statuses, CaseResult.Status.PENDING])
                           .order_by("pk").values_list("status", flat=True))
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status in {Run.Status.QUEUED, Run.Status.RUNNING}:
            raise RunError("the run is still running")
        retry = CaseResult.objects.filter(run=run, status__in=statuses)
        failed = locked_rows.count(CaseResult.Status.FAILED)
        errored = locked_rows.count(CaseResult.Status.ERROR)
        unscored = locked_rows.count(CaseResult.Status.NOT_FULLY_SCORED)
        reset: dict[str, Any] = {"status": CaseResult.Status.PENDING, "error": ""}
        if run.target_kind not in STORED_OUTPUTS:
            reset["output"] = None  # ask the agent again
        # The earlier attempt's scores, tool usage and traces go with the reset, so a pending
        # result never has any (`_write` counts on it) and no page shows them as current.
        # (A trace received on /v1/traces is the output itself: it stays.)
        for model in (Score, ToolUsage):
            model.objects.filter(result__in=retry).delete()
        Trace.objects.filter(result__in=retry, received=False).delete()
        n = retry.update(**reset)
        CaseResult.objects.filter(run=run, status=CaseResult.Status.PENDING).exclude(error="").update(error="")
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.QUEUED, finished_at=None, summary=None, chart_bins=None,
            cases_done=F("cases_done") - n, cases_failed=F("cases_failed") - failed,
            cases_errored=F("cases_errored") - errored, cases_unscored=F("cases_unscored") - unscored,
        )
        transaction.on_commit(lambda: run_enqueue(run.pk), robust=True)
    return n


def resume_stalled_runs() -> list[int]:
    """Queue again the work that stopped (see the module doc): per batch, a batch whose
    worker went silent for a lease, or that the broker lost; per run, a run queued a lease
    ago that never got its batches, and a run whose batches all wait for a turn that nothing
    will give them (the batch that was to hand it on failed). Batches still waiting in the
    broker are left alone. Scheduled every minute (and run by `up --team`'s watchdog); also
    safe to call by hand. Returns the runs it resumed."""
    lease = settings.EVALSITE_LEASE_SECONDS  # no progress for this long, with work pending
    stale = timezone.now() - timedelta(seconds=lease)
    resumed: set[int] = set()
    lost = list(RunBatch.objects.filter(run__status=Run.Status.RUNNING, queued_at__lt=stale)
                .filter(Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True)))
    # A queued run of received traces is waiting for them, not stalled: it is queued when
    # the last case's trace arrives or its deadline passes (evaluations/ingest/runs.py).
    unbatched = list(Run.objects.filter(
        Q(status=Run.Status.RUNNING) & (Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True))
        & ~Q(pk__in=RunBatch.objects.values("run_id"))
        | Q(status=Run.Status.QUEUED, created_at__lt=stale) & ~Q(target_kind=Run.TargetKind.TRACES)
    ).values_list("pk", flat=True))
    idle = list(Run.objects.filter(status=Run.Status.RUNNING, heartbeat_at__lt=stale,
                                   pk__in=RunBatch.objects.values("run_id"))
                .exclude(pk__in=RunBatch.objects.filter(queued_at__isnull=False).values("run_id"))
                .values_list("pk", flat=True))
    if not (lost or unbatched or idle):
        return []
    waiting_runs, waiting_batches = queued_work()
    for batch in lost:
        if batch.heartbeat_at is None and batch.pk in waiting_batches:
            continue  # queued behind other work, not lost
        log.warning("run %s: %s lost its worker or its task (no heartbeat for %ss); queuing it again",
                    batch.run_id, batch, lease)
        if queue.batch_requeue(batch):
            resumed.add(batch.run_id)
    for run_id in unbatched:
        if run_id in waiting_runs:
            continue  # tasks queued before batches had leases: behind other work, not lost
        log.warning("run %s: no progress for %ss, re-enqueueing its pending work", run_id, lease)
        run_enqueue(run_id)
        resumed.add(run_id)
    for run_id in idle:
        if queue.batches_dispatch(run_id):
            log.warning("run %s: its batches waited %ss for a turn; queued them", run_id, lease)
            resumed.add(run_id)
    return sorted(resumed)


BROKER_MARK = "evalsite-mark"  # beside the broker's list: gone when the broker lost what it held


def broker_lost_its_queue() -> bool:
    """With the Redis broker: whether Redis lost what it held since the last look (restarted
    empty, flushed), told by a key written at each look that is gone. The first look says
    so too (nothing is known of before). Raises when the broker does not answer."""
    if settings.Q_CLUSTER.get("orm") or settings.Q_CLUSTER.get("sync"):
        return False  # the ORM broker's queue is in the database: it is not lost with a process
    from django_q.brokers import get_broker

    broker = get_broker()
    return bool(broker.connection.set(f"{broker.list_key}:{BROKER_MARK}", "1", nx=True))


def lost_tasks_requeue() -> list[int]:
    """Batches handed to the broker that no worker has taken and that the broker no longer
    holds: queued again. For when tasks were lost wholesale (the broker restarted empty, a
    cluster died or was restarted with the tasks it had fetched). A batch that was in fact in a
    live cluster's hands, fetched but not started, is sent twice: the older task's claim is
    stale, so it does nothing. Returns the runs resumed."""
    read_at = timezone.now()
    _, in_broker = queued_work()
    suspects = (RunBatch.objects.filter(run__status=Run.Status.RUNNING, heartbeat_at=None,
                                        queued_at__lt=read_at - timedelta(seconds=2))
                .exclude(pk__in=in_broker))
    resumed = {batch.run_id for batch in suspects if queue.batch_requeue(batch)}
    return sorted(resumed)


def lost_work_resume() -> list[int]:
    """The quick part of the watchdog (every few seconds in `up --team` and `manage.py
    watchdog`, every minute on the clusters' schedule): batches whose task the broker refused
    are sent, and when the broker lost its queue, every batch it held. Runs resumed."""
    resumed = set(queue.unsent_dispatch())
    if broker_lost_its_queue():
        lost = lost_tasks_requeue()
        if lost:
            log.warning("the broker lost its queue (restarted empty?): queued again the batches of runs %s", lost)
        resumed.update(lost)
    return sorted(resumed)


def queued_run_ids() -> set[int]:
    """Runs with a batch task waiting in the broker (see `queued_work`)."""
    return queued_work()[0]


def queued_work() -> tuple[set[int], set[int]]:
    """Runs, and RunBatch ids, with a batch task waiting in the broker: not yet handed to a
    cluster. (A task a cluster holds is not here: if that cluster died, the task is lost to
    Redis, and back only after `retry` seconds on the ORM broker, so the watchdog must not
    count on it.)"""
    from django_q.brokers import get_broker
    from django_q.signing import SignedPackage

    broker = get_broker()
    if settings.Q_CLUSTER.get("orm"):
        from django_q.models import OrmQ

        payloads = list(OrmQ.objects.using(settings.Q_CLUSTER["orm"])
                        .filter(key=broker.list_key, lock__lte=timezone.now()).values_list("payload", flat=True))
    else:
        payloads = broker.connection.lrange(broker.list_key, 0, -1)
    runs, batches = set(), set()
    for payload in payloads:
        try:
            task = SignedPackage.loads(payload)
        except Exception:  # signed with another key, or not ours: a cluster will drop it
            log.debug("a queued task that cannot be read", exc_info=True)
            continue
        args = task.get("args")
        if task.get("func") == queue.TASK and args:
            runs.add(int(args[0]))
            if len(args) > 3 and args[3] is not None:
                batches.add(int(args[3]))
    return runs, batches
