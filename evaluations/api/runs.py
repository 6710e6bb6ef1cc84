"""Runs through the API: start, follow, cancel, retry, pin as baseline, read the summary,
the results (one by one or paged) and the exports."""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.plumbing import build_array_type
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from pydantic import ValidationError as PydanticValidationError
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.generics import ListAPIView, ListCreateAPIView, RetrieveAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations import safejson
from evaluations.api.common import (
    CsvRenderer,
    DownloadView,
    download_renderers,
    query,
    require_admin,
    require_writer,
    responses,
    streamed,
    visible_projects,
)
from evaluations.api.common import visible_runs as _visible_runs
from evaluations.api.compare import CAUSES_LIMIT, causes_payload
from evaluations.api.errors import READ_ERRORS, WRITE_ERRORS, ApiError, error_responses
from evaluations.api.idempotency import KEY_PARAMETER, idempotent
from evaluations.api.serializers import (
    CaseResultDetailSerializer,
    CaseResultSerializer,
    DeletedSerializer,
    EvaluationConfigCreateSerializer,
    EvaluationConfigSerializer,
    PinSerializer,
    ResultQuery,
    RetrySerializer,
    RunCausesSerializer,
    RunCreateSerializer,
    RunQuery,
    RunSerializer,
    RunSummarySerializer,
)
from evaluations.audit import record_run
from evaluations.evaluators import get_evaluator_class
from evaluations.ingest.runs import traces_run_create
from evaluations.interop import EvalSetImportError, SourceFile, check_size
from evaluations.interop.adk.evalset import eval_config_from_doc
from evaluations.interop.deepeval.collection import CollectionError, collection_to_config, config_to_collection
from evaluations.interop.outputs import OutputRow, read_output_rows
from evaluations.jsonschemas import criteria_schema_problems
from evaluations.models import (
    AuditEvent,
    CaseResult,
    EvalSet,
    EvalSetVersion,
    EvaluationConfig,
    Project,
    Run,
    Score,
    Span,
    ToolUsage,
    Trace,
)
from evaluations.ordering import config_in_order
from evaluations.review.causes import run_causes
from evaluations.runs import exports, selectors
from evaluations.runs import services as runs
from evaluations.runs.selectors import notice_views
from evaluations.runs.summary import notices_of
from evaluations.schemas.deepeval_collection import DeepEvalMetricCollection
from evaluations.schemas.evalset import CriterionConfig, EvalConfig
from evaluations.schemas.outputs import AgentOutput

MAX_SPANS = 400  # per trace, as on the drill-down


def visible_runs(request: Request) -> QuerySet[Run]:
    return _visible_runs(request)


class RunRows:
    """The runs a user may see, newest first, for the runs list and a run's detail: what
    CI jobs poll while a run is evaluated, so it is read with two hand-written statements
    (a COUNT and one page) rather than ORM querysets, whose compiling cost more than
    PostgreSQL's answering. Each run comes with its project, eval set version and creator
    attached (only the fields RunSerializer reads). Filters: the exact-match ones in FILTERS;
    RunListCreate sends any other to the ORM path. Paginators take it as a queryset: `count()`
    and a slice."""

    FILTERS = frozenset({"project", "evalset", "status"})

    def __init__(self, user: Any, *, pk: int | None = None, project: str | None = None, evalset: int | None = None,
                 status: str | None = None) -> None:
        where: list[str] = ["p.archived_at IS NULL"]  # an archived project's runs are nobody's
        self.params: list[Any] = []
        if not user.is_authenticated:
            where.append("1 = 0")
        elif not user.is_superuser:
            where.append("r.project_id IN (SELECT m.project_id FROM evaluations_membership m WHERE m.user_id = %s)")
            self.params.append(user.pk)
        for clause, value in (("r.id = %s", pk), ("p.slug = %s", project), ("v.evalset_id = %s", evalset),
                              ("r.status = %s", status)):
            if value is not None:
                where.append(clause)
                self.params.append(value)
        self.user_model = get_user_model()
        self.from_where = f"""
  FROM evaluations_run r
  JOIN evaluations_project p ON p.id = r.project_id
  JOIN evaluations_evalsetversion v ON v.id = r.evalset_version_id
  LEFT JOIN {connection.ops.quote_name(self.user_model._meta.db_table)} u ON u.id = r.created_by_id
 WHERE {" AND ".join(where) or "1 = 1"}"""

    def count(self) -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*)" + self.from_where, self.params)
            return int(cursor.fetchone()[0])

    def __getitem__(self, window: slice) -> list[Run]:
        start = window.start or 0
        rows: list[Any] = list(Run.objects.raw(  # Runs, with the joined columns as attributes
            "SELECT r.*, p.slug AS project_slug, v.evalset_id AS version_evalset_id, v.number AS version_number,"
            " u.username AS creator_username" + self.from_where + " ORDER BY r.created_at DESC, r.id DESC"
            " LIMIT %s OFFSET %s", [*self.params, window.stop - start, start]))
        alias = connection.alias
        for run in rows:  # what RunSerializer reads of them (the rest deferred), without a query each
            run.project = Project.from_db(alias, ["id", "slug"], [run.project_id, run.project_slug])
            run.evalset_version = EvalSetVersion.from_db(alias, ["id", "evalset_id", "number"], [
                run.evalset_version_id, run.version_evalset_id, run.version_number])
            run.created_by = (None if run.created_by_id is None else
                              self.user_model.from_db(alias, ["id", "username"], [run.created_by_id,
                                                                                  run.creator_username]))
        return rows


def _writable(request: Request, project: Project) -> None:
    require_writer(request, project, "start or change runs")


def _config_problems(exc: PydanticValidationError) -> dict[str, list[str]]:
    return {"config": [f"{e['msg']} at {'.'.join(map(str, e['loc']))}" for e in exc.errors()]}


@extend_schema_view(
    get=extend_schema(summary="List runs", parameters=[RunQuery],
                      responses=responses(RunSerializer(many=True), *READ_ERRORS)),
    post=extend_schema(
        summary="Start a run",
        parameters=[KEY_PARAMETER],
        description="With uploaded outputs (`outputs` in a JSON body, or a multipart file `outputs_file`) or a "
                    "live target (`target_kind` http/python + `target`). The run is queued; follow it with "
                    "GET /api/v1/runs/<id>/. With `target_kind` traces (`target`: `{\"deadline_seconds\": N}`, "
                    "optional) the run waits for its cases' traces on POST /v1/traces (attributes "
                    "`evalsite.run_id` and `evalsite.eval_id`) and is scored when every case has one or the "
                    "deadline passes.",
        request={"application/json": RunCreateSerializer, "multipart/form-data": RunCreateSerializer},
        responses=responses(RunSerializer, *WRITE_ERRORS, status=201),
    ),
)
class RunListCreate(ListCreateAPIView):
    serializer_class = RunSerializer

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        params = query(RunQuery, request)
        if set(params) <= RunRows.FILTERS:  # the runs list as CI jobs and dashboards poll it
            page = self.paginate_queryset(RunRows(request.user, **params))
            return self.get_paginated_response(RunSerializer(page, many=True).data)
        return super().list(request, *args, **kwargs)

    def get_queryset(self) -> Any:
        params = query(RunQuery, self.request)
        qs = visible_runs(self.request).select_related("project", "evalset_version", "created_by")
        for param, field in (("project", "project__slug"), ("evalset", "evalset_version__evalset_id"),
                             ("status", "status"), ("model", "model"), ("branch", "branch"),
                             ("git_commit", "git_commit__startswith")):
            if params.get(param):
                qs = qs.filter(**{field: params[param]})
        if params.get("tag"):
            qs = qs.filter(tags__icontains=json.dumps(params["tag"]))  # a JSON list: match the quoted item
        if params.get("created_after"):
            qs = qs.filter(created_at__date__gte=params["created_after"])
        if params.get("created_before"):
            qs = qs.filter(created_at__date__lte=params["created_before"])
        return qs.order_by("-created_at", "-pk")

    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if not isinstance(request.data, dict):
            raise ValidationError({"body": ["send a JSON object"]})
        data = request.data.dict() if hasattr(request.data, "dict") else dict(request.data)
        if hasattr(request.data, "dict"):  # a form: lists and objects come as JSON text
            data = _decode_form_json(data)
        upload = request.FILES.get("outputs_file")
        form = RunCreateSerializer(data=data)
        form.is_valid(raise_exception=True)
        v = form.validated_data
        evalset = get_object_or_404(EvalSet.objects.visible_to(request.user), pk=v["evalset"])
        _writable(request, evalset.project)
        version = (evalset.versions.filter(number=v["version"]).first() if "version" in v
                   else evalset.latest_version)
        if version is None:
            raise ValidationError({"version": [f"eval set {evalset.pk} has no version {v.get('version')}"]})
        outputs = None
        if v["target_kind"] == Run.TargetKind.UPLOADED:
            outputs = _outputs(v.get("outputs"), upload)  # iterations bounded by the schema
        config = None
        if "config" in v:
            try:
                config = eval_config_from_doc(v["config"])  # AgentFlow's EvalConfig, or ADK's test_config.json
            except PydanticValidationError as exc:
                raise ValidationError(_config_problems(exc)) from None
        preset = None
        if "preset" in v:
            preset = get_object_or_404(EvaluationConfig, pk=v["preset"], project=evalset.project)
        if v["target_kind"] == Run.TargetKind.TRACES:
            return self._create_traces_run(request, v, evalset, version, config, preset)
        try:
            with transaction.atomic():  # the run and its audit event, together or neither
                run = runs.run_create(
                    project=evalset.project, version=version, target_kind=v["target_kind"], target=v["target"],
                    outputs=outputs, config=config, preset=preset, iterations=v["iterations"], warmups=v["warmups"],
                    eval_ids=v.get("eval_ids"), input_overrides=v["input_overrides"], name=v["name"],
                    labels=_labels(v),
                    user=request.user,
                )
                record_run(run=run, actor=request.user, verb=AuditEvent.Verb.RUN_STARTED, via="the API")
        except runs.RunError as exc:
            raise ValidationError({"run": [str(exc)]}) from None
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)


    def _create_traces_run(self, request: Request, v: dict[str, Any], evalset: EvalSet, version: Any,
                           config: Any, preset: Any) -> Response:
        """A run waiting for its cases' traces on /v1/traces (evaluations/ingest/runs.py)."""
        seconds = v["target"].get("deadline_seconds")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
            raise ValidationError({"target": ["deadline_seconds must be a whole number of seconds"]})
        try:
            with transaction.atomic():  # the run and its audit event, together or neither
                run = traces_run_create(
                    project=evalset.project, version=version, deadline_seconds=seconds, config=config,
                    preset=preset, iterations=v["iterations"], eval_ids=v.get("eval_ids"), name=v["name"],
                    labels=_labels(v),
                    user=request.user,
                )
                record_run(run=run, actor=request.user, verb=AuditEvent.Verb.RUN_STARTED, via="the API")
        except runs.RunError as exc:
            raise ValidationError({"run": [str(exc)]}) from None
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)


def _labels(v: dict[str, Any]) -> dict[str, Any]:
    return {"model": v["model"], "git_commit": v["git_commit"], "branch": v["branch"], "tags": v["tags"]}


# Run fields a multipart form (outputs_file beside them) can only carry as JSON text.
_FORM_JSON_FIELDS = ("target", "config", "eval_ids", "input_overrides", "tags")


def _decode_form_json(data: dict[str, Any]) -> dict[str, Any]:
    for key in _FORM_JSON_FIELDS:
        if isinstance(data.get(key), str):
            with contextlib.suppress(ValueError):  # not JSON: the serializer says what is wrong
                data[key] = safejson.loads(data[key])
    return data


def _outputs(inline: list[dict[str, Any]] | None, upload: Any) -> list[OutputRow]:
    if upload is not None:
        check_size(upload.name, upload.size)
        return read_output_rows([SourceFile(upload.name, upload.read())])
    if inline is None:
        raise ValidationError({"outputs": ["give the agent outputs: `outputs` (a list) or a file `outputs_file`"]})
    try:
        return read_output_rows([SourceFile("outputs.json", json.dumps(inline).encode())])
    except EvalSetImportError:
        raise
    except Exception as exc:  # pragma: no cover - read_outputs raises EvalSetImportError itself
        raise ValidationError({"outputs": [str(exc)]}) from None


def run_or_404(request: Request, pk: int) -> Run:
    return get_object_or_404(visible_runs(request).select_related("project", "evalset_version__evalset",
                                                                  "created_by"), pk=pk)


@extend_schema_view(
    get=extend_schema(summary="One run: status, progress, labels", responses=responses(RunSerializer, *READ_ERRORS)),
    delete=extend_schema(summary="Delete a finished run and everything of it (project admins)",
                         description="Its results, scores, comparisons (and the triage decided in them), grades and "
                                     "received traces, in batches that never hold the database for long; recorded "
                                     "in the activity feed. A run still going is a 409: cancel it first.",
                         responses=responses(DeletedSerializer, *WRITE_ERRORS, 409)),
)
class RunDetail(RetrieveAPIView):
    serializer_class = RunSerializer

    def delete(self, request: Request, pk: int) -> Response:
        from evaluations.review.deletion import run_delete

        run = run_or_404(request, pk)
        require_admin(request, run.project, "delete runs")
        results = run.cases_total
        try:
            rows = run_delete(run=run, actor=request.user, via="the API")
        except ValueError as exc:
            raise ApiError(409, "conflict", str(exc)) from None
        return Response({"runs": 1, "results": results, "versions": 0, "rows": rows})

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        found = RunRows(request.user, pk=kwargs["pk"])[0:1]
        if not found:
            raise Http404("No Run matches the given query.")
        return Response(RunSerializer(found[0]).data)

    def get_queryset(self) -> Any:  # for the OpenAPI schema
        return visible_runs(self.request).select_related("project", "evalset_version", "created_by")


class RunCauses(APIView):
    @extend_schema(summary="A run's failures grouped by cause, most cases first",
                   description="Each failing (case, criterion) has a cause signature read from the tool-call "
                               "diff, the answer, errors and limits; near-identical failures share one. "
                               "Grouped when the run finishes (`final` is false, and `items` empty, until then).",
                   responses=responses(RunCausesSerializer, *READ_ERRORS))
    def get(self, request: Request, pk: int) -> Response:
        run = run_or_404(request, pk)
        found = causes_payload(run_causes(run, limit=CAUSES_LIMIT)) if run.is_finished else None
        return Response({"run": run.pk, "final": run.is_finished,
                         **(found or {"failing_cases": 0, "total": 0, "items": []})})


class RunCancel(APIView):
    @extend_schema(summary="Cancel a queued or running run (results already written stay)", request=None,
                   responses=responses(RunSerializer, *WRITE_ERRORS))
    def post(self, request: Request, pk: int) -> Response:
        run = run_or_404(request, pk)
        _writable(request, run.project)
        if runs.run_cancel(run=run, user=request.user):
            record_run(run=run, actor=request.user, verb=AuditEvent.Verb.RUN_CANCELLED, via="the API")
        run.refresh_from_db()
        return Response(RunSerializer(run).data)


class RunRetry(APIView):
    @extend_schema(summary="Run the failed and errored results of a finished run again", request=None,
                   responses=responses(RetrySerializer, *WRITE_ERRORS))
    def post(self, request: Request, pk: int) -> Response:
        run = run_or_404(request, pk)
        _writable(request, run.project)
        try:
            reset = runs.run_retry_failed(run=run, user=request.user)
        except runs.RunError as exc:
            raise ValidationError({"run": [str(exc)]}) from None
        record_run(run=run, actor=request.user, verb=AuditEvent.Verb.RUN_RETRIED, via="the API", data={"reset": reset})
        run.refresh_from_db()
        return Response({"reset": reset, "run": RunSerializer(run).data})


class RunPin(APIView):
    @extend_schema(summary="Pin a completed run as its eval set's baseline (project admins)", request=None,
                   responses=responses(PinSerializer, *WRITE_ERRORS))
    def post(self, request: Request, pk: int) -> Response:
        from evaluations.review.services import evalset_pin_baseline

        run = run_or_404(request, pk)
        require_admin(request, run.project, "pin baselines")
        if run.status != Run.Status.COMPLETED:
            raise ValidationError({"run": [f"only a completed run can be the baseline (this one is {run.status})"]})
        evalset = run.evalset_version.evalset
        changed = evalset_pin_baseline(evalset=evalset, run=run, actor=request.user)
        return Response(PinSerializer({"changed": changed, "evalset": evalset.pk, "baseline_run": run.pk}).data)


class RunSummary(APIView):
    """The run page's numbers: status counts, pass rate, latency percentiles, tokens and
    cost, per-criterion aggregates, per-tool and per-node figures."""

    @extend_schema(summary="A run's aggregates (the run page's summary)",
                   responses=responses(RunSummarySerializer, *READ_ERRORS))
    def get(self, request: Request, pk: int) -> Response:
        run = run_or_404(request, pk)
        # A finished run's summary is stored; an unfinished one's is computed (in the database) now.
        stored = run.summary
        raw = stored if stored else runs.run_summary(run)
        view = selectors.run_summary_view(raw, run.criteria_order)
        progress = selectors.progress_of(run)
        body: dict[str, Any] = {
            "run": run.pk, "status": run.status, "final": run.is_finished,
            "progress": {"total": progress.total, "settled": progress.settled, "done": progress.done,
                         "passed": progress.passed, "failed": progress.failed, "errored": progress.errored,
                         "not_fully_scored": progress.unscored, "missing": progress.missing,
                         "not_runnable": progress.not_runnable, "percent": progress.percent},
            "statuses": {str(k): int(v) for k, v in (raw.get("statuses") or {}).items()},
        }
        if view is None:  # an empty summary: nothing scored yet
            body.update(pass_rate=None, passed=0, judged=0, errored=0, not_fully_scored=0, missing=0, not_runnable=0,
                        notices=[n.as_dict() for n in notice_views(notices_of(run))],
                        latency={"count": 0, "mean": None, "p50": None, "p95": None, "max": None},
                        tokens={"prompt": None, "completion": None, "total": None}, cost_usd=None,
                        criteria=[], tools=[], nodes=[])
        else:
            body.update(
                pass_rate=view.pass_rate, passed=view.passed, judged=view.judged, errored=view.errored,
                not_fully_scored=view.unscored, missing=view.missing, not_runnable=view.not_runnable,
                notices=[n.as_dict() for n in (view.notices if "notices" in raw else notice_views(notices_of(run)))],
                latency={"count": view.latency_count, "mean": view.latency_mean, "p50": view.latency_p50,
                         "p95": view.latency_p95, "max": view.latency_max},
                tokens={"prompt": view.prompt_tokens, "completion": view.completion_tokens,
                        "total": view.total_tokens},
                cost_usd=view.cost_usd,
                criteria=[asdict(c) for c in view.criteria],
                tools=[{**asdict(t), "mean_latency": t.mean_latency, "failure_rate": t.failure_rate}
                       for t in view.tools],
                nodes=[asdict(n) for n in view.nodes],
            )
        return Response(RunSummarySerializer(body).data)


# --- Results --------------------------------------------------------------------------------


def conversation_scores(run: Run) -> QuerySet[Score]:
    return Score.objects.filter(run=run, applies_to=Score.Level.CONVERSATION, turn_index=-1, node_name="")


def filtered_results(run: Run, params: dict[str, Any]) -> QuerySet[CaseResult]:
    """The run's results narrowed by a validated ResultQuery, in case order."""
    qs = CaseResult.objects.filter(run=run)
    if params.get("status"):
        qs = qs.filter(status=params["status"])
    if params.get("eval_id"):
        qs = qs.filter(case__eval_id=params["eval_id"])
    if params.get("tag"):
        qs = qs.filter(case__tags_text__contains=f"|{params['tag']}|")
    if params.get("q"):
        qs = qs.filter(Q(case__eval_id__icontains=params["q"]) | Q(case__name__icontains=params["q"]))
    passed = params.get("passed")
    verdicts = conversation_scores(run).filter(result=OuterRef("pk"))
    if params.get("criterion"):
        verdicts = verdicts.filter(criterion=params["criterion"])
        qs = qs.filter(Exists(verdicts if passed is None else verdicts.filter(passed=passed)))
    elif passed is False:
        qs = qs.filter(Exists(verdicts.filter(passed=False)))
    elif passed is True:
        qs = qs.filter(Exists(verdicts.filter(passed=True))).exclude(Exists(verdicts.filter(passed=False)))
    return qs.order_by("case__position", "iteration", "pk")


@extend_schema_view(get=extend_schema(
    summary="A run's results with their scores and justifications",
    parameters=[ResultQuery], responses=responses(CaseResultSerializer(many=True), *READ_ERRORS)))
class RunResults(ListAPIView):
    """Results with their scores and justifications, paginated; filter by `status`, by
    `criterion` and `passed`, and by `applies_to` (conversation / interaction / node) and
    `node` for the scores shown."""

    serializer_class = CaseResultSerializer

    def get_queryset(self) -> Any:
        params = query(ResultQuery, self.request)
        run = run_or_404(self.request, self.kwargs["pk"])
        scores = Score.objects.order_by("criterion", "turn_index", "pk")
        if params.get("applies_to"):
            scores = scores.filter(applies_to=params["applies_to"])
        if params.get("node"):
            scores = scores.filter(node_name=params["node"])
        if params.get("criterion"):
            scores = scores.filter(criterion=params["criterion"])
        return filtered_results(run, params).select_related("case").prefetch_related(
            Prefetch("scores", queryset=scores))


def _output(result: CaseResult) -> AgentOutput | None:
    """The output as the evaluators saw it (a trace fills in what the agent did not report)."""
    if result.output is None:
        return None
    try:
        output = AgentOutput.model_validate(result.output)
    except PydanticValidationError:
        return None
    if output.trace:
        from evaluations.interop.otel.spans import apply_trace

        with contextlib.suppress(Exception):  # a broken trace was reported when the run scored it
            output = apply_trace(output)
    return output


def _turns(run: Run, result: CaseResult, output: AgentOutput | None) -> list[dict[str, Any]]:
    from evaluations.evaluators.base import aligned_turns, text_of
    from evaluations.evaluators.diffing import align
    from evaluations.review.selectors import trajectory_settings
    from evaluations.runs.engine import native_case

    case = native_case(result.case)
    match_type, rules = trajectory_settings(run.config)
    pairs = aligned_turns(case, output) if output is not None else [(inv, None) for inv in case.conversation]
    turns = []
    for invocation, turn in pairs:
        expected = invocation.expected_final_response
        turns.append({
            "invocation_id": invocation.invocation_id,
            "turn_missing": turn is None,
            "expected_response": expected.get_text() if expected is not None else None,
            "actual_response": text_of(turn.final_response) if turn is not None and turn.final_response is not None
            else None,
            "tool_calls": [row.as_dict() for row in align(invocation.expected_tool_trajectory,
                                                          turn.tool_calls if turn else [], match_type, rules).rows],
        })
    return turns


def _traces(result: CaseResult) -> list[dict[str, Any]]:
    traces = []
    for trace in Trace.objects.filter(result=result).order_by("start_ns", "pk"):
        spans = Span.objects.filter(trace=trace).order_by("start_ns", "pk")
        traces.append({
            "trace_id": trace.trace_id, "thread_id": trace.thread_id, "name": trace.name,
            "start_ns": trace.start_ns, "end_ns": trace.end_ns, "span_count": spans.count(),
            "spans": list(spans.values("span_id", "parent_span_id", "name", "kind", "start_ns", "end_ns", "status",
                                       "attributes")[:MAX_SPANS]),
        })
    return traces


class RunResultDetail(APIView):
    """One case result, as the drill-down shows it: the expected case, the output, each turn's
    expected and actual tool calls aligned, every score with its justification, tool usage
    and traces."""

    @extend_schema(summary="One case result in full", responses=responses(CaseResultDetailSerializer,
                                                                         *READ_ERRORS))
    def get(self, request: Request, pk: int, result_pk: int) -> Response:
        from evaluations.api.serializers import EvalCaseSerializer, ScoreSerializer

        run = run_or_404(request, pk)
        result = get_object_or_404(CaseResult.objects.select_related("case"), pk=result_pk, run=run)
        output = _output(result)
        scores = Score.objects.filter(result=result).order_by("applies_to", "turn_index", "criterion", "node_name")
        body = {
            "id": result.pk, "run": run.pk, "case": result.case_id, "eval_id": result.case.eval_id,
            "iteration": result.iteration, "status": result.status, "error": result.error,
            "latency_seconds": result.latency_seconds, "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens, "cost_usd": result.cost_usd, "attempts": result.attempts,
            "expected": EvalCaseSerializer(result.case).data,
            "output": result.output,
            "turns": _turns(run, result, output),
            "scores": ScoreSerializer(scores, many=True).data,
            "tool_usage": list(ToolUsage.objects.filter(result=result).order_by("node_name", "tool_name")
                               .values("tool_name", "node_name", "calls", "failures", "latency_seconds")),
            "traces": _traces(result),
        }
        return Response(CaseResultDetailSerializer(body).data)


# --- Exports ----------------------------------------------------------------------------------


class RunReport(DownloadView):
    """The AgentFlow EvalReport JSON, streamed."""

    @extend_schema(summary="The run as an AgentFlow EvalReport (JSON download)",
                   responses={(200, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT,
                                                                         description="EvalReport"),
                              **error_responses(*READ_ERRORS)})
    def get(self, request: Request, pk: int) -> Any:
        run = run_or_404(request, pk)
        return streamed(exports.run_report_chunks(run), "application/json", f"run-{run.pk}-report.json")


class RunUpsonic(DownloadView):
    """The run in Upsonic's result shapes (accuracy, reliability, performance per case)."""

    @extend_schema(summary="The run in Upsonic's result shapes (JSON download)",
                   responses={(200, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT),
                              **error_responses(*READ_ERRORS)})
    def get(self, request: Request, pk: int) -> Any:
        run = run_or_404(request, pk)
        return streamed(exports.run_upsonic_chunks(run), "application/json", f"run-{run.pk}-upsonic.json")


class RunCsv(DownloadView):
    """Wide CSV: one row per case and iteration, one column per criterion."""

    renderer_classes = download_renderers(CsvRenderer)

    @extend_schema(summary="The results as a wide CSV (one row per case and iteration, a column per criterion)",
                   responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR),
                              **error_responses(*READ_ERRORS)})
    def get(self, request: Request, pk: int) -> Any:
        run = run_or_404(request, pk)
        return streamed(exports.csv_lines(exports.run_wide_rows(run)), "text/csv", f"run-{run.pk}-results.csv")


class RunMetricRecords(DownloadView):
    """Every individual metric record (watsonx.governance's `AgentMetricResult` shape), streamed."""

    @extend_schema(summary="Every individual metric record of the run (watsonx-style JSON download)",
                   responses={(200, "application/json"): OpenApiResponse(
                       build_array_type({"type": "object", "additionalProperties": {}}),
                       description="a list of metric records"),
                              **error_responses(*READ_ERRORS)})
    def get(self, request: Request, pk: int) -> Any:
        run = run_or_404(request, pk)
        return streamed(exports.run_metric_records_chunks(run), "application/json", f"run-{run.pk}-metrics.json")


# --- Saved evaluation configs ---------------------------------------------------------------


def _from_collection(doc: dict[str, Any]) -> dict[str, Any]:
    """A DeepEval metric collection as an evalsite config, each metric's arguments checked by
    the criterion that computes it; a 400 naming the metric and field otherwise."""
    try:
        collection = DeepEvalMetricCollection.model_validate(doc)
        config = collection_to_config(collection)
    except PydanticValidationError as exc:
        raise ValidationError({"config": [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                                          for e in exc.errors()[:10]]}) from None
    except CollectionError as exc:
        raise ValidationError({"config": [str(exc)]}) from None
    problems = []
    for index, (key, entry) in enumerate(config["criteria"].items()):
        try:
            get_evaluator_class(entry["evaluator"])().options(CriterionConfig.model_validate(entry))
        except PydanticValidationError as exc:
            problems += [f"metrics[{index}] ({key}).{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                         for e in exc.errors()[:5]]
    if problems:
        raise ValidationError({"config": problems})
    return config


@extend_schema_view(
    get=extend_schema(summary="Saved evaluation configs of your projects",
                      responses=responses(EvaluationConfigSerializer(many=True), *READ_ERRORS)),
    post=extend_schema(summary="Save an evaluation config (AgentFlow EvalConfig) in a project",
                       request=EvaluationConfigCreateSerializer,
                       responses=responses(EvaluationConfigSerializer, *WRITE_ERRORS, status=201)),
)
class EvaluationConfigList(ListCreateAPIView):
    """A project's saved evaluation configs (DeepEval's metric collections)."""

    serializer_class = EvaluationConfigSerializer

    def get_queryset(self) -> Any:
        return EvaluationConfig.objects.filter(project__in=visible_projects(self.request)) \
            .select_related("project").order_by("name", "pk")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        form = EvaluationConfigCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        v = form.validated_data
        project = get_object_or_404(visible_projects(request), slug=v["project"])
        _writable(request, project)
        if isinstance(v["config"], dict) and isinstance(v["config"].get("metrics"), list):
            v["config"] = _from_collection(v["config"])  # a DeepEval metric collection, in DeepEval's terms
        try:
            config = EvalConfig.model_validate(v["config"])
        except PydanticValidationError as exc:
            raise ValidationError(_config_problems(exc)) from None
        problems = criteria_schema_problems(config.criteria)  # a JSON Schema refers outside itself, or is too big
        if problems:
            raise ValidationError({"config": problems})
        try:
            with transaction.atomic():
                preset = EvaluationConfig.objects.create(
                    project=project, name=v["name"], description=v.get("description", ""), config=v["config"],
                    criteria_order=list((v["config"] or {}).get("criteria") or {}), created_by=request.user)
        except IntegrityError:
            raise ValidationError({"name": [f"{project.slug} already has a config named {v['name']!r}"]}) from None
        return Response(EvaluationConfigSerializer(preset).data, status=status.HTTP_201_CREATED)


class EvaluationConfigDeepEval(APIView):
    @extend_schema(summary="A saved evaluation config as a DeepEval metric collection (its deepeval_* criteria)",
                   responses={(200, "application/json"): OpenApiResponse(
                       {"type": "object", "additionalProperties": {}},
                       description="{name, metrics: [{metric, threshold, ...DeepEval's arguments}], skipped}"),
                              **error_responses(*READ_ERRORS)})
    def get(self, request: Request, pk: int) -> Response:
        preset = get_object_or_404(EvaluationConfig.objects.filter(project__in=visible_projects(request)), pk=pk)
        collection, skipped = config_to_collection(config_in_order(preset.config, preset.criteria_order), preset.name)
        return Response({**collection, "skipped": skipped})
