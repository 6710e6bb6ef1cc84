"""Reads over many runs: the runs list (filters in the URL, one page of rows, grouped by eval
set and branch) and the home page (each eval set's default branch first and its other active
branches under it, each with its recent runs and sparkline; the runs in progress; eval sets
with no run yet). Review adds each branch's change against its baseline
(`review.selectors.home_page`).

An eval set's default branch (`default_branch`): its pinned baseline's branch, else "main",
else the branch with the most runs."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import (
    Count,
    F,
    FloatField,
    Max,
    Q,
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

# Home shows an eval set's default branch and up to this many other branches, the most
# recently run first; the rest are counted and linked to the runs list.
OTHER_BRANCHES_SHOWN = 5


def default_branch(*, pinned_branch: str | None, run_counts: dict[str, int]) -> str:
    """The branch an eval set's rows lead with: its pinned baseline's branch, else "main"
    when it has runs there, else the branch with the most runs (ties by name)."""
    if pinned_branch is not None and pinned_branch in run_counts:
        return pinned_branch
    if "main" in run_counts:
        return "main"
    if not run_counts:
        return ""
    return min(run_counts, key=lambda branch: (-run_counts[branch], branch))


@dataclass(frozen=True)
class BranchStats:
    runs: int
    last: datetime


def branch_stats(*, project: Project, evalset_ids: list[int] | None = None
                 ) -> tuple[dict[int, dict[str, BranchStats]], dict[int, str]]:
    """Per eval set, each branch's run count and last run (one GROUP BY), and each eval set's
    default branch (one more query, for the pinned baselines' branches)."""
    runs = Run.objects.filter(project=project)
    evalsets = EvalSet.objects.filter(project=project, baseline_run__isnull=False)
    if evalset_ids is not None:
        runs = runs.filter(evalset_version__evalset_id__in=evalset_ids)
        evalsets = evalsets.filter(pk__in=evalset_ids)
    stats: dict[int, dict[str, BranchStats]] = defaultdict(dict)
    for evalset_id, branch, n, last in (runs.order_by().values_list("evalset_version__evalset_id", "branch")
                                        .annotate(n=Count("pk"), last=Max("created_at"))):
        stats[evalset_id][branch] = BranchStats(n, last)
    pinned = dict(evalsets.values_list("pk", "baseline_run__branch"))
    defaults = {evalset_id: default_branch(pinned_branch=pinned.get(evalset_id),
                                           run_counts={b: s.runs for b, s in branches.items()})
                for evalset_id, branches in stats.items()}
    return stats, defaults


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
class RunGroup:
    """A page's runs of one eval set on one branch, newest first."""

    evalset_pk: int
    evalset_name: str
    branch: str
    is_default: bool
    rows: list[RunRow]


@dataclass(frozen=True)
class RunListPage:
    runs: Page  # of RunRow
    filters: RunFilters
    evalsets: list[tuple[int, str]]
    models: list[str]
    branches: list[str]
    statuses: list[str]
    groups: tuple[RunGroup, ...] = ()  # the page's rows by eval set, default branch first


def group_rows(rows: list[RunRow], defaults: dict[int, str]) -> list[RunGroup]:
    """A page's rows by eval set (the one with the newest run first) and, within one, by
    branch: the default branch first, then the others by their newest run."""
    by_evalset: dict[int, dict[str, list[RunRow]]] = {}
    for row in rows:  # newest first, so dicts keep the order of each group's newest run
        by_evalset.setdefault(row.evalset_pk, {}).setdefault(row.branch, []).append(row)
    groups = []
    for evalset_pk, branches in by_evalset.items():
        default = defaults.get(evalset_pk, "")
        for branch in sorted(branches, key=lambda b: b != default):  # stable: the rest keep their order
            group_rows_ = branches[branch]
            groups.append(RunGroup(evalset_pk, group_rows_[0].evalset_name, branch, branch == default, group_rows_))
    return groups


_ROW_FIELDS = ("pk", "name", "status", "evalset_version__evalset_id", "evalset_version__evalset__name",
               "evalset_version__evalset__eval_set_id", "evalset_version__number", "model", "branch",
               "git_commit", "tags", "cases_total", "cases_done", "cases_failed", "cases_errored",
               "cases_missing", "cases_not_runnable", "cases_unscored", "iterations", "created_at",
               "created_by__username", "p95")


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
                          not_runnable=r["cases_not_runnable"], iterations=r["iterations"],
                          unscored=r["cases_unscored"]),
        latency_p95=seconds(r["p95"]), created_at=r["created_at"], created_by=r["created_by__username"] or "",
    )


def run_rows(runs: QuerySet[Run]) -> list[RunRow]:
    """Rows of the runs list for any queryset of runs: one query."""
    return [_run_row(r) for r in _run_rows(runs)]


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
    rows = [_run_row(r) for r in page.object_list]
    page.object_list = rows  # type: ignore[assignment]
    _, defaults = branch_stats(project=project, evalset_ids=sorted({r.evalset_pk for r in rows}))
    project_runs = Run.objects.filter(project=project).order_by()
    return RunListPage(
        groups=tuple(group_rows(rows, defaults)),
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
class BranchTrend:
    """One branch of an eval set on home: its latest run and the pass rates of its recent
    finished runs."""

    evalset_pk: int
    branch: str
    latest: RunRow
    run_count: int  # among the last SPARKLINE_RUNS
    pass_rates: list[float | None]  # oldest first, of finished runs
    sparkline: str  # SVG polyline points
    is_default: bool = False
    # the latest run against its default baseline (evaluations.review.selectors.BaselineLink),
    # when it completed; review adds it
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


@dataclass(frozen=True)
class EvalSetTrend:
    """An eval set on home: its default branch, and its other recently run branches."""

    evalset_pk: int
    name: str
    default: BranchTrend
    others: list[BranchTrend]
    more_branches: int = 0  # other branches with runs, not shown

    @property
    def branches(self) -> list[BranchTrend]:
        return [self.default, *self.others]

    @property
    def latest(self) -> RunRow:
        return self.default.latest


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

    @property
    def rows(self) -> list[BranchTrend]:
        return [b for t in self.trends for b in t.branches]


def active_runs(*, project: Project) -> list[RunRow]:
    runs = Run.objects.filter(project=project, status__in=ACTIVE).order_by("-created_at", "-pk")
    return [_run_row(r) for r in _run_rows(runs)[:ACTIVE_RUNS_SHOWN]]


def _branch_trend(evalset_pk: int, branch: str, rows: list[RunRow], is_default: bool) -> BranchTrend:
    finished = [r for r in reversed(rows) if r.status == Run.Status.COMPLETED]
    rates = [r.progress.pass_rate for r in finished]
    return BranchTrend(evalset_pk=evalset_pk, branch=branch, latest=rows[0], run_count=len(rows), pass_rates=rates,
                       sparkline=sparkline_points(rates), is_default=is_default)


def home_page(*, project: Project) -> HomePage:
    """Per eval set, its default branch and up to OTHER_BRANCHES_SHOWN other branches (the
    most recently run), each with its last runs; the runs in progress; the eval sets that
    have no run yet. A fixed number of queries: the branches (one GROUP BY), the pinned
    baselines' branches, the shown branches' last runs (one windowed query), the idle eval
    sets and the active runs."""
    stats, defaults = branch_stats(project=project)
    shown: dict[int, list[str]] = {}
    more: dict[int, int] = {}
    for evalset_id, branches in stats.items():
        default = defaults[evalset_id]
        others = sorted((b for b in branches if b != default), key=lambda b: branches[b].last, reverse=True)
        shown[evalset_id] = [default, *others[:OTHER_BRANCHES_SHOWN]]
        more[evalset_id] = max(0, len(others) - OTHER_BRANCHES_SHOWN)
    pairs = Q()
    for evalset_id, branches_shown in shown.items():
        pairs |= Q(evalset_version__evalset_id=evalset_id, branch__in=branches_shown)
    by_branch: dict[tuple[int, str], list[RunRow]] = defaultdict(list)
    if shown:
        ranked = (Run.objects.filter(pairs, project=project)
                  .annotate(rank=Window(RowNumber(), partition_by=[F("evalset_version__evalset_id"), F("branch")],
                                        order_by=[F("created_at").desc(), F("pk").desc()]))
                  .filter(rank__lte=SPARKLINE_RUNS))
        for r in _run_rows(ranked).order_by("-created_at", "-pk"):
            row = _run_row(r)
            by_branch[(row.evalset_pk, row.branch)].append(row)
    trends = []
    for evalset_id in sorted(stats, key=lambda e: max(s.last for s in stats[e].values()), reverse=True):
        rows = [_branch_trend(evalset_id, b, by_branch[(evalset_id, b)], i == 0)
                for i, b in enumerate(shown[evalset_id]) if by_branch.get((evalset_id, b))]
        trends.append(EvalSetTrend(evalset_pk=evalset_id, name=rows[0].latest.evalset_name, default=rows[0],
                                   others=rows[1:], more_branches=more[evalset_id]))
    idle = [IdleEvalSet(pk=pk, name=name or eval_set_id, case_count=cases)
            for pk, name, eval_set_id, cases in EvalSet.objects.filter(project=project)
            .exclude(pk__in=list(stats)).order_by("-updated_at", "pk")
            .values_list("pk", "name", "eval_set_id", "latest_version__case_count")]
    # Each branch's `vs` (its latest run against the default baseline) is review's to add:
    # evaluations.review.selectors.home_page.
    return HomePage(trends=trends, active=active_runs(project=project), idle=idle)
