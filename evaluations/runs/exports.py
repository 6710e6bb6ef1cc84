"""Writing things out: eval sets as native `.evalset.json`, run results as AgentFlow
EvalReport JSON, a wide CSV, and watsonx-style metric records."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from itertools import groupby
from typing import Any

from django.db.models import Avg, Count, Max, Min
from django.utils import timezone

from evaluations.models import CaseResult, EvalCase, EvalSetVersion, Run, Score
from evaluations.ordering import config_in_order, ordered_dict, ordered_keys
from evaluations.schemas.report import (
    AggregateMetricRecord,
    CriterionResult,
    CriterionStats,
    EvalCaseResult,
    EvalSummary,
    MetricRecord,
)

CASE_FIELDS = ("eval_id", "name", "description", "conversation", "session_input", "metadata", "tags",
               "conversation_scenario", "rubrics", "criteria")


def case_native_dict(case: EvalCase) -> dict[str, Any]:
    """The native EvalCase JSON of a stored case (the same dict the import dumped: no
    description when it has none)."""
    return {field: getattr(case, field) for field in CASE_FIELDS if field != "description" or case.description}


def version_native_chunks(version: EvalSetVersion, *, chunk_cases: int = 500) -> Iterator[str]:
    """The version as native JSON text, streamed case by case so a 10,000-case set never
    sits in memory whole. Parsing the output gives back exactly the imported content."""
    evalset = version.evalset
    head = {
        "eval_set_id": evalset.eval_set_id,
        "name": version.name,
        "description": version.description,
        "metadata": version.metadata,
    }
    yield json.dumps(head, ensure_ascii=False, indent=2)[:-2] + ',\n  "eval_cases": ['
    first = True
    cases = (EvalCase.objects.in_version(version).order_by("position").only(*CASE_FIELDS, "position")
             .iterator(chunk_size=chunk_cases))
    parts: list[str] = []
    for case in cases:
        text = _case_text(case)
        parts.append(("\n    " if first else ",\n    ") + text)
        first = False
        if len(parts) >= chunk_cases:
            yield "".join(parts)
            parts = []
    if parts:
        yield "".join(parts)
    yield "\n  ]\n}\n"


def _case_text(case: EvalCase) -> str:
    """The case's JSON: fields in the native model's order, keys sorted inside them, so the
    export is the same text whichever database stored it (PostgreSQL reorders jsonb keys)."""
    fields = ", ".join(
        f"{json.dumps(name)}: {json.dumps(value, ensure_ascii=False, sort_keys=True)}"
        for name, value in case_native_dict(case).items()
    )
    return "{" + fields + "}"


def version_native_text(version: EvalSetVersion) -> str:
    return "".join(version_native_chunks(version))


# --- Run results ----------------------------------------------------------------------------


def criteria_of(run: Run) -> list[str]:
    criteria = run.config.get("criteria") or {}
    return [name for name in ordered_keys(criteria, run.criteria_order) if criteria[name].get("enabled", True)]


def _results_with_scores(run: Run, chunk: int = 500, *, with_output: bool = False,
                         ) -> Iterator[tuple[CaseResult, list[Score]]]:
    """The run's results in case order with their scores, a chunk at a time (two queries per
    chunk), so a 10,000-case run is never in memory whole."""
    pks = list(run.results.order_by("case__position", "iteration").values_list("pk", flat=True))
    fields = ["pk", "iteration", "status", "error", "latency_seconds", "prompt_tokens", "completion_tokens",
              "cost_usd", "case__eval_id", "case__name", "case__position"]
    if with_output:
        fields.append("output")
    for start in range(0, len(pks), chunk):
        ids = pks[start:start + chunk]
        results = CaseResult.objects.filter(pk__in=ids).select_related("case").only(*fields)
        by_pk = {r.pk: r for r in results}
        scores: dict[int, list[Score]] = {pk: [] for pk in ids}
        for score in Score.objects.filter(result_id__in=ids).order_by("pk"):
            scores[score.result_id].append(score)
        for pk in ids:
            yield by_pk[pk], scores[pk]


def _threshold_value(threshold: dict[str, Any] | None) -> float:
    if not threshold:
        return 0.0
    return float(threshold.get("lower_limit", threshold.get("upper_limit", 0.0)))


def run_report_chunks(run: Run) -> Iterator[str]:
    """The run as AgentFlow `EvalReport` JSON, streamed."""
    summary = run.summary or {}
    criteria = ordered_dict(summary.get("criteria", {}), run.criteria_order)
    statuses = summary.get("statuses", {})
    passed = statuses.get("passed", 0)
    total = run.cases_total
    means = [c["mean"] for c in criteria.values() if c.get("mean") is not None]
    report_summary = EvalSummary(
        total_cases=total,
        passed_cases=passed,
        failed_cases=total - passed,
        pass_rate=passed / total if total else 0.0,
        avg_score=sum(means) / len(means) if means else 0.0,
        criterion_stats={name: CriterionStats(**{k: c.get(k) for k in CriterionStats.model_fields})
                         for name, c in criteria.items()},
    )
    finished = run.finished_at or timezone.now()
    head = {
        "report_id": f"run-{run.pk}",
        "eval_set_id": run.evalset_version.evalset.eval_set_id,
        "eval_set_name": run.evalset_version.name or None,
        "summary": report_summary.model_dump(mode="json"),
        "config_used": config_in_order(run.config, run.criteria_order),
        "created_at": run.created_at.isoformat(),
        "duration_seconds": (finished - (run.started_at or run.created_at)).total_seconds(),
    }
    yield json.dumps(head, ensure_ascii=False, indent=2)[:-2] + ',\n  "results": ['
    first = True
    for result, scores in _results_with_scores(run):
        case_result = EvalCaseResult(
            eval_id=result.case.eval_id,
            name=result.case.name or None,
            passed=result.status == CaseResult.Status.PASSED,
            criterion_results=[
                CriterionResult(
                    criterion=s.criterion,
                    score=s.score if s.score is not None else 0.0,
                    passed=bool(s.passed),
                    threshold=_threshold_value(s.threshold),
                    details={**s.justification, **({"error": s.error} if s.error else {}),
                             "iteration": result.iteration},
                )
                for s in scores if s.applies_to == Score.Level.CONVERSATION
            ],
            error=result.error or None,
            duration_seconds=result.latency_seconds or 0.0,
        )
        yield ("\n    " if first else ",\n    ") + case_result.model_dump_json()
        first = False
    yield "\n  ]\n}\n"


def run_wide_rows(run: Run) -> Iterator[list[Any]]:
    """CSV rows, one per case and iteration, one column per criterion (and its pass flag)."""
    criteria = criteria_of(run)
    yield ["eval_id", "iteration", "status", "latency_seconds", "prompt_tokens", "completion_tokens", "cost_usd",
           *[c for name in criteria for c in (name, f"{name}.passed")], "error"]
    for result, scores in _results_with_scores(run):
        top = {s.criterion: s for s in scores if s.applies_to == Score.Level.CONVERSATION}
        cells: list[Any] = []
        for name in criteria:
            s = top.get(name)
            cells += ["" if s is None or s.score is None else round(s.score, 6),
                      "" if s is None or s.passed is None else str(s.passed).lower()]
        yield [result.case.eval_id, result.iteration, result.status, _blank(result.latency_seconds),
               _blank(result.prompt_tokens), _blank(result.completion_tokens), _blank(result.cost_usd), *cells,
               result.error]


def _blank(value: Any) -> Any:
    return "" if value is None else value


def run_metric_records(run: Run, *, aggregated: bool = False, with_records: bool = True) -> Iterator[dict[str, Any]]:
    """watsonx.governance-style metric records: one per score at its level; with
    `aggregated`, one per metric, level and node (mean/min/max/count), optionally with them."""
    groups = score_groups(run)
    if not aggregated:
        for result, scores in _results_with_scores(run):
            yield from (metric_record(run, result, s, groups).model_dump(mode="json") for s in scores)
        return
    rows = (Score.objects.filter(run=run).values("criterion", "applies_to", "node_name")
            .annotate(count=Count("pk"), mean=Avg("score"), min=Min("score"), max=Max("score"))
            .order_by("criterion", "applies_to", "node_name"))
    for row in rows:
        individual = None
        if with_records:
            individual = [
                metric_record(run, s.result, s, groups) for s in Score.objects.filter(
                    run=run, criterion=row["criterion"], applies_to=row["applies_to"], node_name=row["node_name"]
                ).select_related("result__case").order_by("pk")
            ]
        yield AggregateMetricRecord(
            name=row["criterion"], applies_to=row["applies_to"], node_name=row["node_name"] or None,
            value=row["mean"], count=row["count"], mean=row["mean"], min=row["min"], max=row["max"],
            individual_results=individual,
        ).model_dump(mode="json", exclude_none=True)


def run_metric_records_chunks(run: Run) -> Iterator[str]:
    """Every individual metric record of the run as one JSON array, a chunk at a time."""
    yield "["
    for index, record in enumerate(run_metric_records(run)):
        yield ("," if index else "") + "\n" + json.dumps(record, ensure_ascii=False)
    yield "\n]\n"


def score_groups(run: Run) -> dict[str, str]:
    """Criterion -> its evaluator's metric group (watsonx metric groups)."""
    from evaluations.evaluators import registry

    known = registry()
    out = {}
    for name, criterion in (run.config.get("criteria") or {}).items():
        cls = known.get(criterion.get("evaluator") or name)
        if cls is not None:
            out[name] = cls.group
    return out


def metric_record(run: Run, result: CaseResult, s: Score, groups: dict[str, str] | None = None) -> MetricRecord:
    conversation = f"{result.case.eval_id}#{result.iteration}"
    return MetricRecord(
        id=f"run{run.pk}-score{s.pk}",
        name=s.criterion,
        value=s.score,
        applies_to=s.applies_to,
        conversation_id=conversation,
        interaction_id=f"{conversation}/turn{s.turn_index + 1}" if s.turn_index >= 0 else None,
        node_name=s.node_name or None,
        group=(groups or {}).get(s.criterion),
        thresholds=[{"type": k, "value": v} for k, v in (s.threshold or {}).items()],
        errors=[{"message": s.error}] if s.error else [],
        passed=s.passed,
    )


def run_upsonic_chunks(run: Run) -> Iterator[str]:
    """The run in Upsonic's result shapes, per case: `accuracy` (AccuracyEvaluationResult of
    each judged turn and iteration), `reliability` (ReliabilityEvaluationResult per
    iteration) and `performance` (PerformanceEvaluationResult over the iterations)."""
    from evaluations.evaluators.performance import performance_stats
    from evaluations.schemas.outputs import AgentOutput

    yield json.dumps({"run_id": run.pk, "eval_set_id": run.evalset_version.evalset.eval_set_id})[:-1] + ', "cases": ['
    first = True
    for eval_id, group in groupby(_results_with_scores(run, with_output=True), key=lambda rs: rs[0].case.eval_id):
        accuracy: list[dict[str, Any]] = []
        reliability: list[dict[str, Any]] = []
        outputs: list[AgentOutput] = []
        for result, scores in group:
            for s in scores:
                if "accuracy" in s.justification:
                    accuracy.append({"iteration": result.iteration, "turn_index": s.turn_index,
                                     **s.justification["accuracy"]})
                elif {"checks", "missing_tool_calls"} <= s.justification.keys():  # a ReliabilityEvaluationResult
                    reliability.append({"iteration": result.iteration, **s.justification})
            if result.output:
                try:
                    outputs.append(AgentOutput.model_validate(result.output))
                except ValueError:
                    continue
        performance = performance_stats(outputs, run.warmups).model_dump(mode="json") if outputs else None
        case = {"eval_id": eval_id, "accuracy": accuracy, "reliability": reliability, "performance": performance}
        yield ("\n  " if first else ",\n  ") + json.dumps(case, ensure_ascii=False)
        first = False
    yield "\n]}\n"


# A cell a spreadsheet would run as a formula (OWASP "CSV injection"): such text is written
# with a leading apostrophe, so eval ids, outputs and justifications stay text when opened.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_lines(rows: Iterable[list[Any]]) -> Iterator[str]:
    """Rows as CSV text, a line at a time (for a streaming download)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for row in rows:
        writer.writerow([_csv_cell(value) for value in row])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()

