"""Curating eval sets through the API: a save of edits (create, update, delete, duplicate,
tag, untag and move cases) makes a new version; the diff of two versions; a run's results
promoted into cases. The same services and selectors as the pages."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.api.errors import READ_ERRORS, WRITE_ERRORS, ApiError, error_responses, problem
from evaluations.api.serializers import EvalSetVersionSerializer
from evaluations.api.serializers.fields import id_field
from evaluations.audit import audit_record
from evaluations.converters import whole_number
from evaluations.evalsets.curation import CurationError, EditOutcome, evalset_edit, parse_edit
from evaluations.models import AuditEvent, EvalCase, EvalSet, EvalSetVersion, Project, Run, Trace
from evaluations.review import promotion
from evaluations.review.versions import version_diff

MAX_PROMOTE = 10_000


def _evalset(request: Request, pk: int) -> EvalSet:
    return get_object_or_404(EvalSet.objects.visible_to(request.user).select_related("project"), pk=pk)


def _writable(request: Request, evalset: EvalSet) -> None:
    if not evalset.project.can_write(request.user):
        raise PermissionDenied("viewers cannot edit eval sets")


def _curation_error(exc: CurationError) -> ApiError:
    problems = [problem(p.message, p.path or None) for p in exc.problems]
    if exc.conflict:
        return ApiError(409, "conflict", exc.problems[0].message, problems)
    return ApiError(400, "invalid", f"the edit was not saved: {len(problems)} problem(s)", problems)


def _saved(request: Request, evalset: EvalSet, outcome: EditOutcome) -> Response:
    version = outcome.version
    audit_record(
        project=evalset.project,
        actor=request.user,
        verb=AuditEvent.Verb.EVALSET_EDITED,
        obj=evalset,
        summary=f"{evalset.display_name}: v{version.number} ({version.how_created}) — {outcome.describe()}",
        data={
            "version": version.number,
            "how": version.how_created,
            "via": "api",
            "added": outcome.added,
            "changed": outcome.changed,
            "removed": outcome.removed,
        },
    )
    return Response(
        {
            "version": EvalSetVersionSerializer(version).data,
            "added": outcome.added,
            "changed": outcome.changed,
            "removed": outcome.removed,
            "other_versions": [{"evalset": v.evalset_id, "number": v.number} for v in outcome.other_versions],
        },
        status=status.HTTP_201_CREATED,
    )


class EditResultSerializer(serializers.Serializer):
    version = EvalSetVersionSerializer()
    added = serializers.IntegerField()
    changed = serializers.IntegerField()
    removed = serializers.IntegerField()
    other_versions = serializers.ListField(
        child=serializers.DictField(), help_text="versions `move` made in other eval sets"
    )


EDIT_DESCRIPTION = """A new version from changes applied, in order, to the latest version (which
`base_version` must name: else 409). Changes: `{"op": "put", "eval_id": <case replaced, or
omitted for a new case>, "case": <native EvalCase>}`, `{"op": "delete", "eval_ids": [...]}`,
`{"op": "duplicate", "eval_id", "new_eval_id"?}`, `{"op": "tag"|"untag", "eval_ids", "tag"}`,
`{"op": "move", "eval_ids", "target_evalset": <id>}`. Everything is checked before anything
is written: a 400 lists every problem with its path (`changes[0].case.conversation[1].user_content`)."""


class EvalSetEdit(APIView):
    @extend_schema(
        summary="Save edits to an eval set as a new version",
        description=EDIT_DESCRIPTION,
        request=OpenApiTypes.OBJECT,
        responses={201: EditResultSerializer, **error_responses(*WRITE_ERRORS, 409)},
    )
    def post(self, request: Request, pk: int) -> Response:
        evalset = _evalset(request, pk)
        _writable(request, evalset)
        try:
            edit = parse_edit(request.data)
            outcome = evalset_edit(evalset=evalset, edit=edit, user=request.user, how=EvalSetVersion.How.API)
        except CurationError as exc:
            raise _curation_error(exc) from None
        return _saved(request, evalset, outcome)


class EvalSetDiff(APIView):
    @extend_schema(
        summary="What changed between two versions of an eval set",
        description="Cases added, removed and changed (by eval id, in the newer version's order), "
        "and for each changed case on the page its field-level diff: fields, and per turn "
        "the messages and the expected tool calls aligned as the drill-down aligns them, "
        "with argument diffs.",
        parameters=[
            OpenApiParameter("from", int, required=True),
            OpenApiParameter("to", int, required=True),
            OpenApiParameter("page", int),
        ],
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **error_responses(*READ_ERRORS)},
    )
    def get(self, request: Request, pk: int) -> Response:
        evalset = _evalset(request, pk)
        numbers = []
        for name in ("from", "to"):
            value = request.query_params.get(name, "")
            if whole_number(value, maximum=999_999_999) is None:
                raise ApiError(
                    400, "invalid", f"`{name}` must be a version number", [problem("a version number", name)]
                )
            numbers.append(int(value))
        versions = {v.number: v for v in evalset.versions.filter(number__in=numbers)}
        missing = [n for n in numbers if n not in versions]
        if missing:
            raise ApiError(404, "not_found", f"no version {missing[0]} of this eval set")
        page = request.query_params.get("page", "1")
        diff = version_diff(old=versions[numbers[0]], new=versions[numbers[1]], page=whole_number(page) or 1)
        return Response(diff.as_dict())


class PromoteSerializer(serializers.Serializer):
    eval_ids = serializers.ListField(child=serializers.CharField(max_length=255), min_length=1, max_length=MAX_PROMOTE)
    target_evalset = serializers.IntegerField(required=False, help_text="default: the run's own eval set")
    mode = serializers.ChoiceField(
        ["new", "expected"],
        default="new",
        help_text="`new`: new cases; `expected`: the cases' expectations replaced by the "
        "run's answers (the run's own eval set only)",
    )
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class RunPromote(APIView):
    @extend_schema(
        summary="Promote a run's results into eval-set cases",
        description="Each selected case's agent turns and tool calls become the expectation, as new "
        "cases (`mode=new`) or as new expected answers of the same cases (`mode=expected`). "
        "One save: one new version.",
        request=PromoteSerializer,
        responses={201: EditResultSerializer, **error_responses(*WRITE_ERRORS, 409)},
    )
    def post(self, request: Request, pk: int) -> Response:
        run = get_object_or_404(
            Run.objects.filter(project__in=_projects(request)).select_related("project", "evalset_version__evalset"),
            pk=pk,
        )
        data = PromoteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        params = data.validated_data
        target_pk = params.get("target_evalset") or run.evalset_version.evalset_id
        target = get_object_or_404(EvalSet.objects.select_related("project"), pk=target_pk, project=run.project)
        _writable(request, target)
        if params["mode"] == "expected" and target.pk != run.evalset_version.evalset_id:
            raise ApiError(
                400,
                "invalid",
                "new expected answers go to the run's own eval set",
                [problem("only with the run's own eval set", "target_evalset")],
            )
        latest = target.versions.order_by("-number").first()
        if latest is None:
            raise ApiError(400, "invalid", "the eval set has no version")
        eval_ids = list(dict.fromkeys(params["eval_ids"]))
        known = set(run.results.filter(case__eval_id__in=eval_ids).values_list("case__eval_id", flat=True))
        unknown = [i for i, e in enumerate(eval_ids) if e not in known]
        if unknown:
            raise ApiError(
                400,
                "invalid",
                "the run has no result for some eval ids",
                [problem(f"no result for {eval_ids[i]!r} in run {run.pk}", f"eval_ids.{i}") for i in unknown[:100]],
            )
        if params["mode"] == "new":
            taken = set(EvalCase.objects.in_version(latest).values_list("eval_id", flat=True))
            changes = [
                {"op": "put", "case": c} for c in promotion.proposed_cases(run=run, eval_ids=eval_ids, taken=taken)
            ]
        else:
            changes = [
                {"op": "put", "eval_id": c["eval_id"], "case": c}
                for c in promotion.proposed_expectations(run=run, version=latest, eval_ids=eval_ids)
            ]
        note = params.get("note") or f"{len(changes)} case(s) from run #{run.pk}"
        try:
            outcome = evalset_edit(
                evalset=target,
                edit=parse_edit({"base_version": latest.number, "note": note, "changes": changes}),
                user=request.user,
                how=EvalSetVersion.How.PROMOTION,
            )
        except CurationError as exc:
            raise _curation_error(exc) from None
        return _saved(request, target, outcome)


class TracePromoteSerializer(serializers.Serializer):
    evalset = id_field(help_text="the eval set to add the case to")
    eval_id = serializers.CharField(
        required=False, max_length=255, help_text="the new case's id (default: trace-<first 12 hex of the trace id>)"
    )
    base_version = id_field(
        required=False, help_text="the version the addition builds on (default: the latest; else 409)"
    )
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class TracePromote(APIView):
    @extend_schema(
        summary="Promote a received trace into a new eval-set case",
        description="The case is read off the trace's spans: one turn per root span, the user input "
        "(OpenInference `input.value` / `llm.input_messages`, GenAI `gen_ai.input.messages`) and "
        "final answer (`output.value`, `gen_ai.output.messages`) of the root span or its LLM spans, "
        "and its TOOL spans' calls with their arguments as the expected trajectory. One new version "
        "(`how_created=promotion`) whose note names the trace.",
        request=TracePromoteSerializer,
        responses={201: EditResultSerializer, **error_responses(*WRITE_ERRORS, 409)},
    )
    def post(self, request: Request, pk: int) -> Response:
        trace = get_object_or_404(
            Trace.objects.filter(received=True, project__in=_projects(request)).select_related("project"), pk=pk
        )
        data = TracePromoteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        params = data.validated_data
        target = EvalSet.objects.select_related("project").filter(pk=params["evalset"], project=trace.project).first()
        if target is None:
            raise ApiError(400, "invalid", "no such eval set in the trace's project",
                           [problem(f"no eval set {params['evalset']} in the trace's project", "evalset")])
        _writable(request, target)
        latest = target.versions.order_by("-number").first()
        if latest is None:
            raise ApiError(400, "invalid", "the eval set has no version", [problem("has no version", "evalset")])
        taken = set(EvalCase.objects.in_version(latest).values_list("eval_id", flat=True))
        eval_id = params.get("eval_id")
        if eval_id is not None and eval_id in taken:
            raise ApiError(400, "invalid", "the eval set has that case already",
                           [problem(f"version {latest.number} already has a case {eval_id!r}", "eval_id")])
        case = promotion.proposed_case_from_trace(trace, taken=taken, eval_id=eval_id)
        empty = [i for i, turn in enumerate(case["conversation"]) if not turn["user_content"]["content"]]
        if empty:
            raise ApiError(400, "invalid", "the trace records no user input for some turns", [
                problem("no input.value, llm.input_messages or gen_ai.input.messages on the turn's root or LLM "
                        "spans: add the case from the trace's page and write the input", f"trace.turns.{i}")
                for i in empty])
        note = params.get("note") or ""
        if trace.trace_id not in note:
            note = f"{note} (from trace {trace.trace_id})" if note else f"from trace {trace.trace_id}"
        try:
            outcome = evalset_edit(
                evalset=target,
                edit=parse_edit({"base_version": params.get("base_version", latest.number), "note": note,
                                 "changes": [{"op": "put", "case": case}]}),
                user=request.user,
                how=EvalSetVersion.How.PROMOTION,
            )
        except CurationError as exc:
            raise _curation_error(exc) from None
        return _saved(request, target, outcome)


def _projects(request: Request) -> Any:
    return Project.objects.visible_to(request.user)
