"""Paging a long list whose length is already known: a Paginator that would otherwise COUNT a
100,000-row table for every page gets the count it already has."""

from __future__ import annotations

from typing import Any


class Counted:
    """A sliceable sequence (a queryset, or rows read from one) whose count is already known."""

    def __init__(self, rows: Any, count: int):
        self.rows, self._count = rows, count

    def count(self) -> int:
        return self._count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, item: Any) -> Any:
        return self.rows[item]
