"""One run's page: its cases table (filters, sorting by any criterion's score, one page of
results with their scores: a query for the page, never one per row) and the page that puts
the run's header, summary, charts and table together."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import (
    Count,
    Exists,
    F,
    FloatField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.fields.json import KT

from evaluations.converters import parse_id
from evaluations.evaluators.base import Level
from evaluations.models import CaseResult, ResultCause, Run, Score
from evaluations.ordering import ordered_keys
from evaluations.paging import Counted
from evaluations.runs.selectors import (
    RESULT_STATUSES,
    RunChartData,
    RunSummary,
    RunView,
    conversation_scores,
    run_chart_data,
    run_summary_view,
    run_view,
    seconds,
    shorten,
)

RESULTS_PER_PAGE = 50


@dataclass(frozen=True)
class ResultFilters:
    status: str = ""
    tag: str = ""
    criterion: str = ""  # failed on this criterion
    q: str = ""
    sort: str = ""  # eval_id, status, latency or score.<criterion>; "-" first for descending
    page: Any = 1
    cause: int | None = None  # a RunCause of the run (evaluations.review.causes)

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
            cause=_cause_id(query.get("cause", "")),
        )

    @property
    def active(self) -> bool:
        return bool(self.status or self.tag or self.criterion or self.q or self.cause)


def _cause_id(value: Any) -> int | None:
    text = str(value or "").strip()
    return parse_id(text)


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


def filtered_results(run: Run, filters: ResultFilters) -> QuerySet[CaseResult]:
    """The run's results the cases table's filters keep (unordered)."""
    results = CaseResult.objects.filter(run=run)
    if filters.status:
        results = results.filter(status=filters.status)
    if filters.tag:
        results = results.filter(case__tags_text__contains=f"|{filters.tag}|")
    if filters.q:
        results = results.filter(Q(case__eval_id__icontains=filters.q) | Q(case__name__icontains=filters.q))
    if filters.criterion:
        results = results.filter(Exists(conversation_scores(run).filter(
            result=OuterRef("pk"), criterion=filters.criterion, passed=False)))
    if filters.cause is not None:  # a cause of another run keeps nothing
        # The cause's results as a set the run's are matched against: an EXISTS per result
        # read every result of the run (36 ms to count a cause's 10,000 at 100,000 cases; 5 ms).
        results = results.filter(pk__in=ResultCause.objects.filter(
            cause_id=filters.cause, cause__cause_set__run_id=run.pk).values("result_id"))
    return results


def results_table(run: Run, criteria: list[str], filters: ResultFilters) -> ResultsTable:
    """One page of the run's case results, filtered and sorted in the database, with the
    conversation-level score of each criterion: three queries (count, page, scores)."""
    results = filtered_results(run, filters)

    key, descending = filters.sort.lstrip("-"), filters.sort.startswith("-")
    order: list[Any]
    if key == "eval_id":
        order = [F("case__eval_id").desc() if descending else F("case__eval_id").asc(), "iteration"]
    elif key == "status":
        order = [F("status").desc() if descending else F("status").asc(), "pk"]  # pk: see below
    elif key == "latency":
        latency = F("latency_seconds")
        order = [latency.desc(nulls_last=True) if descending else latency.asc(nulls_last=True), "case__position"]
    elif key.startswith("score."):
        results = results.annotate(sort_score=Subquery(
            conversation_scores(run).filter(result=OuterRef("pk"), criterion=key[len("score."):])
            .values("score")[:1], output_field=FloatField()))
        score = F("sort_score")
        order = [score.desc(nulls_last=True) if descending else score.asc(nulls_last=True), "case__position"]
    else:
        # The eval set's order: a run's results are created in one statement in (case
        # position, iteration) order (`run_create`, the only place that creates them), so
        # their ids run in that order too and the (run, id) index gives a page of them
        # without sorting the whole run (a 100,000-case run sorted per page took 80 ms).
        order = []
    rows = (results.order_by(*order, "pk")
            .annotate(response=KT("output__turns__0__final_response"))
            .values("pk", "case_id", "case__eval_id", "case__name", "case__tags", "iteration", "status",
                    "latency_seconds", "prompt_tokens", "completion_tokens", "cost_usd", "error", "response"))
    # Unfiltered, the count is the run's own (results are created with the run): no COUNT
    # over every result of a 100,000-case run for each page.
    # Filtered, the count reads the filtered results alone, without the page's join to the
    # cases (a quarter of the count's time at 100,000 cases).
    listed: Any = Counted(rows, results.count() if filters.active else run.cases_total)
    page = Paginator(listed, RESULTS_PER_PAGE).get_page(filters.page)
    raw = list(page.object_list)
    cells: dict[tuple[int, str], ScoreCell] = {}
    if raw:
        # By result alone (each is the run's): with the run in the filter the planner took the
        # run's index and read every score of the run for one page of results.
        for s in (Score.objects.filter(result_id__in=[r["pk"] for r in raw], applies_to=Level.CONVERSATION.value,
                                       turn_index=-1, node_name="")
                  .values("result_id", "criterion", "score", "passed", "error")):
            cells[(s["result_id"], s["criterion"])] = ScoreCell(score=s["score"], passed=s["passed"],
                                                                error=shorten(s["error"] or ""))
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
            cost_usd=r["cost_usd"], error=shorten(r["error"] or ""),
            response=shorten(_text(r["response"])),
            tags=[str(t) for t in r["case__tags"] or []],
            scores=[cells.get((r["pk"], c)) for c in criteria],
            flaky=r["case_id"] in flaky,
        )
        for r in raw
    ]
    page.object_list = result_rows
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
