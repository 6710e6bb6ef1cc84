"""Monitor pages (issue 31): the project's monitors, one monitor's figures over time and its
failing traces and threads, the form that creates or edits one (a new version when what
scores changes), a backfill; the project's retention."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Sum
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST
from pydantic import ValidationError

from evaluations.converters import whole_number
from evaluations.models import Membership, Monitor, MonitorBucket, MonitorResult, Project, Retention, RetentionSweep
from evaluations.monitors import stats
from evaluations.monitors.pending import pending_waiting
from evaluations.monitors.retention import retention_set
from evaluations.monitors.services import MonitorError, monitor_backfill, monitor_create, monitor_update, spec_of
from evaluations.monitors.spec import MonitorSpec, spec_errors
from evaluations.paging import Counted
from evaluations.web.charts import to_html
from evaluations.web.charts.monitor import monitor_chart
from evaluations.web.views.common import current_project, enter_project

PER_PAGE = 25
RANGES = {"24h": (timedelta(hours=24), "hour"), "7d": (timedelta(days=7), "hour"), "30d": (timedelta(days=30), "day")}
EXAMPLE_CRITERIA = {
    "mentions_city": {"evaluator": "contains", "options": {"substrings": ["Paris"], "case_sensitive": False}},
    "valid_json": {"evaluator": "json_valid"},
    "no_tool_errors": {"evaluator": "tool_errors"},
    "fast": {"evaluator": "latency_seconds", "threshold": 5},
}


def _monitor(request: HttpRequest, pk: int) -> Monitor:
    monitor = get_object_or_404(Monitor.objects.select_related("project"), pk=pk,
                                project__in=Project.objects.visible_to(request.user))
    enter_project(request, monitor.project)
    return monitor


def _writer(request: HttpRequest, project: Project) -> bool:
    return project.can_write(request.user)


@login_required
@require_http_methods(["GET"])
def monitor_list(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    monitors = list(Monitor.objects.filter(project=project)) if project else []
    day = stats.last_day([m.pk for m in monitors], timezone.now())
    rows = [(m, day.get(m.pk, (0, 0))) for m in monitors]
    return render(request, "evaluations/monitors/list.html",
                  {"project": project, "rows": rows, "can_write": bool(project and _writer(request, project))})


def _form_spec(post: Any) -> dict[str, Any]:
    """The form's fields as a spec (validated by MonitorSpec); criteria are JSON."""
    attributes: dict[str, str] = {}
    for line in str(post.get("attributes", "")).splitlines():
        if line.strip():
            key, sep, value = line.partition("=")
            if not sep:
                raise MonitorError([f"filters.attributes: {line.strip()!r} is not key=value"])
            attributes[key.strip()] = value.strip()
    try:
        criteria = json.loads(post.get("criteria") or "{}")
    except ValueError as exc:
        raise MonitorError([f"criteria: not JSON ({exc})"]) from None
    try:
        rate = float(post.get("sample_rate") or 1)
        idle = int(post.get("idle_seconds") or 300)
    except ValueError:
        raise MonitorError(["sample_rate / idle_seconds: numbers please"]) from None
    return {"name": post.get("name", ""), "level": post.get("level", "trace"), "sample_rate": rate,
            "idle_seconds": idle, "enabled": post.get("enabled") == "on", "criteria": criteria,
            "filters": {k: post.get(k, "").strip() for k in ("service", "root_name", "environment", "end_user",
                                                              "thread")} | {"attributes": attributes}}


def _fields(spec: dict[str, Any]) -> dict[str, Any]:
    filters = spec.get("filters") or {}
    return {**{k: filters.get(k, "") for k in ("service", "root_name", "environment", "end_user", "thread")},
            "attributes": "\n".join(f"{k}={v}" for k, v in (filters.get("attributes") or {}).items()),
            "name": spec.get("name", ""), "level": spec.get("level", "trace"),
            "sample_rate": spec.get("sample_rate", 1.0), "idle_seconds": spec.get("idle_seconds", 300),
            "enabled": spec.get("enabled", True), "criteria": json.dumps(spec.get("criteria") or {}, indent=2)}


def _save(request: HttpRequest, project: Project, monitor: Monitor | None) -> Monitor | list[str]:
    try:
        spec = MonitorSpec.model_validate(_form_spec(request.POST))
        if monitor is None:
            return monitor_create(project=project, spec=spec, user=request.user)
        return monitor_update(monitor=monitor, spec=spec, user=request.user)
    except ValidationError as exc:
        return spec_errors(exc)
    except MonitorError as exc:
        return exc.messages


def _form(request: HttpRequest, project: Project, monitor: Monitor | None) -> HttpResponse:
    if not _writer(request, project):
        raise PermissionDenied("viewers do not create or edit monitors")
    problems: list[str] = []
    if request.method == "POST":
        saved = _save(request, project, monitor)
        if isinstance(saved, Monitor):
            messages.success(request, f"Saved monitor {saved.name} (version {saved.version}).")
            return HttpResponseRedirect(reverse("monitor_detail", args=[saved.pk]))
        problems = saved
        fields = {**_fields({}), **{k: request.POST.get(k, "") for k in _fields({})},
                  "enabled": request.POST.get("enabled") == "on"}
    elif monitor is not None:
        fields = _fields(spec_of(monitor))
    else:
        fields = _fields({"criteria": EXAMPLE_CRITERIA})
    return render(request, "evaluations/monitors/form.html",
                  {"project": project, "monitor": monitor, "fields": fields, "problems": problems},
                  status=400 if problems else 200)


@login_required
@require_http_methods(["GET", "POST"])
def monitor_new(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    if project is None:
        raise Http404("no project")
    return _form(request, project, None)


@login_required
@require_http_methods(["GET", "POST"])
def monitor_edit(request: HttpRequest, pk: int) -> HttpResponse:
    monitor = _monitor(request, pk)
    return _form(request, monitor.project, monitor)


@login_required
@require_http_methods(["GET"])
def monitor_detail(request: HttpRequest, pk: int) -> HttpResponse:
    monitor = _monitor(request, pk)
    window = request.GET.get("range", "24h")
    window = window if window in RANGES else "24h"
    span, step = RANGES[window]
    environment = request.GET.get("environment", "").strip()[:100]
    end_user = request.GET.get("end_user", "").strip()[:200]
    now = timezone.now()
    since = (now - span).replace(minute=0, second=0, microsecond=0)
    summary = stats.summary(monitor, since=since, step=step, environment=environment, end_user=end_user)
    failing = MonitorResult.objects.filter(monitor=monitor, version=monitor.version, passed=False)
    if environment:
        failing = failing.filter(environment=environment)
    if end_user:
        failing = failing.filter(end_user=end_user).order_by("-at", "-pk")
        count = failing.count()
    else:
        failing = failing.order_by("-at", "-pk")
        buckets = MonitorBucket.objects.filter(monitor=monitor, version=monitor.version, criterion="")
        if environment:
            buckets = buckets.filter(environment=environment)
        totals = buckets.aggregate(t=Sum("total"), p=Sum("passed"))
        count = (totals["t"] or 0) - (totals["p"] or 0)
    listed: Any = Counted(failing.select_related("trace").only(
        "pk", "trace__name", "trace__trace_id", "thread_id", "at", "failed", "end_user", "environment",
        "latency_seconds", "traces"), count)
    page = Paginator(listed, PER_PAGE).get_page(request.GET.get("page", 1))
    environments = list(MonitorBucket.objects.filter(monitor=monitor, version=monitor.version, criterion="")
                        .exclude(environment="").values_list("environment", flat=True).distinct()
                        .order_by("environment")[:50])
    chart = to_html(monitor_chart(summary.points, list(summary.criteria), step, since, now)) if summary.points else ""
    return render(request, "evaluations/monitors/detail.html", {
        "project": monitor.project, "monitor": monitor, "summary": summary, "page": page, "chart_html": chart,
        "window": window, "ranges": list(RANGES), "environment": environment, "end_user": end_user,
        "environments": environments, "can_write": _writer(request, monitor.project),
        "criteria": sorted(summary.criteria.items()), "versions": monitor.versions.order_by("-number")[:10],
        "waiting": pending_waiting(monitor.project_id) if monitor.level == Monitor.Level.TRACE else None,
    })


@login_required
@require_POST
def monitor_backfill_view(request: HttpRequest, pk: int) -> HttpResponse:
    monitor = _monitor(request, pk)
    if not _writer(request, monitor.project):
        raise PermissionDenied("viewers do not backfill")
    try:
        hours = int(request.POST.get("hours", "24"))
        if not 1 <= hours <= 24 * 90:
            raise ValueError
    except ValueError:
        messages.error(request, "Hours: a whole number from 1 to 2160.")
        return HttpResponseRedirect(reverse("monitor_detail", args=[monitor.pk]))
    until = timezone.now()
    monitor_backfill(monitor=monitor, since=until - timedelta(hours=hours), until=until, user=request.user)
    messages.success(request, f"Backfill of the last {hours} h queued: traces already scored by version "
                              f"{monitor.version} are left as they are.")
    return HttpResponseRedirect(reverse("monitor_detail", args=[monitor.pk]))


@login_required
@require_http_methods(["GET", "POST"])
def project_retention(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(Project.objects.visible_to(request.user), slug=slug)
    enter_project(request, project)
    is_admin = project.role_of(request.user) == Membership.Role.ADMIN
    status = 200
    if request.method == "POST":
        if not is_admin:
            raise PermissionDenied("only project admins set the retention")
        raw = request.POST.get("days", "").strip()
        days = whole_number(raw, minimum=1, maximum=3650)
        if raw and days is None:
            messages.error(request, "Days: a whole number from 1 to 3650, or empty to keep everything.")
            status = 400
        else:
            retention_set(project=project, days=days, user=request.user)
            messages.success(request, "Retention saved.")
            return HttpResponseRedirect(reverse("project_retention", args=[project.slug]))
    retention = Retention.objects.filter(project=project).first()
    sweeps = RetentionSweep.objects.filter(project=project)[:20]
    return render(request, "evaluations/monitors/retention.html",
                  {"project": project, "retention": retention, "sweeps": sweeps, "is_admin": is_admin},
                  status=status)

