"""The results-import page: another tool's results file as a completed run, and the
"rescore with evalsite" button (`evaluations/runs/imports.py`)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from evaluations.audit import record_run
from evaluations.interop import EvalSetImportError, SourceFile, check_size
from evaluations.models import AuditEvent, Project, Run
from evaluations.runs.import_forms import ResultsImportForm
from evaluations.runs.imports import results_import, run_rescore
from evaluations.runs.services import RunError
from evaluations.web.views.common import can_upload, current_project


@login_required
@require_http_methods(["GET", "POST"])
def results_import_page(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    if project is None or not can_upload(request.user, project):
        raise PermissionDenied("only members and admins of the project may import results")
    if request.method == "GET":
        return render(request, "evaluations/runs/import.html",
                      {"form": ResultsImportForm(project=project), "project": project})
    form = ResultsImportForm(request.POST, request.FILES, project=project)
    if not form.is_valid():
        return render(request, "evaluations/runs/import.html", {"form": form, "project": project}, status=400)
    upload = form.cleaned_data["file"]
    rescored = None
    try:
        with transaction.atomic():
            check_size(upload.name, upload.size)
            run = results_import(project=project, file=SourceFile(upload.name, upload.read()),
                                 evalset=form.cleaned_data["evalset"], user=request.user)
            if form.cleaned_data["rescore"]:
                rescored = run_rescore(run=run, user=request.user)
            record_run(run=run, actor=request.user, verb=AuditEvent.Verb.RUN_STARTED, via="the results import page",
                       data={"imported": run.target.get("imported")})
    except EvalSetImportError as error:
        context = {"form": form, "project": project, "error": error,
                   "more_problems": error.total - len(error.problems)}
        return render(request, "evaluations/runs/import.html", context, status=400)
    except RunError as exc:
        return render(request, "evaluations/runs/import.html",
                      {"form": form, "project": project, "rescore_error": str(exc)}, status=400)
    return render(request, "evaluations/runs/import.html",
                  {"form": ResultsImportForm(project=project), "project": project, "run": run, "rescored": rescored})


@login_required
@require_POST
def run_rescore_page(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.filter(project__in=Project.objects.visible_to(request.user))
                            .select_related("project", "evalset_version"), pk=pk)
    if not can_upload(request.user, run.project):
        raise PermissionDenied("only members and admins of the project may start runs")
    try:
        with transaction.atomic():  # the run and its audit event, together or neither
            rescored = run_rescore(run=run, user=request.user, judge=request.POST.get("judge") == "on")
            record_run(run=rescored, actor=request.user, verb=AuditEvent.Verb.RUN_STARTED,
                       via="the results import page")
    except RunError as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")
    return HttpResponseRedirect(reverse("run_detail", args=[rescored.pk]))
