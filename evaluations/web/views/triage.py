"""Triage on the drill-down (status, assignee, threaded comments) and the review queue.

- POST `/triage/` (`triage_update`): `candidate`, `result` (the candidate's result the
  drill-down shows), `baseline`, and any of `status`, `assignee` (a user id, "" to
  unassign), `body` (a comment, for a case nobody triaged yet).
- POST `/triage/<pk>/comments/` (`triage_comment`): `body`, optional `parent`.
- GET `/review/` (`review_queue`): `?tab=assigned|untriaged&page=` and the filters
  `evalset`, `branch`, `criterion` (untriaged), `assignee` (a username or "none"), `state`
  (assigned: "open", the default, or "all"); `/review/export.csv` is the same as CSV, and
  `/review/count/` the navigation's count of your open assigned cases.

Reading needs a role in the project; writing needs member or admin (viewers get 403);
another project's runs and triage are 404. An htmx POST gets the panel back to swap in; a
plain POST is redirected to the drill-down.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from evaluations.converters import parse_id
from evaluations.models import CaseResult, Comment, Membership, Project, Run, Triage
from evaluations.review import triage as services
from evaluations.runs import exports
from evaluations.web.views.common import current_project
from evaluations.web.views.compare import runs_visible_to

WRITERS = {Membership.Role.MEMBER, Membership.Role.ADMIN}


def panel_context(*, user: Any, project: Project, candidate: Run, result: CaseResult, baseline: Run,
                  triage: Triage | None = None, error: str = "", role: str | None = None) -> dict[str, Any]:
    """What `triage/_panel.html` shows: the case's triage, its threads, who it can go to."""
    eval_id = result.case.eval_id
    if triage is None:
        triage = services.triage_for(evalset_id=candidate.evalset_version.evalset_id, eval_id=eval_id,
                                     baseline=baseline, candidate=candidate)
    memberships = list(Membership.objects.filter(project=project).select_related("user").order_by("user__username"))
    if role is None:  # one query for both: who may be assigned, and what this user may do
        role = Membership.Role.ADMIN if user.is_superuser else next(
            (m.role for m in memberships if m.user_id == user.pk), None)
    return {
        "triage": triage,
        "threads": services.comment_tree(triage),
        "history": services.case_history(triage),
        "members": [m.user for m in memberships if m.role in services.ASSIGNABLE_ROLES],
        "statuses": Triage.Status.choices,
        "can_triage": role in WRITERS,
        "candidate": candidate,
        "baseline": baseline,
        "result": result,
        "error": error,
    }


def _drill_url(candidate: Run, result: CaseResult, baseline: Run) -> str:
    return reverse("run_case", args=[candidate.pk, result.pk]) + f"?baseline={baseline.pk}#triage"


def _respond(request: HttpRequest, context: dict[str, Any], redirect_to: str) -> HttpResponse:
    if request.htmx:  # type: ignore[attr-defined]
        return render(request, "evaluations/triage/_panel.html", context)
    if context["error"]:
        return render(request, "evaluations/triage/_panel.html", context, status=400)
    return redirect(redirect_to)


def _require_writer(project: Project, user: Any) -> str | None:
    role = project.role_of(user)
    if role not in WRITERS:
        raise PermissionDenied("only members and admins of the project may triage")
    return role


@login_required
@require_POST
def triage_update(request: HttpRequest) -> HttpResponse:
    visible = runs_visible_to(request.user).select_related("project", "evalset_version__evalset")
    candidate_id, baseline_id, result_id = (parse_id(request.POST.get(k)) for k in ("candidate", "baseline", "result"))
    if candidate_id is None or baseline_id is None or result_id is None:
        raise Http404("no such case")
    candidate = get_object_or_404(visible, pk=candidate_id)
    baseline = get_object_or_404(visible, pk=baseline_id, project=candidate.project)
    result = get_object_or_404(CaseResult.objects.select_related("case"), pk=result_id, run=candidate)
    project = candidate.project
    role = _require_writer(project, request.user)

    status = request.POST.get("status") or None
    error = ""
    assignee: Any = services.KEEP
    if "assignee" in request.POST:
        raw = request.POST["assignee"]
        assignee_id = parse_id(raw)
        assignee = get_user_model().objects.filter(pk=assignee_id).first() if assignee_id is not None else None
        if raw and assignee is None:
            error = "no such user"
    triage: Triage | None = None
    try:
        if error:
            raise ValidationError(error)
        with transaction.atomic():  # a comment that is refused leaves no new triage behind
            triage = services.triage_update(project=project, evalset=candidate.evalset_version.evalset,
                                            eval_id=result.case.eval_id, baseline=baseline, candidate=candidate,
                                            status=status, assignee=assignee, actor=request.user)
            body = request.POST.get("body", "")
            if body.strip():
                services.comment_add(triage=triage, body=body, author=request.user)
    except ValidationError as exc:
        error = " ".join(exc.messages)
        triage = None
    context = panel_context(user=request.user, project=project, candidate=candidate, result=result,
                            baseline=baseline, triage=triage, error=error, role=role)
    return _respond(request, context, _drill_url(candidate, result, baseline))


@login_required
@require_POST
def triage_comment(request: HttpRequest, pk: int) -> HttpResponse:
    triage = get_object_or_404(
        Triage.objects.select_related("project", "assignee", "candidate__evalset_version", "baseline")
        .filter(project__in=Project.objects.visible_to(request.user)), pk=pk)
    role = _require_writer(triage.project, request.user)
    result = (CaseResult.objects.select_related("case").filter(run=triage.candidate, case__eval_id=triage.eval_id)
              .order_by("iteration", "pk").first())
    if result is None:
        raise Http404("the candidate run no longer has this case")
    parent: Comment | None = None
    error = ""
    parent_id = parse_id(request.POST.get("parent"))
    if request.POST.get("parent") and parent_id is None:
        error = "no such comment"
    elif parent_id is not None:
        parent = Comment.objects.filter(pk=parent_id, triage=triage).first()
        if parent is None:
            error = "no such comment on this case"
    if not error:
        try:
            services.comment_add(triage=triage, parent=parent, body=request.POST.get("body", ""),
                                 author=request.user)
        except ValidationError as exc:
            error = " ".join(exc.messages)
    context = panel_context(user=request.user, project=triage.project, candidate=triage.candidate, result=result,
                            baseline=triage.baseline, triage=triage, error=error, role=role)
    return _respond(request, context, _drill_url(triage.candidate, result, triage.baseline))


TABS = {"assigned": "Assigned to me", "untriaged": "Untriaged regressions"}


def queue_filters(params: Any, tab: str) -> services.QueueFilters:
    """The queue's filters from the URL (or the bulk form's hidden copy of it)."""
    evalset = parse_id(params.get("evalset"))
    return services.QueueFilters(
        evalset=evalset, branch=params["branch"][:255] if params.get("branch", "*") != "*" else None,
        criterion=params.get("criterion", "")[:100] if tab == "untriaged" else "",
        assignee=params.get("assignee", "")[:150], state="all" if params.get("state") == "all" else "open")


def _tab(params: Any) -> str:
    tab = params.get("tab", "assigned")
    return tab if tab in TABS else "assigned"


def queue_page(*, user: Any, project: Project, tab: str, filters: services.QueueFilters,
               page: Any) -> services.QueuePage:
    if tab == "assigned":
        return services.assigned_to(user=user, project=project, page=page, filters=filters)
    return services.untriaged_regressions(project=project, page=page, filters=filters)


@login_required
@require_GET
def review_queue(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    tab = _tab(request.GET)
    filters = queue_filters(request.GET, tab)
    queue = None
    counts: dict[str, int] = {}
    context: dict[str, Any] = {}
    if project is not None:
        queue = queue_page(user=request.user, project=project, tab=tab, filters=filters,
                           page=request.GET.get("page", 1))
        counts = {"assigned": services.assigned_count(user=request.user, project=project),
                  "untriaged": services.untriaged_count(project)}
        context = {
            "evalsets": list(project.evalsets.order_by("name", "eval_set_id").values_list("pk", "name", "eval_set_id")),
            "branches": list(Run.objects.filter(project=project).order_by("branch").values_list("branch", flat=True)
                             .distinct()),
            "criteria": services.untriaged_criteria(project) if tab == "untriaged" else [],
            "members": services.project_members(project),
        }
    tabs = [(key, label, counts.get(key)) for key, label in TABS.items()]
    return render(request, "evaluations/triage/review.html",
                  {"project": project, "tab": tab, "tabs": tabs, "queue": queue, "filters": filters,
                   "filter_query": urlencode({"tab": tab, **filters.query()}),
                   "statuses": Triage.Status.choices, **context,
                   "can_triage": project is not None and project.role_of(request.user) in WRITERS})


@login_required
@require_GET
def review_count(request: HttpRequest) -> HttpResponse:
    """The navigation's count of your open assigned cases, fetched by the page after it loads
    (so no page pays a query for it)."""
    project = current_project(request)
    count = services.assigned_count(user=request.user, project=project) if project is not None else 0
    return render(request, "evaluations/triage/_nav_count.html", {"count": count})


@login_required
@require_GET
def review_queue_csv(request: HttpRequest) -> StreamingHttpResponse:
    """The queue tab with its filters, every page, as CSV: the case, its comparison, triage
    status, assignee, who decided and when, and the last comment."""
    project = current_project(request)
    if project is None:
        raise Http404("no project")
    tab = _tab(request.GET)
    rows = services.queue_export(user=request.user, project=project, tab=tab,
                                 filters=queue_filters(request.GET, tab))
    response = StreamingHttpResponse(exports.csv_lines(rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="review-{project.slug}-{tab}.csv"'
    return response
