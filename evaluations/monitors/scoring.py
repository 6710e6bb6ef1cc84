"""Scoring received traces and threads with monitors: what the queue's tasks do.

Each entry point takes ids, reads what it needs, and writes a result per (monitor version,
trace) or (monitor version, thread) with `INSERT ... ON CONFLICT DO NOTHING`: running it
twice (an exporter's retry, a task re-run after a worker died, a backfill over scored
traces) writes nothing the second time. The hourly aggregates (`MonitorBucket`,
`MonitorLatencyBucket`) are incremented in the same transaction for the rows that were new,
so they never count a result twice either.
"""

from __future__ import annotations

import gc
import json
import logging
import math
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from evaluations.evaluators import Evaluator, Level, ScoreResult, get_evaluator_class
from evaluations.evaluators.runnable import not_runnable_reason
from evaluations.models import (
    Monitor,
    MonitorBucket,
    MonitorLatencyBucket,
    MonitorResult,
    MonitorScore,
    Trace,
    TraceThread,
)
from evaluations.monitors.outputs import root_attributes, spans_of, thread_output, trace_output
from evaluations.monitors.signals import monitor_scored
from evaluations.monitors.spec import Filters, matches, sampled
from evaluations.schemas.evalset import CriterionConfig, EvalCase
from evaluations.schemas.outputs import AgentOutput

log = logging.getLogger(__name__)

CHUNK = 500
MAX_THREAD_TRACES = 200
LATENCY_EDGES = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0, 300.0)  # seconds; a last bin above
_EMPTY_CASE = EvalCase(eval_id="online")


def latency_bin(seconds: float) -> int:
    return next((i for i, edge in enumerate(LATENCY_EDGES) if seconds <= edge), len(LATENCY_EDGES))


@dataclass
class _Criterion:
    name: str
    config: CriterionConfig
    evaluator: Evaluator | None
    unavailable: str = ""


@dataclass
class Scorer:
    """A monitor's current version, its evaluators built once per batch."""

    monitor: Monitor
    filters: Filters
    criteria: list[_Criterion] = field(default_factory=list)

    @classmethod
    def of(cls, monitor: Monitor) -> Scorer:
        scorer = cls(monitor, Filters.model_validate(monitor.filters or {}))
        for name, raw in (monitor.criteria or {}).items():
            config = CriterionConfig.model_validate(raw)
            if not config.enabled:
                continue
            evaluator_name = config.evaluator or name
            try:
                evaluator: Evaluator | None = get_evaluator_class(evaluator_name)()
                why = not_runnable_reason(evaluator_name, evaluator)
            except Exception as exc:  # an evaluator that cannot be built is an error on each result
                evaluator, why = None, f"{type(exc).__name__}: {exc}"
            scorer.criteria.append(_Criterion(name, config, None if why else evaluator, why))
        return scorer

    def score(self, output: AgentOutput) -> list[_Scored]:
        return [_one(c, output) for c in self.criteria]

    def score_many(self, outputs: list[AgentOutput]) -> list[list[_Scored]]:
        """Each output's scores, in criterion order. The criteria that call an LLM judge run on
        threads, EVALSITE_JUDGE_CONCURRENCY judge calls in flight at once (as a run's batch does);
        the others are scored here, in turn."""
        judged = [i for i, c in enumerate(self.criteria) if getattr(c.evaluator, "calls_judge", False)]
        concurrency = settings.EVALSITE_JUDGE_CONCURRENCY
        workers = min(2 * concurrency, len(outputs) * len(judged))
        if workers <= 1 or concurrency <= 1:
            return [self.score(output) for output in outputs]
        limiter = threading.BoundedSemaphore(concurrency)
        for i in judged:
            client = getattr(self.criteria[i].evaluator, "client", None)
            if client is not None and hasattr(client, "limiter"):
                client.limiter = limiter
        out: list[list[_Scored | None]] = [[None] * len(self.criteria) for _ in outputs]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="monitor-judge") as pool:
            futures = {(n, i): pool.submit(_one, self.criteria[i], output)
                       for n, output in enumerate(outputs) for i in judged}
            for n, output in enumerate(outputs):
                for i, criterion in enumerate(self.criteria):
                    if i not in judged:
                        out[n][i] = _one(criterion, output)
            for (n, i), future in futures.items():
                out[n][i] = future.result()  # _one records what a criterion raises: never raises itself
        return [[s for s in row if s is not None] for row in out]


@dataclass(frozen=True)
class _Scored:
    criterion: str
    passed: bool | None
    score: float | None
    value: float | None
    error: str
    detail: dict[str, Any]


def _one(criterion: _Criterion, output: AgentOutput) -> _Scored:
    if criterion.evaluator is None:
        return _Scored(criterion.name, None, None, None, criterion.unavailable[:500], {})
    try:
        results = criterion.evaluator.score(_EMPTY_CASE, output, criterion.config, criterion.name)
    except Exception as exc:  # a criterion that raises is recorded; the others go on
        return _Scored(criterion.name, None, None, None, f"{type(exc).__name__}: {exc}"[:500], {})
    return _overall(criterion.name, results)


def _overall(name: str, results: list[ScoreResult]) -> _Scored:
    whole = [r for r in results if r.applies_to == Level.CONVERSATION and r.turn_index == -1]
    if whole:
        r = whole[-1]
        score = r.score if r.score is not None else (None if r.passed is None else float(r.passed))
        return _Scored(name, r.passed, score, r.raw_value, r.error[:500], _detail(r.justification))
    if not results:
        return _Scored(name, None, None, None, "no score", {})
    verdicts = [r.passed for r in results if r.passed is not None]
    scores = [r.score for r in results if r.score is not None]
    return _Scored(name, all(verdicts) if verdicts else None,
                   sum(scores) / len(scores) if scores else (float(all(verdicts)) if verdicts else None),
                   None, next((r.error for r in results if r.error), "")[:500], {})


def _detail(justification: dict[str, Any]) -> dict[str, Any]:
    """What a failing criterion shows beside the waterfall: the justification, texts cut short."""
    out: dict[str, Any] = {}
    for key, value in list(justification.items())[:12]:
        if isinstance(value, str):
            out[key] = value[:500]
        elif isinstance(value, int | float | bool) or value is None:
            out[key] = value
        else:
            text = json.dumps(value, default=str, ensure_ascii=False)
            out[key] = value if len(text) <= 1000 else text[:1000] + "…"
    return out


# --- Writing ----------------------------------------------------------------------------------


@dataclass
class Subject:
    """A trace or a thread, scored: what its result row holds."""

    trace_pk: int | None
    thread_id: str
    at: datetime
    environment: str
    end_user: str
    output: AgentOutput
    traces: int = 1


def _metrics(output: AgentOutput) -> tuple[float | None, float | None, float | None]:
    latency = output.total_latency()
    usage = output.usage()
    tokens = usage.total()
    return latency, float(tokens) if tokens is not None else None, usage.cost_usd


def _adapt(value: Any) -> Any:
    return connection.ops.adapt_datetimefield_value(value) if isinstance(value, datetime) else value


_RESULT_COLUMNS = ["project_id", "monitor_id", "version", "trace_id", "thread_id", "at", "environment", "end_user",
                   "passed", "failed", "traces", "latency_seconds", "tokens", "cost_usd", "scored_at"]


def write(scorer: Scorer, subjects: list[Subject]) -> int:
    """Score and store `subjects` for the monitor's current version; returns how many results
    were new. One transaction; the aggregates move for new results only."""
    if not subjects:
        return 0
    monitor = scorer.monitor
    now = timezone.now()
    rows: list[tuple[Any, ...]] = []
    scored: list[list[_Scored]] = []
    metrics: list[tuple[float | None, float | None, float | None]] = []
    for s, results in zip(subjects, scorer.score_many([s.output for s in subjects]), strict=True):
        failed = sorted(r.criterion for r in results if r.passed is False)
        m = _metrics(s.output)
        scored.append(results)
        metrics.append(m)
        rows.append((monitor.project_id, monitor.pk, monitor.version, s.trace_pk, s.thread_id[:200], s.at,
                     s.environment[:100], s.end_user[:200], not failed, json.dumps(failed), s.traces, *m, now))
    key_of: dict[tuple[int | None, str], int] = {
        ((s.trace_pk, "") if s.trace_pk is not None else (None, s.thread_id[:200])): i for i, s in enumerate(subjects)}
    with transaction.atomic():
        new = _insert_results(rows)
        if not new:
            return 0
        fresh = [(pk, key_of[key]) for pk, key in new if key in key_of]
        _insert_scores([(pk, r.criterion[:100], r.passed, r.score, r.value, r.error,
                         json.dumps(r.detail if r.passed is not True else {}, default=str))
                        for pk, i in fresh for r in scored[i]])
        _add_to_buckets(monitor, [(subjects[i], scored[i], metrics[i]) for _, i in fresh])
        monitor_id = monitor.pk
        transaction.on_commit(lambda: monitor_scored.send(sender=Monitor, monitor_id=monitor_id))
    return len(fresh)


_SCORE_COLUMNS = ["result_id", "criterion", "passed", "score", "value", "error", "detail"]


def _insert_scores(rows: list[tuple[Any, ...]]) -> None:
    """The new results' scores, many rows a statement (no conflict is possible: the results are new)."""
    table = MonitorScore._meta.db_table
    names = ", ".join(connection.ops.quote_name(c) for c in _SCORE_COLUMNS)
    jsonb = "::jsonb" if connection.vendor == "postgresql" else ""
    one = "(" + ", ".join(f"%s{jsonb}" if c == "detail" else "%s" for c in _SCORE_COLUMNS) + ")"
    per = max(1, 900 // len(_SCORE_COLUMNS))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per):
            chunk = rows[start:start + per]
            cursor.execute(f"INSERT INTO {table} ({names}) VALUES {', '.join([one] * len(chunk))}",  # noqa: S608
                           [v for row in chunk for v in row])


def _insert_results(rows: list[tuple[Any, ...]]) -> list[tuple[int, tuple[int | None, str]]]:
    """Insert, skipping rows already there; the new rows' pks and keys."""
    table = MonitorResult._meta.db_table
    names = ", ".join(connection.ops.quote_name(c) for c in _RESULT_COLUMNS)
    jsonb = "::jsonb" if connection.vendor == "postgresql" else ""
    one = "(" + ", ".join(f"%s{jsonb}" if c == "failed" else "%s" for c in _RESULT_COLUMNS) + ")"
    per = max(1, 900 // len(_RESULT_COLUMNS))
    out: list[tuple[int, tuple[int | None, str]]] = []
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per):
            chunk = rows[start:start + per]
            cursor.execute(
                f"INSERT INTO {table} ({names}) VALUES {', '.join([one] * len(chunk))} "  # noqa: S608 - model names
                "ON CONFLICT DO NOTHING RETURNING id, trace_id, thread_id",
                [_adapt(v) for row in chunk for v in row])
            out += [(pk, (trace, "") if trace is not None else (None, thread))
                    for pk, trace, thread in cursor.fetchall()]
    return out


def _hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def _add_to_buckets(monitor: Monitor, items: list[tuple[Subject, list[_Scored], tuple[Any, ...]]]) -> None:
    sums: dict[tuple[datetime, str, str], list[float]] = defaultdict(lambda: [0, 0, 0, 0.0, 0, 0.0, 0.0])
    hist: dict[tuple[datetime, str, int], list[float]] = defaultdict(lambda: [0, 0.0])  # count, max
    for subject, results, (latency, tokens, cost) in items:
        hour, env = _hour(subject.at), subject.environment[:100]
        whole = sums[(hour, env, "")]
        ok = all(r.passed is not False for r in results)
        whole[0] += 1
        whole[1] += int(ok)
        whole[2] += 1
        whole[3] += float(ok)
        whole[4] += subject.traces
        whole[5] += tokens or 0.0
        whole[6] += cost or 0.0
        for r in results:
            row = sums[(hour, env, r.criterion)]
            row[0] += 1
            row[1] += int(r.passed is True)
            if r.score is not None and not math.isnan(r.score):
                row[2] += 1
                row[3] += r.score
        if latency is not None:
            counted = hist[(hour, env, latency_bin(latency))]
            counted[0] += 1
            counted[1] = max(counted[1], latency)
    _upsert(MonitorBucket, ["monitor_id", "version", "hour", "environment", "criterion", "total", "passed", "scored",
                            "score_sum", "traces", "tokens_sum", "cost_sum"],
            [(monitor.pk, monitor.version, h, e, c, *v) for (h, e, c), v in sums.items()],
            conflict=["monitor_id", "version", "hour", "environment", "criterion"],
            add=["total", "passed", "scored", "score_sum", "traces", "tokens_sum", "cost_sum"])
    _upsert(MonitorLatencyBucket, ["monitor_id", "version", "hour", "environment", "bin", "count", "max_seconds"],
            [(monitor.pk, monitor.version, h, e, b, int(n), top) for (h, e, b), (n, top) in hist.items()],
            conflict=["monitor_id", "version", "hour", "environment", "bin"], add=["count"], keep_max=["max_seconds"])


def _upsert(model: Any, columns: list[str], rows: list[tuple[Any, ...]], *, conflict: list[str],
            add: list[str], keep_max: tuple[str, ...] | list[str] = ()) -> None:
    if not rows:
        return
    table = model._meta.db_table
    q = connection.ops.quote_name
    one = "(" + ", ".join(["%s"] * len(columns)) + ")"
    sets = ", ".join([f"{q(c)} = {table}.{q(c)} + excluded.{q(c)}" for c in add]
                     + [f"{q(c)} = CASE WHEN {table}.{q(c)} IS NULL OR excluded.{q(c)} > {table}.{q(c)} "
                        f"THEN excluded.{q(c)} ELSE {table}.{q(c)} END" for c in keep_max])
    per = max(1, 900 // len(columns))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per):
            chunk = rows[start:start + per]
            cursor.execute(
                f"INSERT INTO {table} ({', '.join(q(c) for c in columns)}) VALUES "  # noqa: S608 - model names
                f"{', '.join([one] * len(chunk))} ON CONFLICT ({', '.join(q(c) for c in conflict)}) "
                f"DO UPDATE SET {sets}",
                [_adapt(v) for row in chunk for v in row])


# --- Traces -----------------------------------------------------------------------------------

_TRACE_FIELDS = ("pk", "project_id", "trace_id", "name", "service_name", "environment", "end_user", "thread_id",
                 "received_at", "resource")


def trace_monitors(project_ids: Iterable[int]) -> list[Monitor]:
    return list(Monitor.objects.filter(project_id__in=set(project_ids), enabled=True, level=Monitor.Level.TRACE))


@contextmanager
def _batch() -> Iterator[None]:
    """A scoring batch allocates many short-lived objects: the cyclic collector is paused
    for it (reference counting still frees them) and run once after. With a large heap its
    passes otherwise cost more than the scoring (see bench/monitors_bench.py)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def score_traces(trace_pks: list[int], monitors: list[Monitor] | None = None) -> int:
    """Every enabled trace monitor of the traces' projects over these received traces (those
    whose root span has arrived); returns how many results were new."""
    with _batch():
        return _score_traces(trace_pks, monitors)


def _score_traces(trace_pks: list[int], monitors: list[Monitor] | None) -> int:
    traces = list(Trace.objects.filter(pk__in=trace_pks, received=True, complete=True).values_list(*_TRACE_FIELDS))
    if not traces:
        return 0
    if monitors is None:
        monitors = trace_monitors({t[1] for t in traces})
    if not monitors:
        return 0
    written = 0
    outputs: dict[int, AgentOutput] = {}
    spans: dict[int, Any] = {}
    for monitor in monitors:
        scorer = Scorer.of(monitor)
        mine = [t for t in traces if t[1] == monitor.project_id and sampled(t[2], monitor.sample_rate)]
        mine = [t for t in mine if matches(scorer.filters, service=t[4], root_name=t[3], environment=t[5],
                                           end_user=t[6], thread_id=t[7], attributes={})
                or scorer.filters.attributes]
        done = set(MonitorResult.objects.filter(monitor=monitor, version=monitor.version,
                                                trace_id__in=[t[0] for t in mine]).values_list("trace_id", flat=True))
        mine = [t for t in mine if t[0] not in done]
        missing = [t[0] for t in mine if t[0] not in spans]
        if missing:
            spans.update(spans_of(missing, {t[0]: t[2] for t in mine}))
        subjects = []
        for t in mine:
            pk = t[0]
            if scorer.filters.attributes:
                attributes = {**(t[9] or {}), **root_attributes(spans.get(pk, []))}
                if not matches(scorer.filters, service=t[4], root_name=t[3], environment=t[5], end_user=t[6],
                               thread_id=t[7], attributes=attributes):
                    continue
            if pk not in outputs:
                outputs[pk] = trace_output(t[2], spans.get(pk, []))
            subjects.append(Subject(pk, "", t[8] or timezone.now(), t[5], t[6], outputs[pk]))
        written += write(scorer, subjects)
    return written


# --- Threads ----------------------------------------------------------------------------------


def thread_monitors() -> list[Monitor]:
    return list(Monitor.objects.filter(enabled=True, level=Monitor.Level.THREAD, project__archived_at__isnull=True))


def sweep_threads(now: datetime | None = None) -> int:
    """Threads idle for their monitor's `idle_seconds`, not yet scored by its version: scored,
    each as one conversation. Looks only at threads with a trace received since the monitor's
    last sweep (`threads_swept_to`), so a sweep reads what is new, not the whole history."""
    now = now or timezone.now()
    written = 0
    for monitor in thread_monitors():
        cutoff = now - timedelta(seconds=monitor.idle_seconds)
        since = monitor.threads_swept_to or (monitor.created_at - timedelta(seconds=monitor.idle_seconds))
        written += score_threads(monitor, since=since, until=cutoff)
        Monitor.objects.filter(pk=monitor.pk).update(threads_swept_to=cutoff)
    return written


def score_threads(monitor: Monitor, *, since: datetime, until: datetime) -> int:
    """The monitor's threads whose last trace came after `since` and at or before `until`
    (idle since then), read from the threads ingest keeps (`TraceThread`), in chunks."""
    threads = (TraceThread.objects.filter(project_id=monitor.project_id, last_at__gt=since, last_at__lte=until)
               .order_by("pk").values_list("pk", "thread_id", "last_at"))
    written, last_pk = 0, 0
    while True:
        chunk = list(threads.filter(pk__gt=last_pk)[:CHUNK])
        if not chunk:
            return written
        with _batch():
            written += _score_thread_batch(monitor, {thread: at for _, thread, at in chunk})
        last_pk = chunk[-1][0]


def _score_thread_batch(monitor: Monitor, last: dict[str, datetime]) -> int:
    scorer = Scorer.of(monitor)
    done = set(MonitorResult.objects.filter(monitor=monitor, version=monitor.version, trace__isnull=True,
                                            thread_id__in=list(last)).values_list("thread_id", flat=True))
    ready = [t for t in last if t not in done and sampled(t, monitor.sample_rate)]
    if not ready:
        return 0
    rows = list(Trace.objects.filter(project_id=monitor.project_id, received=True, thread_id__in=ready)
                .order_by("thread_id", "start_ns", "pk").values_list(*_TRACE_FIELDS))
    by_thread: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        if len(by_thread[row[7]]) < MAX_THREAD_TRACES:
            by_thread[row[7]].append(row)
    spans = spans_of([r[0] for rs in by_thread.values() for r in rs],
                     {r[0]: r[2] for rs in by_thread.values() for r in rs})
    subjects = []
    for thread_id, traces in by_thread.items():
        first = traces[0]
        attributes = {**(first[9] or {}), **root_attributes(spans.get(first[0], []))}
        if not matches(scorer.filters, service=first[4], root_name=first[3], environment=first[5],
                       end_user=first[6], thread_id=thread_id, attributes=attributes):
            continue
        output = thread_output(thread_id, [trace_output(t[2], spans.get(t[0], [])) for t in traces])
        subjects.append(Subject(None, thread_id, last[thread_id], first[5],
                                next((t[6] for t in traces if t[6]), ""), output, traces=len(traces)))
    return write(scorer, subjects)


# --- Backfill ---------------------------------------------------------------------------------


def backfill(monitor_id: int, since: datetime, until: datetime) -> int:
    """The monitor's current version over the traces (or threads) received in [since, until):
    what is scored already stays as it is."""
    monitor = Monitor.objects.filter(pk=monitor_id).first()
    if monitor is None:
        return 0
    if monitor.level == Monitor.Level.THREAD:
        idle_before = min(until, timezone.now() - timedelta(seconds=monitor.idle_seconds))
        return score_threads(monitor, since=since, until=idle_before)
    written, last_pk = 0, 0
    base = Trace.objects.filter(project_id=monitor.project_id, received=True, complete=True,
                                received_at__gte=since, received_at__lt=until)
    while True:
        pks = list(base.filter(pk__gt=last_pk).order_by("pk").values_list("pk", flat=True)[:CHUNK])
        if not pks:
            return written
        written += score_traces(pks, [monitor])
        last_pk = pks[-1]
