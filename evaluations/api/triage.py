"""Triage through the API: the review state of a case in a baseline/candidate comparison
(status, assignee), its threaded comments, and the review queue.

Same rules as the drill-down's panel (`evaluations.web.views.triage`): reading needs a role in
the project, changing needs member or admin (viewers get 403), and another project's runs
and triage are 404. The writes are `evaluations.review.triage`'s services.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import Count, QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.generics import GenericAPIView, ListCreateAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from evaluations.api.common import project_named, query, require_writer, responses, visible_projects, visible_runs
from evaluations.api.errors import READ_ERRORS, WRITE_ERRORS
from evaluations.api.serializers import (
    BulkOutcomeSerializer,
    BulkTriageSerializer,
    CommentCreateSerializer,
    CommentSerializer,
    HistoryEntrySerializer,
    QueuePageSerializer,
    ReviewQuery,
    TriageChangeSerializer,
    TriageQuery,
    TriageSerializer,
    TriageUpdateSerializer,
)
from evaluations.models import Comment, Project, Triage
from evaluations.review import triage as services


def _triage_rows(request: Request) -> QuerySet[Triage]:
    return (Triage.objects.filter(project__in=visible_projects(request))
            .select_related("project", "assignee", "updated_by").annotate(comment_count=Count("comments")))


def _assignee(raw: str | None) -> Any:
    """The user a username names (None for null or empty: unassign); the service checks
    that they are a member of the project."""
    if not raw:
        return None
    user = get_user_model().objects.filter(username=raw, is_active=True).first()
    if user is None:
        raise ValidationError({"assignee": [f"no active user {raw!r}"]})
    return user


def _change(triage_kwargs: dict[str, Any], data: dict[str, Any], request: Request) -> Triage:
    assignee = _assignee(data["assignee"]) if "assignee" in data else services.KEEP
    try:
        with transaction.atomic():  # a comment that is refused leaves no new triage behind
            triage = services.triage_update(**triage_kwargs, status=data.get("status"), assignee=assignee,
                                            actor=request.user)
            if (data.get("comment") or "").strip():
                services.comment_add(triage=triage, body=data["comment"], author=request.user)
    except DjangoValidationError as exc:
        raise ValidationError({"triage": exc.messages}) from None
    return _triage_rows(request).get(pk=triage.pk)


@extend_schema_view(
    get=extend_schema(summary="Triaged cases of your projects", parameters=[TriageQuery],
                      responses=responses(TriageSerializer(many=True), *READ_ERRORS)),
    post=extend_schema(
        summary="Triage a case of a comparison: set its status and/or assignee (and add a comment)",
        description="The case is named by the candidate run, the baseline run and its eval_id; its triage row is "
                    "created on first use. Members and admins only.",
        request=TriageUpdateSerializer, responses=responses(TriageSerializer, *WRITE_ERRORS)),
)
class TriageList(ListCreateAPIView):
    serializer_class = TriageSerializer

    def get_queryset(self) -> QuerySet[Triage]:
        request = self.request
        params = query(TriageQuery, request)
        qs = _triage_rows(request)
        for param, field in (("project", "project__slug"), ("candidate", "candidate_id"), ("baseline", "baseline_id"),
                             ("evalset", "evalset_id"), ("eval_id", "eval_id"), ("status", "status")):
            if param in params:
                qs = qs.filter(**{field: params[param]})
        assignee = params.get("assignee")
        if assignee == "me":
            qs = qs.filter(assignee=request.user.pk)
        elif assignee == "none":
            qs = qs.filter(assignee__isnull=True)
        elif assignee:
            qs = qs.filter(assignee__username=assignee)
        return qs.order_by("-updated_at", "-pk")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        form = TriageUpdateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        runs = visible_runs(request).select_related("project", "evalset_version__evalset")
        candidate = get_object_or_404(runs, pk=data["candidate"])
        baseline = get_object_or_404(runs, pk=data["baseline"], project=candidate.project)
        require_writer(request, candidate.project, "triage")
        if not candidate.results.filter(case__eval_id=data["eval_id"]).exists():
            raise NotFound(f"run {candidate.pk} has no case {data['eval_id']!r}")
        triage = _change({"project": candidate.project, "evalset": candidate.evalset_version.evalset,
                          "eval_id": data["eval_id"], "baseline": baseline, "candidate": candidate}, data, request)
        return Response(TriageSerializer(triage).data)


def _triage(request: Request, pk: int) -> Triage:
    return get_object_or_404(_triage_rows(request).select_related("evalset", "baseline", "candidate__evalset_version"),
                             pk=pk)


@extend_schema_view(
    get=extend_schema(summary="One triaged case", responses=responses(TriageSerializer, *READ_ERRORS)),
    patch=extend_schema(summary="Change a triaged case's status and/or assignee", request=TriageChangeSerializer,
                        responses=responses(TriageSerializer, *WRITE_ERRORS)),
)
class TriageDetail(GenericAPIView):
    serializer_class = TriageSerializer

    def get(self, request: Request, pk: int) -> Response:
        return Response(TriageSerializer(_triage(request, pk)).data)

    def patch(self, request: Request, pk: int) -> Response:
        triage = _triage(request, pk)
        require_writer(request, triage.project, "triage")
        form = TriageChangeSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        changed = _change({"project": triage.project, "evalset": triage.evalset, "eval_id": triage.eval_id,
                           "baseline": triage.baseline, "candidate": triage.candidate}, form.validated_data, request)
        return Response(TriageSerializer(changed).data)


@extend_schema_view(
    get=extend_schema(summary="A triaged case's comments, oldest first (`parent` makes threads)",
                      responses=responses(CommentSerializer(many=True), *READ_ERRORS)),
    post=extend_schema(summary="Comment on a triaged case (Markdown; a reply with `parent`)",
                       request=CommentCreateSerializer, responses=responses(CommentSerializer, *WRITE_ERRORS,
                                                                            status=201)),
)
class TriageComments(ListCreateAPIView):
    serializer_class = CommentSerializer

    def get_queryset(self) -> QuerySet[Comment]:
        triage = _triage(self.request, self.kwargs["pk"])
        return Comment.objects.filter(triage=triage).select_related("author").order_by("created_at", "pk")

    def create(self, request: Request, *args: Any, pk: int = 0, **kwargs: Any) -> Response:
        triage = _triage(request, pk)
        require_writer(request, triage.project, "comment")
        form = CommentCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        parent = None
        if form.validated_data.get("parent") is not None:
            parent = Comment.objects.filter(pk=form.validated_data["parent"], triage=triage).first()
            if parent is None:
                raise ValidationError({"parent": ["no such comment on this case"]})
        try:
            comment = services.comment_add(triage=triage, parent=parent, body=form.validated_data["body"],
                                           author=request.user)
        except DjangoValidationError as exc:
            raise ValidationError({"body": exc.messages}) from None
        return Response(CommentSerializer(comment).data, status=status.HTTP_201_CREATED)


class TriageHistory(GenericAPIView):
    """Every change of a case's decision and every comment on it, with who and when."""

    serializer_class = HistoryEntrySerializer
    pagination_class = None

    @extend_schema(summary="A triaged case's history: each status or assignee change and each comment, oldest "
                           "first, with who and when", responses=responses(HistoryEntrySerializer(many=True),
                                                                           *READ_ERRORS))
    def get(self, request: Request, pk: int) -> Response:
        entries = services.case_history(_triage(request, pk))
        return Response(HistoryEntrySerializer([{**e.__dict__, "change": e.change} for e in entries],
                                               many=True).data)


class ReviewQueue(GenericAPIView):
    """The review page's two tabs: cases assigned to you, and untriaged regressions of the
    latest comparisons."""

    serializer_class = QueuePageSerializer
    pagination_class = None

    @extend_schema(summary="Your review queue: cases assigned to you, or untriaged regressions",
                   parameters=[ReviewQuery], responses=responses(QueuePageSerializer, *READ_ERRORS))
    def get(self, request: Request) -> Response:
        params = query(ReviewQuery, request)
        projects = visible_projects(request)
        project: Project | None = (get_object_or_404(projects, slug=params["project"]) if params.get("project")
                                   else projects.order_by("name", "pk").first())
        if project is None:
            return Response({"count": 0, "page": 1, "num_pages": 1, "results": []})
        filters = services.QueueFilters(
            evalset=params.get("evalset"), branch=params.get("branch"),
            criterion=params.get("criterion", "") if params["tab"] == "untriaged" else "",
            assignee=params.get("assignee", ""), state=params["state"])
        if params["tab"] == "assigned":
            page = services.assigned_to(user=request.user, project=project, page=params["page"], filters=filters)
        else:
            page = services.untriaged_regressions(project=project, page=params["page"], filters=filters)
        body = {"count": page.count, "page": page.number, "num_pages": page.num_pages,
                "results": [row.__dict__ for row in page.rows]}
        return Response(QueuePageSerializer(body).data)



class ReviewBulk(GenericAPIView):
    """The review queue's bulk action (`evaluations.review.triage.triage_bulk`): the same rules
    and the same all-or-nothing write as the page's."""

    serializer_class = BulkTriageSerializer

    @extend_schema(summary="Triage many cases at once: a status, an assignee and/or a comment, all or nothing",
                   description="Name the cases (`cases`: candidate, baseline, eval_id) or give the queue's "
                               "filters (`filters`: every case of a tab they keep, as the page's \"all N "
                               "cases\"). One refused case (another project's, not in its run, a viewer as "
                               "assignee) writes nothing. Members and admins only. Each person assigned or "
                               "@mentioned is notified once for the whole action.",
                   request=BulkTriageSerializer, responses=responses(BulkOutcomeSerializer, *WRITE_ERRORS))
    def post(self, request: Request) -> Response:
        named = request.data.get("project") if hasattr(request.data, "get") else None
        project = project_named(request, named if isinstance(named, str) else None)
        require_writer(request, project, "triage")  # who may act, before what they asked
        form = BulkTriageSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        if "filters" in data:
            f = data["filters"]
            tab = f["tab"]
            keys = services.queue_keys(user=request.user, project=project, tab=tab, filters=services.QueueFilters(
                evalset=f.get("evalset"), branch=f.get("branch"),
                criterion=f.get("criterion", "") if tab == "untriaged" else "",
                assignee=f.get("assignee", ""), state=f["state"]))
        else:
            keys = [services.QueueKey(c["candidate"], c["baseline"], c["eval_id"]) for c in data["cases"]]
            named = {k.candidate_id for k in keys} | {k.baseline_id for k in keys}
            if visible_runs(request).filter(pk__in=named).count() != len(named):
                raise NotFound("no such run")  # another project's runs do not exist for this caller
        assignee = _assignee(data["assignee"]) if "assignee" in data else services.KEEP
        try:
            outcome = services.triage_bulk(project=project, keys=keys, status=data.get("status"), assignee=assignee,
                                           comment=data.get("comment", ""), actor=request.user)
        except DjangoValidationError as exc:
            raise ValidationError({"cases": exc.messages}) from None
        return Response(BulkOutcomeSerializer({"cases": outcome.cases, "commented": outcome.commented}).data)
