"""Several runs side by side, and an eval set's leaderboard.

- `/compare/runs/?runs=1,4,7,9[&reference=<id>][&criterion=][&sort=disagreement|case][&page=]`:
  per-criterion means of each run, the best marked where significant against the reference,
  latency and cost, and the cases x runs matrix (`evaluations.review.nway`);
- `/compare/runs/case/?runs=...&case=<eval_id>`: one case from every run side by side;
- `/compare/runs/trajectories/?runs=...&case=<eval_id>`: its tool-call trajectories aligned across the runs;
- `/compare/runs/export.csv?runs=...`: the matrix as CSV;
- `/evalsets/<pk>/leaderboard/[?criterion=][&branch=][&model=][&axis=cost|latency]`.

Runs the user may not see are a 404, as everywhere else.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from evaluations.models import EvalSet, Run
from evaluations.review import leaderboard as boards
from evaluations.review import nway
from evaluations.review.causes import causes_across
from evaluations.review.selectors import run_label
from evaluations.review.trajectories import trajectories_across
from evaluations.runs import exports
from evaluations.runs.selectors import runs_visible_to
from evaluations.runs.simulation import LABELS as SIMULATION_LABELS
from evaluations.web.charts import to_html
from evaluations.web.charts.nway import ParetoPoint, pareto_chart
from evaluations.web.views.common import enter_project

BODY_CACHE_SECONDS = 24 * 3600
BODY_CACHE_VERSION = 2  # 2: the answer first, and what differs between the runs (issue 41)


class _Count:
    """A Paginator's object list whose length is one COUNT query and whose slices are pages."""

    def __init__(self, run_ids: list[int], sort: str, criterion: str) -> None:
        self.run_ids, self.sort, self.criterion = run_ids, sort, criterion
        self._count: int | None = None

    def count(self) -> int:
        if self._count is None:
            self._count = nway.matrix_count(self.run_ids)
        return self._count

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, item: slice) -> list[nway.MatrixRow]:
        start = item.start or 0
        return nway.matrix_rows(self.run_ids, sort=self.sort, criterion=self.criterion, offset=start,
                                limit=(item.stop or start) - start)


def _runs(request: HttpRequest) -> tuple[list[Run], Run, list[str]]:
    """The `?runs=` runs, the reference (`?reference=`, default the first), and their labels.
    Http404 for a run the user may not see; NwayError for bad input."""
    ids = nway.parse_run_ids(request.GET.get("runs"))
    try:
        runs = nway.nway_runs(runs_visible_to(request.user), ids)
    except Run.DoesNotExist:
        raise Http404("no such run") from None
    reference_raw = request.GET.get("reference", "")
    reference = runs[0]
    if reference_raw:
        reference = next((run for run in runs if str(run.pk) == reference_raw), None)  # type: ignore[assignment]
        if reference is None:
            raise nway.NwayError("reference: must be one of the compared runs")
    return runs, reference, [run_label(run) for run in runs]


def _bad(request: HttpRequest, message: str) -> HttpResponse:
    return render(request, "evaluations/compare/missing.html", {"message": message}, status=400)


@login_required
@require_GET
def nway_compare(request: HttpRequest) -> HttpResponse:
    try:
        runs, reference, labels = _runs(request)
    except nway.NwayError as exc:
        return _bad(request, str(exc))
    enter_project(request, runs[0].project)
    evalset = runs[0].evalset_version.evalset
    key = "nway-body:" + hashlib.sha256(json.dumps(
        [BODY_CACHE_VERSION, [(run.pk, str(run.finished_at), run.name, run.model, run.branch) for run in runs],
         sorted(request.GET.lists())]).encode()).hexdigest()
    body = cache.get(key)
    if body is None:
        # Comparisons with the reference not stored yet are computed here for runs of up to
        # EVALSITE_NWAY_INLINE_CASES cases; larger ones go to the task queue and the page
        # shows the means and the matrix at once, the tests as pending (it refreshes itself).
        inline = max(run.cases_total for run in runs) <= settings.EVALSITE_NWAY_INLINE_CASES
        summary = nway.nway_summary(runs, reference, labels, compute=inline)
        body = str(_nway_body(request, runs, reference, summary))
        if summary.pending:
            nway.comparisons_enqueue(reference, summary.pending)
        else:
            cache.set(key, body, timeout=BODY_CACHE_SECONDS)
    return render(request, "evaluations/compare/nway.html",
                  {"runs": runs, "evalset": evalset, "body": mark_safe(body)})  # noqa: S308 - our rendered template


def _nway_body(request: HttpRequest, runs: list[Run], reference: Run, summary: nway.NwaySummary) -> str:
    names = [line.name for line in summary.criteria]
    criterion = request.GET.get("criterion", "")
    if criterion not in names:
        criterion = nway.default_criterion(summary)
    sort = request.GET.get("sort", "disagreement")
    sort = sort if sort in nway.SORTS else "disagreement"
    ids = [run.pk for run in runs]
    paginator: Paginator[nway.MatrixRow] = Paginator(_Count(ids, sort, criterion), nway.CASES_PER_PAGE)  # type: ignore[arg-type]
    page = paginator.get_page(request.GET.get("page", 1))
    base = {"runs": ",".join(str(pk) for pk in ids), "reference": reference.pk}
    case_url = reverse("nway_case") + "?" + urlencode(base) + "&case="
    return render_to_string("evaluations/compare/_nway_body.html", {
        "summary": summary, "criterion": criterion, "criteria": names, "sort": sort, "cases": page,
        "runs_param": base["runs"], "reference": reference, "case_url": case_url,
        "csv_url": reverse("nway_csv") + "?" + urlencode({**base, "criterion": criterion, "sort": sort}),
        "columns": [(column.run, column.label) for column in summary.runs], "pending": summary.pending,
        "answer": nway.answer(summary), "differences": nway.differences(runs),
        **dict(zip(("across", "across_total"), causes_across(runs), strict=True)),
    }, request)


@login_required
@require_GET
def nway_case(request: HttpRequest) -> HttpResponse:
    try:
        runs, reference, labels = _runs(request)
    except nway.NwayError as exc:
        return _bad(request, str(exc))
    eval_id = request.GET.get("case", "")
    columns = nway.case_across(runs, labels, eval_id)
    if not any(column.result_pk for column in columns):
        raise Http404("no such case in these runs")
    enter_project(request, runs[0].project)
    back = reverse("nway_compare") + "?" + urlencode({"runs": ",".join(str(run.pk) for run in runs),
                                                      "reference": reference.pk})
    return render(request, "evaluations/compare/nway_case.html", {
        "columns": columns, "eval_id": eval_id, "evalset": runs[0].evalset_version.evalset, "back": back,
        "reference": reference,
        "trajectories_url": reverse("nway_trajectories") + "?" + urlencode({
            "runs": ",".join(str(run.pk) for run in runs), "reference": reference.pk, "case": eval_id})})


def matrix_csv_rows(runs: list[Run], criterion: str, sort: str) -> Iterator[list[Any]]:
    """The matrix, a page of cases at a time: eval_id, then per run its outcome, score and line."""
    ids = [run.pk for run in runs]
    yield ["eval_id", "disagreement",
           *(f"run {run.pk}:{part}" for run in runs for part in ("outcome", "score", "line"))]
    total = nway.matrix_count(ids)
    for offset in range(0, total, 500):
        for row in nway.matrix_rows(ids, sort=sort, criterion=criterion, offset=offset, limit=500):
            yield [row.eval_id, row.split, *(value for cell in row.cells
                                             for value in (cell.outcome or "", cell.score, cell.line))]


@login_required
@require_GET
def nway_trajectories(request: HttpRequest) -> HttpResponse:
    """One case's tool-call trajectories across the runs, in aligned columns (`review.trajectories`)."""
    try:
        runs, reference, labels = _runs(request)
    except nway.NwayError as exc:
        return _bad(request, str(exc))
    eval_id = request.GET.get("case", "")
    table = trajectories_across(runs, labels, eval_id)
    if table is None:
        raise Http404("no such case in these runs")
    enter_project(request, runs[0].project)
    base = {"runs": ",".join(str(run.pk) for run in runs), "reference": reference.pk}
    return render(request, "evaluations/compare/nway_trajectories.html", {
        "table": table, "eval_id": eval_id, "evalset": runs[0].evalset_version.evalset,
        "back": reverse("nway_compare") + "?" + urlencode(base),
        "case_url": reverse("nway_case") + "?" + urlencode({**base, "case": eval_id}),
        "columns": list(zip(table.run_ids, table.labels, table.result_pks, table.statuses, strict=True)),
        "sources": SIMULATION_LABELS})


@login_required
@require_GET
def nway_csv(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    try:
        runs, _, _ = _runs(request)
    except nway.NwayError as exc:
        return _bad(request, str(exc))
    sort = request.GET.get("sort", "disagreement")
    response = StreamingHttpResponse(
        exports.csv_lines(matrix_csv_rows(runs, request.GET.get("criterion", ""),
                                          sort if sort in nway.SORTS else "disagreement")),
        content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="compare-{"-".join(str(r.pk) for r in runs)}.csv"'
    return response


@login_required
@require_GET
def evalset_leaderboard(request: HttpRequest, pk: int) -> HttpResponse:
    evalset = get_object_or_404(EvalSet.objects.visible_to(request.user).select_related("project"), pk=pk)
    enter_project(request, evalset.project)
    board = boards.leaderboard(evalset, criterion=request.GET.get("criterion", ""),
                               branch=request.GET.get("branch", ""), model=request.GET.get("model", ""),
                               axis=request.GET.get("axis", "cost"))
    points = [ParetoPoint(run_label(e.run), e.mean.mean, e.axis_value, e.pareto,
                          reverse("run_detail", args=[e.run.pk]))
              for e in board.entries if e.mean and e.mean.mean is not None and e.axis_value is not None]
    chart = to_html(pareto_chart(points, board.criterion, boards.AXES[board.axis])) if points else ""
    return render(request, "evaluations/compare/leaderboard.html", {
        "evalset": evalset, "board": board, "chart": chart, "axes": boards.AXES,
        "labels": {e.run.pk: run_label(e.run) for e in board.entries}})
