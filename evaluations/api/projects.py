"""Projects, their members and activity, and your API tokens, through the API.

The rules are the members page's: everyone in a project sees who is in it; only its admins
add, change or remove members (and a project keeps at least one admin); another project is
404. Tokens are your own: created (the secret is in that one response) and revoked, like on
the account page. The writes are the pages' services.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import OuterRef, QuerySet, Subquery, Value
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.generics import GenericAPIView, ListAPIView, ListCreateAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from evaluations.accounts.tokens import token_create, token_revoke
from evaluations.api.common import query, require_admin, responses, visible_projects
from evaluations.api.errors import READ_ERRORS, WRITE_ERRORS, error_responses
from evaluations.api.serializers import (
    ActivityQuery,
    EventSerializer,
    MemberAddSerializer,
    MemberChangeSerializer,
    MemberSerializer,
    NewTokenSerializer,
    ProjectCreateSerializer,
    ProjectSerializer,
    ReportQuery,
    ReportSerializer,
    RevokedSerializer,
    TokenCreateSerializer,
    TokenSerializer,
)
from evaluations.audit import ActivityFilters
from evaluations.models import ApiToken, AuditEvent, Membership, Project
from evaluations.review.report import report_period, review_report


def _projects(request: Request) -> QuerySet[Project]:
    """Your projects, each with your `role` in it (superusers are admins everywhere)."""
    user: Any = request.user
    mine = Membership.objects.filter(project=OuterRef("pk"), user=user.pk).values("role")[:1]
    role = Value(Membership.Role.ADMIN.value) if user.is_superuser else Subquery(mine)
    return visible_projects(request).annotate(role=role).order_by("name", "pk")


def _project(request: Request, slug: str) -> Project:
    return get_object_or_404(_projects(request), slug=slug)


@extend_schema_view(
    get=extend_schema(summary="Your projects, with your role in each",
                      responses=responses(ProjectSerializer(many=True), *READ_ERRORS)),
    post=extend_schema(summary="Create a project (superusers, or everyone signed in with "
                               "EVALSITE_PROJECT_CREATORS=everyone); you become its admin",
                       request=ProjectCreateSerializer,
                       responses=responses(ProjectSerializer, *WRITE_ERRORS, status=201)),
)
class ProjectList(ListCreateAPIView):
    serializer_class = ProjectSerializer

    def get_queryset(self) -> QuerySet[Project]:
        return _projects(self.request)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        from evaluations.accounts.services import ProjectError, may_create_projects, project_create

        if not may_create_projects(request.user):
            raise PermissionDenied("only superusers create projects here (EVALSITE_PROJECT_CREATORS)")
        form = ProjectCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            project = project_create(actor=request.user, **form.validated_data)
        except ProjectError as exc:
            raise ValidationError({"slug": [str(exc)]}) from None
        return Response(ProjectSerializer(_project(request, project.slug)).data, status=status.HTTP_201_CREATED)


@extend_schema_view(post=extend_schema(
    summary="Archive a project (project admins): hidden from everyone, its data kept",
    description="The project disappears from every page, the API and the trace receiver; nothing is deleted. "
                "Django's admin brings it back (clear `archived_at`).",
    request=None, responses={204: None, **error_responses(*WRITE_ERRORS)}))
class ProjectArchive(GenericAPIView):
    serializer_class = ProjectSerializer

    def post(self, request: Request, slug: str) -> Response:
        from evaluations.accounts.services import project_archive

        project = _project(request, slug)
        require_admin(request, project, "archive a project")
        project_archive(project=project, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(get=extend_schema(summary="One project", responses=responses(ProjectSerializer, *READ_ERRORS)))
class ProjectDetail(GenericAPIView):
    serializer_class = ProjectSerializer

    def get(self, request: Request, slug: str) -> Response:
        return Response(ProjectSerializer(_project(request, slug)).data)


def _members(project: Project) -> QuerySet[Membership]:
    return project.memberships.select_related("user").order_by("user__username", "pk")


@extend_schema_view(
    get=extend_schema(summary="A project's members", responses=responses(MemberSerializer(many=True), *READ_ERRORS)),
    post=extend_schema(summary="Add a member (project admins)", request=MemberAddSerializer,
                       responses=responses(MemberSerializer, *WRITE_ERRORS, status=201)),
)
class MemberList(ListCreateAPIView):
    serializer_class = MemberSerializer

    def get_queryset(self) -> QuerySet[Membership]:
        return _members(_project(self.request, self.kwargs["slug"]))

    def create(self, request: Request, *args: Any, slug: str = "", **kwargs: Any) -> Response:
        from evaluations.accounts.services import MembershipError, membership_add, user_find

        project = _project(request, slug)
        require_admin(request, project, "manage members")
        form = MemberAddSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        identifier = form.validated_data["user"].strip()
        user = user_find(identifier) if identifier else None
        if user is None:
            raise ValidationError({"user": [f"no active user with the username or email {identifier!r}"]})
        try:
            membership = membership_add(project=project, user=user, role=form.validated_data["role"],
                                        actor=request.user)
        except MembershipError as exc:
            raise ValidationError({"user": [str(exc)]}) from None
        return Response(MemberSerializer(membership).data, status=status.HTTP_201_CREATED)


@extend_schema_view(
    get=extend_schema(summary="One membership", responses=responses(MemberSerializer, *READ_ERRORS)),
    patch=extend_schema(summary="Change a member's role (project admins)", request=MemberChangeSerializer,
                        responses=responses(MemberSerializer, *WRITE_ERRORS)),
    delete=extend_schema(summary="Remove a member (project admins)",
                         responses={204: None, **error_responses(*WRITE_ERRORS)}),
)
class MemberDetail(GenericAPIView):
    serializer_class = MemberSerializer

    def _membership(self, request: Request, slug: str, pk: int) -> Membership:
        return get_object_or_404(_members(_project(request, slug)), pk=pk)

    def get(self, request: Request, slug: str, pk: int) -> Response:
        return Response(MemberSerializer(self._membership(request, slug, pk)).data)

    def patch(self, request: Request, slug: str, pk: int) -> Response:
        from evaluations.accounts.services import MembershipError, membership_change

        membership = self._membership(request, slug, pk)
        require_admin(request, membership.project, "manage members")
        form = MemberChangeSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            membership_change(membership=membership, role=form.validated_data["role"], actor=request.user)
        except MembershipError as exc:
            raise ValidationError({"role": [str(exc)]}) from None
        return Response(MemberSerializer(membership).data)

    def delete(self, request: Request, slug: str, pk: int) -> Response:
        from evaluations.accounts.services import MembershipError, membership_remove

        membership = self._membership(request, slug, pk)
        require_admin(request, membership.project, "manage members")
        try:
            membership_remove(membership=membership, actor=request.user)
        except MembershipError as exc:
            raise ValidationError({"membership": [str(exc)]}) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(get=extend_schema(summary="A project's activity feed, newest first, filtered by person, case, "
                                              "branch, kind and dates", parameters=[ActivityQuery],
                                      responses=responses(EventSerializer(many=True), *READ_ERRORS)))
class ProjectActivity(ListAPIView):
    serializer_class = EventSerializer

    def get_queryset(self) -> QuerySet[AuditEvent]:
        project = _project(self.request, self.kwargs["slug"])
        params = query(ActivityQuery, self.request)
        filters = ActivityFilters(actor=params.get("actor", ""), eval_id=params.get("eval_id", ""),
                                  branch=params.get("branch"), kind=params.get("kind", ""),
                                  date_from=params.get("date_from"), date_to=params.get("date_to"))
        return filters.apply(AuditEvent.objects.filter(project=project)).select_related("actor").order_by(
            "-created_at", "-pk")


class ProjectReport(GenericAPIView):
    """The review report of a project and period, as JSON (`evaluations.review.report`: what
    the page, its Markdown and its CSV say, with every decision)."""

    serializer_class = ReportSerializer
    pagination_class = None

    @extend_schema(summary="The review report of a period: runs per eval set and branch, decisions by status, "
                           "time to fix, every decision made or open", parameters=[ReportQuery],
                   responses=responses(ReportSerializer, *READ_ERRORS))
    def get(self, request: Request, slug: str) -> Response:
        project = _project(request, slug)
        params = query(ReportQuery, request)
        dates = {"from": str(params.get("date_from") or ""), "to": str(params.get("date_to") or "")}
        try:
            period = report_period(dates)
        except DjangoValidationError as exc:
            raise ValidationError({"date_from": exc.messages}) from None
        report = review_report(project=project, period=period, limit=None)
        body = {**report.__dict__,
                "status_counts": {value: n for value, _, n in report.status_counts},
                "median_time_to_fix_seconds": (report.median_time_to_fix.total_seconds()
                                               if report.median_time_to_fix is not None else None),
                "decisions": [{**d.__dict__, "time_to_fix_seconds": d.time_to_fix.total_seconds()
                               if d.time_to_fix is not None else None} for d in report.decisions]}
        return Response(ReportSerializer(body).data)


# --- API tokens ---------------------------------------------------------------------------------


def _tokens(request: Request) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=request.user.pk).order_by("revoked_at", "-created_at", "-pk")


@extend_schema_view(
    get=extend_schema(summary="Your API tokens (never the secrets)",
                      responses=responses(TokenSerializer(many=True), *READ_ERRORS)),
    post=extend_schema(summary="Create an API token: the response holds the secret, this once",
                       description="Only from a logged-in session with its CSRF token: a token (or a "
                                   "password as Basic auth) cannot create tokens (403).",
                       request=TokenCreateSerializer, responses=responses(NewTokenSerializer, *WRITE_ERRORS,
                                                                          status=201)),
)
class TokenList(ListCreateAPIView):
    serializer_class = TokenSerializer

    def get_queryset(self) -> QuerySet[ApiToken]:
        return _tokens(self.request)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # Only a logged-in session (whose DRF class checks the CSRF token) mints tokens: a token
        # that could mint another would outlive its own revocation, and a password sent as Basic
        # auth is a script's credential, not a person at the account page.
        if not isinstance(request.successful_authenticator, SessionAuthentication):
            raise PermissionDenied("API tokens are created from a logged-in session (the account page), "
                                   "not with a token or a password")
        form = TokenCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        new = token_create(user=request.user, name=form.validated_data["name"].strip())
        body = {**TokenSerializer(new.token).data, "token": new.secret}
        response = Response(NewTokenSerializer(body).data, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"  # the only response that ever holds the secret
        return response


class TokenRevoke(GenericAPIView):
    serializer_class = RevokedSerializer

    @extend_schema(summary="Revoke one of your API tokens", request=None,
                   responses=responses(RevokedSerializer, *WRITE_ERRORS))
    def post(self, request: Request, pk: int) -> Response:
        token = get_object_or_404(_tokens(request), pk=pk)  # someone else's token: 404, as if it did not exist
        revoked = token_revoke(token=token, user=request.user)
        token.refresh_from_db()
        return Response(RevokedSerializer({"revoked": revoked, "token": token}).data)
