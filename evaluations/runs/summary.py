"""A run's aggregates, all computed in the database: pass rate, per-criterion statistics,
latency percentiles, tokens and cost, per tool and node, and its notices: the criteria that
could not be scored on some cases (not runnable here, or their evaluator errored), which
criterion, why and on how many cases. A notice is about the run's set-up, not the agent: the
pages, the API, the CLI, JUnit and notifications show it once for the run, never as a cause
of failure, and the cases it left without a verdict are "not fully scored", not failed.

The pass rate is passed / (passed + failed): cases not fully scored, like errored ones, are
left out of it, and every place that shows it says how many were (`judged`,
`not_fully_scored`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection
from django.db.models import Avg, Count, Max, Min, Q, Sum

from evaluations.alongside import side_by_side
from evaluations.evaluators.base import Level
from evaluations.evaluators.runnable import NOT_RUNNABLE
from evaluations.messages import first_line, normalise
from evaluations.models import (
    CaseResult,
    Run,
    Score,
    ToolUsage,
)
from evaluations.ordering import ordered_dict, ordered_keys

T = TypeVar("T")


def _percentile(qs: Any, field: str, fraction: float, count: int) -> float | None:
    """A nearest-rank percentile computed in the database (ORDER BY ... OFFSET)."""
    if count == 0:
        return None
    index = min(count - 1, max(0, round(fraction * count + 0.5) - 1))
    return qs.order_by(field).values_list(field, flat=True)[index]


def run_summary(run: Run) -> dict[str, Any]:
    """Per-run aggregates, all computed in the database (see `summary_with`)."""
    return summary_with(run, _nothing)[0]


def summary_with(run: Run, other: Callable[[], T]) -> tuple[dict[str, Any], T]:
    """The run's summary, and what `other()` returns, read together (a run's completion: its
    hooks). For a large run the criteria's statistics and their medians are read on
    connections of their own (`alongside.side_by_side`), while this thread counts the rest and
    then calls `other`: those two are mostly Python, the database's two mostly SQLite, which
    releases Python's lock as it works. (Four threads, one per part, left the Python parts
    waiting for the lock: 0.165 s at 10,000 cases, against about 0.07 s for each part alone.)"""
    scope = _scores_of(run)
    (rest, extra), criteria_rows, medians = side_by_side(lambda: (_results_part(run), other()),
                                                         lambda: _criteria_rows(scope), lambda: _medians(scope),
                                                         apart=reads_apart(run))
    criteria: dict[str, Any] = {}
    for row in criteria_rows:
        criteria[row["criterion"]] = {
            "count": row["count"],
            "mean": row["mean"],
            "median": medians.get(row["criterion"]) if row["scored"] else None,
            "min": row["min"],
            "max": row["max"],
            # Population std dev from E[x^2] - E[x]^2: NULL-safe on every database (SQLite's
            # STDDEV aggregate is Python's, which fails on NULLs and on empty input).
            "std_dev": math.sqrt(max(0.0, row["mean_sq"] - row["mean"] ** 2)) if row["mean"] is not None else None,
            "pass_rate": row["passes"] / row["judged"] if row["judged"] else None,
            "passed": row["passes"],
            "errors": row["errors"],
        }
    summary = {"criteria": ordered_dict(criteria, ordered_keys((run.config or {}).get("criteria") or {},
                                                               run.criteria_order)), **rest}
    return summary, extra


def _nothing() -> None:
    return None


def reads_apart(run: Run) -> bool:
    """Whether the run is large enough for its summary's reads to go side by side
    (EVALSITE_SIDE_BY_SIDE_RESULTS): below it, a thread and a second connection cost more
    than they save, and an API poll of a small running run keeps to one connection."""
    return run.cases_total >= settings.EVALSITE_SIDE_BY_SIDE_RESULTS


def _scores_of(run: Run) -> tuple[str, list[Any]]:
    """The SQL condition that picks the run's conversation-level scores, and its parameters.

    On SQLite, through the run's result ids, when they lie close together (a run's results are
    created in one statement, so their ids follow each other): the scores' unique index, which
    starts with the result, reads them about in the order they lie in the table, where the
    `run_id` index reads them criterion by criterion, each row a jump across the whole run
    (0.07 s against 0.12 s for the criteria at 10,000 cases). `+run_id` keeps SQLite from
    choosing that index, and still checks the run. Elsewhere, and for a run whose results are
    spread out, the `run_id` index."""
    level = Level.CONVERSATION.value
    if connection.vendor == "sqlite" and run.cases_total:
        span = CaseResult.objects.filter(run=run).aggregate(first=Min("pk"), last=Max("pk"))
        first, last = span["first"], span["last"]
        if first is not None and last - first < 2 * run.cases_total:
            return "result_id BETWEEN %s AND %s AND +run_id = %s AND applies_to = %s", [first, last, run.pk, level]
    return "run_id = %s AND applies_to = %s", [run.pk, level]


def _criteria_rows(scope: tuple[str, list[Any]]) -> list[dict[str, Any]]:
    """Per criterion, over its conversation-level scores: counts, mean, extremes, passes."""
    where, params = scope
    table = connection.ops.quote_name(Score._meta.db_table)
    sql = ("SELECT criterion, COUNT(id), COUNT(score), AVG(score), MIN(score), MAX(score), AVG(score * score), "  # noqa: S608
           "COUNT(CASE WHEN passed THEN 1 END), COUNT(passed), COUNT(CASE WHEN error <> '' THEN 1 END) "
           f"FROM {table} WHERE {where} GROUP BY criterion")
    names = ("criterion", "count", "scored", "mean", "min", "max", "mean_sq", "passes", "judged", "errors")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _medians(scope: tuple[str, list[Any]]) -> dict[str, float]:
    """Each criterion's median conversation-level score, in one statement: the scores counted
    per criterion and value, the counts added up in order, and the value (or the mean of the
    two values) at the middle place, as `statistics.median`. Most criteria have few distinct
    scores (pass or fail, a few turns' fractions), so the ranking is over values, not rows.
    Criteria with no score are absent."""
    where, params = scope
    table = connection.ops.quote_name(Score._meta.db_table)
    # `upto`: the places up to the value's last; the middle places are (scored + 1) / 2 and
    # scored / 2 + 1, in integers (one place when `scored` is odd).
    sql = ("SELECT criterion, AVG(score) FROM (SELECT criterion, score, n, "  # noqa: S608 - the model's table
           "CAST(SUM(n) OVER (PARTITION BY criterion ORDER BY score ROWS UNBOUNDED PRECEDING) AS BIGINT) AS upto, "
           "CAST(SUM(n) OVER (PARTITION BY criterion) AS BIGINT) AS scored "
           f"FROM (SELECT criterion, score, COUNT(*) AS n FROM {table} WHERE {where} AND score IS NOT NULL "
           "GROUP BY criterion, score) counted) placed "
           "WHERE upto - n < scored / 2 + 1 AND upto >= (scored + 1) / 2 GROUP BY criterion")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return dict(cursor.fetchall())


def _results_part(run: Run) -> dict[str, Any]:
    """Everything but the criteria: statuses and pass rate, notices, latency, tokens and cost,
    tools and nodes."""
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
        "statuses": status_counts,
        "pass_rate": status_counts.get("passed", 0) / judged if judged else None,
        "judged": judged,  # the pass rate's denominator: passed + failed
        "not_fully_scored": status_counts.get(CaseResult.Status.NOT_FULLY_SCORED.value, 0),
        "notices": criterion_notices(run),
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


NOT_RUNNABLE_KIND = "not_runnable"
EVALUATOR_ERROR_KIND = "evaluator_error"
NOTICES_SHOWN = 20


def criterion_notices(run: Run) -> list[dict[str, Any]]:
    """The run's criteria that could not be scored, folded by criterion and reason: one GROUP
    BY over the scores with an error (read through their partial index, `score_run_errored`), then the
    messages folded (`messages.normalise`). Each: criterion, kind (`not_runnable`: known before
    any case, such as an LLM judge with no judge model; `evaluator_error`: the evaluator raised),
    reason, an example message, and how many cases and results. Most cases first."""
    folded: dict[tuple[str, str, str], dict[str, Any]] = {}
    rows = (Score.objects.filter(Score.NOT_PASSED, Score.ERRORED, run=run).order_by()
            .values_list("criterion", "error")
            .annotate(results=Count("result_id", distinct=True), cases=Count("result__case_id", distinct=True)))
    for criterion, error, results, cases in rows:
        kind = NOT_RUNNABLE_KIND if error.startswith(NOT_RUNNABLE) else EVALUATOR_ERROR_KIND
        text = error[len(NOT_RUNNABLE):] if kind == NOT_RUNNABLE_KIND else error
        reason = first_line(text, 300) if kind == NOT_RUNNABLE_KIND else normalise(text, 200)
        entry = folded.setdefault((criterion, kind, reason), {
            "criterion": criterion, "kind": kind, "reason": reason, "example": first_line(text, 300),
            "cases": 0, "results": 0})
        entry["cases"] += cases
        entry["results"] += results
    cap = run.cases_total // max(run.iterations, 1) or None
    for entry in folded.values():  # a case counted under two messages of one reason counts once at most
        if cap is not None:
            entry["cases"] = min(entry["cases"], cap)
        entry["results"] = min(entry["results"], run.cases_total or entry["results"])
    return sorted(folded.values(), key=lambda n: (-n["cases"], n["criterion"], n["reason"]))[:NOTICES_SHOWN]


def notices_of(run: Run) -> list[dict[str, Any]]:
    """The run's notices: kept in its summary once it completed (a summary written before
    notices existed, or a run still going, is counted now: one query)."""
    summary = run.summary if isinstance(run.summary, dict) else None
    if summary is not None and isinstance(summary.get("notices"), list):
        return summary["notices"]
    if summary is not None and run.finished_at is not None:
        criteria = summary.get("criteria") or {}
        if not any(isinstance(c, dict) and c.get("errors") for c in criteria.values()):
            return []  # an older summary says no criterion errored: nothing to count
    return criterion_notices(run)
