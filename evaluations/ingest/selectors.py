"""Reading received traces: a project's trace list (search, filters, pages) and one trace's
spans, for the pages and the API alike. Every list is one query for its page and one count
that stops at COUNT_CAP, whatever the number of traces or spans; a trace shows at most
MAX_SPANS spans."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet

from evaluations.converters import parse_id
from evaluations.models import Project, Span, Trace
from evaluations.paging import CappedPage

PER_PAGE = 50
MAX_SPANS = 400
STATUSES = ("error", "ok")
LINKS = ("run", "none")  # traces that became (or named) a run's case, and those that did not


@dataclass(frozen=True)
class TraceFilters:
    q: str = ""  # trace id prefix, or text in the name, service, thread or eval id
    service: str = ""
    status: str = ""  # "error": some span failed; "ok": none did
    link: str = ""  # "run" / "none"
    run: int | None = None  # only traces of this run
    thread: str = ""
    end_user: str = ""  # enduser.id / user.id
    environment: str = ""  # deployment.environment

    @property
    def active(self) -> bool:
        return bool(self.q or self.service or self.status or self.link or self.run or self.thread or self.end_user
                    or self.environment)


def trace_filters(params: Mapping[str, Any]) -> TraceFilters:
    """Filters from a query string; values that mean nothing are ignored, never an error."""

    def text(name: str, limit: int = 200) -> str:
        value = params.get(name) or ""
        return str(value).strip()[:limit]

    run = text("run", 18)
    return TraceFilters(
        q=text("q"),
        service=text("service", 255),
        status=text("status") if text("status") in STATUSES else "",
        link=text("link") if text("link") in LINKS else "",
        run=parse_id(run),
        thread=text("thread"),
        end_user=text("end_user"),
        environment=text("environment", 100),
    )


def traces_of(project: Project, filters: TraceFilters) -> QuerySet[Trace]:
    qs = Trace.objects.filter(project=project, received=True)
    f = filters
    if f.q:
        q = Q(name__icontains=f.q) | Q(service_name__icontains=f.q) | Q(thread_id__icontains=f.q)
        q |= Q(eval_id__icontains=f.q)
        if all(c in "0123456789abcdefABCDEF" for c in f.q):
            q |= Q(trace_id__startswith=f.q.lower())
        qs = qs.filter(q)
    if f.service:
        qs = qs.filter(service_name=f.service)
    if f.status == "error":
        qs = qs.filter(error_count__gt=0)
    elif f.status == "ok":
        qs = qs.filter(error_count=0)
    if f.link == "run":
        qs = qs.filter(run__isnull=False)
    elif f.link == "none":
        qs = qs.filter(run__isnull=True)
    if f.run is not None:
        qs = qs.filter(run_id=f.run)
    if f.thread:
        qs = qs.filter(thread_id=f.thread)
    if f.end_user:
        qs = qs.filter(end_user=f.end_user)
    if f.environment:
        qs = qs.filter(environment=f.environment)
    return qs.order_by("-start_ns", "-pk")


@dataclass(frozen=True)
class TraceRow:
    pk: int
    trace_id: str
    name: str
    service_name: str
    thread_id: str
    eval_id: str
    run_id: int | None
    result_id: int | None
    span_count: int
    error_count: int
    complete: bool
    start_ns: int | None
    end_ns: int | None
    end_user: str = ""
    environment: str = ""

    @property
    def started(self) -> datetime | None:
        return datetime.fromtimestamp(self.start_ns / 1e9, tz=UTC) if self.start_ns else None

    @property
    def duration_seconds(self) -> float | None:
        if self.start_ns is None or self.end_ns is None or self.end_ns < self.start_ns:
            return None
        return (self.end_ns - self.start_ns) / 1e9


ROW_FIELDS = [
    "pk",
    "trace_id",
    "name",
    "service_name",
    "thread_id",
    "eval_id",
    "run_id",
    "result_id",
    "span_count",
    "error_count",
    "complete",
    "start_ns",
    "end_ns",
    "end_user",
    "environment",
]


def trace_rows(qs: QuerySet[Trace]) -> list[TraceRow]:
    return [TraceRow(*values) for values in qs.values_list(*ROW_FIELDS)]


@dataclass
class TraceListPage:
    project: Project
    filters: TraceFilters
    page: CappedPage
    rows: list[TraceRow]
    services: list[str] = field(default_factory=list)


COUNT_CAP = 10_000
MAX_SERVICES = 100

# The project's distinct services without reading its traces: a skip scan through the
# trace_received_service index, one MIN() a service (a recursive CTE; SQLite and PostgreSQL).
_SERVICES_SQL = """
WITH RECURSIVE services(name, n) AS (
    SELECT (SELECT MIN(service_name) FROM evaluations_trace
            WHERE project_id = %s AND received AND service_name > ''), 1
    UNION ALL
    SELECT (SELECT MIN(service_name) FROM evaluations_trace
            WHERE project_id = %s AND received AND service_name > services.name), n + 1
    FROM services WHERE services.name IS NOT NULL AND n < %s
)
SELECT name FROM services WHERE name IS NOT NULL
"""


def services_of(project: Project, limit: int = MAX_SERVICES) -> list[str]:
    """The project's services (of received traces), in order, at most `limit`."""
    with connection.cursor() as cursor:
        cursor.execute(_SERVICES_SQL, [project.pk, project.pk, limit])
        return [row[0] for row in cursor.fetchall()]


def trace_list(*, project: Project, filters: TraceFilters, page_number: Any = 1) -> TraceListPage:
    """A page of the project's received traces, newest first: read from the partial indexes on
    received traces, counted only up to COUNT_CAP, so that the first pages cost the same with
    a thousand traces or a million (bench/monitors_bench.py)."""
    page = CappedPage(traces_of(project, filters).values_list(*ROW_FIELDS), page_number, PER_PAGE, cap=COUNT_CAP)
    rows = [TraceRow(*values) for values in page.object_list]
    return TraceListPage(project=project, filters=filters, page=page, rows=rows, services=services_of(project))


@dataclass(frozen=True)
class SpanRow:
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    start_ns: int | None
    end_ns: int | None
    status: str
    attributes_json: str
    depth: int = 0
    offset_ms: float | None = None
    duration_ms: float | None = None
    attribute_count: int = 0

    @property
    def indent(self) -> str:
        return "· " * self.depth


@dataclass
class TraceDetail:
    trace: TraceRow
    resource_json: str
    spans: list[SpanRow]  # tree order, at most MAX_SPANS
    span_count: int


def trace_detail(*, project: Project, pk: int) -> TraceDetail | None:
    """One received trace of the project with its spans in tree order, or None."""
    found = trace_rows(Trace.objects.filter(project=project, received=True, pk=pk))
    if not found:
        return None
    trace = found[0]
    resource = Trace.objects.filter(pk=pk).values_list("resource", flat=True).first() or {}
    raw = list(
        Span.objects.filter(trace_id=pk)
        .order_by("start_ns", "pk")
        .values_list("span_id", "parent_span_id", "name", "kind", "start_ns", "end_ns", "status", "attributes")[
            : MAX_SPANS * 4
        ]
    )
    children: dict[str, list[tuple[Any, ...]]] = {}
    ids = {r[0] for r in raw}
    roots = []
    for r in raw:
        if r[1] and r[1] in ids and r[1] != r[0]:
            children.setdefault(r[1], []).append(r)
        else:
            roots.append(r)
    ordered: list[SpanRow] = []
    seen: set[str] = set()
    stack = [(r, 0) for r in reversed(roots)]
    while stack and len(ordered) < MAX_SPANS:
        r, depth = stack.pop()
        if r[0] in seen:
            continue
        seen.add(r[0])
        span_id, parent, name, kind, start, end, status, attributes = r
        offset = (start - trace.start_ns) / 1e6 if start is not None and trace.start_ns is not None else None
        duration = (end - start) / 1e6 if start is not None and end is not None and end >= start else None
        ordered.append(
            SpanRow(
                span_id,
                parent,
                name,
                kind,
                start,
                end,
                status,
                json.dumps(attributes or {}, indent=2, ensure_ascii=False, default=str),
                depth,
                offset,
                duration,
                len(attributes or {}),
            )
        )
        stack.extend((child, depth + 1) for child in reversed(children.get(span_id, [])))
    return TraceDetail(
        trace=trace,
        resource_json=json.dumps(resource, indent=2, ensure_ascii=False, default=str),
        spans=ordered,
        span_count=trace.span_count,
    )
