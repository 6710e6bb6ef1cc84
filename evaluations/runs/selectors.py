"""Page-shaped reads for the run pages: home, runs list, run detail and its cases table.

Each function runs a fixed number of queries, whatever the size of the run, and returns
plain dataclasses: aggregates come from `Run.summary` (written once when the run completes)
or from GROUP BY queries; only one page of case results is ever loaded.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import (
    Count,
    Exists,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    Window,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Floor, Least, RowNumber

from evaluations.evaluators.base import Level
from evaluations.models import CaseResult, EvalSet, EvalSetVersion, EvaluationConfig, Project, Run, Score
from evaluations.ordering import ordered_keys, summary_in_order
from evaluations.runs.chart_data import SCORE_BINS, ScoreBins, TagRate, nice_step, sparkline_points
from evaluations.schemas.evalset import EvalConfig
from evaluations.units import fmt_seconds

RESULTS_PER_PAGE = 50
RUNS_PER_PAGE = 30
SPARKLINE_RUNS = 20
ACTIVE_RUNS_SHOWN = 20
MAX_CHART_TAGS = 40
LATENCY_BINS = 20
SHORT_TEXT = 140
DEMO_CALLABLE = "evaluations.demo.agent:respond"
ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING)
# Filter choices, most useful first.
RESULT_STATUSES = ["passed", "failed", "error", "missing", "not_runnable", "pending"]


# --- Access -----------------------------------------------------------------------------------


def runs_visible_to(user: Any) -> QuerySet[Run]:
    return Run.objects.filter(project__in=Project.objects.visible_to(user))


class Seconds(float):
    """A duration in seconds that prints with two significant digits (`fmt_seconds`), so
    templates show `{{ value }}` and sort or compare it as the number it is."""

    def __str__(self) -> str:
        return fmt_seconds(self)



def seconds(value: float | None) -> Seconds | None:
    return None if value is None else Seconds(value)


def _shorten(text: str, limit: int = SHORT_TEXT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


# --- One run: header and progress -------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    total: int
    done: int  # evaluated: passed, failed or errored
    failed: int
    errored: int
    missing: int
    not_runnable: int

    @property
    def settled(self) -> int:
        return self.done + self.missing + self.not_runnable

    @property
    def passed(self) -> int:
        return self.done - self.failed - self.errored

    @property
    def judged(self) -> int:
        return self.done - self.errored

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.judged if self.judged else None

    @property
    def percent(self) -> int:
        return int(100 * self.settled / self.total) if self.total else 100


@dataclass(frozen=True)
class RunView:
    pk: int
    title: str
    status: str
    is_active: bool
    project_pk: int
    evalset_pk: int
    evalset_name: str
    version_number: int
    target_kind: str
    target_label: str
    iterations: int
    warmups: int
    model: str
    git_commit: str
    branch: str
    tags: list[str]
    created_by: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str
    progress: Progress

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return seconds((self.finished_at - self.started_at).total_seconds())
        return None

    @property
    def can_retry(self) -> bool:
        return not self.is_active and (self.progress.failed + self.progress.errored) > 0


def target_label(kind: str, target: dict[str, Any]) -> str:
    """What the run talked to, for people. Header values (tokens) are never shown."""
    if kind == Run.TargetKind.UPLOADED:
        return "uploaded outputs"
    if kind == Run.TargetKind.HTTP:
        names = ", ".join(sorted(str(k) for k in (target.get("headers") or {})))
        return f"HTTP {target.get('url', '')}" + (f" (headers: {names})" if names else "")
    path = str(target.get("callable", ""))
    if path == DEMO_CALLABLE:
        faults = (target.get("metadata") or {}).get("faults")
        return "demo agent" + (f" with faults {_faults_text(faults)}" if faults else "")
    return f"Python {path}"


def _faults_text(faults: Any) -> str:
    if isinstance(faults, dict):
        names = [k for k, v in faults.items() if k != "rate" and v]
        rate = faults.get("rate")
        return ", ".join(names) + (f" at rate {rate}" if rate is not None else "")
    if isinstance(faults, list):
        return ", ".join(str(f) for f in faults)
    return str(faults)


def progress_of(run: Run) -> Progress:
    return Progress(total=run.cases_total, done=run.cases_done, failed=run.cases_failed,
                    errored=run.cases_errored, missing=run.cases_missing, not_runnable=run.cases_not_runnable)


def run_view(run: Run) -> RunView:
    """`run` comes with its eval-set version, eval set and creator loaded."""
    version = run.evalset_version
    return RunView(
        pk=run.pk,
        title=run.name or f"Run #{run.pk}",
        status=run.status,
        is_active=run.status in ACTIVE,
        project_pk=run.project_id,
        evalset_pk=version.evalset_id,
        evalset_name=version.evalset.display_name,
        version_number=version.number,
        target_kind=run.target_kind,
        target_label=target_label(run.target_kind, run.target or {}),
        iterations=run.iterations,
        warmups=run.warmups,
        model=run.model,
        git_commit=run.git_commit,
        branch=run.branch,
        tags=[str(t) for t in run.tags or []],
        created_by=run.created_by.get_username() if run.created_by else "",
        created_at=run.created_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        error=run.error,
        progress=progress_of(run),
    )


def run_for_page(user: Any, pk: int) -> Run | None:
    return (runs_visible_to(user)
            .select_related("project", "evalset_version__evalset", "created_by")
            .filter(pk=pk).first())


# --- One run: summary -------------------------------------------------------------------------


@dataclass(frozen=True)
class CriterionStat:
    name: str
    count: int
    mean: float | None
    median: float | None
    min: float | None
    max: float | None
    std_dev: float | None
    pass_rate: float | None
    passed: int
    errors: int


@dataclass(frozen=True)
class ToolStat:
    tool: str
    node: str
    calls: int
    failures: int
    cases: int
    latency_seconds: float | None  # summed over the calls

    @property
    def mean_latency(self) -> float | None:
        return seconds(self.latency_seconds / self.calls) if self.latency_seconds is not None and self.calls else None

    @property
    def failure_rate(self) -> float | None:
        return self.failures / self.calls if self.calls else None


@dataclass(frozen=True)
class NodeStat:
    node: str
    executions: int  # NODE steps of the trajectories
    tool_calls: int
    failures: int
    cases: int
    latency_seconds: float | None


@dataclass(frozen=True)
class RunSummary:
    pass_rate: float | None
    passed: int
    judged: int
    errored: int
    missing: int
    not_runnable: int
    latency_count: int
    latency_mean: float | None
    latency_p50: float | None
    latency_p95: float | None
    latency_max: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    cost_usd: float | None
    criteria: list[CriterionStat]
    tools: list[ToolStat]
    nodes: list[NodeStat]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def run_summary_view(summary: dict[str, Any] | None, order: Sequence[str] | None = None) -> RunSummary | None:
    """The run's stored aggregates (`runs.run_summary`'s shape) for the page, criteria in
    `order` (the run's `criteria_order`); None until the run has completed."""
    summary = summary_in_order(summary, order)
    if not summary:
        return None
    statuses = summary.get("statuses") or {}
    latency = summary.get("latency") or {}
    tokens = summary.get("tokens") or {}
    passed, failed = _int(statuses.get("passed")), _int(statuses.get("failed"))
    criteria = [
        CriterionStat(name=str(name), count=_int(c.get("count")), mean=_num(c.get("mean")),
                      median=_num(c.get("median")), min=_num(c.get("min")), max=_num(c.get("max")),
                      std_dev=_num(c.get("std_dev")), pass_rate=_num(c.get("pass_rate")),
                      passed=_int(c.get("passed")), errors=_int(c.get("errors")))
        for name, c in (summary.get("criteria") or {}).items() if isinstance(c, dict)
    ]
    tools = [ToolStat(tool=str(t.get("tool", "")), node=str(t.get("node") or ""), calls=_int(t.get("calls")),
                      failures=_int(t.get("failures")), cases=_int(t.get("cases")),
                      latency_seconds=seconds(_num(t.get("latency_seconds"))))
             for t in summary.get("tools") or [] if isinstance(t, dict)]
    nodes = [NodeStat(node=str(n.get("node", "")), executions=_int(n.get("executions")),
                      # "calls": the shape of summaries written before node executions were counted
                      tool_calls=_int(n.get("tool_calls", n.get("calls"))), failures=_int(n.get("failures")),
                      cases=_int(n.get("cases")), latency_seconds=seconds(_num(n.get("latency_seconds"))))
             for n in summary.get("nodes") or [] if isinstance(n, dict)]
    total = tokens.get("total")
    return RunSummary(
        pass_rate=_num(summary.get("pass_rate")), passed=passed, judged=passed + failed,
        errored=_int(statuses.get("error")), missing=_int(statuses.get("missing")),
        not_runnable=_int(statuses.get("not_runnable")),
        latency_count=_int(latency.get("count")), latency_mean=seconds(_num(latency.get("mean"))),
        latency_p50=seconds(_num(latency.get("p50"))), latency_p95=seconds(_num(latency.get("p95"))),
        latency_max=seconds(_num(latency.get("max"))),
        prompt_tokens=_int(tokens["prompt"]) if tokens.get("prompt") is not None else None,
        completion_tokens=_int(tokens["completion"]) if tokens.get("completion") is not None else None,
        total_tokens=_int(total) if total is not None else None,
        cost_usd=_num(summary.get("cost_usd")),
        criteria=criteria, tools=tools, nodes=nodes,
    )


# --- One run: chart data (GROUP BY, never a row per case) ------------------------------------


@dataclass(frozen=True)
class RunChartData:
    scores: dict[str, ScoreBins]
    latency_width: float | None
    latency_counts: list[int]
    latency_p50: float | None
    latency_p95: float | None
    tag_rates: list[TagRate]
    tags_left_out: int = 0

    @property
    def score_outcomes(self) -> list[str]:
        """The outcomes the score chart shows, for its colour key."""
        return [o for o in ("passed", "failed", "unjudged") if any(sum(getattr(b, o)) for b in self.scores.values())]


def _conversation_scores(run: Run) -> QuerySet[Score]:
    return Score.objects.filter(run=run, applies_to=Level.CONVERSATION.value, turn_index=-1, node_name="")


def score_bins(run: Run, criteria: list[str]) -> dict[str, ScoreBins]:
    """Conversation-level scores per criterion in ten bins, split by passed / failed / no
    verdict: one GROUP BY query."""
    bucket = Least(Floor(F("score") * SCORE_BINS), Value(SCORE_BINS - 1), output_field=IntegerField())
    rows = (_conversation_scores(run).filter(score__isnull=False).order_by()
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


def run_chart_data(run: Run, summary: RunSummary, criteria: list[str]) -> RunChartData:
    tags = [str(t) for t in run.evalset_version.tags or []]
    return RunChartData(
        scores=score_bins(run, criteria),
        latency_width=(latency := latency_bins(run, summary.latency_max))[0],
        latency_counts=latency[1],
        latency_p50=summary.latency_p50,
        latency_p95=summary.latency_p95,
        tag_rates=tag_rates(run, tags[:MAX_CHART_TAGS]),
        tags_left_out=max(0, len(tags) - MAX_CHART_TAGS),
    )


# --- One run: the cases table -----------------------------------------------------------------


@dataclass(frozen=True)
class ResultFilters:
    status: str = ""
    tag: str = ""
    criterion: str = ""  # failed on this criterion
    q: str = ""
    sort: str = ""  # eval_id, status, latency or score.<criterion>; "-" first for descending
    page: Any = 1

    @classmethod
    def from_query(cls, query: Any, criteria: list[str]) -> ResultFilters:
        """Unknown values are dropped rather than refused: an old link still opens the run."""
        status = query.get("status", "").strip()
        criterion = query.get("criterion", "").strip()
        sort = query.get("sort", "").strip()
        return cls(
            status=status if status in RESULT_STATUSES else "",
            tag=query.get("tag", "").strip(),
            criterion=criterion if criterion in criteria else "",
            q=query.get("q", "").strip(),
            sort=sort if sort.lstrip("-") in sort_keys(criteria) else "",
            page=query.get("page", 1),
        )

    @property
    def active(self) -> bool:
        return bool(self.status or self.tag or self.criterion or self.q)


def sort_keys(criteria: list[str]) -> list[str]:
    return ["eval_id", "status", "latency", *(f"score.{c}" for c in criteria)]


@dataclass(frozen=True)
class ScoreCell:
    score: float | None
    passed: bool | None
    error: str


@dataclass(frozen=True)
class ResultRow:
    pk: int
    case_pk: int
    eval_id: str
    case_name: str
    iteration: int
    status: str
    latency_seconds: float | None
    tokens: int | None
    cost_usd: float | None
    error: str
    response: str
    tags: list[str]
    scores: list[ScoreCell | None]
    flaky: bool = False  # the case's repeats in this run disagree (some passed, some did not)


@dataclass(frozen=True)
class SortHeader:
    key: str
    label: str
    numeric: bool
    direction: str  # "asc", "desc" or "" (not sorted by this column)
    next_sort: str  # the sort a click on the header asks for


@dataclass(frozen=True)
class ResultsTable:
    run_pk: int
    rows: Page  # of ResultRow
    criteria: list[str]
    filters: ResultFilters
    headers: dict[str, SortHeader]
    score_headers: list[SortHeader]
    tags: list[str]
    statuses: list[str]
    total: int  # every result of the run, unfiltered
    iterations: int


def _headers(criteria: list[str], sort: str) -> tuple[dict[str, SortHeader], list[SortHeader]]:
    def header(key: str, label: str, numeric: bool) -> SortHeader:
        direction = "asc" if sort == key else "desc" if sort == f"-{key}" else ""
        # Numbers open worst-first (lowest score, slowest), text A-Z; a second click flips.
        first = f"-{key}" if key == "latency" else key
        flipped = key if direction == "desc" else f"-{key}" if direction == "asc" else first
        return SortHeader(key=key, label=label, numeric=numeric, direction=direction, next_sort=flipped)

    fixed = {"eval_id": header("eval_id", "eval_id", False), "status": header("status", "Status", False),
             "latency": header("latency", "Latency (s)", True)}
    return fixed, [header(f"score.{c}", c, True) for c in criteria]


def results_table(run: Run, criteria: list[str], filters: ResultFilters) -> ResultsTable:
    """One page of the run's case results, filtered and sorted in the database, with the
    conversation-level score of each criterion: three queries (count, page, scores)."""
    results = CaseResult.objects.filter(run=run)
    if filters.status:
        results = results.filter(status=filters.status)
    if filters.tag:
        results = results.filter(case__tags_text__contains=f"|{filters.tag}|")
    if filters.q:
        results = results.filter(Q(case__eval_id__icontains=filters.q) | Q(case__name__icontains=filters.q))
    if filters.criterion:
        results = results.filter(Exists(_conversation_scores(run).filter(
            result=OuterRef("pk"), criterion=filters.criterion, passed=False)))

    key, descending = filters.sort.lstrip("-"), filters.sort.startswith("-")
    order: list[Any]
    if key == "eval_id":
        order = [F("case__eval_id").desc() if descending else F("case__eval_id").asc(), "iteration"]
    elif key == "status":
        order = [F("status").desc() if descending else F("status").asc(), "case__position", "iteration"]
    elif key == "latency":
        latency = F("latency_seconds")
        order = [latency.desc(nulls_last=True) if descending else latency.asc(nulls_last=True), "case__position"]
    elif key.startswith("score."):
        results = results.annotate(sort_score=Subquery(
            _conversation_scores(run).filter(result=OuterRef("pk"), criterion=key[len("score."):])
            .values("score")[:1], output_field=FloatField()))
        score = F("sort_score")
        order = [score.desc(nulls_last=True) if descending else score.asc(nulls_last=True), "case__position"]
    else:
        order = ["case__position", "iteration"]
    rows = (results.order_by(*order, "pk")
            .annotate(response=KT("output__turns__0__final_response"))
            .values("pk", "case_id", "case__eval_id", "case__name", "case__tags", "iteration", "status",
                    "latency_seconds", "prompt_tokens", "completion_tokens", "cost_usd", "error", "response"))
    page = Paginator(rows, RESULTS_PER_PAGE).get_page(filters.page)
    raw = list(page.object_list)
    cells: dict[tuple[int, str], ScoreCell] = {}
    if raw:
        # By result alone (each is the run's): with the run in the filter the planner took the
        # run's index and read every score of the run for one page of results.
        for s in (Score.objects.filter(result_id__in=[r["pk"] for r in raw], applies_to=Level.CONVERSATION.value,
                                       turn_index=-1, node_name="")
                  .values("result_id", "criterion", "score", "passed", "error")):
            cells[(s["result_id"], s["criterion"])] = ScoreCell(score=s["score"], passed=s["passed"],
                                                                error=_shorten(s["error"] or ""))
    flaky: set[int] = set()
    if raw and run.iterations > 1:  # one more query, only for runs with repeats
        settled = ~Q(status=CaseResult.Status.PENDING)
        for case_id, passed, done in (CaseResult.objects.filter(run=run, case_id__in={r["case_id"] for r in raw})
                                      .values("case_id").order_by()
                                      .annotate(passed=Count("pk", filter=Q(status=CaseResult.Status.PASSED)),
                                                done=Count("pk", filter=settled))
                                      .values_list("case_id", "passed", "done")):
            if 0 < passed < done:
                flaky.add(case_id)
    result_rows = [
        ResultRow(
            pk=r["pk"], case_pk=r["case_id"], eval_id=r["case__eval_id"], case_name=r["case__name"],
            iteration=r["iteration"], status=r["status"], latency_seconds=seconds(r["latency_seconds"]),
            tokens=(r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0)
            if r["prompt_tokens"] is not None or r["completion_tokens"] is not None else None,
            cost_usd=r["cost_usd"], error=_shorten(r["error"] or ""),
            response=_shorten(_text(r["response"])),
            tags=[str(t) for t in r["case__tags"] or []],
            scores=[cells.get((r["pk"], c)) for c in criteria],
            flaky=r["case_id"] in flaky,
        )
        for r in raw
    ]
    page.object_list = result_rows  # type: ignore[assignment]
    fixed, score_headers = _headers(criteria, filters.sort)
    return ResultsTable(run_pk=run.pk, rows=page, criteria=criteria, filters=filters, headers=fixed,
                        score_headers=score_headers, tags=[str(t) for t in run.evalset_version.tags or []],
                        statuses=RESULT_STATUSES, total=run.cases_total, iterations=run.iterations)


def _text(value: Any) -> str:
    """A final response as text: JSON text for structured content (from the database's
    JSON extraction, which differs between SQLite and PostgreSQL only in spacing)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def run_criteria(run: Run) -> list[str]:
    """The run's criteria in config order: known before the first score is written."""
    criteria = (run.config or {}).get("criteria") or {}
    return [str(name) for name in ordered_keys(criteria, run.criteria_order)
            if not isinstance(criteria[name], dict) or criteria[name].get("enabled", True)]


# --- The run page -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RunPage:
    run: RunView
    summary: RunSummary | None
    charts: RunChartData | None
    table: ResultsTable
    can_write: bool
    criteria: list[str] = field(default_factory=list)


def run_page(run: Run, filters: ResultFilters, *, can_write: bool, with_charts: bool = True) -> RunPage:
    criteria = run_criteria(run)
    summary = run_summary_view(run.summary, run.criteria_order)
    return RunPage(
        run=run_view(run),
        summary=summary,
        charts=run_chart_data(run, summary, criteria) if summary is not None and with_charts else None,
        table=results_table(run, criteria, filters),
        can_write=can_write,
        criteria=criteria,
    )


# --- Runs list --------------------------------------------------------------------------------


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
               "cases_missing", "cases_not_runnable", "created_at", "created_by__username", "p95")


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
                          not_runnable=r["cases_not_runnable"]),
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


# --- Home -------------------------------------------------------------------------------------


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



# --- New run ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionOption:
    pk: int
    label: str
    default_config: str  # the JSON the config editor starts from for this version


@dataclass(frozen=True)
class VersionGroup:
    evalset_pk: int
    name: str
    options: list[VersionOption]


@dataclass(frozen=True)
class NewRunChoices:
    versions: dict[int, EvalSetVersion]  # with their eval sets loaded
    presets: dict[int, EvaluationConfig]
    groups: list[VersionGroup]


def new_run_choices(*, project: Project) -> NewRunChoices:
    """Every eval-set version of the project (latest first within its eval set) and the
    project's saved configs: two queries."""
    from evaluations.runs.services import DEFAULT_CONFIG, config_for

    versions = list(EvalSetVersion.objects.filter(evalset__project=project).select_related("evalset")
                    .defer("evaluator_config", "warnings", "metadata", "description")
                    .order_by("evalset__name", "evalset__eval_set_id", "evalset_id", "-number"))
    groups: dict[int, VersionGroup] = {}
    for v in versions:
        group = groups.setdefault(v.evalset_id, VersionGroup(evalset_pk=v.evalset_id,
                                                             name=v.evalset.display_name, options=[]))
        latest = " · latest" if v.pk == v.evalset.latest_version_id else ""
        try:
            default = config_text(config_for(v))
        except ValueError:  # a stored default that no longer validates: start from evalsite's
            default = config_text(DEFAULT_CONFIG)
        group.options.append(VersionOption(pk=v.pk, label=f"v{v.number} · {v.case_count} cases{latest}",
                                           default_config=default))
    presets = {p.pk: p for p in EvaluationConfig.objects.filter(project=project).order_by("name")}
    return NewRunChoices(versions={v.pk: v for v in versions}, presets=presets, groups=list(groups.values()))


def config_text(config: EvalConfig) -> str:
    """A config as the JSON people edit: each criterion's threshold, and what differs from
    the defaults (the rest is implied)."""
    criteria = {name: {"threshold": c.threshold, **c.model_dump(mode="json", exclude_defaults=True)}
                for name, c in config.criteria.items()}
    doc: dict[str, Any] = {"criteria": criteria}
    if config.user_simulator_config is not None:
        doc["user_simulator_config"] = config.user_simulator_config.model_dump(mode="json")
    return json.dumps(doc, indent=2, ensure_ascii=False)
