"""Reads over many runs: the runs list (filters in the URL, one page of rows) and the home
page (each eval set's recent runs and sparkline, the runs in progress, eval sets with no run
yet). Review adds each eval set's change against its baseline (`review.selectors.home_page`)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import (
    F,
    FloatField,
    QuerySet,
    Window,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, RowNumber

from evaluations.models import EvalSet, Project, Run
from evaluations.runs.chart_data import sparkline_points
from evaluations.runs.selectors import ACTIVE, Progress, runs_visible_to, seconds

RUNS_PER_PAGE = 30


SPARKLINE_RUNS = 20


ACTIVE_RUNS_SHOWN = 20


@dataclass(frozen=True)
class RunFilters:
    evalset: int | None = None
    status: str = ""
    model: str = ""
    branch: str = ""
    commit: str = ""
    tag: str = ""
    date_from: date | None = None
    date_to: date | None = None
    page: Any = 1

    @property
    def active(self) -> bool:
        return any((self.evalset, self.status, self.model, self.branch, self.commit, self.tag,
                    self.date_from, self.date_to))


@dataclass(frozen=True)
class RunRow:
    pk: int
    title: str
    status: str
    evalset_pk: int
    evalset_name: str
    version_number: int
    model: str
    branch: str
    git_commit: str
    tags: list[str]
    progress: Progress
    latency_p95: float | None
    created_at: datetime
    created_by: str

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE


@dataclass(frozen=True)
class RunListPage:
    runs: Page  # of RunRow
    filters: RunFilters
    evalsets: list[tuple[int, str]]
    models: list[str]
    branches: list[str]
    statuses: list[str]


_ROW_FIELDS = ("pk", "name", "status", "evalset_version__evalset_id", "evalset_version__evalset__name",
               "evalset_version__evalset__eval_set_id", "evalset_version__number", "model", "branch",
               "git_commit", "tags", "cases_total", "cases_done", "cases_failed", "cases_errored",
               "cases_missing", "cases_not_runnable", "iterations", "created_at", "created_by__username", "p95")


def _run_rows(runs: QuerySet[Run]) -> QuerySet[Run, dict[str, Any]]:
    # Only the p95 is read out of the summary JSON: the rest of the row comes from columns.
    return runs.annotate(p95=Cast(KT("summary__latency__p95"), FloatField())).values(*_ROW_FIELDS)


def _run_row(r: dict[str, Any]) -> RunRow:
    return RunRow(
        pk=r["pk"], title=r["name"] or f"Run #{r['pk']}", status=r["status"],
        evalset_pk=r["evalset_version__evalset_id"],
        evalset_name=r["evalset_version__evalset__name"] or r["evalset_version__evalset__eval_set_id"],
        version_number=r["evalset_version__number"], model=r["model"], branch=r["branch"],
        git_commit=r["git_commit"], tags=[str(t) for t in r["tags"] or []],
        progress=Progress(total=r["cases_total"], done=r["cases_done"], failed=r["cases_failed"],
                          errored=r["cases_errored"], missing=r["cases_missing"],
                          not_runnable=r["cases_not_runnable"], iterations=r["iterations"]),
        latency_p95=seconds(r["p95"]), created_at=r["created_at"], created_by=r["created_by__username"] or "",
    )


def run_list_page(*, project: Project, filters: RunFilters) -> RunListPage:
    runs = Run.objects.filter(project=project)
    if filters.evalset:
        runs = runs.filter(evalset_version__evalset_id=filters.evalset)
    if filters.status:
        runs = runs.filter(status=filters.status)
    if filters.model:
        runs = runs.filter(model=filters.model)
    if filters.branch:
        runs = runs.filter(branch=filters.branch)
    if filters.commit:
        runs = runs.filter(git_commit__startswith=filters.commit)
    if filters.tag:
        runs = runs.filter(tags__icontains=f'"{filters.tag}"')  # a JSON list: match the quoted item
    if filters.date_from:
        runs = runs.filter(created_at__date__gte=filters.date_from)
    if filters.date_to:
        runs = runs.filter(created_at__date__lte=filters.date_to)
    page = Paginator(_run_rows(runs.order_by("-created_at", "-pk")), RUNS_PER_PAGE).get_page(filters.page)
    page.object_list = [_run_row(r) for r in page.object_list]  # type: ignore[misc]
    project_runs = Run.objects.filter(project=project).order_by()
    return RunListPage(
        runs=page,
        filters=filters,
        evalsets=[(pk, name or eval_set_id) for pk, name, eval_set_id in
                  EvalSet.objects.filter(project=project).order_by("name", "eval_set_id")
                  .values_list("pk", "name", "eval_set_id")],
        models=list(project_runs.exclude(model="").values_list("model", flat=True).distinct().order_by("model")),
        branches=list(project_runs.exclude(branch="").values_list("branch", flat=True).distinct()
                      .order_by("branch")),
        statuses=[s.value for s in Run.Status],
    )


def runs_for_compare(user: Any, pks: list[int]) -> list[Run]:
    """The picked runs, oldest first (the baseline), among those the user may see."""
    return list(runs_visible_to(user).filter(pk__in=pks).order_by("created_at", "pk").only("pk", "created_at"))


@dataclass(frozen=True)
class EvalSetTrend:
    evalset_pk: int
    name: str
    latest: RunRow
    run_count: int  # among the last SPARKLINE_RUNS
    pass_rates: list[float | None]  # oldest first, of finished runs
    sparkline: str  # SVG polyline points
    # the latest run against its default baseline (evaluations.review.baselines), when it completed
    vs: Any = None

    @property
    def sparkline_end(self) -> tuple[str, str] | None:
        """Where the newest pass rate sits, for the dot that ends the line."""
        if not self.sparkline:
            return None
        x, y = self.sparkline.split()[-1].split(",")
        return x, y

    @property
    def sparkline_title(self) -> str:
        return "Pass rate, oldest first: " + ", ".join(
            "—" if r is None else f"{r:.0%}" for r in self.pass_rates)

    @property
    def previous_rate(self) -> float | None:
        known = [r for r in self.pass_rates if r is not None]
        return known[-2] if len(known) > 1 else None

    @property
    def latest_rate(self) -> float | None:
        known = [r for r in self.pass_rates if r is not None]
        return known[-1] if known else None

    @property
    def delta(self) -> float | None:
        if self.latest_rate is None or self.previous_rate is None:
            return None
        return self.latest_rate - self.previous_rate


@dataclass(frozen=True)
class IdleEvalSet:
    pk: int
    name: str
    case_count: int | None


@dataclass(frozen=True)
class HomePage:
    trends: list[EvalSetTrend]
    active: list[RunRow]
    idle: list[IdleEvalSet]  # eval sets without a run yet

    @property
    def empty(self) -> bool:
        return not (self.trends or self.idle)


def active_runs(*, project: Project) -> list[RunRow]:
    runs = Run.objects.filter(project=project, status__in=ACTIVE).order_by("-created_at", "-pk")
    return [_run_row(r) for r in _run_rows(runs)[:ACTIVE_RUNS_SHOWN]]


def home_page(*, project: Project) -> HomePage:
    """The last runs of each eval set (one windowed query), the runs in progress, and the
    eval sets that have no run yet."""
    ranked = (Run.objects.filter(project=project)
              .annotate(rank=Window(RowNumber(), partition_by=[F("evalset_version__evalset_id")],
                                    order_by=[F("created_at").desc(), F("pk").desc()]))
              .filter(rank__lte=SPARKLINE_RUNS))
    by_evalset: dict[int, list[RunRow]] = defaultdict(list)
    for r in _run_rows(ranked).order_by("-created_at", "-pk"):
        row = _run_row(r)
        by_evalset[row.evalset_pk].append(row)
    trends = []
    for evalset_pk, rows in by_evalset.items():  # newest eval-set activity first
        finished = [r for r in reversed(rows) if r.status == Run.Status.COMPLETED]
        rates = [r.progress.pass_rate for r in finished]
        trends.append(EvalSetTrend(evalset_pk=evalset_pk, name=rows[0].evalset_name, latest=rows[0],
                                   run_count=len(rows), pass_rates=rates, sparkline=sparkline_points(rates)))
    idle = [IdleEvalSet(pk=pk, name=name or eval_set_id, case_count=cases)
            for pk, name, eval_set_id, cases in EvalSet.objects.filter(project=project)
            .exclude(pk__in=list(by_evalset)).order_by("-updated_at", "pk")
            .values_list("pk", "name", "eval_set_id", "latest_version__case_count")]
    # Each trend's `vs` (its latest run against the default baseline) is review's to add:
    # evaluations.review.selectors.home_page.
    return HomePage(trends=trends, active=active_runs(project=project), idle=idle)
