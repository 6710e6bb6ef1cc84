"""What a run's charts count, in the database: its conversation-level scores per criterion
in ten bins (split by outcome), its results per latency bin, its pass rate per case tag. A
finished run keeps these bins (`Run.chart_bins`): the engine counts them right after the run
completes, and a run finished before bins were kept has them counted on its first view."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Count, F, IntegerField, Q, Value
from django.db.models.functions import Cast, Floor, Least

from evaluations.evaluators.base import Level
from evaluations.models import CaseResult, Run, Score
from evaluations.runs.chart_data import SCORE_BINS, ScoreBins, TagRate, nice_step

MAX_CHART_TAGS = 40
LATENCY_BINS = 20


def score_bins(run: Run, criteria: list[str]) -> dict[str, ScoreBins]:
    """Conversation-level scores per criterion in ten bins, split by passed / failed / no
    verdict: one GROUP BY query."""
    bucket = Least(Floor(F("score") * SCORE_BINS), Value(SCORE_BINS - 1), output_field=IntegerField())
    rows = (Score.objects.filter(run=run, applies_to=Level.CONVERSATION.value, turn_index=-1, node_name="",
                               score__isnull=False).order_by()
            .annotate(bucket=bucket).values("criterion", "bucket", "passed").annotate(n=Count("pk")))
    counts: dict[str, dict[str, list[int]]] = defaultdict(
        lambda: {"passed": [0] * SCORE_BINS, "failed": [0] * SCORE_BINS, "unjudged": [0] * SCORE_BINS})
    for row in rows:
        outcome = {True: "passed", False: "failed", None: "unjudged"}[row["passed"]]
        index = max(0, min(SCORE_BINS - 1, int(row["bucket"] or 0)))
        counts[row["criterion"]][outcome][index] += row["n"]
    ordered = [c for c in criteria if c in counts] + sorted(c for c in counts if c not in criteria)
    return {c: ScoreBins(**counts[c]) for c in ordered}


def latency_bins(run: Run, maximum: float | None) -> tuple[float | None, list[int]]:
    """Results per latency bin, about LATENCY_BINS bins of a round width from 0 to the
    slowest result: one GROUP BY query."""
    if maximum is None:
        return None, []
    width = nice_step(maximum, LATENCY_BINS)
    bins = int(maximum // width) + 1
    rows = (CaseResult.objects.filter(run=run, latency_seconds__isnull=False).order_by()
            .annotate(bucket=Cast(Floor(F("latency_seconds") / width), IntegerField()))
            .values("bucket").annotate(n=Count("pk")))
    counts = [0] * bins
    for row in rows:
        counts[max(0, min(bins - 1, int(row["bucket"] or 0)))] += row["n"]
    return width, counts


def tag_rates(run: Run, tags: list[str]) -> list[TagRate]:
    """Pass rate per case tag: one aggregate query with two conditional counts per tag."""
    if not tags:
        return []
    judged = Q(status__in=[CaseResult.Status.PASSED, CaseResult.Status.FAILED])
    aggregates: dict[str, Any] = {}
    for i, tag in enumerate(tags):
        tagged = Q(case__tags_text__contains=f"|{tag}|")
        aggregates[f"p{i}"] = Count("pk", filter=tagged & Q(status=CaseResult.Status.PASSED))
        aggregates[f"j{i}"] = Count("pk", filter=tagged & judged)
    totals = CaseResult.objects.filter(run=run).aggregate(**aggregates)
    return [TagRate(tag=tag, passed=totals[f"p{i}"], judged=totals[f"j{i}"]) for i, tag in enumerate(tags)]


# Bump when the bins' shape or meaning changes: a run's kept bins of an older version are
# counted again on its next view.
CHART_BINS_VERSION = 1


def chart_bins(run: Run, latency_max: float | None) -> dict[str, Any]:
    """What the run's charts count, as JSON: its scores per criterion and bin, its results per
    latency bin, its pass rate per tag. Three GROUP BY queries over every score and result of
    the run (about 1.5 s at 100,000 cases): a finished run keeps them (`Run.chart_bins`), so
    its page reads one row whatever its size."""
    tags = [str(t) for t in run.evalset_version.tags or []]
    width, counts = latency_bins(run, latency_max)
    return {
        "version": CHART_BINS_VERSION,
        "scores": {criterion: {"passed": list(b.passed), "failed": list(b.failed), "unjudged": list(b.unjudged)}
                   for criterion, b in score_bins(run, []).items()},
        "latency_width": width,
        "latency_counts": counts,
        "tags": [[t.tag, t.passed, t.judged] for t in tag_rates(run, tags[:MAX_CHART_TAGS])],
        "tags_left_out": max(0, len(tags) - MAX_CHART_TAGS),
    }


def kept_chart_bins(run: Run, latency_max: float | None) -> dict[str, Any]:
    """A finished run's chart bins: those it keeps if they are of this version and of its last
    finish, else counted now and kept (runs finished before bins were kept, or finished again
    after a rerun). A run still going has its bins counted on every view."""
    finished = run.finished_at is not None and run.status not in (Run.Status.QUEUED, Run.Status.RUNNING)
    stamp = run.finished_at.isoformat() if run.finished_at is not None else ""
    kept = run.chart_bins
    if finished and isinstance(kept, dict) and kept.get("version") == CHART_BINS_VERSION \
            and kept.get("finished_at") == stamp:
        return kept
    return keep_chart_bins(run, latency_max) if finished else chart_bins(run, latency_max)


def keep_chart_bins(run: Run, latency_max: float | None) -> dict[str, Any]:
    """Count a finished run's chart bins and keep them, stamped with its finish (a run that
    has finished again since keeps nothing of this count)."""
    assert run.finished_at is not None
    bins = {**chart_bins(run, latency_max), "finished_at": run.finished_at.isoformat()}
    Run.objects.filter(pk=run.pk, finished_at=run.finished_at).update(chart_bins=bins)
    run.chart_bins = bins
    return bins
