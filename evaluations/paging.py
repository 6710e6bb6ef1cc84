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


def capped_count(queryset: Any, *, cap: int, start: int, shown: int, more: bool) -> tuple[int, bool]:
    """(count, capped) of a list shown from `start`, `shown` rows on this page, `more` after
    it: counted up to `cap`; on the last page exact. The count query runs on every page, so a
    page's queries do not vary with its place in the list."""
    counted = queryset.values("pk")[:cap + 1].count()
    if not more and (shown or not start):
        return start + shown, False
    # More after this page, or a page past the end (the list ends before `start`): the count
    # read, up to the cap.
    return min(counted, cap), counted > cap


class CappedPage:
    """One page of a list too long to count for every page (a project's million received
    traces): the rows of page `number` and one more (is there an older page?), and a count
    that stops at `cap` (`count_capped`: "more than 10,000"). Two queries whose cost does not
    grow with the list, except the offset of a deep page. The attributes are those of Django's
    `Page` the templates use."""

    def __init__(self, queryset: Any, number: Any, per_page: int, cap: int = 10_000):
        try:
            number = int(number)
        except (TypeError, ValueError):
            number = 1
        self.per_page = per_page
        self.number = max(1, min(number, 1_000_000 // per_page))  # an offset beyond a million reads nothing useful
        start = (self.number - 1) * per_page
        rows = list(queryset[start:start + per_page + 1])
        if not rows and self.number > 1:  # past the end: the first page, as Paginator.get_page does
            self.number, start = 1, 0
            rows = list(queryset[:per_page + 1])
        self.object_list = rows[:per_page]
        self._more = len(rows) > per_page
        self.count, self.count_capped = capped_count(queryset, cap=cap, start=start, shown=len(self.object_list),
                                                     more=self._more)
        self.cap = cap

    @property
    def num_pages(self) -> int | None:
        """None when the count is capped (the last page is not known)."""
        return None if self.count_capped else max(1, -(-self.count // self.per_page))

    def start_index(self) -> int:
        return (self.number - 1) * self.per_page + 1 if self.object_list else 0

    def end_index(self) -> int:
        return (self.number - 1) * self.per_page + len(self.object_list)

    def has_next(self) -> bool:
        return self._more

    def has_previous(self) -> bool:
        return self.number > 1

    def has_other_pages(self) -> bool:
        return self.has_next() or self.has_previous()

    def next_page_number(self) -> int:
        return self.number + 1

    def previous_page_number(self) -> int:
        return self.number - 1
