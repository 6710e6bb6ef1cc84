"""A run's results read the way watsonx.governance offers them (seed 001):

- `GET /runs/<id>/metrics/`: aggregated per metric, level (`applies_to`: conversation,
  interaction, node) and node (`AggregateAgentMetricResult`: mean, min, max, count), with or
  without the individual results (`get_aggregated_metrics_results(applies_to, node_name,
  include_individual_results)`);
- `GET /runs/<id>/metrics/results/`: the individual metric results (`AgentMetricResult`),
  filtered the same way (`get_metrics_results`), paged;
- `GET /runs/<id>/wide/`: the wide table (`to_df(wide_format=True)`): one row per case and
  iteration, one column per metric, paged; the columns are the CSV export's.

Everything is aggregated and paged in the database: a page costs the same few queries for a
run of ten cases or ten thousand.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Avg, Count, F, Max, Min, Q, QuerySet, Window
from django.db.models.functions import RowNumber
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.api.common import PAGE_PARAMETERS, paged, query, responses
from evaluations.api.errors import READ_ERRORS
from evaluations.api.pagination import Pagination
from evaluations.api.runs import conversation_scores, filtered_results, run_or_404
from evaluations.api.serializers import (
    AggregateMetricQuery,
    AggregateMetricSerializer,
    MetricRecordQuery,
    MetricRecordSerializer,
    ResultQuery,
    WideTableSerializer,
)
from evaluations.models import Run, Score
from evaluations.runs import exports

# What a metric record reads of a score, its result and its case (never the stored output).
RECORD_FIELDS = ("pk", "run_id", "criterion", "score", "applies_to", "turn_index", "node_name", "threshold", "error",
                 "passed", "raw_value", "result__iteration", "result__case__eval_id")


def _scores(run: Run, params: dict[str, Any]) -> QuerySet[Score]:
    scores = Score.objects.filter(run=run)
    levels = set(params.get("level") or ()) | set(params.get("applies_to") or ())
    if levels:
        scores = scores.filter(applies_to__in=sorted(levels))
    if params.get("node"):
        scores = scores.filter(node_name=params["node"])
    if params.get("name"):
        scores = scores.filter(criterion=params["name"])
    if params.get("passed") is not None:
        scores = scores.filter(passed=params["passed"])
    return scores


def _with_records(scores: QuerySet[Score]) -> QuerySet[Score]:
    return scores.select_related("result__case").only(*RECORD_FIELDS)


def record(run: Run, s: Score, groups: dict[str, str]) -> dict[str, Any]:
    """The export's metric record (exports.metric_record), with the raw value on the evaluator's own
    scale (seconds for latency metrics, which have no [0, 1] score) and where it comes from."""
    return {**exports.metric_record(run, s.result, s, groups).model_dump(mode="json"), "raw_value": s.raw_value,
            "result": s.result_id, "eval_id": s.result.case.eval_id, "iteration": s.result.iteration}


class RunMetrics(APIView):
    @extend_schema(
        summary="Metrics aggregated per metric, level and node (watsonx AggregateAgentMetricResult)",
        description="Filter by `level` (conversation / interaction / node), `node` and `name`. With "
                    "`include_individual=true` each aggregate carries up to `individual_limit` of its individual "
                    "results (all of them: /metrics/results/). Paged over the aggregates.",
        parameters=[AggregateMetricQuery, *PAGE_PARAMETERS],
        responses=responses(paged(AggregateMetricSerializer), *READ_ERRORS))
    def get(self, request: Request, pk: int) -> Response:
        params = query(AggregateMetricQuery, request)
        run = run_or_404(request, pk)
        scores = _scores(run, params)
        rows = (scores.values("criterion", "applies_to", "node_name")
                .annotate(n=Count("pk"), mean=Avg("score"), low=Min("score"), high=Max("score"),
                          raw_mean=Avg("raw_value"), raw_min=Min("raw_value"), raw_max=Max("raw_value"),
                          n_passed=Count("pk", filter=Q(passed=True)), n_judged=Count("passed"),
                          n_errors=Count("pk", filter=~Q(error="")))
                .order_by("criterion", "applies_to", "node_name"))
        paginator = Pagination()
        page = paginator.paginate_queryset(rows, request, view=self) or []
        groups = exports.score_groups(run)
        individual: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        if params["include_individual"] and page:
            wanted = Q()
            for row in page:
                wanted |= Q(criterion=row["criterion"], applies_to=row["applies_to"], node_name=row["node_name"])
            # The first `individual_limit` of each aggregate, in one query whatever the page size.
            ranked = scores.filter(wanted).annotate(rank=Window(
                RowNumber(), partition_by=[F("criterion"), F("applies_to"), F("node_name")], order_by=F("pk").asc(),
            )).filter(rank__lte=params["individual_limit"]).order_by("criterion", "applies_to", "node_name", "pk")
            for s in _with_records(ranked):
                individual.setdefault((s.criterion, s.applies_to, s.node_name), []).append(record(run, s, groups))
        out = []
        for row in page:
            item: dict[str, Any] = {
                "name": row["criterion"], "applies_to": row["applies_to"], "node_name": row["node_name"] or None,
                "group": groups.get(row["criterion"]), "value": row["mean"], "count": row["n"],
                "mean": row["mean"], "min": row["low"], "max": row["high"], "passed": row["n_passed"],
                "judged": row["n_judged"], "pass_rate": row["n_passed"] / row["n_judged"] if row["n_judged"] else None,
                "errors": row["n_errors"], "raw_mean": row["raw_mean"], "raw_min": row["raw_min"],
                "raw_max": row["raw_max"],
            }
            if params["include_individual"]:
                item["individual_results"] = individual.get((row["criterion"], row["applies_to"], row["node_name"]),
                                                            [])
            out.append(item)
        return paginator.get_paginated_response(AggregateMetricSerializer(out, many=True).data)


class RunMetricResults(APIView):
    @extend_schema(
        summary="Individual metric results (watsonx AgentMetricResult), paged",
        parameters=[MetricRecordQuery, *PAGE_PARAMETERS],
        responses=responses(paged(MetricRecordSerializer), *READ_ERRORS))
    def get(self, request: Request, pk: int) -> Response:
        params = query(MetricRecordQuery, request)
        run = run_or_404(request, pk)
        paginator = Pagination()
        page = paginator.paginate_queryset(_with_records(_scores(run, params)).order_by("pk"), request, view=self) or []
        groups = exports.score_groups(run)
        records = [record(run, s, groups) for s in page]
        return paginator.get_paginated_response(MetricRecordSerializer(records, many=True).data)


class RunWideTable(APIView):
    @extend_schema(
        summary="The wide table: one row per case and iteration, one column per metric",
        description="The JSON form of results.csv, paged; filter the rows as /results/ does.",
        parameters=[ResultQuery, *PAGE_PARAMETERS], responses=responses(WideTableSerializer, *READ_ERRORS))
    def get(self, request: Request, pk: int) -> Response:
        params = query(ResultQuery, request)
        run = run_or_404(request, pk)
        # The CSV's header: the generator yields it before it reads any result.
        columns = [str(c) for c in next(exports.run_wide_rows(run))]
        criteria = exports.criteria_of(run)
        rows = filtered_results(run, params).values(
            "pk", "case__eval_id", "iteration", "status", "latency_seconds", "prompt_tokens", "completion_tokens",
            "cost_usd", "error")
        paginator = Pagination()
        page = paginator.paginate_queryset(rows, request, view=self) or []
        cells: dict[int, dict[str, tuple[float | None, bool | None]]] = {}
        if page:
            for s in (conversation_scores(run).filter(result_id__in=[r["pk"] for r in page])
                      .values("result_id", "criterion", "score", "passed")):
                cells.setdefault(s["result_id"], {})[s["criterion"]] = (s["score"], s["passed"])
        results = []
        for r in page:
            scored = cells.get(r["pk"], {})
            results.append({
                "result": r["pk"], "eval_id": r["case__eval_id"], "iteration": r["iteration"], "status": r["status"],
                "latency_seconds": r["latency_seconds"], "prompt_tokens": r["prompt_tokens"],
                "completion_tokens": r["completion_tokens"], "cost_usd": r["cost_usd"], "error": r["error"],
                "metrics": {c: scored.get(c, (None, None))[0] for c in criteria},
                "passed": {c: scored.get(c, (None, None))[1] for c in criteria},
            })
        body = {"columns": columns, "metrics": criteria, "count": paginator.count,
                "next": paginator.get_next_link(), "previous": paginator.get_previous_link(), "results": results}
        return Response(WideTableSerializer(body).data)
