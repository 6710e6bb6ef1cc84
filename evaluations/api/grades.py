"""People's grades through the API, the grading queue and judge calibration.

- `GET /api/v1/grades/` lists grades of your projects (`?project=&run=&result=&criterion=
  &grader=`); `POST` grades a criterion of a result (`result`, `criterion`, `verdict`, optional
  `score` and `note`): 201 with a new grade, 200 when it changed your earlier one.
- `GET /api/v1/grades/<id>/`; `PATCH` changes a grade (only its grader's own).
- `GET /api/v1/grading-queue/`: the queue of the grading page, a page at a time.
- `GET /api/v1/calibration/`: each judged criterion's agreement with people.

Same rules as the pages (`evaluations.web.views.grades`): reading needs a role in the project,
grading needs member or admin (viewers get 403), another project's results are 404. The writes
are `evaluations.review.grades.grade_save`.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.generics import GenericAPIView, ListCreateAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from evaluations.api.common import query, require_writer, responses, visible_projects, visible_runs
from evaluations.api.errors import READ_ERRORS, WRITE_ERRORS
from evaluations.api.serializers import (
    CalibrationQuery,
    CalibrationSerializer,
    GradeChangeSerializer,
    GradeCreateSerializer,
    GradeQuery,
    GradeSerializer,
    GradingQueueQuery,
    GradingQueueSerializer,
)
from evaluations.models import CaseResult, HumanGrade, Project
from evaluations.review import calibration, grades


def _grades(request: Request) -> QuerySet[HumanGrade]:
    return HumanGrade.objects.filter(project__in=visible_projects(request)).select_related("grader", "project")


def _save(request: Request, result: CaseResult, criterion: str, data: dict[str, Any]) -> tuple[HumanGrade, bool]:
    try:
        grade, created = grades.grade_save(
            result=result,
            criterion=criterion,
            grader=request.user,
            passed=data["verdict"] == "pass",
            score=data.get("score"),
            note=data.get("note", ""),
        )
    except DjangoValidationError as exc:
        raise ValidationError(exc.message_dict) from None
    return _grades(request).get(pk=grade.pk), created


@extend_schema_view(
    get=extend_schema(
        summary="People's grades in your projects",
        parameters=[GradeQuery],
        responses=responses(GradeSerializer(many=True), *READ_ERRORS),
    ),
    post=extend_schema(
        summary="Grade a criterion of a result (pass or fail, an optional score and a note)",
        description="Creates your grade (201) or changes your earlier grade of the same result and criterion "
        "(200). Members and admins only.",
        request=GradeCreateSerializer,
        responses=responses(GradeSerializer, *WRITE_ERRORS, status=201),
    ),
)
class GradeList(ListCreateAPIView):
    serializer_class = GradeSerializer

    def get_queryset(self) -> QuerySet[HumanGrade]:
        params = query(GradeQuery, self.request)
        qs = _grades(self.request)
        for param, field in (
            ("project", "project__slug"),
            ("run", "run_id"),
            ("result", "result_id"),
            ("criterion", "criterion"),
        ):
            if param in params:
                qs = qs.filter(**{field: params[param]})
        grader = params.get("grader")
        if grader == "me":
            qs = qs.filter(grader=self.request.user.pk)
        elif grader:
            qs = qs.filter(grader__username=grader)
        return qs.order_by("-updated_at", "-pk")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        form = GradeCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        result = get_object_or_404(
            CaseResult.objects.select_related("case", "run__project").filter(run__in=visible_runs(request)),
            pk=data["result"],
        )
        require_writer(request, result.run.project, "grade")
        grade, created = _save(request, result, data["criterion"], data)
        return Response(GradeSerializer(grade).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


@extend_schema_view(
    get=extend_schema(summary="One grade", responses=responses(GradeSerializer, *READ_ERRORS)),
    patch=extend_schema(
        summary="Change your grade", request=GradeChangeSerializer, responses=responses(GradeSerializer, *WRITE_ERRORS)
    ),
)
class GradeDetail(GenericAPIView):
    serializer_class = GradeSerializer

    def get(self, request: Request, pk: int) -> Response:
        return Response(GradeSerializer(get_object_or_404(_grades(request), pk=pk)).data)

    def patch(self, request: Request, pk: int) -> Response:
        grade = get_object_or_404(_grades(request).select_related("result__case", "result__run__project"), pk=pk)
        require_writer(request, grade.project, "grade")
        if grade.grader_id != request.user.pk:
            raise PermissionDenied("only its grader may change a grade; grade the result yourself instead")
        form = GradeChangeSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        changed, _ = _save(request, grade.result, grade.criterion, form.validated_data)
        return Response(GradeSerializer(changed).data)


def _project(request: Request, slug: str | None) -> Project | None:
    projects = visible_projects(request)
    if slug:
        return get_object_or_404(projects, slug=slug)
    return projects.order_by("name", "pk").first()


class GradingQueue(GenericAPIView):
    """The grading page's queue: disagreements first, then the stratified sample."""

    serializer_class = GradingQueueSerializer
    pagination_class = None

    @extend_schema(
        summary="The grading queue: disagreements first, then a stratified sample",
        parameters=[GradingQueueQuery],
        responses=responses(GradingQueueSerializer, *READ_ERRORS),
    )
    def get(self, request: Request) -> Response:
        params = query(GradingQueueQuery, request)
        project = _project(request, params.get("project"))
        if project is None:
            return Response({"count": 0, "disagreements": 0, "page": 1, "num_pages": 1, "results": []})
        version = params.get("prompt_version")
        scope = grades.QueueScope(
            project=project,
            evalset=params.get("evalset"),
            run=params.get("run"),
            criterion=params.get("criterion", ""),
            judge_model=params.get("judge_model"),
            prompt_version=None if version is None else ("" if version == "-" else version),
            kind=params.get("kind", ""),
        )
        page = grades.queue_page(scope, user=request.user, page=params["page"])
        body = {
            "count": page.total,
            "disagreements": page.disagreements,
            "page": page.page,
            "num_pages": page.pages,
            "results": [
                {
                    "position": item.position,
                    "disagreement": item.disagreement,
                    "run": item.run_id,
                    "result": item.result_id,
                    "criterion": item.criterion,
                    "eval_id": item.eval_id,
                    "evalset": item.evalset,
                    "status": item.status,
                    "automatic_passed": item.auto_passed,
                    "automatic_score": item.auto_score,
                    "output": item.line,
                    "turns": grades.item_turns(item.source),
                    "justification": item.source.justification if item.source else None,
                    "score_error": item.source.score_error if item.source else "",
                    "grades": [
                        {
                            "grader": g.grader,
                            "verdict": "pass" if g.passed else "fail",
                            "score": g.score,
                            "note": g.note,
                        }
                        for g in item.grades
                    ],
                    "url": reverse("run_case", args=[item.run_id, item.result_id]),
                }
                for item in page.items
            ],
        }
        return Response(GradingQueueSerializer(body).data)


class JudgeCalibration(GenericAPIView):
    """Per LLM-judged criterion, judge model and prompt version: agreement with people."""

    serializer_class = CalibrationSerializer
    pagination_class = None

    @extend_schema(
        summary="Judge calibration: each LLM judge's agreement with people's grades",
        parameters=[CalibrationQuery],
        responses=responses(CalibrationSerializer(many=True), *READ_ERRORS),
    )
    def get(self, request: Request) -> Response:
        params = query(CalibrationQuery, request)
        project = _project(request, params.get("project"))
        if project is None:
            return Response([])
        rows = []
        for row in calibration.calibration_rows(project=project, criterion=params.get("criterion", "")):
            c = row.calibration
            m = c.confusion
            rows.append(
                {
                    "criterion": row.criterion,
                    "judge_model": row.judge_model,
                    "prompt_version": row.prompt_version,
                    "items": c.items,
                    "compared": m.total,
                    "ties": c.ties,
                    "accuracy": m.accuracy,
                    "cohen_kappa": m.kappa,
                    "confusion": {
                        "judge_pass_people_pass": m.pass_pass,
                        "judge_pass_people_fail": m.pass_fail,
                        "judge_fail_people_pass": m.fail_pass,
                        "judge_fail_people_fail": m.fail_fail,
                    },
                    "graders_items": c.graders.items,
                    "graders_observed_agreement": c.graders.observed,
                    "graders_fleiss_kappa": c.graders.kappa,
                    "disagreements_url": row.queue_url,
                }
            )
        return Response(CalibrationSerializer(rows, many=True).data)
