"""People's grades, the grading queue and judge calibration.

- POST `/grades/` (`grade_save`): `result`, `criterion`, `verdict` (pass / fail), optional
  `score` (0-1) and `note`; `view=queue` (with `position` and `disagreement`) answers an htmx
  request with the queue's row, else with the drill-down's grades panel. A plain POST is
  redirected back to the drill-down (or the queue).
- GET `/grading/` (`grading_queue`): the current project's queue (disagreements first, then
  the stratified sample; `evaluations.review.grades`), `?evalset=&criterion=&run=&judge_model=
  &prompt_version=&page=`; graded with the keyboard (static/js/grading.js).
- GET `/calibration/` (`judge_calibration`): each judged criterion's agreement with people, per
  judge model and prompt version (`evaluations.review.calibration`).

Reading needs a role in the project; grading needs member or admin (viewers get 403);
another project's results are 404.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from evaluations.converters import parse_id
from evaluations.models import CaseResult, Project
from evaluations.review import calibration, grades
from evaluations.web.views import grading_context as context_views
from evaluations.web.views.common import current_project
from evaluations.web.views.compare import runs_visible_to
from evaluations.web.views.grade_panel import WRITERS, panel_context


def parse_score(raw: str | None) -> float | None:
    """The optional score field: "" is none; anything else must be a number (ValidationError)."""
    if raw is None or not raw.strip():
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValidationError({"score": "a score is a number between 0 and 1"}) from None
    if not math.isfinite(value):
        raise ValidationError({"score": "a score is a number between 0 and 1"})
    return value


def _messages(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return "; ".join(
            f"{name}: {' '.join(e.messages[0] for e in errors)}" for name, errors in exc.error_dict.items()
        )
    return " ".join(exc.messages)


def scope_from(project: Project, params: QueryDict) -> grades.QueueScope:
    """The queue's filters from a query string; a malformed id is a 404, as elsewhere."""
    evalset = parse_id(params.get("evalset"))
    run = parse_id(params.get("run"))
    if (params.get("evalset") and evalset is None) or (params.get("run") and run is None):
        raise Http404("no such eval set or run")
    version = params.get("prompt_version")
    return grades.QueueScope(
        project=project,
        evalset=evalset,
        run=run,
        criterion=params.get("criterion", "")[:100],
        judge_model=params.get("judge_model"),
        prompt_version=None if version is None else ("" if version == "-" else version),
        kind=params.get("kind", "") if params.get("kind", "") in grades.KINDS else "",
    )


@login_required
@require_POST
def grade_save(request: HttpRequest) -> HttpResponse:
    result_id = parse_id(request.POST.get("result"))
    if result_id is None:
        raise Http404("no such result")
    result = get_object_or_404(
        CaseResult.objects.select_related("case", "run__project").filter(run__in=runs_visible_to(request.user)),
        pk=result_id,
    )
    run = result.run
    role = run.project.role_of(request.user)
    if role not in WRITERS:
        raise PermissionDenied("only members and admins of the project may grade")
    criterion = request.POST.get("criterion", "")
    error = ""
    try:
        passed = grades.parse_verdict(request.POST.get("verdict"))
        if passed is None:
            raise ValidationError({"verdict": "say pass or fail"})
        grades.grade_save(
            result=result,
            criterion=criterion,
            grader=request.user,
            passed=passed,
            score=parse_score(request.POST.get("score")),
            note=request.POST.get("note", ""),
        )
    except ValidationError as exc:
        error = _messages(exc)
    in_queue = request.POST.get("view") == "queue"
    if in_queue:
        scope = scope_from(run.project, request.POST)
        position = parse_id(request.POST.get("position")) or 0
        item = grades.queue_item(
            scope,
            user=request.user,
            result_id=result.pk,
            criterion=criterion,
            position=position,
            disagreement=request.POST.get("disagreement") == "1",
        )
        if item is None:
            raise Http404("no such item")
        if request.htmx:  # type: ignore[attr-defined]
            return render(
                request,
                "evaluations/grades/_queue_row.html",
                {"item": item, "item_context": context_views.grading_context(item.source), "can_grade": True,
                 "error": error, "scope_query": scope.query()},
            )
        if error:
            return HttpResponse(f"Not saved: {error}", status=400, content_type="text/plain; charset=utf-8")
        return redirect(reverse("grading_queue") + "?" + urlencode(scope.query()))
    context = panel_context(user=request.user, run=run, result=result, error=error, role=role)
    if request.htmx:  # type: ignore[attr-defined]
        return render(request, "evaluations/grades/_drill_grades.html", context)
    if error:
        return render(request, "evaluations/grades/_drill_grades.html", context, status=400)
    return redirect(reverse("run_case", args=[run.pk, result.pk]) + "#grades")


KEYS = [
    ("j / n", "next item"),
    ("k", "previous item"),
    ("p", "grade pass (and go to the next item)"),
    ("f", "grade fail (and go to the next item)"),
    ("0-9", "set the score to 0.0-0.9 (then p or f)"),
    ("=", "set the score to 1.0"),
    ("e", "write a note (Enter or Escape goes back to the keys; then p or f saves it with the grade)"),
    ("o", "open the item's drill-down"),
]


@login_required
@require_GET
def grading_queue(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    context: dict[str, Any] = {"project": project, "keys": KEYS}
    if project is not None:
        scope = scope_from(project, request.GET)
        page = grades.queue_page(scope, user=request.user, page=request.GET.get("page", 1))
        query = scope.query()
        context.update(
            {
                "scope": scope,
                "queue": page,
                "entries": entries(page.items),
                "scope_query": query,
                "can_grade": project.role_of(request.user) in WRITERS,
                "page_query": urlencode(query),
                "calibration_url": reverse("judge_calibration"),
                "kinds": kind_links(scope),
            }
        )
    return render(request, "evaluations/grades/queue.html", context)


def entries(items: list[grades.QueueItem]) -> list[tuple[grades.QueueItem, Any]]:
    """Each item with its context; a result's turns are laid out once for all its criteria."""
    seen: dict[int, Any] = {}
    return [(item, context_views.grading_context(item.source, seen)) for item in items]


def kind_links(scope: grades.QueueScope) -> list[tuple[str, str, bool]]:
    """The queue's "all / LLM-judged only / deterministic only" filter: (label, url, selected),
    each keeping the scope's other filters."""
    links = []
    for kind, label in (("", "all criteria"), *grades.KINDS.items()):
        query = {**scope.query(), "kind": kind}
        if not kind:
            del query["kind"]
        links.append((label, reverse("grading_queue") + ("?" + urlencode(query) if query else ""), kind == scope.kind))
    return links


@login_required
@require_GET
def judge_calibration(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    rows = calibration.calibration_rows(project=project) if project is not None else []
    return render(
        request,
        "evaluations/grades/calibration.html",
        {"project": project, "rows": rows, "queue_url": reverse("grading_queue"),
         "llm_queue_url": reverse("grading_queue") + "?" + urlencode({"kind": grades.LLM_JUDGED}),
         "counted": sorted({row.criterion for row in rows})},
    )
