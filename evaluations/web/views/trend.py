"""An eval set over time: pass rate and p95 latency across its completed runs, and a case x
run heatmap that shows where each case started failing.

`/evalsets/<pk>/trend/[?page=<n>][&failing=1][&branch=][&model=]`. The last `TREND_RUNS`
completed runs (of any version of the eval set, of one branch and / or model when the filters
say so), oldest first, on a date axis with a line per branch and model; cases are
paginated, so a page costs the same few queries for 10 cases or 10,000: the lines come from
each run's stored summary, the heatmap from one query over one page of cases.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Page, Paginator
from django.db.models import F
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from evaluations.models import CaseResult, EvalCase, EvalSet, Run
from evaluations.review import comparison
from evaluations.review.causes import causes_since
from evaluations.review.selectors import TREND_RUNS, branch_streak, run_label
from evaluations.web.charts import to_html
from evaluations.web.charts.compare import HeatmapRow, TrendPoint, case_heatmap, latency_trend, pass_rate_trend
from evaluations.web.charts.svg import to_svg
from evaluations.web.charts.versions import VersionChange, mark_version_changes
from evaluations.web.views.common import enter_project

CASES_PER_PAGE = 50




@dataclass(frozen=True)
class FailingCase:
    eval_id: str
    since_label: str
    since_url: str | None  # the first failing result, compared with the run before it
    runs_failing: int
    now_url: str | None = None  # the latest run's result, compared with the run before it
    since_pk: int = 0  # the run the streak began in: "since #10", as the causes say it


@dataclass(frozen=True)
class TrendPage:
    evalset: EvalSet
    runs: list[Run]
    run_labels: list[str]
    points: list[TrendPoint]
    pass_rate_html: str
    latency_html: str
    heatmap_html: str
    cases: Page | None  # of eval ids
    failing: list[FailingCase]
    failing_only: bool
    more_runs: bool
    branch: str = ""
    model: str = ""
    branches: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    version_changes: tuple[VersionChange, ...] = ()  # where the eval set's version changed (issue 18)
    streak_branch: str = ""  # the latest run's branch: where failing streaks are counted


def run_axis_labels(runs: list[Run]) -> list[str]:
    """The heatmap's column labels: `#12 · 11-24 · main · gpt-x`, the run, its day, and its
    branch and model when the runs shown have more than one of them (one is in the filters)."""
    branches = len({run.branch for run in runs}) > 1
    models = len({run.model for run in runs}) > 1
    labels = []
    for run in runs:
        parts = [f"#{run.pk}", f"{timezone.localtime(run.created_at):%m-%d}"]
        if branches:
            parts.append(run.branch or "(no branch)")
        if models:
            parts.append(run.model or "(no model)")
        labels.append(" · ".join(parts))
    return labels


def trend_page(*, evalset: EvalSet, page: Any, failing_only: bool, branch: str = "", model: str = "") -> TrendPage:
    completed = Run.objects.filter(evalset_version__evalset=evalset, status=Run.Status.COMPLETED)
    labels_used = set(completed.order_by().values_list("branch", "model").distinct())
    branches = tuple(sorted({b for b, _ in labels_used}))
    models = tuple(sorted({m for _, m in labels_used}))
    filters: dict[str, Any] = {"branches": branches, "models": models, "branch": branch, "model": model}
    if branch:
        completed = completed.filter(branch=branch)
    if model:
        completed = completed.filter(model=model)
    latest = list(completed
                  .select_related("evalset_version")
                  .only("pk", "name", "model", "branch", "git_commit", "created_at", "summary", "eval_ids", "status",
                        "finished_at", "evalset_version__case_count", "evalset_version__number",
                        "evalset_version__evalset_id")
                  .order_by("-created_at", "-pk")[:TREND_RUNS + 1])
    more_runs = len(latest) > TREND_RUNS
    runs = latest[:TREND_RUNS][::-1]
    labels = run_axis_labels(runs)
    points = []
    for run, label in zip(runs, labels, strict=True):
        summary = run.summary or {}
        points.append(TrendPoint(label, f"{run_label(run)} · {run.created_at:%Y-%m-%d %H:%M}",
                                 summary.get("pass_rate"), (summary.get("latency") or {}).get("p95"),
                                 reverse("run_detail", args=[run.pk]), run.created_at,
                                 f"{run.branch or '(no branch)'} · {run.model or '(no model)'}"))
    if not runs:
        return TrendPage(evalset, [], [], [], "", "", "", None, [], failing_only, False, **filters)

    run_ids = [run.pk for run in runs]
    versions = sorted({run.evalset_version_id for run in runs})
    if len(versions) == 1 and not failing_only and not any(run.eval_ids for run in runs):
        # Every run has a result for every case of the one version (a run without a subset
        # makes one per case): the version's cases are the rows, read a page at a time by
        # their (eval set, eval_id) index and counted by the version, not over 30 runs' results.
        paginator = Paginator(EvalCase.objects.in_version_ordered_by_eval_id(runs[0].evalset_version)
                              .values_list("eval_id", flat=True), CASES_PER_PAGE)
        paginator.count = runs[0].evalset_version.case_count
    else:
        eval_ids = CaseResult.objects.filter(run_id__in=run_ids)
        if failing_only:
            eval_ids = eval_ids.filter(case__eval_id__in=CaseResult.objects.filter(
                run_id=run_ids[-1], status__in=[CaseResult.Status.FAILED, CaseResult.Status.ERROR]
            ).values("case__eval_id"))
        paginator = Paginator(eval_ids.values_list("case__eval_id", flat=True).distinct().order_by("case__eval_id"),
                              CASES_PER_PAGE)
    paginated = paginator.get_page(page)
    shown = list(paginated.object_list)

    outcomes: dict[tuple[str, int], list[str]] = defaultdict(list)
    first_pk: dict[tuple[str, int], int] = {}
    # The shown cases' rows in each version, then their results by the (run, case) index.
    numbers = [run.evalset_version.number for run in runs]
    # Found through the (eval set, eval id) index, as `in_version_by_eval_id` finds them: the
    # upper bound read as an expression and no ordering (the model's default joins the version
    # and the eval set), or SQLite walks the range index over every case (30 ms at 100k).
    case_ids = dict(EvalCase.objects.filter(evalset_id=evalset.pk, valid_from__lte=max(numbers), eval_id__in=shown)
                    .alias(upper=F("valid_to") + 0).filter(upper__gt=min(numbers))
                    .order_by().values_list("pk", "eval_id"))
    for pk, run_id, case_id, status in (
        CaseResult.objects.filter(run_id__in=run_ids, case_id__in=list(case_ids))
        .values_list("pk", "run_id", "case_id", "status").order_by("iteration", "pk")
    ):
        eval_id = case_ids[case_id]
        outcome = comparison.result_outcome(status)
        if outcome is not None:
            outcomes[(eval_id, run_id)].append(outcome)
            first_pk.setdefault((eval_id, run_id), pk)

    # One reverse() for every cell: a URL per cell would cost more than the chart.
    marker = 987654321
    pattern = reverse("run_case", args=[marker, marker + 1])

    def cell_url(run_id: int, result_pk: int | None, before: int | None) -> str | None:
        if result_pk is None:
            return None
        url = pattern.replace(str(marker + 1), str(result_pk)).replace(str(marker), str(run_id))
        return url + (f"?baseline={before}&status=all" if before is not None else "")

    rows, failing = [], []
    position = {run_id: i for i, run_id in enumerate(run_ids)}
    # A case's failing streak is counted on the latest run's branch, as its causes' are
    # (`causes.causes_since`): a passing run of another branch does not end it.
    branch = runs[-1].branch
    on_branch = [i for i, run in enumerate(runs) if run.branch == branch]
    for eval_id in shown:
        cells = [comparison.case_outcome(outcomes.get((eval_id, run_id), [])) or "none" for run_id in run_ids]
        since, runs_failing = branch_streak(cells, [run.branch for run in runs])
        urls = [cell_url(run_id, first_pk.get((eval_id, run_id)), run_ids[i - 1] if i else None)
                for i, run_id in enumerate(run_ids)]
        rows.append(HeatmapRow(eval_id, cells, since, urls))
        if since is not None:
            run = runs[since]
            result_pk = first_pk.get((eval_id, run.pk))
            before = next((runs[i] for i in reversed(on_branch) if i < since and cells[i] != "none"), None)
            url: str | None = None
            if result_pk is not None:
                url = reverse("run_case", args=[run.pk, result_pk])
                if before is not None:
                    url += f"?baseline={before.pk}&status=all"
            failing.append(FailingCase(eval_id, labels[position[run.pk]], url, runs_failing, urls[-1], run.pk))
    paginated.object_list = shown
    changes = _version_changes(evalset, runs, labels)
    return TrendPage(
        evalset=evalset, runs=runs, run_labels=labels, points=points,
        # drawn by the server: they are the page's first screen on a phone, where plotly.js would
        # be fetched and run before the page answered (the heatmap further down still is plotly)
        pass_rate_html=to_svg(mark_version_changes(pass_rate_trend(points), changes)),
        latency_html=to_svg(mark_version_changes(latency_trend(points), changes)),
        version_changes=tuple(changes),
        heatmap_html=to_html(case_heatmap(rows, labels)) if rows else "", cases=paginated, failing=failing,
        failing_only=failing_only, more_runs=more_runs, streak_branch=branch, **filters,
    )


def _version_changes(evalset: EvalSet, runs: list[Run], labels: list[str]) -> list[VersionChange]:
    """Each run (oldest first) whose eval-set version differs from the run before it."""
    diff_url = reverse("evalset_diff", args=[evalset.pk])
    changes = []
    for i in range(1, len(runs)):
        before, after = runs[i - 1].evalset_version.number, runs[i].evalset_version.number
        if before != after:
            changes.append(VersionChange(labels[i], runs[i].created_at, before, after,
                                         f"{diff_url}?from={before}&to={after}"))
    return changes


@login_required
@require_GET
def evalset_trend(request: HttpRequest, pk: int) -> HttpResponse:
    evalset = get_object_or_404(EvalSet.objects.visible_to(request.user).select_related("project"), pk=pk)
    enter_project(request, evalset.project)
    page = trend_page(evalset=evalset, page=request.GET.get("page", 1), failing_only=request.GET.get("failing") == "1",
                      branch=request.GET.get("branch", ""), model=request.GET.get("model", ""))
    since_branch, since = causes_since(page.runs)
    return render(request, "evaluations/compare/trend.html", {"page": page, "evalset": evalset,
                                                               "since": since, "since_branch": since_branch})
