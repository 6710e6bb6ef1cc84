"""Creating projects, and what project admins remove: a run, an eval set with its runs, a
whole project (archived: hidden, data kept).

Every removal is a confirmation page first (GET: it names what goes, counted in the
database), then the POST that does it through the one service the API calls too
(`review.deletion`, `accounts.services`).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from evaluations.accounts.services import ProjectError, may_create_projects, project_archive, project_create
from evaluations.models import EvalSet, Membership, Project, Run
from evaluations.review.deletion import evalset_delete, evalset_deletion_counts, run_delete
from evaluations.web.views.common import SESSION_PROJECT_KEY, current_project, enter_project


def _require_admin(request: HttpRequest, project: Project, what: str) -> None:
    if project.role_of(request.user) != Membership.Role.ADMIN:
        raise PermissionDenied(f"only project admins {what}")


def _confirm(request: HttpRequest, context: dict[str, Any], status: int = 200) -> HttpResponse:
    return render(request, "evaluations/confirm_removal.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def run_delete_page(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.filter(project__in=Project.objects.visible_to(request.user))
                            .select_related("project", "evalset_version__evalset"), pk=pk)
    _require_admin(request, run.project, "delete runs")
    enter_project(request, run.project)
    evalset = run.evalset_version.evalset
    label = f"run #{run.pk}" + (f" ({run.name})" if run.name else "")
    if request.method == "POST":
        try:
            run_delete(run=run, actor=request.user, via="the run page")
        except ValueError as exc:
            messages.error(request, str(exc)[:1].upper() + str(exc)[1:] + ".")
            return HttpResponseRedirect(reverse("run_detail", args=[run.pk]))
        messages.success(request, f"Deleted {label}.")
        return HttpResponseRedirect(reverse("evalset_detail", args=[evalset.pk]))
    return _confirm(request, {
        "title": f"Delete {label}?", "subject": label, "verb": "Delete run",
        "goes": [f"{run.cases_total:,} result{'' if run.cases_total == 1 else 's'} with their scores",
                 "its comparisons, and the triage and comments decided in them",
                 "its grades and the traces it received"],
        "stays": [f"the eval set {evalset.display_name} and its versions", "every other run"],
        "blocked": "" if run.is_finished else f"The run is still {run.status}: cancel it first.",
        "cancel_url": reverse("run_detail", args=[run.pk]),
    })


@login_required
@require_http_methods(["GET", "POST"])
def evalset_delete_page(request: HttpRequest, pk: int) -> HttpResponse:
    evalset = get_object_or_404(EvalSet.objects.visible_to(request.user).select_related("project"), pk=pk)
    _require_admin(request, evalset.project, "delete eval sets")
    enter_project(request, evalset.project)
    if request.method == "POST":
        if request.POST.get("confirm", "").strip() != evalset.eval_set_id:
            messages.error(request, f"Type the eval set's id, {evalset.eval_set_id}, to delete it.")
            return HttpResponseRedirect(reverse("evalset_delete", args=[evalset.pk]))
        try:
            evalset_delete(evalset=evalset, actor=request.user, via="the eval set page")
        except ValueError as exc:
            messages.error(request, str(exc)[:1].upper() + str(exc)[1:] + ".")
            return HttpResponseRedirect(reverse("evalset_delete", args=[evalset.pk]))
        messages.success(request, f"Deleted the eval set {evalset.display_name}.")
        return HttpResponseRedirect(reverse("evalset_list"))
    counts = evalset_deletion_counts(evalset)

    def n(count: int, word: str) -> str:
        return f"{count:,} {word}{'' if count == 1 else 's'}"

    return _confirm(request, {
        "title": f"Delete the eval set {evalset.display_name}?", "subject": evalset.display_name,
        "verb": "Delete eval set", "confirm_text": evalset.eval_set_id,
        "goes": [f"{n(counts.versions, 'version')} ({n(counts.cases, 'case')} in all)",
                 f"{n(counts.runs, 'run')} of it, with {n(counts.results, 'result')} and their scores",
                 "their comparisons, triage, comments, grades and received traces"],
        "stays": ["the project's other eval sets and their runs", "the activity feed, which records the deletion"],
        "blocked": f"{n(counts.running, 'run')} of it still going: cancel them first." if counts.running else "",
        "cancel_url": reverse("evalset_detail", args=[evalset.pk]),
    })


@login_required
@require_http_methods(["GET", "POST"])
def project_archive_page(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(Project.objects.visible_to(request.user), slug=slug)
    _require_admin(request, project, "archive a project")
    if request.method == "POST":
        project_archive(project=project, actor=request.user)
        if request.session.get(SESSION_PROJECT_KEY) == project.pk:
            del request.session[SESSION_PROJECT_KEY]
        messages.success(request, f"Archived {project.name}: it is hidden from everyone; its data is kept.")
        return HttpResponseRedirect(reverse("home"))
    enter_project(request, project)
    return _confirm(request, {
        "title": f"Archive the project {project.name}?", "subject": project.name, "verb": "Archive project",
        "goes": ["the project disappears for everyone: its pages, its API and the trace receiver",
                 "its members lose access to it"],
        "stays": ["every eval set, run, result, comment and trace, kept as they are",
                  "an administrator brings it back in Django's admin (clear “archived at”)"],
        "blocked": "", "cancel_url": reverse("project_members", args=[project.slug]),
    })


class ProjectForm(forms.Form):
    name = forms.CharField(max_length=200)
    slug = forms.SlugField(max_length=64, help_text="Its name in URLs and the API: letters, digits, - and _.")
    description = forms.CharField(required=False, max_length=10_000, widget=forms.Textarea(attrs={"rows": 3}))


@login_required
@require_http_methods(["GET", "POST"])
def project_new(request: HttpRequest) -> HttpResponse:
    if not may_create_projects(request.user):
        raise PermissionDenied("only superusers create projects here (EVALSITE_PROJECT_CREATORS)")
    form = ProjectForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                project = project_create(actor=request.user, **form.cleaned_data)
            except ProjectError as exc:
                form.add_error("slug", str(exc))
            else:
                request.session[SESSION_PROJECT_KEY] = project.pk
                messages.success(request, f"Created {project.name}: you are its admin. Add members here.")
                return HttpResponseRedirect(reverse("project_members", args=[project.slug]))
        status = 400
    current_project(request)  # the header's project switcher
    return render(request, "evaluations/accounts/project_new.html", {"form": form}, status=status)
