"""Pagination for every API list: `?limit=&offset=`, at most MAX_LIMIT items a page."""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination

MAX_LIMIT = 1000


class Pagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT
