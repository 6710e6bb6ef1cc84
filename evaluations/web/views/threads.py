"""Threads of received traces (issue 31): the project's conversations, newest activity first
(one row per thread, kept by ingest), and one thread read as a conversation, turn by turn:
what the user said, what the agent answered, the tools it called, what the monitors found."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from evaluations.converters import whole_number
from evaluations.models import MonitorResult, TraceThread
from evaluations.monitors.threads import thread_turns
from evaluations.web.views.common import current_project

PER_PAGE = 50
TURNS_PER_PAGE = 50


@login_required
@require_GET
def thread_list(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    end_user = request.GET.get("end_user", "").strip()[:200]
    number = whole_number(request.GET.get("page", "")) or 1
    number = max(1, min(number, 10_000))
    rows: list[TraceThread] = []
    if project is not None:
        threads = TraceThread.objects.filter(project=project)
        if end_user:
            threads = threads.filter(end_user=end_user)
        # newer / older without counting a million threads: one row past the page says there is more
        start = (number - 1) * PER_PAGE
        rows = list(threads.order_by("-last_at", "-pk")[start:start + PER_PAGE + 1])
    return render(request, "evaluations/traces/threads.html", {
        "project": project, "rows": rows[:PER_PAGE], "number": number, "has_next": len(rows) > PER_PAGE,
        "end_user": end_user})


@login_required
@require_GET
def thread_detail(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    thread_id = request.GET.get("id", "")[:200]
    thread = TraceThread.objects.filter(project=project, thread_id=thread_id).first() if project else None
    if thread is None:
        raise Http404("no such thread in this project")
    page = Paginator(range(thread.traces), TURNS_PER_PAGE).get_page(request.GET.get("page", 1))
    turns = thread_turns(thread, offset=page.start_index() - 1 if thread.traces else 0, limit=TURNS_PER_PAGE)
    verdicts: list[Any] = list(MonitorResult.objects.filter(project=project, trace__isnull=True,
                                                            thread_id=thread_id).select_related("monitor")
                               .order_by("monitor__name", "-version")[:20])
    return render(request, "evaluations/traces/thread.html",
                  {"project": project, "thread": thread, "turns": turns, "page": page, "verdicts": verdicts})
