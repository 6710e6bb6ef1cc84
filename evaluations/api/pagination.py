"""Pagination for every API list: `?limit=&offset=`, at most MAX_LIMIT items a page; the
received traces count only up to a cap."""

from __future__ import annotations

from typing import Any

from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from evaluations.paging import capped_count

MAX_LIMIT = 1000
COUNT_CAP = 10_000
# No list holds this many rows, and OFFSET plus a page stays within a signed 64-bit integer:
# PostgreSQL refuses a larger OFFSET ("bigint out of range", a 500 schemathesis found with
# offset=55683338354090817542007974318843037667), and SQLite cannot bind one.
MAX_OFFSET = 2**62


class Pagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT

    def get_offset(self, request: Request) -> int:
        """An offset past every row is an empty page, however large it is written."""
        return min(super().get_offset(request), MAX_OFFSET)


class CappedCountPagination(Pagination):
    """For lists too long to count on every request (a project's received traces): `count` is
    exact up to `cap` and on the last page; otherwise it reads `cap` and `count_capped` is
    true. Whether there is a next page comes from one row past the page, not from the count."""

    cap = COUNT_CAP

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> list[Any] | None:
        self.request = request
        self.limit = self.get_limit(request)
        if self.limit is None:
            return None
        self.offset = self.get_offset(request)
        rows = list(queryset[self.offset:self.offset + self.limit + 1])
        self.more = len(rows) > self.limit
        rows = rows[:self.limit]
        self.count, self.count_capped = capped_count(queryset, cap=self.cap, start=self.offset, shown=len(rows),
                                                     more=self.more)
        return rows

    def get_next_link(self) -> str | None:
        if not self.more:
            return None
        url = self.request.build_absolute_uri()
        url = replace_query_param(url, self.limit_query_param, self.limit)
        return replace_query_param(url, self.offset_query_param, self.offset + self.limit)

    def get_paginated_response(self, data: Any) -> Response:
        return Response({"count": self.count, "count_capped": self.count_capped, "next": self.get_next_link(),
                         "previous": self.get_previous_link(), "results": data})

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        response = super().get_paginated_response_schema(schema)
        response["properties"]["count"]["description"] = (
            f"exact up to {self.cap:,} and on the last page; otherwise {self.cap:,} (see count_capped)")
        response["properties"]["count_capped"] = {"type": "boolean", "description": f"more than {self.cap:,} items"}
        response["required"] = [*response.get("required", []), "count_capped"]
        return response
