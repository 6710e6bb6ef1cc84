"""Rows made once for a module's tests, rolled back after its last test: Django's
`TestCase.setUpTestData`, for pytest.

A module-scoped fixture opens a transaction, makes its rows in it and yields them; each test's
own transaction (pytest-django's `db`) is then a savepoint inside that one, so what a test
writes is rolled back after it as before, and the module's rows are rolled back at the end of
the module (or at the end of a worker's share of it, under xdist). A module that uses it must
have no transactional test: a flush would empty the tables under the open transaction.

Each test gets its own copy of the objects (`copy.deepcopy`, as `setUpTestData`'s attributes
are copied per test), so a test that refreshes or changes one leaves the next test's alone.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from django.core.cache import cache
from django.db import transaction

T = TypeVar("T")


@contextmanager
def module_transaction(django_db_blocker: Any) -> Iterator[None]:
    """A transaction on the default database, open for the `with` block and rolled back after
    it. It is marked as a test case's own (`_from_testcase`), as Django marks its TestCase
    transactions: `atomic(durable=True)` and the notification outbox (evaluations/notify/events.py)
    look through it to the transactions the code under test opens."""
    with django_db_blocker.unblock():
        atomic = transaction.atomic()
        atomic._from_testcase = True  # type: ignore[attr-defined]
        atomic.__enter__()
    try:
        yield
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


def per_test(shared: T) -> T:
    """One test's copy of the module's objects, with an empty cache: a page cached by the test
    before (the run page's charts, the compare page, keyed by the shared run) is built again, as
    it was when every test made its own run."""
    cache.clear()
    return copy.deepcopy(shared)
