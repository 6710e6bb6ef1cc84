"""The project's trace list (traces received on /v1/traces: search, filters, pages) and one
trace's span waterfall and spans (`evaluations/ingest/selectors.py`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from evaluations.ingest import selectors
from evaluations.models import EvalSet
from evaluations.monitors.threads import trace_verdicts
from evaluations.web.charts import to_html
from evaluations.web.charts.trace import WaterfallSpan, waterfall
from evaluations.web.docs import otlp_curl_example
from evaluations.web.views.common import can_upload, current_project


@login_required
@require_GET
def trace_list(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    page = None
    if project is not None:
        filters = selectors.trace_filters(request.GET)
        page = selectors.trace_list(project=project, filters=filters, page_number=request.GET.get("page", 1))
    fragment = bool(request.htmx and not request.htmx.history_restore_request)  # type: ignore[attr-defined]
    template = "evaluations/traces/_table.html" if fragment else "evaluations/traces/list.html"
    context: dict[str, Any] = {"project": project, "page": page, "statuses": selectors.STATUSES,
                               "links": selectors.LINKS}
    if not fragment:
        context["curl_example"] = otlp_curl_example(request.build_absolute_uri("/").rstrip("/"))
    return render(request, template, context)


@login_required
@require_GET
def trace_detail(request: HttpRequest, pk: int) -> HttpResponse:
    project = current_project(request)
    detail = selectors.trace_detail(project=project, pk=pk) if project is not None else None
    if detail is None:
        raise Http404("no such trace in this project")
    spans = [
        WaterfallSpan(s.span_id, s.parent_span_id, s.name, s.kind, s.start_ns, s.end_ns, s.status) for s in detail.spans
    ]
    chart = to_html(waterfall(spans)) if spans else ""
    # Members and admins may add the trace to one of the project's eval sets; viewers see no form.
    targets = (
        list(
            EvalSet.objects.filter(project=project).only("pk", "name", "eval_set_id").order_by("name", "eval_set_id")[
                :200
            ]
        )
        if project is not None and can_upload(request.user, project)
        else None
    )
    return render(
        request,
        "evaluations/traces/detail.html",
        {"project": project, "detail": detail, "chart_html": chart, "max_spans": selectors.MAX_SPANS,
         "promote_targets": targets, "verdicts": trace_verdicts(pk)},
    )
