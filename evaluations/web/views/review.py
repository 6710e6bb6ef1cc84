"""Review helpers around triage: a case of a run by its eval_id (what the activity feed
links to), and bulk triage from the review queue.

- GET `/runs/<run_pk>/case/?eval_id=<id>[&baseline=<id>]` redirects to the drill-down of the
  run's first repeat of the case that did not pass (else its first repeat).
- POST `/review/bulk/`: `status` and one or more `case` values `<candidate>:<baseline>:<eval_id>`
  (the untriaged queue's checkboxes); each is triaged as the drill-down's form would.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from evaluations.models import CaseResult, Triage
from evaluations.review import triage as services
from evaluations.web.views.compare import parse_id, runs_visible_to
from evaluations.web.views.triage import WRITERS

MAX_BULK = 200


@login_required
@require_GET
def run_case_by_eval_id(request: HttpRequest, run_pk: int) -> HttpResponse:
    run = get_object_or_404(runs_visible_to(request.user), pk=run_pk)
    eval_id = request.GET.get("eval_id", "")
    results = list(CaseResult.objects.filter(run=run, case__eval_id=eval_id).order_by("iteration", "pk")
                   .values_list("pk", "status"))
    if not results:
        raise Http404("the run has no such case")
    pk = next((pk for pk, status in results if status != CaseResult.Status.PASSED), results[0][0])
    baseline = parse_id(request.GET.get("baseline"))
    query = "?" + urlencode({"baseline": baseline, "status": "all"}) if baseline else ""
    return redirect(reverse("run_case", args=[run.pk, pk]) + query)


@login_required
@require_POST
def triage_bulk(request: HttpRequest) -> HttpResponse:
    status = request.POST.get("status", "")
    back = reverse("review_queue") + "?tab=untriaged"
    if status not in Triage.Status.values:
        messages.error(request, "Choose a status to give the selected cases.")
        return redirect(back)
    keys = request.POST.getlist("case")[:MAX_BULK]
    if not keys:
        messages.error(request, "Tick the cases to triage first.")
        return redirect(back)
    visible = runs_visible_to(request.user).select_related("project", "evalset_version__evalset")
    done = 0
    with transaction.atomic():
        for key in keys:
            candidate_raw, _, rest = key.partition(":")
            baseline_raw, _, eval_id = rest.partition(":")
            candidate_id, baseline_id = parse_id(candidate_raw), parse_id(baseline_raw)
            if candidate_id is None or baseline_id is None or not eval_id:
                raise Http404("no such case")
            candidate = get_object_or_404(visible, pk=candidate_id)
            baseline = get_object_or_404(visible, pk=baseline_id, project=candidate.project)
            if candidate.project.role_of(request.user) not in WRITERS:
                raise PermissionDenied("only members and admins of the project may triage")
            if not candidate.results.filter(case__eval_id=eval_id).exists():
                raise Http404("no such case")
            try:
                services.triage_update(project=candidate.project, evalset=candidate.evalset_version.evalset,
                                       eval_id=eval_id, baseline=baseline, candidate=candidate, status=status,
                                       actor=request.user)
            except ValidationError as exc:
                messages.error(request, " ".join(exc.messages))
                transaction.set_rollback(True)
                return redirect(back)
            done += 1
    messages.success(request, f"{done} case{'' if done == 1 else 's'} marked “{Triage.Status(status).label}”.")
    return redirect(back)
