"""Received traces through the API: a project's trace list with the page's search and
filters, and one trace with its spans (`evaluations/ingest/selectors.py`). Traces come in on
`POST /v1/traces` (`evaluations/api/otlp.py`)."""

from __future__ import annotations

import json
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.api.common import project_named, query, responses
from evaluations.api.errors import READ_ERRORS
from evaluations.api.pagination import CappedCountPagination
from evaluations.api.serializers import ReceivedTraceDetailSerializer, ReceivedTraceSerializer, TraceQuery
from evaluations.ingest import selectors
from evaluations.models import Project


def _project(request: Request, slug: str | None) -> Project:
    return project_named(request, slug, read=True)


class TraceList(ListAPIView):
    serializer_class = ReceivedTraceSerializer
    pagination_class = CappedCountPagination

    @extend_schema(
        summary="List a project's received traces, newest first",
        parameters=[TraceQuery],
        responses=responses(ReceivedTraceSerializer(many=True), *READ_ERRORS),
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> Any:
        params = query(TraceQuery, self.request)
        project = _project(self.request, params.get("project"))
        filters = selectors.trace_filters({k: str(v) for k, v in params.items()})
        return selectors.traces_of(project, filters).values_list(*selectors.ROW_FIELDS)

    def paginate_queryset(self, queryset: Any) -> Any:
        page = super().paginate_queryset(queryset)
        return [selectors.TraceRow(*values) for values in page] if page is not None else None


class TraceDetail(APIView):
    @extend_schema(
        summary="One received trace with its spans",
        parameters=[TraceQuery],
        responses=responses(ReceivedTraceDetailSerializer, *READ_ERRORS),
    )
    def get(self, request: Request, pk: int) -> Response:
        params = query(TraceQuery, request)
        detail = selectors.trace_detail(project=_project(request, params.get("project")), pk=pk)
        if detail is None:
            raise NotFound(f"no trace {pk} in this project")
        body = dict(ReceivedTraceSerializer(detail.trace).data)
        body["resource"] = json.loads(detail.resource_json)
        body["spans"] = [
            {
                "span_id": s.span_id,
                "parent_span_id": s.parent_span_id,
                "name": s.name,
                "kind": s.kind,
                "start_ns": s.start_ns,
                "end_ns": s.end_ns,
                "status": s.status,
                "depth": s.depth,
                "attributes": json.loads(s.attributes_json),
            }
            for s in detail.spans
        ]
        return Response(body)
