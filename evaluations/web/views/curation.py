"""Curating eval sets in the browser: version history and diffs (everyone who can read the
project), and edits that save new versions (members and admins): a case's editor, add,
duplicate, delete, bulk actions on a selection, and promotions of run results into cases."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from evaluations.audit import audit_record
from evaluations.converters import whole_number
from evaluations.evalsets import exports, selectors
from evaluations.evalsets.case_form import CaseFields, TurnFields, case_from_post, fields_from_case, friendly_path
from evaluations.evalsets.curation import (
    CurationError,
    EditOutcome,
    Problem,
    case_native,
    evalset_edit,
    parse_edit,
)
from evaluations.models import OPEN_VERSION, AuditEvent, CaseResult, EvalCase, EvalSet, EvalSetVersion, Trace
from evaluations.review import comparison, promotion
from evaluations.review.statistics import ERRORED, FLAKY, IMPROVED, NEW, REGRESSED, UNCHANGED_FAIL
from evaluations.review.versions import version_diff, version_history
from evaluations.runs import page as run_pages
from evaluations.runs.selectors import runs_visible_to
from evaluations.schemas.text import without_nul
from evaluations.web.views.common import can_upload, current_project, enter_project

BULK_LIMIT = 10_000


def _evalset(request: HttpRequest, pk: int) -> EvalSet:
    return get_object_or_404(
        selectors.evalsets_visible_to(request.user).select_related("project", "latest_version"), pk=pk
    )


def _require_edit(request: HttpRequest, evalset: EvalSet) -> None:
    if not can_upload(request.user, evalset.project):
        raise PermissionDenied("only members and admins of the project may edit its eval sets")


def _latest(evalset: EvalSet) -> EvalSetVersion:
    latest = evalset.versions.order_by("-number").first()
    if latest is None:
        raise Http404("the eval set has no version")
    return latest


def record_edit(*, request: HttpRequest, evalset: EvalSet, outcome: EditOutcome, via: str) -> None:
    version = outcome.version
    audit_record(
        project=evalset.project,
        actor=request.user,
        verb=AuditEvent.Verb.EVALSET_EDITED,
        obj=evalset,
        summary=f"{evalset.display_name}: v{version.number} ({version.how_created}) — {outcome.describe()}"
        + (f" — {version.note}" if version.note else ""),
        data={
            "version": version.number,
            "how": version.how_created,
            "via": via,
            "added": outcome.added,
            "changed": outcome.changed,
            "removed": outcome.removed,
        },
    )


# --- History and diffs -------------------------------------------------------------------------


@login_required
@require_GET
def evalset_versions(request: HttpRequest, pk: int) -> HttpResponse:
    evalset = _evalset(request, pk)
    enter_project(request, evalset.project)
    versions = version_history(evalset=evalset)
    return render(
        request,
        "evaluations/curation/versions.html",
        {"evalset": evalset, "versions": versions, "can_edit": can_upload(request.user, evalset.project),
         "tool_formats": exports.tool_formats(evalset.pk)},
    )


def _number(value: str | None) -> int | None:
    return whole_number(value, maximum=999_999_999)


@login_required
@require_GET
def evalset_diff(request: HttpRequest, pk: int) -> HttpResponse:
    evalset = _evalset(request, pk)
    enter_project(request, evalset.project)
    old_n, new_n = _number(request.GET.get("from")), _number(request.GET.get("to"))
    if old_n is None or new_n is None:
        raise Http404("say which two versions: ?from=1&to=2")
    versions = {v.number: v for v in evalset.versions.filter(number__in=[old_n, new_n]).select_related("created_by")}
    if old_n not in versions or new_n not in versions:
        raise Http404("no such version")
    diff = version_diff(old=versions[old_n], new=versions[new_n], page=request.GET.get("page", 1))
    numbers = list(evalset.versions.order_by("-number").values_list("number", flat=True))
    return render(request, "evaluations/curation/diff.html", {"evalset": evalset, "diff": diff, "numbers": numbers})


# --- The case editor ---------------------------------------------------------------------------


def _form_context(
    evalset: EvalSet,
    latest: EvalSetVersion,
    fields: CaseFields,
    *,
    title: str,
    action: str,
    problems: list[Problem] | None = None,
    note: str = "",
    replaces: str = "",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    turns = list(fields.turns)
    turns.append(TurnFields(len(turns)))  # a blank turn to add one
    return {
        "evalset": evalset,
        "latest": latest,
        "fields": fields,
        "turns": turns,
        "turn_count": len(turns),
        "title": title,
        "action": action,
        "note": note,
        "replaces": replaces,
        "problems": [Problem(friendly_path(p.path), p.message) for p in problems or []],
        **(extra or {}),
    }


def _save_case(
    request: HttpRequest,
    evalset: EvalSet,
    *,
    replaces: str | None,
    title: str,
    action: str,
    how: str = EvalSetVersion.How.EDIT,
    extra: dict[str, Any] | None = None,
    must_name: str = "",
) -> HttpResponse:
    latest = _latest(evalset)
    case, typed, problems = case_from_post(request.POST)
    note = request.POST.get("note", "").strip()
    if must_name and must_name not in note:  # e.g. the trace a case came from stays in the history
        note = f"{note} (from trace {must_name})" if note else f"from trace {must_name}"
    base = _number(request.POST.get("base_version"))
    if not problems:
        try:
            edit = parse_edit(
                {
                    "base_version": base if base is not None else -1,
                    "note": note,
                    "changes": [{"op": "put", "eval_id": replaces or None, "case": case}],
                }
            )
            outcome = evalset_edit(evalset=evalset, edit=edit, user=request.user, how=how)
        except CurationError as exc:
            problems = exc.problems
        else:
            record_edit(request=request, evalset=evalset, outcome=outcome, via="web")
            messages.success(request, f"Saved as version {outcome.version.number}.")
            return HttpResponseRedirect(
                reverse("evalset_diff", args=[evalset.pk])
                + f"?from={outcome.version.number - 1}&to={outcome.version.number}"
            )
    context = _form_context(
        evalset,
        latest,
        typed,
        title=title,
        action=action,
        problems=problems,
        note=note,
        replaces=replaces or "",
        extra=extra,
    )
    return render(request, "evaluations/curation/case_form.html", context, status=400)


def _case_in_latest(request: HttpRequest, pk: int) -> tuple[EvalCase, EvalSet]:
    case = get_object_or_404(selectors.cases_visible_to(request.user).select_related("evalset__project"), pk=pk)
    evalset = case.evalset
    _require_edit(request, evalset)
    if case.valid_to != OPEN_VERSION:
        raise Http404("this case is not in the latest version: edit the latest version's case")
    return case, evalset


@login_required
@require_http_methods(["GET", "POST"])
def case_edit(request: HttpRequest, pk: int) -> HttpResponse:
    case, evalset = _case_in_latest(request, pk)
    action = reverse("case_edit", args=[pk])
    title = f"Edit {case.eval_id}"
    if request.method == "POST":
        return _save_case(request, evalset, replaces=case.eval_id, title=title, action=action)
    enter_project(request, evalset.project)
    return render(
        request,
        "evaluations/curation/case_form.html",
        _form_context(
            evalset,
            _latest(evalset),
            fields_from_case(case_native(case)),
            title=title,
            action=action,
            replaces=case.eval_id,
        ),
    )


@login_required
@require_http_methods(["GET", "POST"])
def case_new(request: HttpRequest, pk: int) -> HttpResponse:
    evalset = _evalset(request, pk)
    _require_edit(request, evalset)
    action = reverse("case_new", args=[pk])
    if request.method == "POST":
        return _save_case(request, evalset, replaces=None, title="New case", action=action)
    enter_project(request, evalset.project)
    return render(
        request,
        "evaluations/curation/case_form.html",
        _form_context(evalset, _latest(evalset), CaseFields(), title="New case", action=action),
    )


def _apply(request: HttpRequest, evalset: EvalSet, changes: list[dict[str, Any]], *, how: str = "edit") -> HttpResponse:
    """One save from a small form (duplicate, delete, bulk); errors go back as a message."""
    base = _number(request.POST.get("base_version"))
    try:
        edit = parse_edit(
            {
                "base_version": base if base is not None else -1,
                "note": request.POST.get("note", "").strip(),
                "changes": changes,
            }
        )
        outcome = evalset_edit(evalset=evalset, edit=edit, user=request.user, how=how)
    except CurationError as exc:
        for p in exc.problems[:10]:
            messages.error(request, f"{friendly_path(p.path)}: {p.message}" if p.path else p.message)
        return HttpResponseRedirect(reverse("evalset_detail", args=[evalset.pk]))
    record_edit(request=request, evalset=evalset, outcome=outcome, via="web")
    moved = "".join(f" Also version {v.number} of {v.evalset.display_name}." for v in outcome.other_versions)
    messages.success(request, f"Saved as version {outcome.version.number}: {outcome.describe()}.{moved}")
    return HttpResponseRedirect(
        reverse("evalset_diff", args=[evalset.pk]) + f"?from={outcome.version.number - 1}&to={outcome.version.number}"
    )


@login_required
@require_POST
def case_duplicate(request: HttpRequest, pk: int) -> HttpResponse:
    case, evalset = _case_in_latest(request, pk)
    return _apply(request, evalset, [{"op": "duplicate", "eval_id": case.eval_id}])


@login_required
@require_POST
def case_delete(request: HttpRequest, pk: int) -> HttpResponse:
    case, evalset = _case_in_latest(request, pk)
    return _apply(request, evalset, [{"op": "delete", "eval_ids": [case.eval_id]}])


@login_required
@require_POST
def evalset_bulk(request: HttpRequest, pk: int) -> HttpResponse:
    evalset = _evalset(request, pk)
    _require_edit(request, evalset)
    eval_ids = request.POST.getlist("eval_ids")[:BULK_LIMIT]
    action = request.POST.get("action", "")
    if not eval_ids:
        messages.error(request, "Select at least one case.")
        return HttpResponseRedirect(reverse("evalset_detail", args=[evalset.pk]))
    change: dict[str, Any] = {"op": action, "eval_ids": eval_ids}
    if action in ("tag", "untag"):
        change["tag"] = request.POST.get("tag", "").strip()
    elif action == "move":
        change["target_evalset"] = _number(request.POST.get("target")) or 0
    elif action != "delete":
        messages.error(request, "Choose what to do with the selected cases.")
        return HttpResponseRedirect(reverse("evalset_detail", args=[evalset.pk]))
    return _apply(request, evalset, [change])


# --- Promotion ---------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def result_promote(request: HttpRequest, run_pk: int, result_pk: int) -> HttpResponse:
    """A run's result as a case of an eval set: a new case, or this case's new expected
    answer, proposed from what the agent actually said and called, edited before saving."""
    run = get_object_or_404(
        runs_visible_to(request.user).select_related("project", "evalset_version__evalset"), pk=run_pk
    )
    result = get_object_or_404(CaseResult.objects.select_related("case"), pk=result_pk, run=run)
    evalset = run.evalset_version.evalset
    evalset.project = run.project
    _require_edit(request, evalset)
    mode = request.POST.get("mode") or request.GET.get("mode") or "new"
    if mode not in ("new", "expected"):
        raise Http404("no such mode")
    action = reverse("result_promote", args=[run.pk, result.pk]) + f"?mode={mode}"
    latest = _latest(evalset)
    current = EvalCase.objects.in_version_by_eval_id(latest, result.case.eval_id).first()
    if mode == "expected" and current is None:
        messages.error(request, f"The latest version has no case {result.case.eval_id!r} any more.")
        return HttpResponseRedirect(reverse("run_case", args=[run.pk, result.pk]))
    extra = {"run": run, "result": result, "mode": mode}
    title = (
        f"New expected answer for {result.case.eval_id}"
        if mode == "expected"
        else f"Add run #{run.pk}'s {result.case.eval_id} as a new case"
    )
    if request.method == "POST":
        return _save_case(
            request,
            evalset,
            replaces=result.case.eval_id if mode == "expected" else None,
            title=title,
            action=action,
            how=EvalSetVersion.How.PROMOTION,
            extra=extra,
        )
    enter_project(request, run.project)
    base = case_native(current) if current is not None else case_native(result.case)
    proposal = promotion.proposed_case(
        base=base,
        result=result,
        new_case=mode == "new",
        taken=set(EvalCase.objects.in_version(latest).values_list("eval_id", flat=True)) if mode == "new" else set(),
    )
    fields = fields_from_case(proposal)
    return render(
        request,
        "evaluations/curation/case_form.html",
        _form_context(
            evalset,
            latest,
            fields,
            title=title,
            action=action,
            replaces=result.case.eval_id if mode == "expected" else "",
            note=f"from run #{run.pk}",
            extra=extra,
        ),
    )


def _received_trace(request: HttpRequest, pk: int) -> Trace:
    """A trace received by the current project (404 for another project's, as on its page)."""
    project = current_project(request)
    trace = Trace.objects.filter(project=project, received=True, pk=pk).select_related("project").first()
    if project is None or trace is None:
        raise Http404("no such trace in this project")
    return trace


@login_required
@require_http_methods(["GET", "POST"])
def trace_promote(request: HttpRequest, pk: int) -> HttpResponse:
    """A received trace as a new case of one of the project's eval sets (`?evalset=<id>`):
    proposed from its spans (user input, final answer, tool calls with their arguments),
    edited in the case editor, saved as a promotion whose note names the trace."""
    trace = _received_trace(request, pk)
    evalset = get_object_or_404(
        EvalSet.objects.select_related("project"), pk=_number(request.GET.get("evalset")) or 0, project=trace.project
    )
    _require_edit(request, evalset)
    action = reverse("trace_promote", args=[trace.pk]) + f"?evalset={evalset.pk}"
    title = f"Add trace {trace.name or trace.trace_id} to {evalset.display_name}"
    extra = {"trace": trace}
    if request.method == "POST":
        return _save_case(request, evalset, replaces=None, title=title, action=action,
                          how=EvalSetVersion.How.PROMOTION, extra=extra, must_name=trace.trace_id)
    latest = _latest(evalset)
    proposal = promotion.proposed_case_from_trace(
        trace, taken=set(EvalCase.objects.in_version(latest).values_list("eval_id", flat=True)))
    return render(request, "evaluations/curation/case_form.html", _form_context(
        evalset, latest, fields_from_case(proposal), title=title, action=action,
        note=f"from trace {trace.trace_id}", extra=extra))


PROMOTABLE = (REGRESSED, UNCHANGED_FAIL, ERRORED, FLAKY, IMPROVED, NEW)


@login_required
@require_GET
def run_promote_form(request: HttpRequest, run_pk: int) -> HttpResponse:
    """The compare page's "add these cases to an eval set" form, fetched by htmx so the cached
    comparison stays the same for every role: members and admins get the form, viewers nothing."""
    run = get_object_or_404(
        runs_visible_to(request.user).select_related("project", "evalset_version__evalset"), pk=run_pk
    )
    baseline = get_object_or_404(
        runs_visible_to(request.user), pk=_number(request.GET.get("baseline")) or 0, project=run.project
    )
    if not can_upload(request.user, run.project):
        return HttpResponse("")
    counts = comparison.comparison_source(baseline=baseline, candidate=run).head["counts"]
    choices = [(s, counts.get(s, 0)) for s in PROMOTABLE if counts.get(s)]
    targets = list(
        EvalSet.objects.filter(project=run.project)
        .only("pk", "name", "eval_set_id")
        .order_by("name", "eval_set_id")[:200]
    )
    return render(
        request,
        "evaluations/curation/_promote_compare.html",
        {
            "run": run,
            "baseline": baseline,
            "choices": choices,
            "targets": targets,
            "own": run.evalset_version.evalset_id,
            "next": request.GET.get("next", ""),
        },
    )


@login_required
@require_POST
def run_promote_selected(request: HttpRequest, run_pk: int) -> HttpResponse:
    """The selected cases of a run (e.g. a comparison's regressions) into an eval set in one
    save: each becomes a new case, its expectation taken from the run's answers. The cases are
    `eval_ids`, or every case of one status in the comparison with `baseline`."""
    run = get_object_or_404(
        runs_visible_to(request.user).select_related("project", "evalset_version__evalset"), pk=run_pk
    )
    # A NUL is kept as U+FFFD in stored eval ids (evaluations.schemas.text): looked up the same way.
    eval_ids = list(dict.fromkeys(without_nul(request.POST.getlist("eval_ids"))))[:BULK_LIMIT]
    status = request.POST.get("status", "")
    baseline_id = _number(request.POST.get("baseline"))
    if not eval_ids and request.POST.get("from_table"):
        # the run page's cases table, as filtered (a filter is required: not the whole run)
        current = {
            k: request.POST.get(k, request.POST.get(f"opened_{k}", ""))
            for k in ("status", "tag", "criterion", "q", "cause")
        }
        filters = run_pages.ResultFilters.from_query(current, run_pages.run_criteria(run))
        if filters.active:
            eval_ids = list(
                run_pages.filtered_results(run, filters)
                .order_by("case__position")
                .values_list("case__eval_id", flat=True)
                .distinct()[:BULK_LIMIT]
            )
    elif not eval_ids and status in PROMOTABLE and baseline_id is not None:
        baseline = get_object_or_404(runs_visible_to(request.user), pk=baseline_id, project=run.project)
        eval_ids = comparison.eval_ids_with_status(baseline=baseline, candidate=run, status=status,
                                                   limit=BULK_LIMIT)
    target_pk = _number(request.POST.get("target")) or run.evalset_version.evalset_id
    target = get_object_or_404(EvalSet.objects.select_related("project"), pk=target_pk, project=run.project)
    _require_edit(request, target)
    back = request.POST.get("next") or reverse("run_detail", args=[run.pk])
    if not back.startswith("/") or back.startswith("//"):
        back = reverse("run_detail", args=[run.pk])
    if not eval_ids:
        messages.error(request, "Select at least one case to add (on the run page: filter the cases first).")
        return _redirect(request, back)
    latest = _latest(target)
    cases = promotion.proposed_cases(
        run=run, eval_ids=eval_ids, taken=set(EvalCase.objects.in_version(latest).values_list("eval_id", flat=True))
    )
    note = request.POST.get("note", "").strip() or f"{len(cases)} case(s) from run #{run.pk}"
    try:
        edit = parse_edit(
            {"base_version": latest.number, "note": note, "changes": [{"op": "put", "case": c} for c in cases]}
        )
        outcome = evalset_edit(evalset=target, edit=edit, user=request.user, how=EvalSetVersion.How.PROMOTION)
    except CurationError as exc:
        for p in exc.problems[:10]:
            messages.error(request, f"{p.path}: {p.message}" if p.path else p.message)
        return _redirect(request, back)
    record_edit(request=request, evalset=target, outcome=outcome, via="web")
    messages.success(
        request, f"Added {outcome.added} case(s) to {target.display_name} as version {outcome.version.number}."
    )
    return _redirect(
        request,
        reverse("evalset_diff", args=[target.pk]) + f"?from={outcome.version.number - 1}&to={outcome.version.number}",
    )


def _redirect(request: HttpRequest, url: str) -> HttpResponse:
    """A redirect; for htmx (the run page's form posts its filters with hx-include) a full page load."""
    if request.htmx:  # type: ignore[attr-defined]
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return HttpResponseRedirect(url)
