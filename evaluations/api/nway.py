"""Several runs compared through the API: the `/compare/runs/` page's numbers, as JSON.

`GET /api/v1/compare/runs/?runs=1,4,7,9[&reference=<id>][&criterion=][&sort=disagreement|case][&page=]`
`GET /api/v1/evalsets/<id>/leaderboard/[?criterion=][&branch=][&model=][&axis=cost|latency]`

The computation is `evaluations.review.nway` (the page's); the leaderboard's is
`evaluations.review.leaderboard`; this module only reshapes them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.api.common import query
from evaluations.api.errors import ApiError, ErrorSerializer, error_responses, problem
from evaluations.api.serializers.fields import count_field
from evaluations.models import EvalSet, Run
from evaluations.review import leaderboard as leaderboards
from evaluations.review import nway
from evaluations.review.selectors import run_label
from evaluations.review.trajectories import trajectories_across
from evaluations.runs.selectors import runs_visible_to

CORRECTION = ("Each run is tested against the reference with an exact McNemar test of its pass/fail flips; the "
              "p-values of the N - 1 tests of a criterion are Holm-corrected (family-wise error 5%). `best` marks "
              "the best run of a criterion only where its difference from the reference is significant after "
              "that correction and its 95% paired bootstrap interval excludes 0.")


class NwayQuerySerializer(serializers.Serializer):
    runs = serializers.CharField(help_text="2 to 8 ids of completed runs of one eval set, comma-separated")
    reference = serializers.IntegerField(required=False, help_text="one of `runs` (default: the first)")
    criterion = serializers.CharField(required=False, default="",
                                      help_text="the criterion of the matrix's scores (default: one with a "
                                                "significant best run, else the one the runs differ most on)")
    sort = serializers.ChoiceField(choices=list(nway.SORTS), default="disagreement",
                                   help_text="matrix order: the cases the runs split on most first, or eval set order")
    page = count_field(required=False, default=1, min_value=1, help_text="matrix page (50 cases)")


class NwayRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    label = serializers.CharField()
    name = serializers.CharField()
    model = serializers.CharField()
    branch = serializers.CharField()
    reference = serializers.BooleanField()
    pass_rate = serializers.FloatField(allow_null=True)
    latency_p50 = serializers.FloatField(allow_null=True, help_text="seconds")
    latency_p95 = serializers.FloatField(allow_null=True, help_text="seconds")
    cost_usd = serializers.FloatField(allow_null=True)


class NwayCellSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    n = serializers.IntegerField(help_text="scores averaged")
    mean = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True, help_text="95% normal interval of the mean")
    ci_high = serializers.FloatField(allow_null=True)
    delta = serializers.FloatField(allow_null=True, help_text="mean change against the reference, paired cases")
    delta_ci_low = serializers.FloatField(allow_null=True, help_text="95% paired bootstrap interval")
    delta_ci_high = serializers.FloatField(allow_null=True)
    p_value = serializers.FloatField(allow_null=True, help_text="exact McNemar, against the reference")
    p_holm = serializers.FloatField(allow_null=True, help_text="Holm-adjusted")
    significant = serializers.BooleanField()
    best = serializers.BooleanField()


class NwayCriterionSerializer(serializers.Serializer):
    name = serializers.CharField()
    runs = NwayCellSerializer(many=True)


class MatrixCellSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    result = serializers.IntegerField(allow_null=True)
    outcome = serializers.CharField(allow_null=True, help_text="pass / fail / error / mixed; null: not in the run")
    passed = serializers.IntegerField(help_text="repeats passed")
    repeats = serializers.IntegerField()
    score = serializers.FloatField(allow_null=True)
    line = serializers.CharField(help_text="the output's first line, the error, or the failing tool call")


class MatrixRowSerializer(serializers.Serializer):
    eval_id = serializers.CharField()
    disagreement = serializers.IntegerField(help_text="min(runs passing, runs not passing)")
    cells = MatrixCellSerializer(many=True)


class MatrixSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    page = serializers.IntegerField()
    per_page = serializers.IntegerField()
    sort = serializers.CharField()
    criterion = serializers.CharField()
    results = MatrixRowSerializer(many=True)


class NwaySerializer(serializers.Serializer):
    answer = serializers.CharField(help_text="the page's one-line answer: which run is best on what, which is worse "
                                             "than the reference, where no run differs beyond chance (from the "
                                             "Holm-corrected tests)")
    differences = serializers.ListField(child=serializers.CharField(),
                                        help_text="what makes the runs unlike, run by run: eval-set version, "
                                                  "model, evaluation config, iterations (empty when none)")
    reference = serializers.IntegerField()
    runs = NwayRunSerializer(many=True)
    criteria = NwayCriterionSerializer(many=True)
    correction = serializers.CharField()
    matrix = MatrixSerializer()
    page_url = serializers.URLField()
    csv_url = serializers.URLField()


def _cell(run: Run, cell: nway.CriterionCell) -> dict[str, Any]:
    mean = cell.mean
    return {"run": run.pk, "n": mean.n if mean else 0, "mean": mean.mean if mean else None,
            "ci_low": mean.low if mean else None, "ci_high": mean.high if mean else None, "delta": cell.delta,
            "delta_ci_low": cell.ci_low, "delta_ci_high": cell.ci_high, "p_value": cell.p_value,
            "p_holm": cell.p_holm, "significant": cell.significant, "best": cell.best}


class NwayCompareView(APIView):
    @extend_schema(
        operation_id="compare_several_runs",
        summary="Compare 2 to 8 completed runs of one eval set",
        description=("Per criterion each run's mean with its 95% interval and, against the reference run, the mean "
                     "change with its paired bootstrap interval and the Holm-corrected exact McNemar p-value; "
                     "latency and cost per run; one page (50 cases) of the cases x runs matrix.\n\n" + CORRECTION
                     + "\n\n400 `not_comparable` for runs of different eval sets or not completed."),
        parameters=[NwayQuerySerializer],
        responses={200: NwaySerializer,
                   400: OpenApiResponse(ErrorSerializer, description="bad parameters, or runs that cannot be "
                                                                     "compared together"),
                   401: OpenApiResponse(ErrorSerializer, description="no or invalid token"),
                   403: OpenApiResponse(ErrorSerializer, description="not allowed"),
                   404: OpenApiResponse(ErrorSerializer, description="a run not in your projects")},
        tags=["comparisons"],
    )
    def get(self, request: Request) -> Response:
        query = NwayQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        try:
            ids = nway.parse_run_ids(params["runs"])
        except nway.NwayError as exc:
            raise ApiError(400, "invalid", str(exc), [problem(str(exc), "runs")]) from None
        try:
            runs = nway.nway_runs(runs_visible_to(request.user), ids)
        except Run.DoesNotExist:
            raise Http404("no such run") from None
        except nway.NwayError as exc:
            raise ApiError(400, "not_comparable", str(exc), [problem(str(exc), "runs")]) from None
        reference = next((run for run in runs if run.pk == params.get("reference", runs[0].pk)), None)
        if reference is None:
            raise ApiError(400, "invalid", "reference: must be one of the compared runs",
                           [problem("must be one of the compared runs", "reference")])
        labels = [run_label(run) for run in runs]
        summary = nway.nway_summary(runs, reference, labels)
        names = [line.name for line in summary.criteria]
        criterion = params["criterion"] if params["criterion"] in names else nway.default_criterion(summary)
        run_ids = [run.pk for run in runs]
        offset = (params["page"] - 1) * nway.CASES_PER_PAGE
        rows = nway.matrix_rows(run_ids, sort=params["sort"], criterion=criterion, offset=offset,
                                limit=nway.CASES_PER_PAGE)
        base = {"runs": ",".join(str(pk) for pk in run_ids), "reference": reference.pk}
        return Response({
            "answer": nway.answer(summary),
            "differences": nway.differences(runs),
            "reference": reference.pk,
            "runs": [{"id": c.run.pk, "label": c.label, "name": c.run.name, "model": c.run.model,
                      "branch": c.run.branch, "reference": c.is_reference, "pass_rate": c.pass_rate,
                      "latency_p50": c.p50, "latency_p95": c.p95, "cost_usd": c.cost_usd} for c in summary.runs],
            "criteria": [{"name": line.name, "runs": [_cell(run, cell) for run, cell in zip(runs, line.cells,
                                                                                             strict=True)]}
                         for line in summary.criteria],
            "correction": CORRECTION,
            "matrix": {
                "count": nway.matrix_count(run_ids), "page": params["page"], "per_page": nway.CASES_PER_PAGE,
                "sort": params["sort"], "criterion": criterion,
                "results": [{"eval_id": row.eval_id, "disagreement": row.split,
                             "cells": [{"run": pk, "result": cell.result_pk, "outcome": cell.outcome,
                                        "passed": cell.passed, "repeats": cell.repeats, "score": cell.score,
                                        "line": cell.line} for pk, cell in zip(run_ids, row.cells, strict=True)]}
                            for row in rows],
            },
            "page_url": request.build_absolute_uri(reverse("nway_compare") + "?" + urlencode(base)),
            "csv_url": request.build_absolute_uri(reverse("nway_csv") + "?" + urlencode(base)),
        })


# --- An eval set's leaderboard ---------------------------------------------------------------


class LeaderboardQuerySerializer(serializers.Serializer):
    criterion = serializers.CharField(required=False, default="", max_length=200,
                                      help_text="the criterion ranked by (default: the one the runs differ most on)")
    branch = serializers.CharField(required=False, default="", max_length=255, help_text="only this branch")
    model = serializers.CharField(required=False, default="", max_length=200, help_text="only this model")
    axis = serializers.ChoiceField(choices=list(leaderboards.AXES), default="cost",
                                   help_text="what the Pareto front weighs quality against")


class LeaderboardEntrySerializer(serializers.Serializer):
    run = serializers.IntegerField()
    label = serializers.CharField()
    model = serializers.CharField()
    branch = serializers.CharField()
    git_commit = serializers.CharField()
    config = serializers.CharField(help_text="short hash of the run's evaluation config")
    finished_at = serializers.DateTimeField(allow_null=True)
    rank = serializers.IntegerField(allow_null=True, help_text="equal means share a rank; null: no mean")
    n = serializers.IntegerField(allow_null=True, help_text="scores averaged")
    mean = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True, help_text="95% interval of the mean")
    ci_high = serializers.FloatField(allow_null=True)
    cost_usd = serializers.FloatField(allow_null=True)
    latency_p95 = serializers.FloatField(allow_null=True, help_text="seconds")
    pareto = serializers.BooleanField(help_text="on the Pareto front of the mean against `axis`")
    url = serializers.URLField(help_text="the run's page")


class LeaderboardSerializer(serializers.Serializer):
    evalset = serializers.IntegerField()
    criterion = serializers.CharField(allow_blank=True, help_text="the criterion ranked by")
    criteria = serializers.ListField(child=serializers.CharField())
    axis = serializers.ChoiceField(choices=list(leaderboards.AXES))
    branches = serializers.ListField(child=serializers.CharField(), help_text="the filter's choices")
    models = serializers.ListField(child=serializers.CharField())
    entries = LeaderboardEntrySerializer(many=True)
    page_url = serializers.URLField(help_text="the leaderboard page")


class Leaderboard(APIView):
    @extend_schema(
        operation_id="evalset_leaderboard",
        summary="An eval set's leaderboard",
        description="The leaderboard page's numbers: the latest completed run per model, branch and evaluation "
                    "config, ranked by one criterion's mean (with its 95% interval), cost and p95 latency beside "
                    "it, and which runs are on the Pareto front of quality against cost or latency.",
        parameters=[LeaderboardQuerySerializer],
        responses={200: LeaderboardSerializer, **error_responses(400, 401, 403, 404, 429)},
        tags=["comparisons"],
    )
    def get(self, request: Request, pk: int) -> Response:
        params = query(LeaderboardQuerySerializer, request)
        evalset = get_object_or_404(EvalSet.objects.visible_to(request.user), pk=pk)
        board = leaderboards.leaderboard(evalset, criterion=params.get("criterion", ""),
                                         branch=params.get("branch", ""), model=params.get("model", ""),
                                         axis=params.get("axis", "cost"))
        absolute = request.build_absolute_uri
        entries = [{
            "run": e.run.pk, "label": run_label(e.run), "model": e.run.model, "branch": e.run.branch,
            "git_commit": e.run.git_commit, "config": e.config, "finished_at": e.run.finished_at, "rank": e.rank,
            "n": e.mean.n if e.mean else None, "mean": e.mean.mean if e.mean else None,
            "ci_low": e.mean.low if e.mean else None, "ci_high": e.mean.high if e.mean else None,
            "cost_usd": e.cost_usd, "latency_p95": e.p95, "pareto": e.pareto,
            "url": absolute(reverse("run_detail", args=[e.run.pk])),
        } for e in board.entries]
        page = reverse("evalset_leaderboard", args=[evalset.pk])
        return Response({"evalset": evalset.pk, "criterion": board.criterion, "criteria": board.criteria,
                         "axis": board.axis, "branches": board.branches, "models": board.models,
                         "entries": entries, "page_url": absolute(page)})


class TrajectoryQuerySerializer(serializers.Serializer):
    runs = serializers.CharField(help_text="2 to 8 ids of completed runs of one eval set, comma-separated")
    case = serializers.CharField(max_length=255, help_text="the eval_id")


class NwayTrajectories(APIView):
    @extend_schema(
        operation_id="compare_trajectories_across_runs",
        summary="One case's tool-call trajectories across 2 to 8 runs, aligned",
        description=("Each turn is aligned on the case's expected calls (or, when it expects none, on the first "
                     "run's): a row per call with each run's answering call (`matched`, `args_differ`), `missing`, "
                     "or a call beyond the pivot (`unexpected`); `diverges` marks rows where the runs differ and "
                     "`first_divergence` the first. Simulated tool results carry their source (`simulated`)."),
        parameters=[TrajectoryQuerySerializer],
        responses={200: OpenApiResponse(description="the aligned rows"),
                   400: OpenApiResponse(ErrorSerializer, description="bad parameters, or runs that cannot be "
                                                                     "compared together"),
                   401: OpenApiResponse(ErrorSerializer, description="no or invalid token"),
                   403: OpenApiResponse(ErrorSerializer, description="not allowed"),
                   404: OpenApiResponse(ErrorSerializer, description="a run not in your projects, or no such case")},
        tags=["comparisons"],
    )
    def get(self, request: Request) -> Response:
        form = TrajectoryQuerySerializer(data=request.query_params)
        form.is_valid(raise_exception=True)
        try:
            ids = nway.parse_run_ids(form.validated_data["runs"])
        except nway.NwayError as exc:
            raise ApiError(400, "invalid", str(exc), [problem(str(exc), "runs")]) from None
        try:
            runs = nway.nway_runs(runs_visible_to(request.user), ids)
        except Run.DoesNotExist:
            raise Http404("no such run") from None
        except nway.NwayError as exc:
            raise ApiError(400, "not_comparable", str(exc), [problem(str(exc), "runs")]) from None
        table = trajectories_across(runs, [run_label(run) for run in runs], form.validated_data["case"])
        if table is None:
            raise Http404("no such case in these runs")
        return Response(table.as_dict())
