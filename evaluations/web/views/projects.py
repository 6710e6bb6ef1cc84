"""Project pages: members (admins manage them), the activity feed (filtered by person, case,
branch, kind and dates in the URL), the review report of a period (page, Markdown, CSV), and
pinning a baseline.

The views check access and call one service (evaluations.accounts.services for members,
evaluations.review.services for the baseline).
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from evaluations.accounts.services import (
    MembershipError,
    may_create_projects,
    membership_add,
    membership_change,
    membership_remove,
    user_find,
)
from evaluations.audit import activity_filters, activity_kinds, project_activity
from evaluations.converters import parse_id
from evaluations.models import Membership, Project, Run
from evaluations.review.report import (
    REPORT_ROWS,
    Report,
    report_csv_rows,
    report_markdown,
    report_period,
    review_report,
)
from evaluations.review.services import evalset_pin_baseline
from evaluations.runs.exports import csv_lines
from evaluations.web.views.common import enter_project

# --- Services -----------------------------------------------------------------------------------












# --- Views --------------------------------------------------------------------------------------


def _project_of_member(request: HttpRequest, slug: str) -> tuple[Project, str]:
    """The project and the user's role in it; 404 for projects the user does not belong to."""
    project = get_object_or_404(Project.objects.visible_to(request.user), slug=slug)
    role = project.role_of(request.user)
    assert role is not None  # visible_to and role_of agree
    return project, role




def _role(value: str) -> str:
    if value not in Membership.Role.values:
        raise MembershipError("choose a role: viewer, member or admin")
    return value


@login_required
@require_http_methods(["GET", "POST"])
def project_members(request: HttpRequest, slug: str) -> HttpResponse:
    """Everyone in the project sees who is in it; only admins change it."""
    project, role = _project_of_member(request, slug)
    is_admin = role == Membership.Role.ADMIN
    status = 200
    if request.method == "POST":
        if not is_admin:
            raise PermissionDenied("only project admins manage members")
        try:
            _members_action(request, project)
        except MembershipError as exc:
            text = str(exc)
            messages.error(request, text[:1].upper() + text[1:] + ".")
            status = 400
        else:
            return HttpResponseRedirect(reverse("project_members", args=[project.slug]))
    enter_project(request, project)
    members = project.memberships.select_related("user").order_by("user__username")
    return render(request, "evaluations/accounts/members.html",
                  {"project": project, "members": members, "is_admin": is_admin,
                   "roles": Membership.Role.choices, "can_create_projects": may_create_projects(request.user)},
                  status=status)


def _members_action(request: HttpRequest, project: Project) -> None:
    action = request.POST.get("action", "")
    if action == "add":
        identifier = request.POST.get("user", "").strip()
        user = user_find(identifier) if identifier else None
        if user is None:
            raise MembershipError(f"no active user with the username or email {identifier!r}")
        membership_add(project=project, user=user, role=_role(request.POST.get("role", "")), actor=request.user)
        messages.success(request, f"Added {user.get_username()}.")
        return
    chosen = parse_id(request.POST.get("membership")) or 0
    membership = project.memberships.select_related("user").filter(pk=chosen).first()
    if membership is None:
        raise MembershipError("that person is not a member of this project")
    if action == "change":
        if membership_change(membership=membership, role=_role(request.POST.get("role", "")), actor=request.user):
            messages.success(request, f"{membership.user.get_username()} is now {membership.role}.")
    elif action == "remove":
        membership_remove(membership=membership, actor=request.user)
        messages.success(request, f"Removed {membership.user.get_username()}.")
    else:
        raise MembershipError("unknown action")


@login_required
@require_GET
def project_activity_view(request: HttpRequest, slug: str) -> HttpResponse:
    project, _ = _project_of_member(request, slug)
    enter_project(request, project)
    filters = activity_filters(request.GET)
    page = project_activity(project=project, page=request.GET.get("page", 1), filters=filters)
    return render(request, "evaluations/accounts/activity.html", {
        "project": project, "page": page, "filters": filters, "kinds": activity_kinds(),
        "people": list(project.memberships.order_by("user__username").values_list("user__username", flat=True)),
        "filter_query": urlencode(filters.query())})


@login_required
@require_POST
def run_pin_baseline(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.filter(project__in=Project.objects.visible_to(request.user))
                            .select_related("project", "evalset_version__evalset"), pk=pk)
    if run.project.role_of(request.user) != Membership.Role.ADMIN:
        raise PermissionDenied("only project admins pin baselines")
    if run.status != Run.Status.COMPLETED:
        messages.error(request, "Only a completed run can be the baseline.")
    elif evalset_pin_baseline(evalset=run.evalset_version.evalset, run=run, actor=request.user):
        messages.success(request, "Pinned as the eval set's baseline: comparisons now default to this run.")
    else:
        messages.info(request, "This run already is the pinned baseline.")
    return HttpResponseRedirect(reverse("run_detail", args=[run.pk]))


def _report(request: HttpRequest, slug: str, *, limit: int | None) -> tuple[Project, Report | None, str]:
    project, _ = _project_of_member(request, slug)
    try:
        period = report_period(request.GET)
    except ValidationError as exc:
        return project, None, " ".join(exc.messages)
    return project, review_report(project=project, period=period, limit=limit), ""


def _report_link(request: HttpRequest, report: Report) -> str:
    return request.build_absolute_uri(reverse("project_report", args=[report.project.slug]) + "?"
                                      + urlencode(report.period.query()))


@login_required
@require_GET
def project_report(request: HttpRequest, slug: str) -> HttpResponse:
    """The review report of a period (`?from=&to=`, the last 7 days by default): any member
    of the project may read it; the link with its dates is the one to share."""
    project, report, error = _report(request, slug, limit=REPORT_ROWS)
    enter_project(request, project)
    context = {"project": project, "report": report, "error": error, "from": request.GET.get("from", ""),
               "to": request.GET.get("to", "")}
    if report is not None:
        context["query"] = urlencode(report.period.query())
        context["link"] = _report_link(request, report)
    return render(request, "evaluations/accounts/report.html", context, status=400 if error else 200)


@login_required
@require_GET
def project_report_download(request: HttpRequest, slug: str, fmt: str) -> HttpResponse | StreamingHttpResponse:
    """The same report with every decision, as Markdown (`report.md`) or CSV (`report.csv`)."""
    project, report, error = _report(request, slug, limit=None)
    if report is None:
        return HttpResponse(error + "\n", status=400, content_type="text/plain; charset=utf-8")
    name = f"review-{project.slug}-{report.period.start}-{report.period.end}"
    response: HttpResponse | StreamingHttpResponse
    if fmt == "md":
        response = HttpResponse(report_markdown(report, _report_link(request, report)),
                                content_type="text/markdown; charset=utf-8")
    else:
        response = StreamingHttpResponse(csv_lines(report_csv_rows(report)), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response
