"""Run pages: home, runs list, new run, run detail (with its htmx cases table and live
progress), cancel and retry."""

from __future__ import annotations

from datetime import date
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from evaluations.audit import object_history, record_run
from evaluations.converters import parse_id
from evaluations.evaluators.deepeval_judged.catalogue import judged_metric_catalogue
from evaluations.evaluators.parity import parity_notes
from evaluations.ingest.runs import traces_run_create, traces_waiting
from evaluations.models import AuditEvent, Membership, Run
from evaluations.ordering import config_in_order
from evaluations.prompts.selectors import version_choices
from evaluations.review import selectors as review_selectors
from evaluations.review.causes import run_causes
from evaluations.review.notices import notices_against
from evaluations.review.selectors import baseline_link
from evaluations.runs import listing, selectors
from evaluations.runs import page as run_pages
from evaluations.runs import services as runs
from evaluations.runs.forms import NewRunForm
from evaluations.runs.live import live_status
from evaluations.runs.selectors import config_text
from evaluations.web.charts import to_html
from evaluations.web.charts.run import latency_histogram, pass_rate_by_tag, score_distribution
from evaluations.web.views.common import current_project, enter_project
from evaluations.web.views.evalsets import IMPORT_ERROR_TITLES

# The comparison page belongs to another module; linked by path until its route exists.
COMPARE_PATH = "/compare/"


def _htmx_fragment(request: HttpRequest) -> bool:
    # A history restore wants the whole page, not the fragment; so does a swap of the page's
    # whole <main> (a run that has just finished brings in its summary and charts).
    htmx = request.htmx  # type: ignore[attr-defined]
    return bool(htmx and not htmx.history_restore_request and htmx.target != "main")


def _visible_run(request: HttpRequest, pk: int) -> Run:
    run = selectors.run_for_page(request.user, pk)
    if run is None:
        raise Http404("no such run")
    return run


# --- Home -------------------------------------------------------------------------------------


def home_monitors(project: Any) -> list[tuple[Any, int, int, int]]:
    """Each monitor of the project with its last 24 h (passed, scored, failed): two queries."""
    from evaluations.models import Monitor
    from evaluations.monitors.stats import last_day

    monitors = list(Monitor.objects.filter(project=project).only("pk", "name", "level", "enabled", "version")[:20])
    day = last_day([m.pk for m in monitors], timezone.now()) if monitors else {}
    return [(m, *day.get(m.pk, (0, 0)), day.get(m.pk, (0, 0))[1] - day.get(m.pk, (0, 0))[0]) for m in monitors]


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    if _htmx_fragment(request):  # the polled "in progress" block
        active = listing.active_runs(project=project) if project else []
        # The runs whose status the page shows in its table while they went: their badges
        # are swapped out of band, and watched until they have finished.
        ids = [pk for pk in map(parse_id, request.GET.get("watch", "").split(",")[:50]) if pk is not None]
        watched = list(Run.objects.filter(project=project, pk__in=ids).order_by("pk").values_list("pk", "status")
                       ) if project and ids else []
        response = render(request, "evaluations/runs/_active_runs.html", {
            "active": active, "watched": watched,
            "watch": [pk for pk, status in watched if status in selectors.ACTIVE]})
    else:
        page = review_selectors.home_page(project=project) if project else None
        can_write = bool(project and project.can_write(request.user))
        watch = [b.latest.pk for b in page.rows if b.latest.status in selectors.ACTIVE] if page else []
        response = render(request, "evaluations/runs/home.html",
                          {"project": project, "page": page, "can_write": can_write, "watch": watch,
                           "monitors": home_monitors(project) if project else []})
    patch_vary_headers(response, ["HX-Request"])
    return response


# --- Runs list --------------------------------------------------------------------------------


def _date(value: str | None) -> date | None:
    try:
        return date.fromisoformat(value) if value else None
    except ValueError:
        return None


def _run_filters(query: Any) -> listing.RunFilters:
    evalset = query.get("evalset", "")
    status = query.get("status", "")
    return listing.RunFilters(
        evalset=parse_id(evalset),
        status=status if status in Run.Status.values else "",
        model=query.get("model", "").strip(),
        branch=query.get("branch", "").strip(),
        commit=query.get("commit", "").strip(),
        tag=query.get("tag", "").strip(),
        date_from=_date(query.get("from")),
        date_to=_date(query.get("to")),
        page=query.get("page", 1),
    )


@login_required
@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    page = listing.run_list_page(project=project, filters=_run_filters(request.GET)) if project else None
    context = {"project": project, "page": page, "compare_path": COMPARE_PATH}
    template = "evaluations/runs/_runs_table.html" if _htmx_fragment(request) else "evaluations/runs/list.html"
    response = render(request, template, context)
    patch_vary_headers(response, ["HX-Request"])
    return response


@login_required
@require_GET
def run_compare_pick(request: HttpRequest) -> HttpResponse:
    """The runs list's checkboxes send `run=a&run=b`: the older run is the baseline."""
    pks = sorted({pk for pk in map(parse_id, request.GET.getlist("run")) if pk is not None})
    if 3 <= len(pks) <= 8:  # several runs: side by side, oldest first (the first is the reference)
        several = listing.runs_for_compare(request.user, pks)
        if len(several) == len(pks):
            return HttpResponseRedirect(reverse("nway_compare") + "?"
                                        + urlencode({"runs": ",".join(str(r.pk) for r in several)}))
    picked = listing.runs_for_compare(request.user, pks) if len(pks) == 2 else []
    if len(picked) != 2:
        messages.error(request, "Pick two to eight runs to compare.")
        return HttpResponseRedirect(reverse("run_list"))
    baseline, candidate = picked
    return HttpResponseRedirect(f"{COMPARE_PATH}?{urlencode({'baseline': baseline.pk, 'candidate': candidate.pk})}")


# --- New run ----------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def run_new(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    if project is None or not project.can_write(request.user):
        raise PermissionDenied("only members and admins of the project may start runs")
    choices = selectors.new_run_choices(project=project)

    if request.method == "GET":
        remembered = request.session.get(NEW_RUN_MEMORY) or {}
        version = _initial_version(request, choices, remembered)
        initial: dict[str, Any] = {key: remembered[key] for key in REMEMBERED_TARGET if remembered.get(key)}
        if version is not None:
            initial["version"] = version.pk
            initial["config_json"] = config_text(runs.config_for(version)) if _valid_default(version) else ""
        form = NewRunForm(initial=initial, versions=choices.versions, presets=choices.presets,
                          prompts=version_choices(project))
        return _render_new(request, form, choices)

    form = NewRunForm(request.POST, request.FILES, versions=choices.versions, presets=choices.presets,
                      prompts=version_choices(project))
    if not form.is_valid():
        return _render_new(request, form, choices, status=400)
    try:
        spec = form.cleaned_data["run"]
        with transaction.atomic():  # the run and its audit event, together or neither
            if spec["target_kind"] == Run.TargetKind.TRACES:  # waits for the agent's traces on /v1/traces
                run = traces_run_create(project=project, user=request.user, version=spec["version"],
                                        deadline_seconds=spec["target"].get("deadline_seconds"),
                                        config=spec["config"], preset=spec["preset"], iterations=spec["iterations"],
                                        name=spec["name"], labels=spec["labels"])
            else:
                run = runs.run_create(project=project, user=request.user, **spec)
            record_run(run=run, actor=request.user, verb=AuditEvent.Verb.RUN_STARTED, via="the new-run page")
    except runs.RunError as exc:  # nothing was written
        form.add_error(None, str(exc))
        return _render_new(request, form, choices, status=400)
    # The next New run starts from this one's eval set and target (never its headers: secrets).
    request.session[NEW_RUN_MEMORY] = {"evalset": spec["version"].evalset_id,
                                       **{key: form.cleaned_data.get(key) or "" for key in REMEMBERED_TARGET}}
    return HttpResponseRedirect(reverse("run_detail", args=[run.pk]))


# What New run remembers of the user's last run (in the session): its eval set and target.
NEW_RUN_MEMORY = "new_run_last"
REMEMBERED_TARGET = ("target_kind", "http_url", "python_callable", "model_base_url", "model_name", "model_api_key_env")


def _initial_version(request: HttpRequest, choices: selectors.NewRunChoices, remembered: dict[str, Any]) -> Any:
    """The version asked for (`?version=<pk>`), else the latest of `?evalset=<pk>`, else the
    latest of the eval set of the user's last run, else the first eval set's."""
    wanted = parse_id(request.GET.get("version", ""))
    if wanted is not None and wanted in choices.versions:
        return choices.versions[wanted]
    evalset = request.GET.get("evalset", "") or str(remembered.get("evalset") or "")
    if not any(str(v.evalset_id) == evalset for v in choices.versions.values()):
        evalset = ""  # an eval set gone, or of another project: the first one
    for version in choices.versions.values():  # latest first within each eval set
        if not evalset or str(version.evalset_id) == evalset:
            return version
    return None


def _valid_default(version: Any) -> bool:
    try:
        runs.config_for(version)
    except ValueError:
        return False
    return True


def _render_new(request: HttpRequest, form: NewRunForm, choices: selectors.NewRunChoices,
                status: int = 200) -> HttpResponse:
    error = form.outputs_error
    selected = form["version"].value()
    selected_pk = parse_id(str(selected))
    context = {
        "form": form,
        "groups": choices.groups,
        "selected_version": str(selected) if selected is not None else "",
        "skeleton_url": reverse("version_outputs_skeleton", args=[selected_pk])
        if selected_pk is not None and selected_pk in choices.versions else "",
        "has_presets": bool(choices.presets),
        "judged_metrics": judged_metric_catalogue(),
        "error": error,
        "error_title": IMPORT_ERROR_TITLES.get(error.code, error.code.replace("_", " ").capitalize()) if error else "",
        "more_problems": error.total - len(error.problems) if error else 0,
    }
    return render(request, "evaluations/runs/new.html", context, status=status)


# --- One run ----------------------------------------------------------------------------------


def _charts(page: run_pages.RunPage) -> dict[str, str]:
    data = page.charts
    if data is None:
        return {}
    charts = {}
    if data.scores:
        charts["scores"] = to_html(score_distribution(data.scores))
    if data.latency_width and any(data.latency_counts):
        charts["latency"] = to_html(latency_histogram(data.latency_width, data.latency_counts,
                                                      p50=data.latency_p50, p95=data.latency_p95))
    if any(r.judged for r in data.tag_rates):
        charts["tags"] = to_html(pass_rate_by_tag(data.tag_rates, iterations=page.run.iterations))
    return charts


@login_required
@require_GET
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = _visible_run(request, pk)
    criteria = run_pages.run_criteria(run)
    filters = run_pages.ResultFilters.from_query(request.GET, criteria)
    if _htmx_fragment(request):  # the cases table, filtered, sorted or paged
        table = run_pages.results_table(run, criteria, filters)
        response = render(request, "evaluations/runs/_results_table.html", {"table": table})
        if run.status not in selectors.ACTIVE:
            response.status_code = 286  # htmx: swap this last table in and stop polling
    else:
        enter_project(request, run.project)
        role = run.project.role_of(request.user)
        # A finished run's charts never change: build them once (plotly figures cost a few
        # hundred ms at 10,000 cases) and keep the HTML, keyed by when the run finished.
        key = f"run-charts:{run.pk}:{run.finished_at.timestamp()}" if run.finished_at else None
        charts = cache.get(key) if key else None
        page = run_pages.run_page(run, filters, can_write=role in {Membership.Role.MEMBER, Membership.Role.ADMIN},
                                  with_charts=charts is None)
        if charts is None:
            charts = _charts(page)
            if key and page.charts is not None:
                cache.set(key, charts, timeout=24 * 3600)
        vs = baseline_link(run)
        response = render(request, "evaluations/runs/detail.html",
                          {"page": page, "run": page.run, "table": page.table, "charts": charts,
                           "pinned": run.evalset_version.evalset.baseline_run_id == run.pk,
                           "can_admin": role == Membership.Role.ADMIN, "history": object_history(run),
                           "parity_notes": parity_notes(config_in_order(run.config, run.criteria_order)),
                           "vs": vs, "notices": notices_against(run, vs.baseline_pk if vs else None),
                           "live": live_status(run) if page.run.is_active else None,
                           "traces_waiting": traces_waiting(run),
                           "causes": run_causes(run) if run.is_finished else None,
                           "causes_base": reverse("run_detail", args=[run.pk]) + "?cause="})
    patch_vary_headers(response, ["HX-Request"])
    return response


@login_required
@require_GET
def run_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The live progress block, polled every 2 s while the run is queued or running, with the
    page head's status badge swapped out of band, so "queued" turns "running" and then
    "completed" in place. When the run has finished the block says so, stops polling and
    brings in the page's summary and charts (its <main>, swapped by htmx: no reload); the
    compare page (`?reload=1`, its verdict waits for the run) reloads instead."""
    run = _visible_run(request, pk)
    view = selectors.run_view(run)
    reload = bool(request.GET.get("reload"))
    response = render(request, "evaluations/runs/_progress.html",
                      {"run": view, "can_write": run.project.can_write(request.user),
                       "live": live_status(run) if view.is_active else None, "oob_status": not reload})
    if request.htmx and not view.is_active and reload:  # type: ignore[attr-defined]
        response["HX-Refresh"] = "true"
    return response


@login_required
@require_POST
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    run = _visible_run(request, pk)
    if not run.project.can_write(request.user):
        raise PermissionDenied("viewers cannot cancel runs")
    if runs.run_cancel(run=run, user=request.user):
        record_run(run=run, actor=request.user, verb=AuditEvent.Verb.RUN_CANCELLED, via="the run page")
        messages.success(request, "Run cancelled. Results already written are kept.")
    else:
        messages.info(request, "The run had already finished.")
    return HttpResponseRedirect(reverse("run_detail", args=[run.pk]))


@login_required
@require_POST
def run_retry(request: HttpRequest, pk: int) -> HttpResponse:
    run = _visible_run(request, pk)
    if not run.project.can_write(request.user):
        raise PermissionDenied("viewers cannot retry runs")
    try:
        reset = runs.run_retry_failed(run=run, user=request.user)
    except runs.RunError as exc:
        messages.error(request, str(exc).capitalize() + ".")
    else:
        record_run(run=run, actor=request.user, verb=AuditEvent.Verb.RUN_RETRIED, via="the run page",
                   data={"reset": reset})
        messages.success(request, f"Retrying {reset} failed or errored result{'s' if reset != 1 else ''}.")
    return HttpResponseRedirect(reverse("run_detail", args=[run.pk]))
