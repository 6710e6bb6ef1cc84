"""Review helpers around triage: a case of a run by its eval_id (what the activity feed
links to), and bulk triage from the review queue.

- GET `/runs/<run_pk>/case/?eval_id=<id>[&baseline=<id>]` redirects to the drill-down of the
  run's first repeat of the case that did not pass (else its first repeat).
- POST `/review/bulk/`: any of `status`, `assignee` (a user id, "none" to unassign) and
  `comment`, applied to the ticked `case` values `<candidate>:<baseline>:<eval_id>`, or with
  `scope=all` to every case of the queue tab (`tab`) its filters keep, on every page; all or
  nothing (`evaluations.review.triage.triage_bulk`).
  A local `next` path (the compare page filtered to a cause) is where it returns.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from evaluations.converters import parse_id
from evaluations.models import CaseResult, Project, Triage
from evaluations.review import triage as services
from evaluations.web.views.common import current_project
from evaluations.web.views.compare import runs_visible_to
from evaluations.web.views.triage import WRITERS, queue_filters


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


def _posted_filters(request: HttpRequest, tab: str) -> services.QueueFilters:
    """The queue's filters as the bulk form carries them (its own `assignee` is the action)."""
    params = {key: request.POST[key] for key in ("evalset", "branch", "criterion", "state") if key in request.POST}
    if request.POST.get("assignee_filter"):
        params["assignee"] = request.POST["assignee_filter"]
    return queue_filters(params, tab)


def _bulk_keys(request: HttpRequest, project: Project, tab: str) -> list[services.QueueKey]:
    """The ticked cases (`case` = `<candidate>:<baseline>:<eval_id>`), or with `scope=all`
    every case the queue's filters keep, on every page."""
    if request.POST.get("scope") == "all":
        return services.queue_keys(user=request.user, project=project, tab=tab,
                                   filters=_posted_filters(request, tab))
    keys = []
    for key in request.POST.getlist("case")[:services.MAX_BULK + 1]:
        candidate_raw, _, rest = key.partition(":")
        baseline_raw, _, eval_id = rest.partition(":")
        candidate_id, baseline_id = parse_id(candidate_raw), parse_id(baseline_raw)
        if candidate_id is None or baseline_id is None or not eval_id:
            raise Http404("no such case")
        keys.append(services.QueueKey(candidate_id, baseline_id, eval_id))
    named = {k.candidate_id for k in keys} | {k.baseline_id for k in keys}
    if runs_visible_to(request.user).filter(pk__in=named).count() != len(named):
        raise Http404("no such case")  # another project's runs do not exist for this user
    return keys


@login_required
@require_POST
def triage_bulk(request: HttpRequest) -> HttpResponse:
    """One action over the ticked cases (or all the filters keep): any of a status, an
    assignee ("" keeps, "none" unassigns) and a comment."""
    project = current_project(request)
    if project is None:
        raise Http404("no project")
    if project.role_of(request.user) not in WRITERS:
        raise PermissionDenied("only members and admins of the project may triage")
    tab = request.POST.get("tab", "untriaged")
    tab = tab if tab in ("assigned", "untriaged") else "untriaged"
    back = reverse("review_queue") + "?" + urlencode({"tab": tab, **_posted_filters(request, tab).query()})
    asked = request.POST.get("next", "")
    if asked.startswith("/") and url_has_allowed_host_and_scheme(asked, allowed_hosts=None):
        back = asked  # e.g. the compare page filtered to a cause: the reviewer stays where they were
    status = request.POST.get("status") or None
    raw_assignee = request.POST.get("assignee", "")
    assignee: Any = services.KEEP
    if raw_assignee == "none":
        assignee = None
    elif raw_assignee:
        assignee = get_user_model().objects.filter(pk=parse_id(raw_assignee) or 0, is_active=True).first()
        if assignee is None:
            messages.error(request, "No such user to assign.")
            return redirect(back)
    try:
        outcome = services.triage_bulk(project=project, keys=_bulk_keys(request, project, tab), status=status,
                                       assignee=assignee, comment=request.POST.get("comment", ""),
                                       actor=request.user)
    except ValidationError as exc:
        text = " ".join(exc.messages)
        messages.error(request, text[:1].upper() + text[1:] + ".")
        return redirect(back)
    done = []
    if status:
        done.append(f"marked “{Triage.Status(status).label}”")
    if assignee is None:
        done.append("unassigned")
    elif assignee is not services.KEEP:
        done.append(f"assigned to {assignee.get_username()}")
    if outcome.commented:
        done.append("commented on")
    n = outcome.cases
    messages.success(request, f"{n} case{'' if n == 1 else 's'} " + ", ".join(done) + ".")
    return redirect(back)
