"""Several runs of one eval set at once: per-criterion means with intervals, which run is best
(only where that is significant against a reference run), latency and cost, and a matrix of
cases x runs.

**Each run's mean** of a criterion is over its conversation-level scores, with a 95% normal
interval, mean +- 1.96 s / sqrt(n) (s the sample standard deviation), clipped to the scores'
range [0, 1], from the aggregates the database computed when the run finished (count, mean,
standard deviation, in the run's summary): no score is read into Python.

**Against the reference** every other run is compared with the reference run by the
two-run comparison (`comparison.comparison_get`, stored once both runs finished; only its
per-criterion part is read back, `pairwise_criteria`): the paired
bootstrap interval of the mean delta, and the exact McNemar test of the pass/fail flips.
With N runs that is N - 1 tests per criterion, so the McNemar p-values are Holm-corrected
(`holm`) to keep the family-wise error at 5%. The best run of a criterion is marked only
when that holds: a run other than the reference whose Holm-adjusted p < 0.05 and whose delta
interval lies above 0, or the reference itself when every other run is significantly worse.

**The matrix** is one row per case (matched by `eval_id`), one column per run: whether the
case passed (every repeat), failed or errored, its score on one criterion and a line: the
failing tool call (one the agent reported failed, else the first call of a failed case), the
error, or the final response. The order "disagreement" puts first the cases the runs split on most evenly: with
p runs passing out of m runs having the case, min(p, m - p). Ordering, counting and paging
are one GROUP BY in the database; a page reads its 50 cases' results and scores only, so a
page costs the same queries for 10 cases or 10,000.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Case, Count, F, IntegerField, Min, Q, QuerySet, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Least

from evaluations.converters import whole_number
from evaluations.models import CaseResult, Comparison, Run, Score, ToolUsage
from evaluations.review import comparison
from evaluations.review import verdict as verdicts

MIN_RUNS = 2
MAX_RUNS = 8
CASES_PER_PAGE = 50
Z95 = 1.959963984540054  # the standard normal's 97.5th percentile
LINE_CHARS = 120
SORTS = ("disagreement", "case")


class NwayError(ValueError):
    """Runs that cannot be compared together; the message says why."""


# --- Pure statistics ----------------------------------------------------------------------


def normal_mean_ci(count: int, mean: float | None, mean_sq: float | None) -> tuple[float, float] | None:
    """The 95% normal interval of a mean from count, mean and mean of squares; None below
    two values (no spread to estimate)."""
    if mean is None or mean_sq is None or count < 2:
        return None
    variance = max(0.0, mean_sq - mean * mean) * count / (count - 1)
    half = Z95 * math.sqrt(variance / count)
    return mean - half, mean + half


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input's order: the i-th smallest of m is
    multiplied by m - i (i from 0), made monotone, and capped at 1."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def disagreement(passes: int, present: int) -> int:
    """How evenly the runs split on a case: min(runs passing, runs not passing)."""
    return min(passes, present - passes)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For (quality, cost) points, higher quality and lower cost better: whether each point is
    not dominated (no other point at least as good on both and better on one)."""
    front = []
    for i, (quality, cost) in enumerate(points):
        dominated = any(q >= quality and c <= cost and (q > quality or c < cost)
                        for j, (q, c) in enumerate(points) if j != i)
        front.append(not dominated)
    return front


def config_hash(config: Any) -> str:
    """A short stable digest of a run's evaluation config (key order does not matter)."""
    text = json.dumps(config or {}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def one_line(value: Any, limit: int = LINE_CHARS) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        if isinstance(value, dict) and isinstance(value.get("content"), str):
            value = value["content"]
        else:
            value = json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(value.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def call_line(raw: Any) -> str:
    """`lookup {"id": 0}` for a tool call (a dict, or its JSON text as the database gives it)."""
    call = raw
    if isinstance(raw, str):
        try:
            call = json.loads(raw)
        except ValueError:
            return one_line(raw)
    if not isinstance(call, dict):
        return one_line(call)
    args = json.dumps(call.get("args", {}), ensure_ascii=False, sort_keys=True, default=str)
    return one_line(f"{call.get('name', '')} {args}")


# --- Reading the runs ---------------------------------------------------------------------


def parse_run_ids(raw: str | None) -> list[int]:
    """`1,4,7,9` -> [1, 4, 7, 9] (order kept, repeats dropped); NwayError for anything else."""
    ids: list[int] = []
    for part in (raw or "").split(","):
        part = part.strip()
        if not part:
            continue
        number = whole_number(part, minimum=1, maximum=2**31 - 1)
        if number is None:
            raise NwayError(f"runs: {part!r} is not a run id")
        if number not in ids:
            ids.append(number)
    if not MIN_RUNS <= len(ids) <= MAX_RUNS:
        raise NwayError(f"runs: give {MIN_RUNS} to {MAX_RUNS} run ids separated by commas (got {len(ids)})")
    return ids


def nway_runs(visible: QuerySet[Run], ids: list[int]) -> list[Run]:
    """The runs, in the order asked, among `visible`. Run.DoesNotExist for any the user may
    not see (a 404: whether it exists is not said); NwayError for runs that are not all
    completed runs of one eval set. One query."""
    found = {run.pk: run for run in visible.select_related("project", "evalset_version__evalset")
             .defer("target", "input_overrides", "eval_ids", "error").filter(pk__in=ids)}
    if len(found) != len(ids):
        raise Run.DoesNotExist("no such run")
    runs = [found[pk] for pk in ids]
    if len({run.evalset_version.evalset_id for run in runs}) != 1:
        raise NwayError("runs: every run must be of the same eval set")
    unfinished = [run.pk for run in runs if run.status != Run.Status.COMPLETED]
    if unfinished:
        raise NwayError(f"runs: run {unfinished[0]} has not completed; compare completed runs only")
    return runs


@dataclass(frozen=True)
class MeanCell:
    n: int
    mean: float | None
    low: float | None
    high: float | None


def criterion_means(runs: Sequence[Run]) -> dict[tuple[int, str], MeanCell]:
    """(run id, criterion) -> the mean of its conversation-level scores with a 95% interval.

    From each run's stored summary (`runs.services.run_summary`, aggregates the database
    computed when the run finished: count, mean, population standard deviation; n is the
    count less the scores that errored, which have no value), so no query at all; runs without
    one are aggregated in one GROUP BY query."""
    cells: dict[tuple[int, str], MeanCell] = {}
    missing = []
    for run in runs:
        criteria = (run.summary or {}).get("criteria")
        if not isinstance(criteria, dict):
            missing.append(run.pk)
            continue
        for name, stats in criteria.items():
            mean, sd = stats.get("mean"), stats.get("std_dev")
            n = int(stats.get("count") or 0) - int(stats.get("errors") or 0)
            cells[(run.pk, name)] = _cell(n, mean, None if mean is None or sd is None else sd * sd + mean * mean)
    if missing:
        rows = (Score.objects.filter(run_id__in=missing, applies_to=Score.Level.CONVERSATION, score__isnull=False)
                .values("run_id", "criterion")
                .annotate(n=Count("score"), mean=_avg("score"), mean_sq=_avg(F("score") * F("score"))))
        for row in rows:
            cells[(row["run_id"], row["criterion"])] = _cell(row["n"], row["mean"], row["mean_sq"])
    return cells


def _cell(n: int, mean: float | None, mean_sq: float | None) -> MeanCell:
    interval = normal_mean_ci(n, mean, mean_sq)
    if interval is not None:  # scores are normalised to [0, 1]: so is the interval
        interval = (max(0.0, interval[0]), min(1.0, interval[1]))
    return MeanCell(n, mean, *(interval or (None, None)))


def _avg(expression: Any) -> Any:
    from django.db.models import Avg, FloatField

    return Avg(expression, output_field=FloatField())


# --- The summary --------------------------------------------------------------------------


@dataclass
class RunColumn:
    run: Run
    label: str
    is_reference: bool
    p50: float | None
    p95: float | None
    cost_usd: float | None
    pass_rate: float | None


@dataclass
class CriterionCell:
    mean: MeanCell | None
    delta: float | None = None  # vs the reference, over paired cases
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None  # exact McNemar
    p_holm: float | None = None
    significant: bool = False  # Holm-adjusted p < 0.05 and the delta interval excludes 0 (verdict.py)
    best: bool = False
    n: int = 0  # paired cases the test saw
    show_p: bool = False  # a p-value that is evidence of something (verdict.p_shown)

    @property
    def too_few(self) -> bool:
        return self.delta is not None and self.n < verdicts.MIN_CASES


@dataclass
class CriterionLine:
    name: str
    cells: list[CriterionCell] = field(default_factory=list)

    @property
    def best_index(self) -> int | None:
        return next((i for i, cell in enumerate(self.cells) if cell.best), None)


@dataclass
class NwaySummary:
    runs: list[RunColumn]
    reference: Run
    criteria: list[CriterionLine]
    pending: list[int] = field(default_factory=list)  # runs whose comparison with the reference is not stored yet


def nway_summary(runs: list[Run], reference: Run, labels: list[str], *, compute: bool = True) -> NwaySummary:
    """Everything above the matrix. Pairwise comparisons come from `comparison_get` (stored
    once computed); the per-run means from one aggregate query. With `compute=False` a
    comparison not stored yet is not computed here: its run is listed in `pending`, its cells
    have no test, and no run is marked best (the missing test could change which is)."""
    means = criterion_means(runs)
    others = [run for run in runs if run.pk != reference.pk]
    pairs = {pk: {c["name"]: c for c in criteria}
             for pk, criteria in pairwise_criteria(reference, others, compute=compute).items()}
    pending = [run.pk for run in others if run.pk not in pairs]
    names = sorted({name for _, name in means} | {name for pair in pairs.values() for name in pair})
    columns = []
    for run, label in zip(runs, labels, strict=True):
        summary = run.summary or {}
        latency = summary.get("latency") or {}
        columns.append(RunColumn(run, label, run.pk == reference.pk, latency.get("p50"), latency.get("p95"),
                                 summary.get("cost_usd"), summary.get("pass_rate")))
    lines = []
    for name in names:
        line = CriterionLine(name)
        tested = [pairs.get(run.pk, {}).get(name) for run in others]
        adjusted = holm([t["p_value"] if t else 1.0 for t in tested])
        by_run: dict[int, CriterionCell] = {}
        for run, test, p_holm in zip(others, tested, adjusted, strict=True):
            cell = CriterionCell(means.get((run.pk, name)))
            if test is not None:
                cell.delta, cell.ci_low, cell.ci_high = test["delta"], test["ci_low"], test["ci_high"]
                cell.p_value, cell.p_holm, cell.n = test["p_value"], p_holm, test["n"]
                cell.show_p = verdicts.p_shown(test["judged"], test["pass_to_fail"], test["fail_to_pass"])
                cell.significant = verdicts.pair_significant(test["n"], p_holm, cell.ci_low, cell.ci_high)
            by_run[run.pk] = cell
        by_run[reference.pk] = CriterionCell(means.get((reference.pk, name)))
        line.cells = [by_run[run.pk] for run in runs]
        if not pending:
            _mark_best(line, runs, reference)
        lines.append(line)
    return NwaySummary(columns, reference, lines, pending)


def _runs_text(pks: list[int]) -> str:
    return ", ".join(f"#{pk}" for pk in pks)


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def answer(summary: NwaySummary) -> str:
    """The one-line answer first, from the Holm-corrected tests against the reference: which run
    is best on what (★, significant), which is significantly worse than the reference on what,
    and on which criteria no run differs beyond chance (or too few cases to call)."""
    reference = summary.reference.pk
    if not summary.criteria:
        return "No scores in these runs: nothing to compare."
    if summary.pending:
        return (f"The tests against the reference #{reference} are still being computed "
                f"({_runs_text(summary.pending)}): no run is called best until they are in.")
    runs = [column.run.pk for column in summary.runs]
    best: dict[int, list[str]] = {}
    worse: dict[int, list[str]] = {}
    quiet: list[str] = []
    few: list[str] = []
    unscored: list[str] = []  # no run has a score: the runs' notices say why
    for line in summary.criteria:
        index = line.best_index
        if index is not None:
            best.setdefault(runs[index], []).append(line.name)
        tested = [(pk, cell) for pk, cell in zip(runs, line.cells, strict=True) if pk != reference]
        for pk, cell in tested:
            if cell.significant and (cell.delta or 0) < 0 and not (index is not None and runs[index] == reference):
                worse.setdefault(pk, []).append(line.name)
        if not any(cell.mean and cell.mean.mean is not None for cell in line.cells):
            unscored.append(line.name)
        elif index is None and not any(cell.significant for _, cell in tested):
            if tested and all(cell.delta is None or cell.too_few for _, cell in tested):
                few.append(line.name)
            else:
                quiet.append(line.name)
    parts = [f"#{pk} is best on {_names(names)}" for pk, names in best.items()]
    parts += [f"#{pk} is worse than the reference #{reference} on {_names(names)}" for pk, names in worse.items()]
    if quiet:
        parts.append(f"no run differs from the reference #{reference} beyond chance on {_names(quiet)}")
    if few:
        parts.append(f"too few cases to call {_names(few)} ({verdicts.MIN_CASES} or more paired cases needed)")
    if unscored:
        parts.append(f"{_names(unscored)} not scored in any run")
    tests = len(runs) - 1
    return " · ".join(parts) + (f" (exact McNemar against #{reference}, Holm-corrected over {tests} "
                                f"test{'' if tests == 1 else 's'} per criterion)")


def differences(runs: Sequence[Run]) -> list[str]:
    """What makes the runs' numbers unlike, named run by run: `eval-set version v1 (#4, #7) ·
    v2 (#9)`, `model ...`, `evaluation config ...`, `iterations ...` (empty when none)."""
    found = []
    for what, key in (("eval-set version", lambda r: f"v{r.evalset_version.number}"),
                      ("model", lambda r: r.model or "(none)"),
                      ("evaluation config", lambda r: config_hash(r.config)),
                      ("iterations", lambda r: str(r.iterations))):
        groups: dict[str, list[int]] = {}
        for run in runs:
            groups.setdefault(key(run), []).append(run.pk)
        if len(groups) > 1:
            if what == "evaluation config":
                named = {value: f"config {chr(ord('A') + i)}" for i, value in enumerate(groups)}
                found.append(what + " " + " · ".join(f"{named[v]} ({_runs_text(pks)})" for v, pks in groups.items()))
            else:
                found.append(what + " " + " · ".join(f"{v} ({_runs_text(pks)})" for v, pks in groups.items()))
    return found


def default_criterion(summary: NwaySummary) -> str:
    """The criterion the matrix shows when none is asked for: one with a marked best run,
    else the one whose run means are furthest apart, else the first."""
    def spread(line: CriterionLine) -> float:
        means = [cell.mean.mean for cell in line.cells if cell.mean and cell.mean.mean is not None]
        return max(means) - min(means) if means else 0.0

    if not summary.criteria:
        return ""
    marked = [line for line in summary.criteria if line.best_index is not None]
    return max(marked or summary.criteria, key=spread).name


def pairwise_criteria(reference: Run, others: list[Run], *, compute: bool = True) -> dict[int, list[dict[str, Any]]]:
    """Run id -> the per-criterion statistics of its comparison with the reference. Stored
    comparisons that are still current give only their `criteria`, extracted by the
    database in one query (decoding whole summaries, a row per case each, would cost more
    than the rest of the page); the others are computed and stored (`comparison_get`), or
    with `compute=False` left out."""
    found: dict[int, list[dict[str, Any]]] = {}
    finished = {run.pk: run.finished_at for run in others}
    for candidate_id, version, baseline_at, candidate_at, criteria in (
            Comparison.objects.filter(baseline=reference, candidate_id__in=list(finished))
            .values_list("candidate_id", "version", "baseline_finished_at", "candidate_finished_at",
                         "full__summary__criteria")):
        if (version == comparison.SUMMARY_VERSION and baseline_at == reference.finished_at
                and candidate_at == finished[candidate_id] and isinstance(criteria, list)):
            found[candidate_id] = criteria
    for run in others:
        if run.pk not in found and compute:
            found[run.pk] = comparison.comparison_get(baseline=reference, candidate=run)["criteria"]
    return found


PENDING_SECONDS = 600  # how long a queued computation is trusted to be on its way


def comparisons_enqueue(reference: Run, run_ids: Sequence[int]) -> bool:
    """Queue `comparisons_compute` once for these pairs (another view of the same pending
    page within `PENDING_SECONDS` queues nothing); True when it queued the task."""
    from django_q.tasks import async_task

    from evaluations.once import once_take

    # In the database, not the cache: without Redis each web process would queue it once.
    if not once_take(scope="nway-pending", value=json.dumps([reference.pk, sorted(run_ids)]),
                     seconds=PENDING_SECONDS):
        return False
    async_task("evaluations.tasks.nway_comparisons", reference.pk, sorted(run_ids), group=f"nway-{reference.pk}")
    return True


def comparisons_compute(reference_id: int, run_ids: Sequence[int]) -> int:
    """Compute and store the comparisons of runs with a reference that the N-way page found
    missing (the task queue's `tasks.nway_comparisons`); safe to run twice: a stored, current
    comparison is read back, not recomputed. Returns how many pairs it looked at."""
    reference = Run.objects.filter(pk=reference_id).first()
    if reference is None:
        return 0
    others = list(Run.objects.filter(pk__in=list(run_ids), evalset_version__evalset_id=reference.evalset_version
                                     .evalset_id).exclude(pk=reference_id))
    for run in others:
        comparison.comparison_get(baseline=reference, candidate=run)
    return len(others)


def _mark_best(line: CriterionLine, runs: list[Run], reference: Run) -> None:
    scored = [(cell.mean.mean, i) for i, cell in enumerate(line.cells) if cell.mean and cell.mean.mean is not None]
    if not scored:
        return
    _, best = max(scored, key=lambda item: (item[0], -item[1]))
    cell = line.cells[best]
    if runs[best].pk == reference.pk:
        others = [c for c, run in zip(line.cells, runs, strict=True) if run.pk != reference.pk]
        cell.best = bool(others) and all(c.significant and (c.delta or 0) < 0 for c in others)
    else:
        cell.best = cell.significant and (cell.delta or 0) > 0


# --- The matrix ---------------------------------------------------------------------------


def _grouped(run_ids: Sequence[int]) -> QuerySet[Any]:
    counts: dict[str, Any] = {}
    for i, pk in enumerate(run_ids):
        counts[f"n{i}"] = Count("pk", filter=Q(run_id=pk))
        counts[f"p{i}"] = Count("pk", filter=Q(run_id=pk, status=CaseResult.Status.PASSED))
    qs = (CaseResult.objects.filter(run_id__in=list(run_ids)).exclude(status=CaseResult.Status.PENDING)
          .values("case__eval_id").annotate(position=Min("case__position"), **counts))
    passing = sum((Case(When(Q(**{f"n{i}__gt": 0}) & Q(**{f"p{i}": F(f"n{i}")}), then=Value(1)), default=Value(0),
                        output_field=IntegerField()) for i in range(len(run_ids))), Value(0))
    present = sum((Case(When(**{f"n{i}__gt": 0}, then=Value(1)), default=Value(0), output_field=IntegerField())
                   for i in range(len(run_ids))), Value(0))
    return (qs.annotate(passing=passing, present=present)
            .annotate(split=Least(F("passing"), F("present") - F("passing"))))


@dataclass(frozen=True)
class MatrixCell:
    result_pk: int | None
    outcome: str | None  # pass / fail / error / mixed, None when the run lacks the case
    passed: int
    repeats: int
    score: float | None
    line: str  # the final response, the error, or the failing tool call

    @property
    def word(self) -> str:
        return comparison.outcome_text(self.outcome, self.passed, self.repeats)


@dataclass(frozen=True)
class MatrixRow:
    eval_id: str
    split: int
    cells: list[MatrixCell]


# a case the agent answered (a not fully scored one's error is a criterion's, not the agent's)
_ANSWERED = (CaseResult.Status.PASSED, CaseResult.Status.NOT_FULLY_SCORED)


def matrix_count(run_ids: Sequence[int]) -> int:
    return _grouped(run_ids).count()


def matrix_rows(run_ids: Sequence[int], *, sort: str, criterion: str, offset: int, limit: int) -> list[MatrixRow]:
    """One page of the matrix: three queries for the page's cases (order, results, scores)
    and one for failed tool calls, whatever the size of the runs."""
    order = ["-split", "position", "case__eval_id"] if sort == "disagreement" else ["position", "case__eval_id"]
    page = list(_grouped(run_ids).order_by(*order).values("case__eval_id", "split")[offset:offset + limit])
    if not page:
        return []
    eval_ids = [row["case__eval_id"] for row in page]
    results = list(CaseResult.objects.filter(run_id__in=list(run_ids), case__eval_id__in=eval_ids)
                   .exclude(status=CaseResult.Status.PENDING)
                   .annotate(response=KT("output__turns__0__final_response"),
                             first_call=KT("output__turns__0__tool_calls__0"))
                   .order_by("iteration", "pk")
                   .values("pk", "run_id", "case__eval_id", "iteration", "status", "error", "response",
                           "first_call"))
    pks = [r["pk"] for r in results]
    scores: dict[int, list[float]] = {}
    if criterion:
        for result_id, value in (Score.objects.filter(result_id__in=pks, criterion=criterion,
                                                      applies_to=Score.Level.CONVERSATION, score__isnull=False)
                                 .values_list("result_id", "score")):
            if value is not None:
                scores.setdefault(result_id, []).append(value)
    failing: dict[int, str] = {}
    for result_id, tool in (ToolUsage.objects.filter(result_id__in=pks, failures__gt=0).exclude(tool_name="")
                            .order_by("pk").values_list("result_id", "tool_name")):
        failing.setdefault(result_id, tool)
    grouped: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in results:
        grouped.setdefault((r["case__eval_id"], r["run_id"]), []).append(r)
    rows = []
    for row in page:
        cells = []
        for run_id in run_ids:
            repeats = grouped.get((row["case__eval_id"], run_id), [])
            if not repeats:
                cells.append(MatrixCell(None, None, 0, 0, None, ""))
                continue
            outcomes = [o for o in (comparison.result_outcome(r["status"]) for r in repeats) if o]
            first = next((r for r in repeats if r["status"] != CaseResult.Status.PASSED), repeats[0])
            values = [v for r in repeats for v in scores.get(r["pk"], [])]
            if first["pk"] in failing:
                line = f"failing call: {failing[first['pk']]}"
            elif first["status"] == CaseResult.Status.FAILED and first["first_call"]:
                line = "call: " + call_line(first["first_call"])
            elif first["status"] in _ANSWERED or not first["error"]:
                line = one_line(first["response"])
            else:
                line = one_line(first["error"])
            cells.append(MatrixCell(first["pk"], comparison.case_outcome(outcomes), outcomes.count(comparison.PASS),
                                    len(outcomes), math.fsum(values) / len(values) if values else None, line))
        rows.append(MatrixRow(row["case__eval_id"], row["split"], cells))
    return rows


# --- One case across runs -----------------------------------------------------------------


@dataclass(frozen=True)
class CaseColumn:
    run: Run
    label: str
    result_pk: int | None
    status: str
    turns: list[dict[str, Any]]  # {"final_response": str, "tool_calls": [{"name", "args"}]}
    scores: list[tuple[str, float | None, bool | None]]
    error: str


def case_across(runs: list[Run], labels: list[str], eval_id: str) -> list[CaseColumn]:
    """One case's first repeat in every run: its turns' final responses and tool calls, and its
    scores. Two queries."""
    results = {r.run_id: r for r in CaseResult.objects.filter(run__in=runs, case__eval_id=eval_id)
               .order_by("-iteration", "-pk").only("pk", "run_id", "status", "output", "error")}
    scores: dict[int, list[tuple[str, float | None, bool | None]]] = {}
    for result_id, criterion, score, passed in (Score.objects.filter(
            result_id__in=[r.pk for r in results.values()], applies_to=Score.Level.CONVERSATION)
            .order_by("criterion").values_list("result_id", "criterion", "score", "passed")):
        scores.setdefault(result_id, []).append((criterion, score, passed))
    columns = []
    for run, label in zip(runs, labels, strict=True):
        result = results.get(run.pk)
        if result is None:
            columns.append(CaseColumn(run, label, None, "", [], [], ""))
            continue
        turns = []
        output = result.output if isinstance(result.output, dict) else {}
        for turn in output.get("turns") or []:
            if not isinstance(turn, dict):
                continue
            calls = [{"name": str(call.get("name", "")),
                      "args": json.dumps(call.get("args", {}), ensure_ascii=False, sort_keys=True, default=str)}
                     for call in turn.get("tool_calls") or [] if isinstance(call, dict)]
            response = turn.get("final_response")
            turns.append({"final_response": response if isinstance(response, str) else one_line(response, 4000),
                          "tool_calls": calls})
        columns.append(CaseColumn(run, label, result.pk, result.status, turns, scores.get(result.pk, []),
                                  result.error))
    return columns
